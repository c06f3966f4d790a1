"""The compaction-policy base: every capability the host calls, with defaults.

The host calls each method below directly (no ``getattr`` / signature probing); a policy
overrides what it can do better than the default:

- ``should_compact(context)``: the trigger that fires (``"budget"``, ``"user_turns"``…),
  ``False`` when none does (the host skips ``compact``), or ``None`` — the default — when
  the policy does not decide up front and ``compact`` decides (it may return ``None``);
- ``compact(context, call, *, memory=None)``: the one required method; ``memory`` is the
  host's ``CompactionFailureMemory`` (backoff across resumes), updated in place;
- ``estimate(messages, tools)``: the size of a request in the policy's own units (the
  units of the estimates the policy records in the failure memory), or ``None`` when the
  policy does not measure;
- ``validate_request(request)``: the hard limit, called before every model request
  (action, compaction, verification): raises ``BudgetExceeded`` over it; returns the
  estimate, or ``None`` when the policy has no limit;
- ``validate_compaction_result(original, replacement, tools)``: ``None`` when the
  replacement may be committed, else the reason it may not (the host runs its own
  protocol and size checks as well).
- ``message_sizer()``: what measures messages in the policy's units, one message at a
  time (``MessageSizer``), so the host keeps each message's size with the record it
  sizes and a view rebuilt from a checkpoint is not measured again; ``None`` — the
  default — when sizes are not per message (or cost nothing to measure again).

``NoCompaction`` (``no-compaction/v1``) never compacts. ``with_defaults`` is how the
engine takes a bare policy — one that implements only what ``contracts.CompactionPolicy``
requires (``compact``, ``module_id``, ``checkpoint_config``) without deriving from the
base: it is wrapped in ``BarePolicy``, which calls its ``compact`` and gives the base's
defaults for the rest. Such a policy that also defines an optional method by name is
refused (``ConfigError``), so a hard limit it wrote is never silently not called.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Literal, Protocol

from agentloom_runtime.contracts import (
    JSON,
    CompactionPolicy,
    CompactionResult,
    ContextInput,
    Message,
    ModelCall,
    ModelRequest,
    ToolSchema,
)
from agentloom_runtime.errors import ConfigError

from .failures import CompactionFailureMemory

Decision = str | Literal[False] | None
"""``should_compact``: a trigger name (compact now), False (do not), None (``compact``
decides)."""


class MessageSizer(Protocol):
    """Per-message sizes of a policy (``message_sizer``): ``message_costs`` measures (a
    cost per message; equal values, equal costs), ``remember`` takes costs measured
    earlier as those of these message objects (the estimators' identity cache)."""

    def message_costs(self, messages: Sequence[Message]) -> list[int]: ...

    def remember(self, messages: Sequence[Message], costs: Sequence[int]) -> None: ...


class CompactionPolicyBase(ABC):
    module_id: str = ""

    def checkpoint_config(self) -> JSON:
        return {}

    def should_compact(self, context: ContextInput) -> Decision:
        """None: this policy does not decide up front; call ``compact``."""
        return None

    @abstractmethod
    async def compact(self, context: ContextInput, call: ModelCall, *,
                      memory: CompactionFailureMemory | None = None
                      ) -> CompactionResult | None:
        """A smaller view to commit, or None (skipped, deferred or failed)."""

    def estimate(self, messages: Sequence[Message],
                 tools: Sequence[ToolSchema]) -> int | None:
        """None: this policy does not measure requests."""
        return None

    def validate_request(self, request: ModelRequest) -> int | None:
        """None: this policy sets no hard limit on requests."""
        return None

    def validate_compaction_result(self, original: Sequence[Message],
                                   replacement: Sequence[Message],
                                   tools: Sequence[ToolSchema]) -> str | None:
        """None: nothing to object to beyond the host's own checks."""
        return None

    def message_sizer(self) -> MessageSizer | None:
        """None: this policy's sizes are not kept with the records."""
        return None


class NoCompaction(CompactionPolicyBase):
    """Never compacts (tests, hosts that manage context themselves). Requests still
    face the model's own limits; prefer a budget policy in production."""

    module_id = "no-compaction/v1"

    def should_compact(self, context: ContextInput) -> Decision:
        return False

    async def compact(self, context: ContextInput, call: ModelCall, *,
                      memory: CompactionFailureMemory | None = None) -> None:
        return None


OPTIONAL = ("should_compact", "estimate", "validate_request", "validate_compaction_result")


class BarePolicy(CompactionPolicyBase):
    """A policy that implements only ``compact``, with the base's defaults for the
    optional capabilities (``with_defaults``). Its identity and configuration are the
    wrapped policy's, so a run's bindings do not change with the wrapping."""

    def __init__(self, policy: CompactionPolicy) -> None:
        self.policy = policy
        self.module_id = policy.module_id

    def checkpoint_config(self) -> JSON:
        return self.policy.checkpoint_config()

    async def compact(self, context: ContextInput, call: ModelCall, *,
                      memory: CompactionFailureMemory | None = None
                      ) -> CompactionResult | None:
        return await self.policy.compact(context, call, memory=memory)


def with_defaults(policy: CompactionPolicy) -> CompactionPolicyBase:
    """The policy as the engine calls it: itself when it derives from
    ``CompactionPolicyBase``, else wrapped in ``BarePolicy``."""
    if isinstance(policy, CompactionPolicyBase):
        return policy
    defined = [name for name in OPTIONAL if hasattr(policy, name)]  # misuse check only
    if defined:
        raise ConfigError(
            f"compaction policy {type(policy).__name__} defines {', '.join(defined)} but "
            "does not derive from agentloom_runtime.context.CompactionPolicyBase: derive "
            "from it so the engine calls them (a bare policy implements only compact)")
    return BarePolicy(policy)
