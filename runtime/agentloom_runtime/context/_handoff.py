"""The handoff compaction algorithm shared by the budget and the character policies.

``compact`` never changes its input; it returns a new view or None:

1. assess: which trigger fired (subclass), and the backoff of the failure memory;
2. select: cut the view into units (``_protocol.split_units``); keep the leading system
   messages, pinned messages (``"_pin": true`` and the current task message), the pending
   group, and the longest suffix of complete units that fits the room for recent
   history; the body units before that suffix are compressible;
3. pack: serialize the compressible units, oldest first, into pieces of material that
   fit one summary request; an oversized unit becomes ordered fragments, each a piece;
   at most ``max_compaction_calls`` pieces; a unit that does not fit entirely stays
   verbatim (and so does everything after it): no tail is ever dropped. Only over the
   hard budget — where the alternative is a request that is never sent — is the oldest
   unit, when alone it needs more calls than allowed, summarised from a capped copy:
   the fragments the calls allow, and a note of how much was left out (the source
   records keep it whole);
4. summarize: one rolling summary, one call per piece, each given the summary so far;
5. assemble: the covered units are replaced by one summary message, placed where the
   last covered unit was; everything else keeps its order and its identity;
6. check: the protocol holds, the view shrank and is below the size trigger.

A view over the hard budget is a request that can never be sent, so there any progress
counts (``_over``): what must stay (a long task, say) need only fit the hard budget, not
the trigger, and a result need only be smaller — it may still be over the hard budget
when one preparation's calls cannot fold enough; the next preparation goes on from it.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Protocol

from agentloom_runtime.contracts import (
    CompactionResult,
    ContextInput,
    Message,
    ModelCall,
    ModelRequest,
    ToolSchema,
)
from agentloom_runtime.errors import ModelError, ModelOutcomeUnknown

from ._protocol import Unit, chunk_text, merge_ranges, protocol_violations, split_units
from ._summary import CURRENT, EARLIER, summary_message, summary_request, unit_parts
from .failures import DEFAULT_GROWTH_RATIO, DEFAULT_STEP_GAP, CompactionFailureMemory
from .policy import CompactionPolicyBase, Decision

SIZE_TRIGGERS = ("budget", "characters")
_BODY = ("group", "single", "orphan")
_KEEP_ANYWAY = ("pending", "pinned")
_FRAGMENT = "[part {i}/{n} of one oversized message group; the parts follow in order]\n"
_LEFT_OUT = ("\n[the rest of this message group, {n:,} characters, is left out: it needs "
             "more summary calls than are allowed. Say in the summary that it was cut; the "
             "whole text stays in the source records]")


class Measure(Protocol):
    """Sizes in a policy's units. With a lineage ``key`` (a view or a request stream that
    grows from step to step) ``total`` and ``sized`` are incremental: only what changed
    since the lineage's last measure is measured (``_sizes``)."""

    def costs(self, messages: Sequence[Message]) -> list[int]: ...

    def total(self, messages: Sequence[Message], tools: Sequence[ToolSchema],
              key: Hashable | None = None) -> int: ...

    def sized(self, messages: Sequence[Message], tools: Sequence[ToolSchema],
              key: Hashable | None = None) -> tuple[int, list[int]]:
        """``(total(messages, tools), costs(messages))``, measuring each message once."""
        ...

    def text(self, text: str) -> int: ...

    def text_of(self, parts: Sequence[str]) -> int:
        """``text("".join(parts))``, possibly without reading every part again."""
        ...


@dataclass(frozen=True)
class Selection:
    units: list[Unit]
    compressible: list[int]  # unit positions, oldest first
    task_index: int | None
    unit_costs: list[int]


@dataclass(frozen=True)
class Pieces:
    texts: list[str]
    covered: list[int]  # unit positions entirely consumed, a prefix of compressible
    chars_per_unit: float


def counter(context: ContextInput, name: str) -> int:
    return int(context.counters.get(name, 0) or 0)


def task_index(context: ContextInput) -> int | None:
    """The current task message: the last user message whose content is the task."""
    task = context.task
    if not task:
        return None
    messages = context.messages
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user" and message.get("content") == task:
            return index
    return None


def split_text(text: str, capacity: int, cost: Any) -> list[str]:
    """Ordered fragments of ``text`` each costing at most ``capacity`` (when possible)."""
    total = int(cost(text))
    if total <= capacity or len(text) < 2:
        return [text]
    parts = max(2, math.ceil(total / (capacity * 0.9)))
    out: list[str] = []
    for chunk in chunk_text(text, max(1, math.ceil(len(text) / parts))):
        out.extend(split_text(chunk, capacity, cost))
    return out


