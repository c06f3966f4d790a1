"""Driving a replay: a throwaway engine on an in-memory store, stepped to the end.

``replay_run`` starts the recorded run again (same run id, task, inherited history,
start counters and labels) with ``ReplayModel`` and ``ReplayTools``, no workspace, no
command runner and no services, steps it until it stops, diverges or reaches the end
of the recording, and compares its records with the recorded ones, text for text.
``evaluate`` judges another configuration of the agent against the recording: a replay
of the run's own version first (its requests are the reference), then one of the
other version, compared request by request with the first.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentloom_runtime.checkpoint.memory import InMemoryCheckpointStore
from agentloom_runtime.contracts import JSON, ModelRequest
from agentloom_runtime.engine import create_engine
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.tool_contracts import ToolDefinition

from ._doubles import DIFF_LINES, Divergence, ReplayModel, ReplayTools
from ._recording import Recording, records_digest, stored_records

MAX_STEPS = 10_000  # the engine's own budgets stop a run long before this
Ended = Literal["stopped", "recording_end", "diverged", "step_limit"]


@dataclass(frozen=True)
class RecordsReport:
    """The replay's records against the recorded ones (every stream but ``meta``)."""

    equal: bool
    recorded: int
    replayed: int
    recorded_digest: str
    replayed_digest: str
    first_difference: JSON | None = None

    def to_dict(self) -> JSON:
        return {"equal": self.equal, "recorded": self.recorded, "replayed": self.replayed,
                "recorded_digest": self.recorded_digest,
                "replayed_digest": self.replayed_digest,
                "first_difference": self.first_difference}


@dataclass
class ReplayReport:
    identical: bool
    steps: int
    ended: Ended
    status: str  # the replayed run's status when it stopped
    diverged_at: Divergence | None
    records: RecordsReport
    model_calls: int
    requests: list[ModelRequest] = field(default_factory=list, repr=False)
    tool_arguments: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)

    def to_dict(self) -> JSON:
        return {"identical": self.identical, "steps": self.steps, "ended": self.ended,
                "status": self.status, "model_calls": self.model_calls,
                "diverged_at": self.diverged_at.to_dict() if self.diverged_at else None,
                "records": self.records.to_dict()}


def compare_records(recorded: Mapping[str, list[str]],
                    replayed: Mapping[str, list[str]]) -> RecordsReport:
    first: JSON | None = None
    for name in sorted(set(recorded) | set(replayed)):
        a, b = recorded.get(name, []), replayed.get(name, [])
        index = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                     None if len(a) == len(b) else min(len(a), len(b)))
        if index is not None:
            first = {"stream": name, "seq": index + 1,
                     "recorded": _pretty(a[index]) if index < len(a) else None,
                     "replayed": _pretty(b[index]) if index < len(b) else None}
            first["diff"] = _text_diff(first["recorded"] or "", first["replayed"] or "")
            break
    return RecordsReport(equal=first is None,
                         recorded=sum(len(v) for v in recorded.values()),
                         replayed=sum(len(v) for v in replayed.values()),
                         recorded_digest=records_digest(recorded),
                         replayed_digest=records_digest(replayed), first_difference=first)


def _pretty(text: str) -> str:
    return json.dumps(json.loads(text), indent=1, ensure_ascii=False)


def _text_diff(a: str, b: str) -> str:
    diff = list(difflib.unified_diff(a.splitlines(), b.splitlines(), "recorded", "replayed",
                                     n=2, lineterm=""))
    return "\n".join(diff[:DIFF_LINES])


async def replay_run(recording: Recording, snapshot: AgentSnapshot, *,
                     tools: list[ToolDefinition], hook_registry: Any = None,
                     reference: ReplayReport | None = None,
                     compaction_policy: Any = "default") -> ReplayReport:
    """Replay ``recording`` with ``snapshot`` (the run's own, or another version's).
    ``tools``: the catalog's host definitions (their handlers are never called);
    ``reference``: a replay of the run's own version to compare requests with;
    ``compaction_policy``: as ``create_engine`` takes it (the snapshot's by default)."""
    model = ReplayModel(recording, reference.requests if reference else None)
    answers = ReplayTools(recording, reference.tool_arguments if reference else None)
    store = InMemoryCheckpointStore()
    engine = create_engine(snapshot, save=store, model_gateway=model,
                           tools=answers.wrap(tools), hook_registry=hook_registry,
                           compaction_policy=compaction_policy)
    steps, ended, divergence = 0, "step_limit", None
    try:
        await engine.start(recording.task, run_id=recording.run_id,
                           history=recording.history, counters=recording.counters,
                           history_watermark=recording.history_watermark,
                           labels=recording.labels)
        command: dict[str, Any] | None = None
        while steps < MAX_STEPS:
            steps += 1
            answers.model_calls = len(model.requests)
            result = await engine.step(command_result=command)
            command = None
            divergence = model.divergence or answers.divergence
            if divergence is not None:
                divergence.step = steps
                ended = "diverged"
                break
            if model.ended or answers.ended:
                ended = "recording_end"
                break
            if result.next == "done":
                ended = "stopped"
                break
            if result.next == "command":
                command, ended = _command_result(recording, result.request_id)
                if command is None:
                    if ended == "diverged":
                        divergence = Divergence(
                            kind="command_result", model_call=len(model.requests),
                            step=steps, message=f"the recording has no result for the "
                            f"command {result.request_id}")
                    break
        status = engine.status
    finally:
        await engine.close()
    records = compare_records(recording.records, stored_records(store, recording.run_id))
    return ReplayReport(identical=divergence is None and records.equal, steps=steps,
                        ended=ended,  # type: ignore[arg-type]
                        status=status, diverged_at=divergence, records=records,
                        model_calls=len(model.requests), requests=model.requests,
                        tool_arguments=answers.arguments)


def _command_result(recording: Recording, request_id: str | None
                    ) -> tuple[dict[str, Any] | None, str]:
    recorded = recording.by_request(request_id or "")
    result = recorded.command_result() if recorded is not None else None
    if result is not None:
        return result, "step_limit"
    return None, "recording_end" if request_id == recording.in_flight else "diverged"


async def evaluate(recording: Recording, own: AgentSnapshot, other: AgentSnapshot, *,
                   own_tools: list[ToolDefinition], other_tools: list[ToolDefinition],
                   own_hooks: Any = None, other_hooks: Any = None,
                   own_compaction: Any = "default", other_compaction: Any = "default"
                   ) -> tuple[ReplayReport, ReplayReport]:
    """(the replay of the run's own version, the replay of ``other`` against it)."""
    baseline = await replay_run(recording, own, tools=own_tools, hook_registry=own_hooks,
                                compaction_policy=own_compaction)
    judged = await replay_run(recording, other, tools=other_tools, hook_registry=other_hooks,
                              reference=baseline, compaction_policy=other_compaction)
    return baseline, judged
