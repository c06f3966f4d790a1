"""The run's fence: which Step Functions execution (generation) may drive it.

One platform item per run, ``fence#{run}`` / ``fence``::

    {"generation": g,          # the latest execution started for the run (launcher, rollover)
     "owner": g' ,             # the generation that claimed it (its first step)
     "start_version": v,       # the checkpoint head version when it claimed (rollover count)
     "cluster": "<arn>" | ""}  # where its sandbox tasks run (cancel stops them)

The launcher and a rollover move ``generation`` up with a compare-and-set before they
start the execution named ``{run}-g{generation}`` (so a duplicate start is
``ExecutionAlreadyExists``, never a second execution). A step of generation ``g`` claims
the run with a conditional write (``owner = g``) once per generation; a step whose
generation is not the latest is stale and does nothing. Within one generation the
checkpoint head's own compare-and-set keeps steps in order.
"""

from __future__ import annotations

from pydantic import BaseModel

from agentloom.platform.store import ABSENT, PlatformStore, Versioned, WriteConflict
from agentloom.platform.store.items import put

MAX_NAME = 80


class Fence(BaseModel):
    generation: int = 0
    owner: int = 0
    start_version: int = 0
    cluster: str = ""
    rolled_from: int = 0  # the generation whose rollover started this one


def rollover_pending(fence: Fence, generation: int) -> bool:
    """``generation`` rolled over and its successor has not claimed the run yet: a
    retried rollover step answers the same rollover again."""
    return fence.rolled_from == generation and fence.generation == generation + 1 \
        and fence.owner != fence.generation


def execution_name(run_id: str, generation: int) -> str:
    name = f"{run_id}-g{generation}"
    if len(name) > MAX_NAME:  # run ids are ~24 characters; never in practice
        raise ValueError(f"execution name {name[:40]}… is longer than {MAX_NAME} characters")
    return name


def _key(run_id: str) -> tuple[str, str]:
    return f"fence#{run_id}", "fence"


def read(store: PlatformStore, run_id: str) -> Versioned[Fence] | None:
    return store.items.get(*_key(run_id), Fence)


def write(store: PlatformStore, run_id: str, fence: Fence,
          found: Versioned[Fence] | None) -> None:
    """Compare-and-set on the version read (``WriteConflict`` when someone wrote first)."""
    store.items.transact([put(*_key(run_id), fence, found.version if found else ABSENT)])


def advance(store: PlatformStore, run_id: str, *, expect: int | None = None,
            attempts: int = 20) -> int:
    """The next generation, recorded (compare-and-set). ``expect``: only from that
    generation (a rollover of generation ``expect``, recorded as ``rolled_from``);
    ``WriteConflict`` otherwise."""
    for _ in range(attempts):
        found = read(store, run_id)
        current = found.value if found else Fence()
        if expect is not None and current.generation != expect:
            raise WriteConflict(f"run {run_id} moved to generation {current.generation}",
                                index=0, pk=_key(run_id)[0], sk=_key(run_id)[1])
        new = current.model_copy(update={"generation": current.generation + 1,
                                         "rolled_from": expect or 0})
        try:
            write(store, run_id, new, found)
        except WriteConflict:
            continue
        return new.generation
    raise WriteConflict(f"run {run_id}: its fence kept moving", index=0,
                        pk=_key(run_id)[0], sk=_key(run_id)[1])


def claim(store: PlatformStore, run_id: str, generation: int, head_version: int,
          cluster: str = "") -> Fence | None:
    """Claim the run for ``generation``; None when that generation is stale (a newer one
    was started, or it was never started)."""
    for _ in range(20):
        found = read(store, run_id)
        if found is None or found.value.generation != generation:
            return None
        if found.value.owner == generation:
            return found.value
        new = found.value.model_copy(update={"owner": generation,
                                             "start_version": head_version,
                                             "cluster": cluster or found.value.cluster})
        try:
            write(store, run_id, new, found)
        except WriteConflict:
            continue
        return new
    return None