def view_key(context: ContextInput) -> tuple[str, str]:
    """The lineage of an instance's view (``Measure``)."""
    return (context.instance, "view")


class HandoffPolicy(CompactionPolicyBase):
    """Shared logic of the handoff policies; subclasses size things and fire triggers."""

    max_compaction_calls: int = 4
    retry_growth_ratio: float = DEFAULT_GROWTH_RATIO
    retry_after_steps: int = DEFAULT_STEP_GAP

    # ------------------------------------------------------------ subclass hooks

    @abstractmethod
    def _measure(self) -> Measure: ...

    @abstractmethod
    def _trigger(self, context: ContextInput, size: int) -> str | None: ...

    @abstractmethod
    def _threshold(self) -> float:
        """The size trigger; a committed view is strictly below it."""

    @abstractmethod
    def _target(self) -> float: ...

    @abstractmethod
    def _summary_allowance(self) -> int: ...

    @abstractmethod
    def _tail_room(self, *, fixed: int, allowance: int, body: int, trigger: str) -> float: ...

    @abstractmethod
    def _material_capacity(self, context: ContextInput) -> int: ...

    def _hard_limit(self) -> int | None:
        return None

    def _min_material(self) -> int:
        return 128

    def _request_fits(self, request: ModelRequest) -> bool:
        return True

    def _summary_floor(self) -> int:
        """The least a summary message can cost: its framing and header."""
        return self._measure().costs([summary_message("", (), 0, [])])[0]

    def _extra_metrics(self) -> dict[str, Any]:
        return {}

    # ------------------------------------------------------------ public

    def should_compact(self, context: ContextInput) -> Decision:
        """Which trigger fires for this view, or False. Costs the messages added since
        the instance's last measure, not the history."""
        size = self._measure().total(context.messages, context.tools, key=view_key(context))
        return self._trigger(context, size) or False

    def estimate(self, messages: Sequence[Message], tools: Sequence[ToolSchema]) -> int:
        """The size of ``messages`` + ``tools`` in this policy's units (those of the
        estimates recorded in the failure memory)."""
        return self._measure().total(messages, tools)

    def validate_compaction_result(self, original: Sequence[Message],
                                   replacement: Sequence[Message],
                                   tools: Sequence[ToolSchema]) -> str | None:
        """None when ``replacement`` may replace ``original``; else the reason it may not
        (protocol broken, not smaller, not below the size trigger, over the hard limit)."""
        problems = protocol_violations(replacement)
        if problems:
            return f"protocol: {problems[0]}"
        before = self._measure().total(original, tools)
        return self._verify(before, replacement, tools)[1]

    def _verify(self, before: int, replacement: Sequence[Message],
                tools: Sequence[ToolSchema]) -> tuple[int, str | None]:
        after = self._measure().total(replacement, tools)
        if after >= before:
            return after, f"not smaller ({after} >= {before})"
        if self._over(before):
            return after, None  # progress towards a request that can be sent
        if after >= self._threshold():
            return after, f"not below the trigger ({after} >= {self._threshold():.0f})"
        hard = self._hard_limit()
        if hard is not None and after > hard:
            return after, f"over the hard budget ({after} > {hard})"
        return after, None

    def _over(self, size: int) -> bool:
        """Over the hard budget: a request of this size is never sent."""
        hard = self._hard_limit()
        return hard is not None and size > hard

    async def compact(self, context: ContextInput, call: ModelCall, *,
                      memory: CompactionFailureMemory | None = None
                      ) -> CompactionResult | None:
        """A smaller, protocol-valid view, or None (no trigger, deferred after a failure,
        nothing worth compacting, or a failed attempt). Raises only what the model call
        raises beyond ordinary model failures (budget, cancellation, persistence,
        ``ModelOutcomeUnknown``). ``memory`` is updated in place (see ``failures``)."""
        memory = CompactionFailureMemory() if memory is None else memory
        before, costs = self._measure().sized(context.messages, context.tools,
                                              key=view_key(context))
        trigger = self._trigger(context, before)
        if trigger is None:
            memory.note("skipped", "no trigger fired")
            return None
        steps = counter(context, "model_steps")
        hard = self._hard_limit()
        if (hard is None or before <= hard) and not memory.allows(before, steps):
            memory.note("deferred", "waiting for growth or steps after a failed compaction")
            return None
        selection = self._select(context, trigger, before, costs)
        pieces = selection if isinstance(selection, str) else self._pack(
            context, selection, capped=self._over(before))  # a capped copy beats no request
        if isinstance(selection, str) or isinstance(pieces, str):
            memory.note("skipped", str(pieces))
            return None
        freed = sum(selection.unit_costs[k] for k in pieces.covered)
        if before - freed + self._summary_floor() >= (
                before if self._over(before) else self._threshold()):
            memory.note("skipped", "what fits in the allowed summary calls cannot bring the "
                        "view below the trigger")
            return None
        outcome = await self._summarize(context, pieces, call)
        result = (outcome if isinstance(outcome, str)
                  else self._result(context, selection, pieces, outcome, trigger, before))
        if isinstance(result, str):
            memory.record_failure(result, estimate=before, model_steps=steps,
                                  growth_ratio=self.retry_growth_ratio,
                                  step_gap=self.retry_after_steps)
            return None
        memory.record_success()
        return result

    # ------------------------------------------------------------ steps

    def _select(self, context: ContextInput, trigger: str, before: int,
                costs: list[int]) -> Selection | str:
        messages = context.messages
        task = task_index(context)
        pinned = {i for i, m in enumerate(messages) if m.get("_pin")}
        if task is not None:
            pinned.add(task)
        units = split_units(messages, frozenset(pinned))
        prefix = list(accumulate(costs, initial=0))
        unit_costs = [prefix[end] - prefix[start] for start, end, _ in units]
        body = sum([c for u, c in zip(units, unit_costs, strict=True) if u.kind in _BODY])
        fixed = before - body
        allowance = self._summary_allowance()
        hard = self._hard_limit()
        if fixed + allowance >= (self._threshold() if not self._over(before) or hard is None
                                 else hard + 1):
            return "pinned messages, tools and pending calls leave no room below the trigger"
        room = self._tail_room(fixed=fixed, allowance=allowance, body=body, trigger=trigger)
        boundary, kept = len(units), 0
        for k in range(len(units) - 1, -1, -1):
            kind = units[k].kind
            if kind in _KEEP_ANYWAY:
                boundary = k
                continue
            if kind in ("head", "orphan") or kept + unit_costs[k] > room:
                break
            kept += unit_costs[k]
            boundary = k
        compressible = [k for k in range(boundary) if units[k].kind in _BODY]
        if not compressible:
            return "nothing compressible"
        if sum([unit_costs[k] for k in compressible]) <= self._min_material():
            return "too little compressible history to gain from a summary"
        return Selection(units, compressible, task, unit_costs)

    def _pack(self, context: ContextInput, selection: Selection, *,
              capped: bool = False) -> Pieces | str:
        """``capped``: the oldest unit may be summarised from the fragments the calls
        allow when it needs more (over the hard budget only)."""
        capacity = self._material_capacity(context)
        measure = self._measure()
        header = measure.text(_FRAGMENT.format(i=99, n=99))
        if capacity < 4 * header:
            return "no room for a summary request"
        pieces: list[list[str]] = []
        covered: list[int] = []
        used = chars = spent = 0
        section: str | None = None
        messages, units, task = context.messages, selection.units, selection.task_index
        for k in selection.compressible:
            unit = units[k]
            label = _label(unit, task)
            parts = unit_parts(messages, unit)
            body = "".join(parts)  # unit_text
            if label and label != section:
                joined = f"{label}\n{body}"
                cost = measure.text_of([f"{label}\n", *parts])
            else:
                joined = body
                cost = measure.text_of(parts)
            if cost <= capacity and 0 < used and used + cost <= capacity:
                pieces[-1].append(joined)  # the last piece still has room
                used += cost
            elif cost <= capacity and len(pieces) < self.max_compaction_calls:
                pieces.append([f"{label}\n{body}" if label else body])
                used = cost = measure.text(pieces[-1][0])
            elif cost > capacity:
                fragments = split_text(joined, capacity - header, measure.text)
                if len(pieces) + len(fragments) > self.max_compaction_calls:
                    if not capped or covered:
                        break
                    fragments = self._head_fragments(joined, capacity - header)
                pieces.extend([_FRAGMENT.format(i=i, n=len(fragments)) + fragment]
                              for i, fragment in enumerate(fragments, 1))
                used = 0  # a fragment piece takes nothing more
            else:
                break
            covered.append(k)
            section = label
            chars += len(joined)
            spent += cost
        if not covered:
            return "the oldest compressible history does not fit the allowed summary calls"
        return Pieces(["\n".join(piece) for piece in pieces], covered, chars / max(1, spent))

    def _head_fragments(self, text: str, capacity: int) -> list[str]:
        """The first ``max_compaction_calls`` fragments of ``text``, the last ending with
        a note of how much is left out."""
        measure = self._measure()
        note = measure.text(_LEFT_OUT.format(n=len(text)))
        fragments = split_text(text, max(1, capacity - note), measure.text)
        kept = fragments[:self.max_compaction_calls]
        left = len(text) - sum(len(f) for f in kept)
        return [*kept[:-1], kept[-1] + _LEFT_OUT.format(n=left)]

    async def _summarize(self, context: ContextInput, pieces: Pieces,
                         call: ModelCall) -> str | tuple[str, int]:
        summary = ""
        limit = max(200, int(self._summary_allowance() * pieces.chars_per_unit))
        for part, material in enumerate(pieces.texts, 1):
            request = summary_request(task=context.task, plan=context.plan, previous=summary,
                                      material=material, part=part, summary_chars=limit,
                                      instance=context.instance)
            if not self._request_fits(request):
                return f"summary request {part} would exceed the hard budget"
            try:
                response = await call(request)
            except ModelOutcomeUnknown:
                raise
            except ModelError as exc:
                return f"summary call {part} failed: {exc.code}"
            text = (response.content or "").strip()
            if response.tool_calls or not text:
                return f"summary call {part} returned no summary"
            summary = text
        return summary, len(pieces.texts)

    def _result(self, context: ContextInput, selection: Selection, pieces: Pieces,
                outcome: tuple[str, int], trigger: str, before: int) -> CompactionResult | str:
        summary, calls = outcome
        covered_units = set(pieces.covered)
        if any(k not in covered_units for k, unit in enumerate(selection.units)
               if unit.kind == "orphan"):
            return "rejected: a stray tool message or broken group would be kept"
        messages, index, covered, source_indexes = _assemble(context, selection, pieces,
                                                             summary)
        after, reason = self._verify(before, messages, context.tools)
        if reason is not None:
            return f"rejected: {reason}"
        metrics: dict[str, Any] = {
            "policy": self.module_id, "trigger": trigger,
            "estimate_before": before, "estimate_after": after,
            "trigger_threshold": self._threshold(), "target": self._target(),
            "target_reached": after <= self._target(), "calls": calls,
            "pieces": len(pieces.texts), "summary_index": index,
            "covered_messages": covered, "source_indexes": source_indexes,
            "source_seqs": messages[index].get("_covers", []),
            "kept_messages": len(messages) - 1,
            "baselines": {"baseline_user_turns": counter(context, "user_turns"),
                          "baseline_model_steps": counter(context, "model_steps")},
            **self._extra_metrics()}
        return CompactionResult(messages=messages, metrics=metrics, summary=summary)


