"""An operator's raise of a run's budget, checked before the run is resumed.

Only a space admin or owner may raise a budget (403 ``role_required``). Each figure
given must exceed the run's current budget — an earlier raise (the run head's
``budget``) or else the version's ``limits`` — and a budget the version does not set
cannot be raised (422 ``budget_raise_invalid`` naming the field). The engine checks
again when the resume begins (``begin_execution(raise_budget=)``); checking here gives
the caller the error instead of a resume that silently stays blocked. ``by`` is the
caller's identity, never a name the client sends.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentloom.platform.access import member_of
from agentloom.platform.domain import Run
from agentloom.platform.errors import Invalid
from agentloom.platform.identity import Principal
from agentloom.platform.store import PlatformStore
from agentloom_runtime.checkpoint.store import BaseCheckpointStore
from agentloom_runtime.engine import RaiseBudget
from agentloom_runtime.snapshot import AgentSnapshot

MAX_NOTE = 500


def budget_raise(store: PlatformStore, checkpoints: BaseCheckpointStore, who: Principal,
                 run: Run, snapshot: AgentSnapshot, *, max_tokens: int | None,
                 max_cost: float | None, note: str = "") -> RaiseBudget | None:
    """The ``RaiseBudget`` to resume ``run`` with, or None when nothing is raised."""
    if max_tokens is None and max_cost is None:
        return None
    member_of(store, who, run.space_id, "admin")
    current = _current(checkpoints, run.run_id, snapshot)
    for name, new in (("max_tokens", max_tokens), ("max_cost", max_cost)):
        old, field = current[name], f"raise_budget.{name}"
        if new is None:
            continue
        if old is None:
            raise _invalid(field, f"version {run.version} sets no {name} budget to raise")
        if not new > old:
            raise _invalid(field, f"must exceed the current budget ({_figure(old)}); got "
                                  f"{_figure(new)}")
    return RaiseBudget(by=who.user_id, max_tokens=max_tokens, max_cost=max_cost,
                       note=note.strip()[:MAX_NOTE])


def _current(checkpoints: BaseCheckpointStore, run_id: str,
             snapshot: AgentSnapshot) -> Mapping[str, float | None]:
    loaded = checkpoints.load_head(run_id)
    raised = loaded.body.get("budget") if loaded is not None else None
    if isinstance(raised, Mapping):
        return {"max_tokens": raised.get("max_tokens"), "max_cost": raised.get("max_cost")}
    return {"max_tokens": snapshot.limits.max_tokens, "max_cost": snapshot.limits.max_cost}


def _figure(value: float) -> str:
    """A budget figure as people read it: tokens with separators, a cost as it is."""
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _invalid(field: str, message: str) -> Invalid:
    return Invalid(f"{field}: {message}", code="budget_raise_invalid",
                   details={"fields": [{"field": field, "message": message}]})
