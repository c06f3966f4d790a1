"""``character-handoff/v1``: the policy of published versions without ``context_policy``.

It fires when the view holds ``trigger_chars`` characters (60,000), keeps about
``keep_chars`` characters (16,000) of recent complete groups verbatim and summarises the
rest with the same handoff algorithm and safety rules as the budget policy. Characters
are those a model reads: role, content, tool-call names, arguments and ids, reasoning;
tool schemas are not counted. It has no per-request hard limit (``validate_request`` is
the base's: None): it knows no model window. ``estimate`` is in characters.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from agentloom_runtime.contracts import JSON, ContextInput, Message, ToolSchema
from agentloom_runtime.errors import ConfigError

from ._estimate_cache import _CostCache
from ._handoff import HandoffPolicy, Measure
from ._sizes import RunningSizes
from .estimators import message_text
from .failures import DEFAULT_GROWTH_RATIO, DEFAULT_STEP_GAP


class CharacterMeasure:
    """Characters a model reads; incremental under a lineage ``key`` like the budget
    policy's measure (``_sizes.RunningSizes``). Tools cost nothing here."""

    def __init__(self) -> None:
        self._cache = _CostCache()
        self._running = RunningSizes(self.costs, _no_tools)

    def costs(self, messages: Sequence[Message]) -> list[int]:
        return [self._cost(m) for m in messages]

    def total(self, messages: Sequence[Message], tools: Sequence[ToolSchema],
              key: Hashable | None = None) -> int:
        if key is not None:
            return self._running.total(key, messages)
        known = self._running.known(messages)
        return known if known is not None else sum(self._cost(m) for m in messages)

    def sized(self, messages: Sequence[Message], tools: Sequence[ToolSchema],
              key: Hashable | None = None) -> tuple[int, list[int]]:
        if key is not None:
            return self._running.messages(key, messages)
        costs = self.costs(messages)
        return sum(costs), costs

    def text(self, text: str) -> int:
        return len(text)

    def text_of(self, parts: Sequence[str]) -> int:
        return sum(map(len, parts))

    def _cost(self, message: Message) -> int:
        cached = self._cache.get(message)
        if cached is not None:
            return cached
        return self._cache.put(message, len(message_text(message)))


def _no_tools(tools: Sequence[ToolSchema]) -> int:
    return 0


class CharacterCompactionPolicy(HandoffPolicy):
    module_id = "character-handoff/v1"

    def __init__(self, *, trigger_chars: int = 60_000, keep_chars: int = 16_000,
                 summary_chars: int = 6_000, piece_chars: int = 30_000,
                 max_compaction_calls: int = 4,
                 retry_growth_ratio: float = DEFAULT_GROWTH_RATIO,
                 retry_after_steps: int = DEFAULT_STEP_GAP) -> None:
        values = {"trigger_chars": trigger_chars, "keep_chars": keep_chars,
                  "summary_chars": summary_chars, "piece_chars": piece_chars,
                  "max_compaction_calls": max_compaction_calls,
                  "retry_after_steps": retry_after_steps}
        for name, value in values.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, not {value!r}")
        if keep_chars + summary_chars >= trigger_chars:
            raise ConfigError("keep_chars + summary_chars must stay below trigger_chars")
        if max_compaction_calls > 16:
            raise ConfigError("max_compaction_calls must be 1..16")
        if isinstance(retry_growth_ratio, bool) or not retry_growth_ratio > 0:
            raise ConfigError("retry_growth_ratio must be > 0")
        self.trigger_chars = trigger_chars
        self.keep_chars = keep_chars
        self.summary_chars = summary_chars
        self.piece_chars = piece_chars
        self.max_compaction_calls = max_compaction_calls
        self.retry_growth_ratio = float(retry_growth_ratio)
        self.retry_after_steps = retry_after_steps
        self._sizes = CharacterMeasure()

    def checkpoint_config(self) -> JSON:
        return {"trigger_chars": self.trigger_chars, "keep_chars": self.keep_chars,
                "summary_chars": self.summary_chars, "piece_chars": self.piece_chars,
                "max_compaction_calls": self.max_compaction_calls,
                "retry_growth_ratio": self.retry_growth_ratio,
                "retry_after_steps": self.retry_after_steps}

    def _measure(self) -> Measure:
        return self._sizes

    def _trigger(self, context: ContextInput, size: int) -> str | None:
        return "characters" if size >= self.trigger_chars else None

    def _threshold(self) -> float:
        return self.trigger_chars

    def _target(self) -> float:
        """Nominal: the kept recent history plus a full-size summary."""
        return self.keep_chars + self.summary_chars

    def _summary_allowance(self) -> int:
        return self.summary_chars

    def _min_material(self) -> int:
        return 2 * self.summary_chars // 3

    def _tail_room(self, *, fixed: int, allowance: int, body: int, trigger: str) -> float:
        return self.keep_chars

    def _material_capacity(self, context: ContextInput) -> int:
        return self.piece_chars
