"""``journal-context/v1``: an instance's source records and model-visible view.

Three kinds of data stay apart (docs/contract.md#three-kinds-of-data):
- source records, stream ``src:<instance>``: what the instance really received and
  produced (``kind`` + ``message``), append-only, never overwritten by a summary;
- the model-visible view: the latest compaction snapshot (stream ``snap:<instance>``)
  plus the view entries after it (stream ``view:<instance>``);
- execution state lives in the frame (the checkpoint head), never derived from a summary.

A view entry is one of
- ``{"src": seq}``: the visible message is source record ``seq``'s message;
- ``{"src": seq, "message": m}``: the same, with the message copied into the entry
  because it is small (``INLINE_CHARS``): such a row costs about what a bare reference
  costs (a store's read and write units), and a restore then never reads the source;
- ``{"src": seq, "many": n}``: the inherited history, one source record holding
  ``messages`` (a run's first commit stays a few items however long the history);
  ``"plain": true`` when none of them has a ``_`` key;
- ``{"of": seq, "message": v, "n": size}``: the visible message differs from the source
  record's (a capped tool result, a hook-processed answer, rewritten call ids); ``n`` is
  about the size of the source message (absent in older checkpoints: unknown).

**Sizes are kept with the records they size.** Given the compaction policy's
``MessageSizer`` (the engine passes ``policy.message_sizer()``), each view entry also
holds ``"c"``: the visible message's cost in the policy's units; the inherited
history's entry holds ``"costs"`` (one per message) and a compaction snapshot
``"costs"`` too. A run's policy, estimator included, is bound in its checkpoint (an
engine with another one cannot attach), so every cost of a run is of one estimator.
``restore`` hands the costs it finds to the sizer (``remember``) for the messages it
rebuilds, so a new engine attaching to a long run does not measure its whole history
again; entries of older checkpoints (no cost) are measured as before.

What the model is shown of an oversized value (an assistant's answer or tool-call
arguments, a tool result a hook left large) is a capped copy (``_protocol.capped``): the
entry is then an ``of`` entry holding the copy, the source record keeps the value whole
(``visible`` stays what the model would have seen uncapped: sessions project it and cap
it by the same rule). ``restore`` and ``create`` apply the same rule, so a view from
an older checkpoint or an uncapped history is capped too, and a restored view equals
the one built step by step.

``restore`` reads the snapshot, the view entries after it, and only the source records
of ``{"src": seq}`` entries, by exact seqs in ranges. Two ranges are read as one when the
records between them are known to be small (the sources of inlined or small ``of``
entries): fewer reads, never a large record the view does not need.

Each step appends what changed, so persisted bytes do not grow with the history; an
append to a view not loaded yet (a new engine's tool step) does not load it.
"""

from __future__ import annotations

import copy
import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from agentloom_runtime.contracts import (
    JSON,
    CompactionResult,
    ContextFrame,
    ContextInput,
    LogRecord,
    Message,
    RunJournal,
    ToolSchema,
)

from ._protocol import PRIVATE_PREFIX, VIEW_CHARS, capped, dumps, to_ranges
from .policy import MessageSizer

COUNTERS = ("user_turns", "baseline_user_turns", "model_steps", "baseline_model_steps")
INLINE_CHARS = 4_096  # a message about this small is copied into its view entry
SMALL_CHARS = 8_192  # a source record this small is read in passing (never spilled)
GAP_CHARS = 32_768  # two source ranges are read as one across at most this much


HISTORY = "the session's records"  # where the whole values of inherited history are


def _where(instance: str, seq: int) -> str:
    return f"source record {instance}#{seq}"


def _strip_private(message: Message) -> Message:
    return {k: v for k, v in message.items() if not k.startswith("_")}


def _size(message: Message) -> int:
    """About the characters of the message's JSON (cheap: strings by length)."""
    size = 2
    for key, value in message.items():
        size += len(key) + 4
        if isinstance(value, str):
            size += len(value)
        elif value is not None:
            size += len(dumps(value))
    return size


