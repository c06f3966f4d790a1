"""Running sizes of growing views: per-message costs kept per lineage, so measuring the
next step's view costs its new messages, not the whole history again.

A *lineage* is a sequence the host measures again and again as it grows — one
instance's view (``should_compact``, ``compact``), one instance's requests of one
purpose (``validate_request``). For each lineage the last measured messages and their
costs are kept. A new sequence of the same lineage is compared with it: the common
prefix is found by stepping back over the few trailing positions that changed (appended
messages, a replaced tail, per-request material), then confirmed with one tuple
comparison (C speed; identical messages compare by identity). Only the messages after
the prefix are measured. Anything else — a compacted view, a different sequence — is
measured in full once, and becomes the lineage's new base.

Correct whatever the host passes: the prefix is always confirmed by equality, and a
message's cost is a function of its value (never mutate a measured message in place —
the estimators' rule already). Live messages are never evicted. A key holds up to
``PER_KEY`` lineages (a policy shared by runs sees several "main" views: each keeps its
own), at most ``LINEAGES`` keys are kept (the oldest is dropped). Thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from agentloom_runtime.contracts import Message, ToolSchema

LINEAGES = 64  # keys
PER_KEY = 4  # lineages per key
TAIL_STEPS = 64  # trailing positions examined before a sequence counts as unrelated


class _Lineage:
    __slots__ = ("costs", "messages", "tool_cost", "tools", "total")

    def __init__(self) -> None:
        self.messages: tuple[Message, ...] = ()
        self.costs: list[int] = []
        self.total = 0
        self.tools: tuple[ToolSchema, ...] | None = None
        self.tool_cost = 0


def _common_prefix(old: tuple[Any, ...], new: tuple[Any, ...]) -> int:
    keep = min(len(old), len(new))
    steps = 0
    while keep and new[keep - 1] is not old[keep - 1] and new[keep - 1] != old[keep - 1]:
        keep -= 1
        steps += 1
        if steps > TAIL_STEPS:
            return 0
    if not keep:
        return 0
    same = new[:keep] == (old if keep == len(old) else old[:keep])
    return keep if same else 0


class RunningSizes:
    """Message and tool costs per lineage. ``message_costs`` measures messages (any
    sequence, returns one cost each); ``tool_costs`` the total of a tool list."""

    def __init__(self, message_costs: Callable[[Sequence[Message]], list[int]],
                 tool_costs: Callable[[Sequence[ToolSchema]], int]) -> None:
        self._message_costs = message_costs
        self._tool_costs = tool_costs
        self._lineages: dict[Hashable, list[_Lineage]] = {}
        self._lock = threading.Lock()

    def messages(self, key: Hashable, messages: Sequence[Message]) -> tuple[int, list[int]]:
        """(Σ costs, the costs) of ``messages`` as the next state of a lineage of ``key``
        (the one it extends, or a new one). The costs list is a copy."""
        with self._lock:
            line = self._advance(key, messages)
            return line.total, list(line.costs)

    def total(self, key: Hashable, messages: Sequence[Message]) -> int:
        """``messages(key, messages)[0]``, without copying the costs."""
        with self._lock:
            return self._advance(key, messages).total

    def tools(self, key: Hashable, tools: Sequence[ToolSchema]) -> int:
        """Σ tool costs, measured again only when the tool list of ``key``'s current
        lineage changed (the host builds equal schemas anew for every request)."""
        current = tools if isinstance(tools, tuple) else tuple(tools)
        with self._lock:
            lines = self._lines(key)
            if not lines:
                lines.append(_Lineage())
            line = lines[0]
            if line.tools is None or line.tools != current:
                line.tool_cost = self._tool_costs(current)
                line.tools = current
            return line.tool_cost

    def known(self, messages: Sequence[Message]) -> int | None:
        """Σ costs of exactly the sequence object a lineage measured last, else None."""
        with self._lock:
            for lines in self._lineages.values():
                for line in lines:
                    if line.messages is messages:
                        return line.total
        return None

    def _lines(self, key: Hashable) -> list[_Lineage]:
        lines = self._lineages.get(key)
        if lines is None:
            if len(self._lineages) >= LINEAGES:
                del self._lineages[next(iter(self._lineages))]
            lines = self._lineages[key] = []
        return lines

    def _advance(self, key: Hashable, messages: Sequence[Message]) -> _Lineage:
        """The lineage of ``key`` that ``messages`` extends, brought up to ``messages``:
        the costs after the common prefix dropped, the new messages measured."""
        current = messages if isinstance(messages, tuple) else tuple(messages)
        line, keep = self._pick(key, current)
        costs = line.costs
        if keep < len(costs):
            line.total -= sum(costs[keep:])
            del costs[keep:]
        if keep < len(current):
            new = self._message_costs(current[keep:])
            costs.extend(new)
            line.total += sum(new)
        line.messages = current
        return line

    def _pick(self, key: Hashable, current: tuple[Message, ...]) -> tuple[_Lineage, int]:
        """The lineage ``current`` extends (moved to the front) and the common prefix;
        else a fresh lineage in place of the least recently used one, and 0."""
        lines = self._lines(key)
        for index, line in enumerate(lines):
            keep = _common_prefix(line.messages, current)
            if keep:
                if index:
                    lines.insert(0, lines.pop(index))
                return line, keep
        line = _Lineage()
        if len(lines) >= PER_KEY:
            lines.pop()
        lines.insert(0, line)
        return line, 0
