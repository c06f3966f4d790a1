"""A run's inbox: supplements written without touching the run's head.

A user may add to a running task at any moment, while a step holds the run. Writing the
supplement into the head would bump its version and make that step's commit fail — and a
step whose tool already ran would lose its result. So supplements go to a separate
document (``<run_id>/inbox``) with its own compare-and-set; the engine pulls new entries
into the main frame's durable queue at its next step and injects them at a safe boundary.
"""

from __future__ import annotations

from agentloom_runtime.checkpoint.store import BaseCheckpointStore, Commit, LogEntry
from agentloom_runtime.errors import CheckpointConflict, ConfigError

STREAM = "inputs"
MAX_CHARS = 100_000


def inbox_key(run_id: str) -> str:
    return f"{run_id}/inbox"


def post_input(store: BaseCheckpointStore, run_id: str, text: str) -> int:
    """Queue a supplement for a run; returns its inbox seq. Safe while steps run."""
    if not text.strip():
        raise ConfigError("the supplement is empty")
    if len(text) > MAX_CHARS:
        raise ConfigError(f"the supplement is longer than {MAX_CHARS} characters")
    head = store.load_head(run_id)
    if head is None:
        raise ConfigError(f"run {run_id} does not exist")
    if head.body["status"] in ("completed", "cancelled"):
        raise ConfigError(f"run {run_id} is {head.body['status']}; ask a new question instead")
    key = inbox_key(run_id)
    for _ in range(50):  # contention only with other supplements to the same run
        inbox = store.load_head(key)
        version, count = (inbox.version, int(inbox.body["count"])) if inbox else (0, 0)
        try:
            store.commit(Commit(key, version, {"count": count + 1},
                                [LogEntry(STREAM, count + 1, {"text": text})]))
            return count + 1
        except CheckpointConflict:
            continue
    raise CheckpointConflict(f"could not queue the supplement for run {run_id}")


def pull_inputs(store: BaseCheckpointStore, run_id: str, seen: int) -> list[tuple[int, str]]:
    """Supplements after ``seen`` (the head's cursor), in order."""
    return [(e.seq, str(e.body["text"])) for e in store.read(inbox_key(run_id), STREAM, seen)]
