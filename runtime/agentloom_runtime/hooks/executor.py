"""Cooperative time budgets for hook handlers, on the event loop's monotonic clock.

Each call gets ``min(now + binding timeout, stage deadline)``. On expiry the handler's
task is cancelled (cooperatively: a handler that swallows the cancellation still runs to
its end, and its late result is discarded as a timeout). A cancellation from outside
(the engine closing) propagates unchanged. Monotonic deadlines are never persisted: a
resumed stage starts a fresh stage budget.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from .context import HookContext, HookScope
from .errors import HookConfigError, HookFailure, HookTimeout
from .registry import HookHandler

DEFAULT_STAGE_TIMEOUT = 10.0


class HookExecutor:
    def __init__(self, *, stage_timeout: float = DEFAULT_STAGE_TIMEOUT) -> None:
        if not math.isfinite(stage_timeout) or stage_timeout <= 0:
            raise HookConfigError("stage_timeout must be a positive number")
        self.stage_timeout = stage_timeout

    def stage_deadline(self) -> float:
        """The monotonic deadline of a stage starting now."""
        return asyncio.get_running_loop().time() + self.stage_timeout

    def context(self, *, hook_id: str, hook_version: str, config: Any, scope: HookScope,
                timeout: float, stage_deadline: float) -> HookContext:
        now = asyncio.get_running_loop().time()
        deadline = min(now + timeout, stage_deadline)
        return HookContext(hook_id=hook_id, hook_version=hook_version, config=config,
                           scope=scope, monotonic_deadline=deadline,
                           deadline=time.time() + max(0.0, deadline - now))

    async def call(self, handler: HookHandler, ctx: HookContext, payload: dict[str, Any],
                   *, limit: float, stage_deadline: float) -> object:
        """Run one handler within its budget; ``HookTimeout`` / ``HookFailure`` on
        expiry or exception."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        details = {"hook_id": ctx.hook_id, "version": ctx.hook_version, "point": ctx.point}
        if now >= stage_deadline:
            raise HookTimeout(f"hook {ctx.hook_id} at {ctx.point}: the stage budget is spent",
                              details={**details, "budget": "stage"})
        binding_deadline = now + limit
        deadline = min(binding_deadline, stage_deadline)
        budget = "binding" if binding_deadline <= stage_deadline else "stage"
        guard = asyncio.timeout_at(deadline)
        try:
            async with guard:
                result = await handler(ctx, payload)
        except TimeoutError as exc:
            if guard.expired():
                raise self._timeout(details, budget) from exc
            raise self._failure(details, exc) from exc
        except Exception as exc:
            raise self._failure(details, exc) from exc
        if guard.expired() or loop.time() > deadline:
            raise self._timeout(details, budget)
        return result

    @staticmethod
    def _timeout(details: dict[str, str], budget: str) -> HookTimeout:
        return HookTimeout(f"hook {details['hook_id']} at {details['point']} exceeded the "
                           f"{budget} time budget", details={**details, "budget": budget})

    @staticmethod
    def _failure(details: dict[str, str], exc: BaseException) -> HookFailure:
        kind = type(exc).__name__
        return HookFailure(f"hook {details['hook_id']} at {details['point']} raised {kind}",
                           details={**details, "error_type": kind})