def _label(unit: Unit, task: int | None) -> str | None:
    if task is None:
        return None
    return EARLIER if unit.start < task else CURRENT


def _assemble(context: ContextInput, selection: Selection, pieces: Pieces,
              summary: str) -> tuple[list[Message], int, int, list[list[int]]]:
    """The new view, the summary's index in it, how many messages it covers and their
    indexes in the old view as ranges (``to_ranges`` of them)."""
    source = context.messages
    covered_units = set(pieces.covered)
    last = pieces.covered[-1]
    out: list[Message] = []
    indexes: list[list[int]] = []  # covered source indexes, coalesced as we go
    seqs: list[list[int]] = []  # covered source seqs and earlier summaries' ranges
    run: list[int] | None = None  # the last range of consecutive seqs in seqs
    index = -1
    for k, (start, end, _) in enumerate(selection.units):
        if k not in covered_units:
            if end - start == 1:
                out.append(source[start])
            else:
                out.extend(source[start:end])
            continue
        if indexes and indexes[-1][1] == start - 1:
            indexes[-1][1] = end - 1
        else:
            indexes.append([start, end - 1])
        for i in range(start, end):
            message = source[i]
            seq = message.get("_seq")
            if isinstance(seq, int):
                if run is not None and seq == run[1] + 1:
                    run[1] = seq
                else:
                    run = [seq, seq]
                    seqs.append(run)
            covers = message.get("_covers")
            if covers:
                seqs.extend(covers)
        if k == last:
            index = len(out)
            out.append({})
    covered = sum(high - low + 1 for low, high in indexes)
    out[index] = summary_message(summary, context.plan, covered, merge_ranges(seqs))
    return out, index, covered, indexes
