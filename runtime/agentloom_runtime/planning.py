"""``update_plan`` and the plan rules strategies and completion share (docs/contract.md#modes).

A plan is always submitted whole: 1–12 steps ``{"id", "title", "status"}`` with unique
ids, at most one ``in_progress``. Changing an existing plan needs a ``reason``; plain
progress — the same steps in the same order, statuses only moving forward
(pending → in_progress → completed) — does not, so the model is not pushed to invent a
reason for every tick. Adding, removing, renaming, reordering, cancelling or reopening
steps is a change. The tool goes through the bus and hooks like any other; nothing in
the loop recognises its name.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import ConfigError, ToolArgumentsError
from .tool_contracts import ToolContext, ToolDefinition

PLAN_STATUSES = ("pending", "in_progress", "completed", "cancelled")
OPEN_STATUSES = frozenset({"pending", "in_progress"})
MAX_STEPS = 12
MAX_ID_CHARS = 64
MAX_TITLE_CHARS = 300
MAX_REASON_CHARS = 2_000
_FORWARD = frozenset({("pending", "in_progress"), ("pending", "completed"),
                      ("in_progress", "completed")})

PLAN_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "steps": {
            "type": "array", "minItems": 1, "maxItems": MAX_STEPS,
            "description": "The complete plan, in order.",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS},
                    "title": {"type": "string", "minLength": 1, "maxLength": MAX_TITLE_CHARS},
                    "status": {"enum": list(PLAN_STATUSES)},
                },
                "required": ["id", "title", "status"],
                "additionalProperties": False,
            },
        },
        "reason": {"type": "string", "maxLength": MAX_REASON_CHARS,
                   "description": "Why an existing plan changes."},
    },
    "required": ["steps"],
    "additionalProperties": False,
}

PLAN_DESCRIPTION = (
    "Create or update your plan for the task. Always send the complete list of steps "
    f"(1-{MAX_STEPS}), each with a unique id, a short title and a status: pending, "
    "in_progress, completed or cancelled. At most one step may be in_progress. When you "
    "change an existing plan (add, remove, rename, reorder, cancel or reopen steps) give a "
    "short reason; marking steps in_progress or completed needs no reason."
)


def plan_is_open(steps: Sequence[Mapping[str, Any]]) -> bool:
    """True while any step is pending or in progress."""
    return any(step.get("status") in OPEN_STATUSES for step in steps)


def validate_plan(steps: Any, previous: Sequence[Mapping[str, Any]] = (),
                  reason: Any = None) -> list[dict[str, str]]:
    """Check a submitted plan against the rules and the current plan; returns the
    normalized steps (``id``, ``title``, ``status`` only, whitespace trimmed).

    Raises ``ToolArgumentsError`` with every problem found, phrased for the model.
    """
    problems: list[str] = []
    normalized = _normalize(steps, problems)
    if reason is not None and not isinstance(reason, str):
        problems.append("reason must be a string")
    if problems:
        raise ToolArgumentsError("invalid plan: " + "; ".join(problems[:8]))
    if previous and _is_change(previous, normalized) and not (reason or "").strip():
        raise ToolArgumentsError(
            "this changes the existing plan (steps added, removed, renamed, reordered, "
            "cancelled or reopened); resubmit it with a non-empty 'reason'")
    return normalized


def _normalize(steps: Any, problems: list[str]) -> list[dict[str, str]]:
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_STEPS:
        problems.append(f"steps must be a list of 1 to {MAX_STEPS} steps")
        return []
    out: list[dict[str, str]] = []
    for index, item in enumerate(steps):
        step = _normalize_step(index, item, problems)
        if step is not None:
            out.append(step)
    ids = [s["id"] for s in out]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        problems.append(f"step ids must be unique; repeated: {', '.join(duplicates)}")
    active = [s["id"] for s in out if s["status"] == "in_progress"]
    if len(active) > 1:
        problems.append(f"at most one step may be in_progress; got {', '.join(active)}")
    return out


def _normalize_step(index: int, item: Any, problems: list[str]) -> dict[str, str] | None:
    where = f"steps[{index}]"
    if not isinstance(item, Mapping):
        problems.append(f"{where} must be an object with id, title and status")
        return None
    step_id, title, status = item.get("id"), item.get("title"), item.get("status")
    ok = True
    if not isinstance(step_id, str) or not 0 < len(step_id.strip()) <= MAX_ID_CHARS:
        problems.append(f"{where}.id must be a non-empty string of at most {MAX_ID_CHARS} "
                        "characters")
        ok = False
    if not isinstance(title, str) or not 0 < len(title.strip()) <= MAX_TITLE_CHARS:
        problems.append(f"{where}.title must be a non-empty string of at most "
                        f"{MAX_TITLE_CHARS} characters")
        ok = False
    if status not in PLAN_STATUSES:
        problems.append(f"{where}.status must be one of {', '.join(PLAN_STATUSES)}")
        ok = False
    if ok and isinstance(step_id, str) and isinstance(title, str):
        return {"id": step_id.strip(), "title": title.strip(), "status": str(status)}
    return None


def _is_change(previous: Sequence[Mapping[str, Any]], steps: list[dict[str, str]]) -> bool:
    """Anything but forward progress of the same steps counts as a change."""
    if [(p.get("id"), p.get("title")) for p in previous] != [(s["id"], s["title"])
                                                               for s in steps]:
        return True
    return any(p.get("status") != s["status"] and (p.get("status"), s["status"]) not in _FORWARD
               for p, s in zip(previous, steps, strict=True))


async def update_plan(context: ToolContext, arguments: dict[str, Any]) -> dict[str, Any]:
    """The ``update_plan`` handler. Replaying it with the same arguments after an
    interruption is harmless (the second submission is no change), hence resume_inflight."""
    if context.plan is None:
        raise ConfigError("update_plan needs ToolContext.plan; the host did not bind one")
    previous = context.plan.get()
    steps = validate_plan(arguments.get("steps"), previous, arguments.get("reason"))
    context.plan.replace(steps)
    return {"plan": steps, "open": plan_is_open(steps)}


def plan_tool(*, timeout: float = 10.0) -> ToolDefinition:
    return ToolDefinition(
        name="update_plan", description=PLAN_DESCRIPTION, parameters=copy.deepcopy(PLAN_PARAMETERS),
        handler=update_plan, implementation_id="update-plan/v1", tool_id="update_plan",
        before_plan=True, resume_inflight=True, timeout=timeout)
