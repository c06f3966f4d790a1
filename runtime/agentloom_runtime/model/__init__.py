"""Model gateways: the providers' wire formats behind the ``ModelGateway`` port."""

from .gateway import (
    MAX_RESPONSE_BYTES,
    RETRYABLE_STATUSES,
    ChatCompletionsGateway,
    Dialect,
    parse_chat_completion,
    retry_after_seconds,
    validate_message,
)

__all__ = [
    "MAX_RESPONSE_BYTES",
    "RETRYABLE_STATUSES",
    "ChatCompletionsGateway",
    "Dialect",
    "parse_chat_completion",
    "retry_after_seconds",
    "validate_message",
]
