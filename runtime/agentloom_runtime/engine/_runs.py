"""Runs read or stopped without assembling an engine: ``read_run`` (what a host lists)
and ``cancel_run`` (no module, hook or tool binding has to match)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from agentloom_runtime.checkpoint.journal import Journal
from agentloom_runtime.checkpoint.store import BaseCheckpointStore
from agentloom_runtime.contracts import RunStatus
from agentloom_runtime.errors import CheckpointConflict, ConfigError

from . import _resolve
from ._state import FORMAT, Head, error_info


@dataclass(frozen=True)
class RunSummary:
    """A run as a host lists it, read without assembling an engine."""

    run_id: str
    version: int
    status: RunStatus
    error: Mapping[str, str] | None
    labels: Mapping[str, str]
    instances: tuple[str, ...]
    execution: int
    way_out: str | None
    in_flight: str | None  # the kind of an operation in flight, if any
    reason: str = ""  # the outcome's reason, when it ended (e.g. a review's or a verdict's)


def read_run(store: BaseCheckpointStore, run_id: str) -> RunSummary | None:
    loaded = store.load_head(run_id)
    if loaded is None:
        return None
    head = cast(Head, loaded.body)
    if head.get("format") != FORMAT:
        raise ConfigError(f"run {run_id} was saved in checkpoint format "
                          f"{head.get('format')}; this runtime reads format {FORMAT} only")
    error = head["error"]
    return RunSummary(run_id=run_id, version=loaded.version, status=head["status"],
                      error=None if error is None else {
                          "code": error["code"], "message": error["message"],
                          "type": error["type"]},
                      labels=dict(head["labels"]), instances=tuple(head["frames"]),
                      execution=head["execution"], way_out=_resolve.way_out(head),
                      in_flight=head["op"]["kind"] if head["op"] else None,
                      reason=_main_reason(head))


def cancel_run(store: BaseCheckpointStore, run_id: str, reason: str = "cancelled",
               *, attempts: int = 20) -> RunSummary:
    """Cancel a run without assembling an engine for it: no module, hook or tool binding
    has to match (a run whose hook package changed can still be stopped). Compare-and-
    set on the head; a driver's next step then loses its commit and stops."""
    for _ in range(attempts):
        loaded = store.load_head(run_id)
        if loaded is None:
            raise ConfigError(f"run {run_id} does not exist")
        head = cast(Head, loaded.body)
        if head.get("format") != FORMAT:
            raise ConfigError(f"run {run_id} was saved in checkpoint format "
                              f"{head.get('format')}; this runtime reads format {FORMAT} only")
        if head["status"] in _resolve.TERMINAL:
            raise ConfigError(f"run {run_id} is already {head['status']}",
                              details={"code": "run_ended"})
        head["status"] = "cancelled"
        head["error"] = error_info("run_cancelled", reason, "RunCancelled")
        try:
            Journal(store, run_id, loaded.version, head).commit("run.cancel")
        except CheckpointConflict:
            continue  # a step committed meanwhile: look again
        summary = read_run(store, run_id)
        assert summary is not None
        return summary
    raise CheckpointConflict(f"run {run_id} kept moving; cancel it again")


def _main_reason(head: Head) -> str:
    outcome = head["frames"]["main"]["outcome"]
    return outcome["reason"] if outcome is not None else ""


