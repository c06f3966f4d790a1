"""Frame records inside the checkpoint head, and the small views handed to modules."""

from __future__ import annotations

import json
from typing import Any

from agentloom_runtime.contracts import FrameView, ToolOutcome

EVIDENCE_KEPT = 12
EVIDENCE_EXCERPT = 600


def new_frame(instance: str, task: str, *, parent: dict[str, Any] | None = None,
              template: str | None = None, tools: list[str] | None = None) -> dict[str, Any]:
    return {
        "instance": instance, "task": task, "parent": parent, "template": template,
        "tools": tools, "status": "running", "iterations": 0, "pending": [],
        "candidate": None, "plan": [], "evidence": [], "outcome": None,
    }


def frame_view(frame: dict[str, Any]) -> FrameView:
    return FrameView(instance=frame["instance"], plan=tuple(frame["plan"]),
                     iterations=frame["iterations"])


def add_evidence(frame: dict[str, Any], name: str, outcome: ToolOutcome) -> None:
    """Keep the latest evidence items, bounded, so the head stays small."""
    value = outcome.value if isinstance(outcome.value, str) else json.dumps(
        outcome.value, ensure_ascii=False)
    if len(value) > EVIDENCE_EXCERPT:
        value = value[:EVIDENCE_EXCERPT] + " …"
    frame["evidence"].append({"tool": name, "status": outcome.status,
                              "arguments": dict(outcome.evidence_arguments),
                              "result": value})
    del frame["evidence"][:-EVIDENCE_KEPT]


class FramePlan:
    """PlanAccess over a frame: the update_plan tool writes through it."""

    def __init__(self, frame: dict[str, Any]) -> None:
        self._frame = frame

    def get(self) -> list[dict[str, Any]]:
        return [dict(s) for s in self._frame["plan"]]

    def replace(self, steps: list[dict[str, Any]]) -> None:
        self._frame["plan"] = [dict(s) for s in steps]
