"""The local driver: loops ``Engine.step()`` until the run is done.

In AWS, Step Functions plays this role, one Lambda invocation per step; here a few lines
of asyncio do. Commands are handed to a CommandRunner and their outcome goes back into
the next step. An ``observer`` (``agentloom.observability.Observer``) wraps each step:
its span, duration and usage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from agentloom_runtime.contracts import StepResult
from agentloom_runtime.engine import Engine


class CommandRunner(Protocol):
    async def run(self, spec: dict[str, Any], instance: str) -> dict[str, Any]: ...


class StepWatch(Protocol):
    def finished(self, result: StepResult) -> StepResult: ...


class StepObserver(Protocol):
    def step(self, engine: Engine) -> AbstractContextManager[StepWatch]: ...


class _Unwatched:
    def finished(self, result: StepResult) -> StepResult:
        return result


async def drive(engine: Engine, *, runner: CommandRunner | None = None, pause: float = 0.0,
                on_step: Callable[[StepResult], Awaitable[None] | None] | None = None,
                max_steps: int = 100_000,
                observer: StepObserver | None = None) -> StepResult:
    """Step until done. ``pause`` waits between steps (demos: time to interrupt)."""
    command_result: dict[str, Any] | None = None
    for _ in range(max_steps):
        watching = observer.step(engine) if observer else nullcontext(_Unwatched())
        with watching as watch:
            result = watch.finished(await engine.step(command_result=command_result))
        command_result = None
        if on_step is not None:
            maybe = on_step(result)
            if maybe is not None:
                await maybe
        if result.next == "done":
            return result
        if result.next == "command":
            command_result = await _run_command(engine, runner, result)
        if pause:
            await asyncio.sleep(pause)
    raise RuntimeError(f"the run did not finish within {max_steps} steps")


async def _run_command(engine: Engine, runner: CommandRunner | None,
                       result: StepResult) -> dict[str, Any]:
    if runner is None:
        return {"exit_code": None, "error": {"code": "sandbox_unavailable",
                                             "message": "no command sandbox is configured"}}
    return await runner.run(engine.command_spec(), result.instance)