def _source_ranges(entries: Sequence[LogRecord]) -> list[list[int]]:
    """The seq ranges of source records to read: every ``{"src"}``-only entry's record,
    and between two of them the records known to be small (``GAP_CHARS`` in all)."""
    needed: list[int] = []
    small: dict[int, int] = {}  # seq -> size, records that may be read in passing
    for entry in entries:
        body = entry.body
        if "message" not in body:
            needed.append(int(body["src"]))
        elif "src" in body:
            small[int(body["src"])] = _size(body["message"])
        elif isinstance(body.get("n"), int) and body["n"] <= SMALL_CHARS:
            small[int(body["of"])] = int(body["n"])
    ranges: list[list[int]] = []
    for low, high in to_ranges(needed):
        if ranges:
            gap = range(ranges[-1][1] + 1, low)
            if all(seq in small for seq in gap) and sum(small[s] for s in gap) <= GAP_CHARS:
                ranges[-1][1] = high
                continue
        ranges.append([low, high])
    return ranges


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Rebuilding a long view makes thousands of dicts at once (the decoded records, the
    tagged messages), none of them in a cycle; the cyclic collector would walk the heap
    several times over meanwhile (a third of restoring 5,000 messages). It is paused for
    that while, and resumed only if it was running."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _Rebuilt:
    """A view being restored: its messages (tagged with ``_seq``), their stripped
    copies for the model, and the kept costs of the messages that have one."""

    def __init__(self) -> None:
        self.view: list[Message] = []
        self.public: list[Message] = []
        self.sized: list[Message] = []
        self.costs: list[int] = []

    def _sized(self, cost: int) -> None:
        self.sized += (self.view[-1], self.public[-1])
        self.costs += (cost, cost)

    def snapshot(self, inst: str, snap: JSON) -> None:
        kept = snap.get("costs")
        for index, m in enumerate(snap["messages"]):
            shown = capped(m, _where(inst, m["_seq"]) if isinstance(
                m.get("_seq"), int) else HISTORY)
            self.view.append(dict(shown))
            self.public.append(_strip_private(shown))
            if isinstance(kept, list) and shown is m:  # a cost of this very value
                self._sized(kept[index])

    def history(self, body: JSON, messages: list[Message]) -> None:
        """The inherited history: its record is decoded for this view alone, so a message
        that needs no cap is itself the model's copy when the entry says that no message
        has a private key (``plain``). Hot: 5,000 messages are 5,000 of each step here."""
        seq, start = body["src"], len(self.view)
        # capped's own test, inlined for the common case (no call, a short content)
        shown = [m if not m.get("tool_calls") and (
            (text := m.get("content")).__class__ is not str or len(text) <= VIEW_CHARS)
            else capped(m, HISTORY) for m in messages]
        self.view += [{**m, "_seq": seq} for m in shown]
        self.public += shown if body.get("plain") is True else [
            _strip_private(m) for m in shown]
        kept = body.get("costs")
        if isinstance(kept, list) and len(kept) == len(shown):
            self.sized += self.view[start:]
            self.sized += self.public[start:]
            self.costs += kept
            self.costs += kept

    def entry(self, inst: str, body: JSON, sources: dict[int, Message]) -> None:
        if "message" not in body:
            seq = body["src"]
            message = sources[seq]
        else:
            seq = body.get("src", body.get("of"))
            message = body["message"]
        if seq is not None:  # an entry of an older checkpoint may hold it uncapped
            message = capped(message, _where(inst, seq))
        # a new dict: bodies of entries not yet committed are the journal's own
        self.view.append({**message, "_seq": seq} if seq is not None else dict(message))
        self.public.append(_strip_private(self.view[-1]))
        if isinstance(body.get("c"), int):  # capped as when it was measured
            self._sized(body["c"])


