"""``journal-context/v1``: an instance's source records and model-visible view.

Three kinds of data stay apart (seed 000 §2):
- source records, stream ``src:<instance>``: what the instance really received and
  produced (``kind`` + ``message``), append-only, never overwritten by a summary;
- the model-visible view: the latest compaction snapshot (stream ``snap:<instance>``)
  plus the view entries after it (stream ``view:<instance>``); a view entry is either a
  reference to a source record (same message) or the visible message itself (a capped
  tool result, a hook-processed answer);
- execution state lives in the frame (the checkpoint head), never derived from a summary.

Each step appends what changed, so persisted bytes do not grow with the history.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from agentloom_runtime.contracts import JSON, CompactionResult, ContextInput, Message, ToolSchema
from agentloom_runtime.engine.journal import Journal

COUNTERS = ("user_turns", "baseline_user_turns", "model_steps", "baseline_model_steps")


def _strip_private(message: Message) -> Message:
    return {k: v for k, v in message.items() if not k.startswith("_")}


class JournalContextManager:
    module_id = "journal-context/v1"

    def __init__(self) -> None:
        # instance -> view messages, each tagged with "_seq" (its source record, if any)
        self._views: dict[str, list[Message]] = {}
        # instance -> (the view list it was made from, its stripped copies)
        self._model: dict[str, tuple[list[Message] | None, list[Message]]] = {}

    def checkpoint_config(self) -> JSON:
        return {}

    # -- lifecycle ------------------------------------------------------------------------

    def create(self, journal: Journal, frame: dict[str, Any], *, system: str,
               history: Sequence[Message], task: str,
               counters: dict[str, int] | None = None, history_watermark: int = 0) -> None:
        inst = frame["instance"]
        frame["view"] = {"snapshot": 0, "base": 0}
        frame["history_watermark"] = history_watermark  # the session seq inherited up to
        frame["inputs"] = []
        frame["counters"] = {k: int((counters or {}).get(k, 0)) for k in COUNTERS}
        frame["raw_complete"] = True
        self._views[inst] = []
        self.append(journal, frame, "system", {"role": "system", "content": system})
        for message in history:
            self.append(journal, frame, "history", dict(message))
        self.append(journal, frame, "user", {"role": "user", "content": task})
        if inst == "main":
            frame["counters"]["user_turns"] += 1

    def restore(self, journal: Journal, frame: dict[str, Any]) -> list[Message]:
        """Load the view from the latest snapshot plus the entries after it."""
        inst = frame["instance"]
        view: list[Message] = []
        snap_seq, base = frame["view"]["snapshot"], frame["view"]["base"]
        if snap_seq:
            snap = journal.read(f"snap:{inst}", snap_seq - 1, 1)[0].body
            view = [dict(m) for m in snap["messages"]]
        entries = journal.read(f"view:{inst}", base)
        refs = [e.body["src"] for e in entries if "src" in e.body]
        sources = {}
        if refs:
            sources = {e.seq: e.body for e in journal.read(f"src:{inst}", min(refs) - 1)}
        for entry in entries:
            if "src" in entry.body:
                message = dict(sources[entry.body["src"]]["message"])
                message["_seq"] = entry.body["src"]
            else:
                message = dict(entry.body["message"])
                if "of" in entry.body:
                    message["_seq"] = entry.body["of"]
            view.append(message)
        self._views[inst] = view
        return view

    def view(self, journal: Journal, frame: dict[str, Any]) -> list[Message]:
        """The current model-visible messages (cached; tagged with ``_seq``)."""
        inst = frame["instance"]
        if inst not in self._views:
            self.restore(journal, frame)
        return self._views[inst]

    @staticmethod
    def model_messages(view: Sequence[Message]) -> list[Message]:
        return [_strip_private(m) for m in view]

    def model_view(self, journal: Journal, frame: dict[str, Any]) -> list[Message]:
        """The view as the model sees it (private keys stripped). The stripped copies are
        made once per message and reused, so estimators that cache by message identity
        do not re-size the whole view on every step. Never mutate them."""
        view = self.view(journal, frame)
        inst = frame["instance"]
        source, stripped = self._model.get(inst, (None, []))
        if source is not view:  # the view was rebuilt (restore, compaction)
            stripped = []
        stripped.extend(_strip_private(m) for m in view[len(stripped):])
        self._model[inst] = (view, stripped)
        return list(stripped)

    # -- appends --------------------------------------------------------------------------

    def append(self, journal: Journal, frame: dict[str, Any], kind: str, message: Message,
               visible: Message | None = None, *, extra: JSON | None = None) -> int:
        """Append a source record and its view entry; returns the record's seq."""
        inst = frame["instance"]
        view = self.view(journal, frame)
        record: JSON = {"kind": kind, "message": message}
        if extra:
            record.update(extra)
        seq = journal.append(f"src:{inst}", record)
        if visible is None or visible == message:
            journal.append(f"view:{inst}", {"src": seq})
            shown = dict(message)
        else:
            journal.append(f"view:{inst}", {"of": seq, "message": visible})
            shown = dict(visible)
        shown["_seq"] = seq
        view.append(shown)
        return seq

    def queue_input(self, frame: dict[str, Any], text: str) -> None:
        """A supplement: held in the durable queue until a safe boundary."""
        frame.setdefault("inputs", []).append(text)

    def drain_inputs(self, journal: Journal, frame: dict[str, Any]) -> int:
        """Inject queued supplements; never between a tool call and its results and never
        counted as a user turn. Returns how many were injected."""
        inputs = frame.get("inputs") or []
        if not inputs or frame.get("pending"):
            return 0
        for text in inputs:
            self.append(journal, frame, "supplement", {"role": "user", "content": text})
        frame["inputs"] = []
        return len(inputs)

    def prepare(self, journal: Journal, frame: dict[str, Any],
                tools: Sequence[ToolSchema]) -> ContextInput:
        """The working copy a compaction policy decides on: task, plan, the current view
        (tagged with source seqs), tools and counters. Policies return a new view; they
        never modify the frame."""
        return ContextInput(task=frame["task"], plan=tuple(frame["plan"]),
                            messages=tuple(self.view(journal, frame)),
                            instance=frame["instance"], tools=tuple(tools),
                            counters=dict(frame["counters"]))

    # -- compaction -----------------------------------------------------------------------

    def commit_compaction(self, journal: Journal, frame: dict[str, Any],
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
        journal.append(f"snap:{inst}", {
            "revision": revision,
            "covered_seq": journal.last_seq(f"src:{inst}"),
            "messages": messages,
            "history_watermark": frame.get("history_watermark", 0),
            "counters": dict(counters),
            "metrics": dict(result.metrics),
        })
        frame["view"] = {"snapshot": revision, "base": journal.last_seq(f"view:{inst}")}
        self._views[inst] = [dict(m) for m in messages]
        return revision
