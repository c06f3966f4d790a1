"""Execution strategies: what differs between ReAct and Plan (docs/contract.md#modes).

Both run the same loop. Plan's plan-first rule binds only the main instance; children
execute their delegated task without a mode of their own.
"""

from __future__ import annotations

from typing import Any

from .contracts import JSON, FrameView

_REACT = ("Work step by step. Use the tools you have when they help; observe each result "
          "before deciding the next action. For a complex task you may keep a plan with "
          "update_plan. When the task is done, answer with the final result.")
_PLAN = ("Before anything else, call update_plan with a plan of 1-12 steps. Then carry it "
         "out without waiting for approval, updating the plan (with a reason) as results "
         "come in. Deliver the final answer only when no step is pending or in progress.")
_PLAN_FIRST = ("No plan exists yet. Call update_plan with your plan before answering or "
               "using other tools.")


class ReactStrategy:
    module_id = "react/v1"

    def checkpoint_config(self) -> JSON:
        return {}

    def instructions(self, frame: FrameView) -> str:
        return _REACT

    def candidate_feedback(self, frame: FrameView, candidate: str) -> str | None:
        return None

    def authorize_tool(self, frame: FrameView, tool: Any) -> str | None:
        return None

    def before_plan_only(self, frame: FrameView) -> bool:
        return False


class PlanStrategy(ReactStrategy):
    module_id = "plan/v1"

    def instructions(self, frame: FrameView) -> str:
        return _PLAN if frame.instance == "main" else _REACT

    def _needs_plan(self, frame: FrameView) -> bool:
        return frame.instance == "main" and not frame.plan

    def candidate_feedback(self, frame: FrameView, candidate: str) -> str | None:
        return _PLAN_FIRST if self._needs_plan(frame) else None

    def authorize_tool(self, frame: FrameView, tool: Any) -> str | None:
        if self._needs_plan(frame) and not getattr(tool, "before_plan", False):
            return f"{_PLAN_FIRST} ({getattr(tool, 'name', 'this tool')} is not available yet)"
        return None

    def before_plan_only(self, frame: FrameView) -> bool:
        return self._needs_plan(frame)


def strategy_for(mode: str) -> ReactStrategy:
    return PlanStrategy() if mode == "plan" else ReactStrategy()
