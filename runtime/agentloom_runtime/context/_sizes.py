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
the estimators' rule already). Live messages are never evicted; at most ``LINEAGES``
lineages are kept (the oldest is dropped).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from agentloom_runtime.contracts import Message, ToolSchema

LINEAGES = 64
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
        self._lineages: dict[Hashable, _Lineage] = {}

    def messages(self, key: Hashable, messages: Sequence[Message]) -> tuple[int, list[int]]:
        """(Σ costs, the costs) of ``messages`` as the next state of lineage ``key``. The
        list is the lineage's own: read it, never keep or change it."""
        current = messages if isinstance(messages, tuple) else tuple(messages)
        line = self._lineage(key)
        keep = _common_prefix(line.messages, current)
        costs = line.costs
        if keep < len(costs):
            line.total -= sum(costs[keep:])
            del costs[keep:]
        if keep < len(current):
            new = self._message_costs(current[keep:])
            costs.extend(new)
            line.total += sum(new)
        line.messages = current
        return line.total, costs

    def tools(self, key: Hashable, tools: Sequence[ToolSchema]) -> int:
        """Σ tool costs, measured again only when the tool list changed (the host builds
        equal schemas anew for every request)."""
        current = tools if isinstance(tools, tuple) else tuple(tools)
        line = self._lineage(key)
        if line.tools is None or line.tools != current:
            line.tool_cost = self._tool_costs(current)
            line.tools = current
        return line.tool_cost

    def known(self, messages: Sequence[Message]) -> int | None:
        """Σ costs of exactly the sequence object a lineage measured last, else None."""
        for line in self._lineages.values():
            if line.messages is messages:
                return line.total
        return None

    def _lineage(self, key: Hashable) -> _Lineage:
        line = self._lineages.get(key)
        if line is None:
            if len(self._lineages) >= LINEAGES:
                del self._lineages[next(iter(self._lineages))]
            line = self._lineages[key] = _Lineage()
        return line
