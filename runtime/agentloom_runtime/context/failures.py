"""Compaction failure memory: do not pay for the same failing summary on every step.

A policy consults and updates one ``CompactionFailureMemory`` per instance, passed as
``await policy.compact(context, call, memory=memory)``. The memory is an explicit
in/out ledger: the policy updates it in place (the only thing ``compact`` changes), and
the host stores ``memory.to_dict()`` in the checkpoint head after every preparation
and rebuilds it with ``CompactionFailureMemory.from_dict`` on resume.

After a failed attempt (the summary call failed, the summary was empty, or the new view
did not shrink below the trigger) the next attempt waits until the view estimate has
grown by ``growth_ratio`` × 2^(failures-1) **or** ``model_steps`` has advanced by
``step_gap`` × 2^(failures-1) (the exponent is capped). A success resets the memory.
A policy does not wait once a view exceeds the hard budget (the only alternative to
trying is a refused request); the host backs off there instead: one attempt per
execution, then the run blocks with the reason (``engine._compaction``).
``record_failure`` needs only a reason: the growth and
step gaps default to the policies' defaults, and a failure recorded without an estimate
(or without a step count) is not gated on it — with neither, the next attempt is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agentloom_runtime.contracts import JSON
from agentloom_runtime.errors import ConfigError

FORMAT = 1
MAX_DOUBLINGS = 6
DEFAULT_GROWTH_RATIO = 0.1  # the policies' retry_growth_ratio default
DEFAULT_STEP_GAP = 2  # the policies' retry_after_steps default

Outcome = Literal["committed", "failed", "deferred", "skipped"]
_OUTCOMES = ("committed", "failed", "deferred", "skipped")


@dataclass
class CompactionFailureMemory:
    failures: int = 0  # consecutive failed attempts
    last_failure_estimate: int | None = None
    last_failure_steps: int | None = None
    retry_at_estimate: int | None = None  # an attempt is allowed from this estimate on
    retry_at_steps: int | None = None  # … or from this model_steps count on
    last_outcome: Outcome | None = None
    last_reason: str | None = None

    def allows(self, estimate: int, model_steps: int) -> bool:
        """True when an attempt may be made now (no failure, or growth / steps reached)."""
        if self.failures == 0:
            return True
        if self.retry_at_estimate is None and self.retry_at_steps is None:
            return True  # nothing to wait for was recorded
        if self.retry_at_estimate is not None and estimate >= self.retry_at_estimate:
            return True
        return self.retry_at_steps is not None and model_steps >= self.retry_at_steps

    def record_failure(self, reason: str = "", *, estimate: int | None = None,
                       model_steps: int | None = None,
                       growth_ratio: float = DEFAULT_GROWTH_RATIO,
                       step_gap: int = DEFAULT_STEP_GAP) -> None:
        """A failed attempt at view size ``estimate`` after ``model_steps`` steps."""
        self.failures += 1
        factor = 2 ** min(self.failures - 1, MAX_DOUBLINGS)
        self.last_failure_estimate = estimate
        self.last_failure_steps = model_steps
        self.retry_at_estimate = (None if estimate is None
                                  else math.ceil(estimate * (1 + growth_ratio * factor)))
        self.retry_at_steps = None if model_steps is None else model_steps + step_gap * factor
        self.last_outcome = "failed"
        self.last_reason = reason

    def record_success(self) -> None:
        self.failures = 0
        self.last_failure_estimate = self.last_failure_steps = None
        self.retry_at_estimate = self.retry_at_steps = None
        self.last_outcome = "committed"
        self.last_reason = None

    def note(self, outcome: Literal["deferred", "skipped"], reason: str) -> None:
        """A preparation that made no attempt; the backoff state is unchanged."""
        self.last_outcome = outcome
        self.last_reason = reason

    def to_dict(self) -> JSON:
        return {"format": FORMAT, "failures": self.failures,
                "last_failure_estimate": self.last_failure_estimate,
                "last_failure_steps": self.last_failure_steps,
                "retry_at_estimate": self.retry_at_estimate,
                "retry_at_steps": self.retry_at_steps,
                "last_outcome": self.last_outcome, "last_reason": self.last_reason}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> CompactionFailureMemory:
        """Rebuild a saved memory; ``None`` or ``{}`` is a fresh one."""
        if not data:
            return cls()
        if data.get("format") != FORMAT:
            raise ConfigError(f"unknown compaction memory format {data.get('format')!r}")
        outcome = data.get("last_outcome")
        if outcome is not None and outcome not in _OUTCOMES:
            raise ConfigError(f"unknown compaction outcome {outcome!r}")
        failures = data.get("failures", 0)
        if not isinstance(failures, int) or isinstance(failures, bool) or failures < 0:
            raise ConfigError("compaction memory: failures must be a non-negative int")
        reason = data.get("last_reason")
        return cls(failures=failures,
                   last_failure_estimate=_opt_int(data, "last_failure_estimate"),
                   last_failure_steps=_opt_int(data, "last_failure_steps"),
                   retry_at_estimate=_opt_int(data, "retry_at_estimate"),
                   retry_at_steps=_opt_int(data, "retry_at_steps"),
                   last_outcome=outcome, last_reason=None if reason is None else str(reason))


def _opt_int(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"compaction memory: {key} must be an int or null")
    return value
