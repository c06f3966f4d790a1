"""A run's inbox: supplements written without touching the run's head.

A user may add to a running task at any moment, while a step holds the run. Writing the
supplement into the head would bump its version and make that step's commit fail — and a
step whose tool already ran would lose its result. So supplements go to a separate
document (``<run_id>/inbox``) with its own compare-and-set; the engine pulls new entries
into the main frame's durable queue at its next step and injects them at a safe boundary.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentloom_runtime.checkpoint.store import BaseCheckpointStore, Commit, LogEntry
from agentloom_runtime.errors import CheckpointConflict, ConfigError

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ._context import StepContext

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
    if head.body["status"] in ("completed", "cancelled", "failed"):
        raise ConfigError(f"run {run_id} is {head.body['status']}; ask a new question instead")
    key = inbox_key(run_id)
    for _ in range(50):  # contention only with other supplements to the same run
        inbox = store.load_head(key)
        version, count = (inbox.version, int(inbox.body["count"])) if inbox else (0, 0)
        if inbox is not None and inbox.body.get("sealed"):
            raise ConfigError(f"run {run_id} is finishing; ask it as a new question "
                              "instead", details={"run_id": run_id, "code": "run_finished"})
        try:
            store.commit(Commit(key, version, {"count": count + 1},
                                [LogEntry(STREAM, count + 1, {"text": text})]))
        except CheckpointConflict:
            continue
        _check_delivery(store, run_id, count + 1)
        return count + 1
    raise CheckpointConflict(f"could not queue the supplement for run {run_id}")


def _check_delivery(store: BaseCheckpointStore, run_id: str, seq: int) -> None:
    """The run may have finished between our status check and our write: then nothing
    will ever read the supplement, and the caller must be told instead of trusting it."""
    head = store.load_head(run_id)
    if head is None:
        return
    if head.body["status"] in ("completed", "cancelled", "failed") and \
            int(head.body.get("inbox_seen", 0)) < seq:
        raise ConfigError(f"run {run_id} finished before the supplement could be read; "
                          "ask it as a new question instead",
                          details={"run_id": run_id, "code": "run_finished"})


def seal(store: BaseCheckpointStore, run_id: str, seen: int) -> bool:
    """Close the inbox before the run's final commit: True when no supplement came after
    ``seen`` (posts are refused from now on); False when one did (pull it, go on). The
    compare-and-set on the inbox makes a racing post either land before the seal (and
    be seen) or be refused."""
    key = inbox_key(run_id)
    inbox = store.load_head(key)
    version, count = (inbox.version, int(inbox.body["count"])) if inbox else (0, 0)
    if count > seen:
        return False
    try:
        store.commit(Commit(key, version, {"count": count, "sealed": True}, []))
    except CheckpointConflict:
        return False
    except Exception:  # the seal only narrows a race; a failing store must not stop the run
        logger.warning("could not seal the inbox of run %s", run_id, exc_info=True)
    return True


def unseal(store: BaseCheckpointStore, run_id: str) -> None:
    """A run that goes on after all (a failed final save, then a resume)."""
    key = inbox_key(run_id)
    for _ in range(50):
        inbox = store.load_head(key)
        if inbox is None or not inbox.body.get("sealed"):
            return
        try:
            store.commit(Commit(key, inbox.version, {"count": inbox.body["count"]}, []))
            return
        except CheckpointConflict:
            continue


def pull_inputs(store: BaseCheckpointStore, run_id: str, seen: int) -> list[tuple[int, str]]:
    """Supplements after ``seen`` (the head's cursor), in order."""
    return [(e.seq, str(e.body["text"])) for e in store.read(inbox_key(run_id), STREAM, seen)]


def pull_inbox(ctx: StepContext) -> None:
    """Move new supplements into the main frame's durable queue (committed with this
    step's next commit; a crash before it simply pulls them again)."""
    head = ctx.head
    main = head["frames"]["main"]
    for seq, text in pull_inputs(ctx.journal.store, head["run_id"], head["inbox_seen"]):
        ctx.context.queue_input(main, text)
        head["inbox_seen"] = seq
