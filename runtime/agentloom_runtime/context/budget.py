"""``budget-handoff/v1``: proactive compaction against the model's input budget.

    effective budget = context_window - max_output_tokens - safety_margin_tokens
    trigger          = estimate(messages + tools) >= effective × context_ratio   "budget"
                    or user_turns  - baseline_user_turns  >= user_turns          "user_turns"
                    or model_steps - baseline_model_steps >= model_steps         "model_steps"

A committed view is smaller than the original and below effective × context_ratio;
``metrics["target_reached"]`` says whether it also reached effective × target_ratio.
On a turns/steps trigger the kept recent history is at most half of the compressible
body (and what fits the target), so a small view is still folded; if that gains nothing
the policy skips without advancing baselines. ``validate_request`` is the hard limit:
any request (action, compaction, verification) whose estimate exceeds the effective
budget raises ``BudgetExceeded`` before it is sent. Units are the estimator's
(``utf8-bytes-with-framing/v1`` counts bytes, not tokens).

Counters read from ``ContextInput.counters``: ``user_turns``, ``baseline_user_turns``,
``model_steps``, ``baseline_model_steps`` (missing = 0). On success
``metrics["baselines"]`` holds the baselines to commit (the current counts).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import partial
from typing import Any

from agentloom_runtime.contracts import (
    JSON,
    ContextInput,
    Message,
    ModelRequest,
    TokenEstimator,
    ToolSchema,
)
from agentloom_runtime.errors import BudgetExceeded, ConfigError

from ._handoff import SIZE_TRIGGERS, HandoffPolicy, Measure, counter
from ._protocol import public_messages
from ._sizes import RunningSizes
from ._summary import summary_request
from .estimators import (
    Utf8BytesEstimator,
    _BaseEstimator,
    estimator_for,
    message_costs,
    text_cost,
)
from .failures import DEFAULT_GROWTH_RATIO, DEFAULT_STEP_GAP
from .policy import MessageSizer

SUMMARY_SHARE = 0.1  # of the effective budget, for the summary message
SUMMARY_CAP = 12_000
REQUEST_SHARE = 0.9  # of the effective budget, for a whole summary request
POLICY_KEYS = ("context_ratio", "target_ratio", "user_turns", "model_steps",
               "max_compaction_calls")


class EstimatorMeasure:
    """Sizes in estimator units. With a built-in, additive estimator (request = overhead +
    Σ message costs + Σ tool costs) a measure under a lineage ``key`` is incremental
    (``_sizes.RunningSizes``): a step costs its new messages, not the history."""

    def __init__(self, estimator: TokenEstimator) -> None:
        self.estimator = estimator
        self._builtin = isinstance(estimator, _BaseEstimator)
        # estimate() is the base one: base + Σ message_costs + Σ tool costs
        self._additive = (isinstance(estimator, _BaseEstimator)
                          and type(estimator).estimate is _BaseEstimator.estimate)
        self._text: Callable[[str], int] = (
            estimator.text_cost if isinstance(estimator, _BaseEstimator)
            else partial(text_cost, estimator))
        self._text_of: Callable[[Sequence[str]], int] | None = (
            estimator.text_cost_of if isinstance(estimator, Utf8BytesEstimator)
            and type(estimator).text_cost is Utf8BytesEstimator.text_cost else None)
        self._running = (RunningSizes(self.costs, self._tool_total)
                         if isinstance(estimator, _BaseEstimator) and self._additive
                         else None)

    def costs(self, messages: Sequence[Message]) -> list[int]:
        return message_costs(self.estimator, messages)

    def _tool_total(self, tools: Sequence[ToolSchema]) -> int:
        estimator = self.estimator
        assert isinstance(estimator, _BaseEstimator)
        return sum(estimator.tool_cost(tool) for tool in tools)

    def total(self, messages: Sequence[Message], tools: Sequence[ToolSchema],
              key: Hashable | None = None) -> int:
        running, estimator = self._running, self.estimator
        if running is not None and isinstance(estimator, _BaseEstimator):
            if key is not None:
                return (estimator.request_overhead + running.total(key, messages)
                        + running.tools(key, tools))
            known = running.known(messages)
            if known is not None:
                return estimator.request_overhead + known + self._tool_total(tools)
        if not self._builtin:
            messages = public_messages(messages)
        return int(estimator.estimate(messages, tools))

    def sized(self, messages: Sequence[Message], tools: Sequence[ToolSchema],
              key: Hashable | None = None) -> tuple[int, list[int]]:
        running, estimator = self._running, self.estimator
        if running is not None and isinstance(estimator, _BaseEstimator):
            if key is not None:
                total, costs = running.messages(key, messages)
                return estimator.request_overhead + total + running.tools(key, tools), costs
            costs = self.costs(messages)
            return estimator.request_overhead + sum(costs) + self._tool_total(tools), costs
        return self.total(messages, tools), self.costs(messages)

    def sizer(self) -> _BaseEstimator | None:
        """The estimator, when its sizes are per message (built-in and additive: those
        ``RunningSizes`` keeps); else None."""
        estimator = self.estimator
        return estimator if self._running is not None and isinstance(
            estimator, _BaseEstimator) else None

    def text(self, text: str) -> int:
        return self._text(text)

    def text_of(self, parts: Sequence[str]) -> int:
        if self._text_of is not None:
            return self._text_of(parts)
        return self._text("".join(parts))


def _int(name: str, value: Any, *, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, not {value!r}")
    return value


def _ratio(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ConfigError(f"{name} must be a number, not {value!r}")
    return float(value)


def _optional_count(name: str, value: Any) -> int | None:
    return None if value is None else _int(name, value, minimum=1)


class BudgetCompactionPolicy(HandoffPolicy):
    module_id = "budget-handoff/v1"

    def __init__(self, *, context_window: int, max_output_tokens: int,
                 safety_margin_tokens: int, estimator: TokenEstimator,
                 context_ratio: float = 0.8, target_ratio: float = 0.6,
                 user_turns: int | None = None, model_steps: int | None = None,
                 max_compaction_calls: int = 4,
                 retry_growth_ratio: float = DEFAULT_GROWTH_RATIO,
                 retry_after_steps: int = DEFAULT_STEP_GAP) -> None:
        self.context_window = _int("context_window", context_window, minimum=1)
        self.max_output_tokens = _int("max_output_tokens", max_output_tokens, minimum=0)
        self.safety_margin_tokens = _int("safety_margin_tokens", safety_margin_tokens,
                                         minimum=0)
        self.effective_budget = context_window - max_output_tokens - safety_margin_tokens
        if self.effective_budget <= 0:
            raise ConfigError(f"the effective input budget is {self.effective_budget}: "
                              "context_window must exceed max_output_tokens + "
                              "safety_margin_tokens")
        self.context_ratio = _ratio("context_ratio", context_ratio)
        self.target_ratio = _ratio("target_ratio", target_ratio)
        if not 0 < self.target_ratio < self.context_ratio <= 1:
            raise ConfigError("ratios must satisfy 0 < target_ratio < context_ratio <= 1, "
                              f"not target={target_ratio!r}, context={context_ratio!r}")
        self.user_turns = _optional_count("user_turns", user_turns)
        self.model_steps = _optional_count("model_steps", model_steps)
        calls = _int("max_compaction_calls", max_compaction_calls, minimum=1)
        if calls > 16:
            raise ConfigError(f"max_compaction_calls must be 1..16, not {calls}")
        self.max_compaction_calls = calls
        growth = _ratio("retry_growth_ratio", retry_growth_ratio)
        if growth <= 0:
            raise ConfigError("retry_growth_ratio must be > 0")
        self.retry_growth_ratio = growth
        self.retry_after_steps = _int("retry_after_steps", retry_after_steps, minimum=1)
        module_id = getattr(estimator, "module_id", None)  # misuse check, not a capability
        if not isinstance(module_id, str) or not module_id or not callable(
                getattr(estimator, "estimate", None)) or not callable(
                getattr(estimator, "checkpoint_config", None)):
            raise ConfigError("estimator must be a TokenEstimator (module_id, estimate, "
                              "checkpoint_config)")
        self.estimator = estimator
        self._sizes = EstimatorMeasure(estimator)

    @classmethod
    def from_settings(cls, context_policy: Mapping[str, Any], connection: Mapping[str, Any],
                      *, estimator: TokenEstimator | None = None) -> BudgetCompactionPolicy:
        """From a published ``context_policy`` and a model connection (``context_window``,
        ``max_output_tokens``, ``safety_margin_tokens``, provider / model for
        ``estimator_for``). Unknown policy keys are a ConfigError."""
        unknown = set(context_policy) - set(POLICY_KEYS)
        if unknown:
            raise ConfigError(f"unknown context_policy keys: {', '.join(sorted(unknown))}")
        budget = {k: connection.get(k) for k in
                  ("context_window", "max_output_tokens", "safety_margin_tokens")}
        return cls(**budget, **dict(context_policy),  # type: ignore[arg-type]
                   estimator=estimator if estimator is not None else estimator_for(connection))

    def checkpoint_config(self) -> JSON:
        return {"context_window": self.context_window,
                "max_output_tokens": self.max_output_tokens,
                "safety_margin_tokens": self.safety_margin_tokens,
                "context_ratio": self.context_ratio, "target_ratio": self.target_ratio,
                "user_turns": self.user_turns, "model_steps": self.model_steps,
                "max_compaction_calls": self.max_compaction_calls,
                "retry_growth_ratio": self.retry_growth_ratio,
                "retry_after_steps": self.retry_after_steps,
                "estimator": {"module_id": self.estimator.module_id,
                              "config": self.estimator.checkpoint_config()}}

    @property
    def trigger_tokens(self) -> float:
        return self.effective_budget * self.context_ratio

    @property
    def target_tokens(self) -> float:
        return self.effective_budget * self.target_ratio

    def validate_request(self, request: ModelRequest) -> int:
        """The request's estimate; raises BudgetExceeded above the effective budget.
        Incremental per (instance, purpose): a growing view is not measured again."""
        size = self._sizes.total(request.messages, request.tools,
                                 key=(request.instance, request.purpose))
        if size > self.effective_budget:
            raise BudgetExceeded(
                f"the {request.purpose} request for {request.instance} is estimated at "
                f"{size}, over the effective input budget {self.effective_budget}",
                details={"estimate": size, "budget": self.effective_budget,
                         "purpose": request.purpose, "instance": request.instance,
                         "estimator": self.estimator.module_id})
        return size

    def message_sizer(self) -> MessageSizer | None:
        """The estimator, when it sizes message by message (the built-in ones)."""
        return self._sizes.sizer()

    # ------------------------------------------------------------ handoff hooks

    def _measure(self) -> Measure:
        return self._sizes

    def _trigger(self, context: ContextInput, size: int) -> str | None:
        if size >= self.trigger_tokens:
            return "budget"
        turns = counter(context, "user_turns") - counter(context, "baseline_user_turns")
        if self.user_turns is not None and turns >= self.user_turns:
            return "user_turns"
        steps = counter(context, "model_steps") - counter(context, "baseline_model_steps")
        if self.model_steps is not None and steps >= self.model_steps:
            return "model_steps"
        return None

    def _threshold(self) -> float:
        return self.trigger_tokens

    def _target(self) -> float:
        return self.target_tokens

    def _hard_limit(self) -> int | None:
        return self.effective_budget

    def _summary_allowance(self) -> int:
        return max(64, min(SUMMARY_CAP, int(self.effective_budget * SUMMARY_SHARE)))

    def _min_material(self) -> int:
        return max(128, self.effective_budget // 200)

    def _tail_room(self, *, fixed: int, allowance: int, body: int, trigger: str) -> float:
        room = self.target_tokens - fixed - allowance
        return room if trigger in SIZE_TRIGGERS else min(room, body / 2)

    def _material_capacity(self, context: ContextInput) -> int:
        probe = summary_request(task=context.task, plan=context.plan,
                                previous="", material="", part=1, summary_chars=99_999,
                                instance=context.instance)
        overhead = self._sizes.total(probe.messages, ())
        room = int(self.effective_budget * REQUEST_SHARE)
        return room - overhead - self._summary_allowance()

    def _request_fits(self, request: ModelRequest) -> bool:
        return self._sizes.total(request.messages, request.tools) <= self.effective_budget

    def _extra_metrics(self) -> dict[str, Any]:
        return {"effective_budget": self.effective_budget,
                "estimator": self.estimator.module_id}