class JournalContextManager:
    """Implements the ``contracts.ContextManager`` port."""

    module_id = "journal-context/v1"

    def __init__(self, sizer: MessageSizer | None = None) -> None:
        self.sizer = sizer  # sizes kept with the records (module notes); None: not kept
        # instance -> view messages, each tagged with "_seq" (its source record, if any)
        self._views: dict[str, list[Message]] = {}
        # instance -> (the view list it was made from, its stripped copies)
        self._model: dict[str, tuple[list[Message] | None, list[Message]]] = {}

    def checkpoint_config(self) -> JSON:
        return {}

    # -- lifecycle ------------------------------------------------------------------------

    def create(self, journal: RunJournal, frame: ContextFrame, *, system: str,
               history: Sequence[Message], task: str,
               counters: dict[str, int] | None = None, history_watermark: int = 0) -> None:
        inst = frame["instance"]
        frame["view"] = {"snapshot": 0, "base": 0}
        frame["history_watermark"] = history_watermark  # the session seq inherited up to
        frame["inputs"] = []
        frame["counters"] = {k: int((counters or {}).get(k, 0)) for k in COUNTERS}
        self._views[inst] = []
        self.append(journal, frame, "system", {"role": "system", "content": system})
        if history:  # one record, however long: a run's first commit stays a few items
            messages = [dict(m) for m in history]
            seq = journal.append(f"src:{inst}", {
                "kind": "history", "messages": messages,
                "message": {"role": "system", "content": f"[{len(messages)} messages of "
                            "session history]"}})
            shown = [{**capped(m, HISTORY), "_seq": seq} for m in messages]
            entry: JSON = {"src": seq, "many": len(messages)}
            if not any(k.startswith(PRIVATE_PREFIX) for m in messages for k in m):
                entry["plain"] = True  # no private key: restore shares the model's copies
            if self.sizer is not None:
                entry["costs"] = self.sizer.message_costs(shown)
            journal.append(f"view:{inst}", entry)
            self._views[inst].extend(shown)
        self.append(journal, frame, "user", {"role": "user", "content": task})
        if inst == "main":
            frame["counters"]["user_turns"] += 1

    def restore(self, journal: RunJournal, frame: ContextFrame) -> list[Message]:
        """Load the view from the latest snapshot plus the entries after it, reading only
        the source records those entries refer to (see the module notes), with the
        stripped copies the model is shown and the sizes kept with the entries."""
        inst = frame["instance"]
        built = _Rebuilt()
        with _collector_paused():
            snap_seq, base = frame["view"]["snapshot"], frame["view"]["base"]
            if snap_seq:
                snap = journal.read(f"snap:{inst}", snap_seq - 1, 1)[0].body
                built.snapshot(inst, snap)
            entries = journal.read(f"view:{inst}", base)
            sources: dict[int, Message] = {}
            sources_many: dict[int, list[Message]] = {}
            for low, high in _source_ranges(entries):
                for record in journal.read(f"src:{inst}", low - 1, high - low + 1):
                    if "messages" in record.body:
                        sources_many[record.seq] = record.body["messages"]
                    else:
                        sources[record.seq] = record.body["message"]
            for entry in entries:
                body = entry.body
                if "many" in body:  # the inherited history, one record
                    built.history(body, sources_many[body["src"]])
                else:
                    built.entry(inst, body, sources)
        if self.sizer is not None and built.sized:
            self.sizer.remember(built.sized, built.costs)
        self._views[inst] = built.view
        self._model[inst] = (built.view, built.public)
        return built.view

    def view(self, journal: RunJournal, frame: ContextFrame) -> list[Message]:
        """The current model-visible messages (cached; tagged with ``_seq``)."""
        inst = frame["instance"]
        if inst not in self._views:
            self.restore(journal, frame)
        return self._views[inst]

    @staticmethod
    def model_messages(view: Sequence[Message]) -> list[Message]:
        return [_strip_private(m) for m in view]

    def model_view(self, journal: RunJournal, frame: ContextFrame) -> list[Message]:
        """The view as the model sees it (private keys stripped). The stripped copies are
        made once per message and reused, so estimators that cache by message identity
        do not re-size the whole view on every step. Never mutate them."""
        view = self.view(journal, frame)
        inst = frame["instance"]
        source, stripped = self._model.get(inst, (None, []))
        if source is not view:  # the view was rebuilt (restore, compaction)
            stripped = []
        new = view[len(stripped):]
        copies = [_strip_private(m) for m in new]
        if self.sizer is not None and copies:  # the same costs: "_" keys do not count
            self.sizer.remember(copies, self.sizer.message_costs(new))
        stripped.extend(copies)
        self._model[inst] = (view, stripped)
        return list(stripped)

    # -- appends --------------------------------------------------------------------------

    def append(self, journal: RunJournal, frame: ContextFrame, kind: str, message: Message,
               visible: Message | None = None, *, extra: JSON | None = None) -> int:
        """Append a source record and its view entry; returns the record's seq. A view
        not loaded yet stays so (a tool step of a new engine need not read the history):
        ``restore`` reads this entry with the others, the journal's pending ones too."""
        inst = frame["instance"]
        view = self._views.get(inst)
        record: JSON = {"kind": kind, "message": message}
        if extra:
            record.update(extra)
        if visible is not None and visible != message:
            record["visible"] = visible  # what the model saw: sessions project this
        seq = journal.append(f"src:{inst}", record)
        same = visible is None or visible == message
        shown = capped(message if visible is None or same else visible, _where(inst, seq))
        tagged = {**shown, "_seq": seq}
        if same and shown is message:
            entry: JSON = {"src": seq, "message": message} \
                if _size(message) <= INLINE_CHARS else {"src": seq}
        else:  # hook-processed, rewritten or capped: the entry holds what the model sees
            entry = {"of": seq, "message": shown, "n": _size(message)}
        if self.sizer is not None:
            entry["c"] = self.sizer.message_costs([tagged])[0]
        journal.append(f"view:{inst}", entry)
        if view is not None:
            view.append(tagged)
        return seq

    def queue_input(self, frame: ContextFrame, text: str) -> None:
        """A supplement: held in the durable queue until a safe boundary."""
        frame.setdefault("inputs", []).append(text)

    def drain_inputs(self, journal: RunJournal, frame: ContextFrame) -> int:
        """Inject queued supplements; never between a tool call and its results and never
        counted as a user turn. Returns how many were injected."""
        inputs = frame.get("inputs") or []
        if not inputs or frame.get("pending"):
            return 0
        for text in inputs:
            self.append(journal, frame, "supplement", {"role": "user", "content": text})
        frame["inputs"] = []
        return len(inputs)

    def prepare(self, journal: RunJournal, frame: ContextFrame,
                tools: Sequence[ToolSchema]) -> ContextInput:
        """The working copy a compaction policy decides on: task, plan, the current view
        (tagged with source seqs), tools and counters. Policies return a new view; they
        never modify the frame."""
        return ContextInput(task=frame["task"], plan=tuple(frame["plan"]),
                            messages=tuple(self.view(journal, frame)),
                            instance=frame["instance"], tools=tuple(tools),
                            counters=dict(frame["counters"]))

    # -- compaction -----------------------------------------------------------------------

    def commit_compaction(self, journal: RunJournal, frame: ContextFrame,
                          result: CompactionResult) -> int:
        """Replace the view with a validated compaction result: a new snapshot entry; the
        source records stay untouched. Returns the snapshot revision."""
        inst = frame["instance"]
        counters = frame["counters"]
        baselines = result.metrics.get("baselines") or {
            "baseline_user_turns": counters["user_turns"],
            "baseline_model_steps": counters["model_steps"]}
        counters.update({k: int(v) for k, v in baselines.items() if k in COUNTERS})
        revision = journal.last_seq(f"snap:{inst}") + 1
        messages = [copy.deepcopy(m) for m in result.messages]
        view = [dict(m) for m in messages]
        snapshot: JSON = {
            "revision": revision,
            "covered_seq": journal.last_seq(f"src:{inst}"),
            "messages": messages,
            "history_watermark": frame.get("history_watermark", 0),
            "counters": dict(counters),
            "metrics": dict(result.metrics),
        }
        if self.sizer is not None:
            snapshot["costs"] = self.sizer.message_costs(view)
        journal.append(f"snap:{inst}", snapshot)
        frame["view"] = {"snapshot": revision, "base": journal.last_seq(f"view:{inst}")}
        self._views[inst] = view
        return revision
