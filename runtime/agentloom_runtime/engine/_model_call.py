"""The durable model call: the host ``ModelCall`` every policy and step uses.

A model operation is saved as ``sent`` (and the call budget consumed) before the request
leaves. Its response is logged in ``ops`` and carried by the step's next commit; with
``model.chat.after`` hooks the raw response is committed first (``raw_saved``), so a
failing or interrupted after-stage resumes from the saved output without calling the
model again. After a crash, an operation still ``sent`` has an unknown outcome: the run
blocks until an operator decides (``resolve``: send again, or treat as failed). Calls
already answered within a multi-call step (compaction) are replayed from the log, never
sent twice.

An action's response is stored once: in the assistant source record the action step
appends, with the call's metadata (op id, attempts, usage, and ``request_digest``: the
identity of the request as sent, after ``model.chat.before`` — what a replay compares,
``agentloom_runtime.replay``); summaries and reviews keep theirs in ``ops`` (a
multi-call step replays them from there).

Usage and budget: each response's provider usage (and its cost, from the connection's
prices) is added to the head's ``usage`` totals in the commit that makes the response
durable, once (a replayed call is not counted again), whatever the purpose or instance.
Before a call is sent, the run's token and cost budgets (``limits.max_tokens`` /
``max_cost``, or an operator's raise in ``head["budget"]``) are checked twice: before
the ``model.chat.before`` hooks, that the budget is not used up; after them, next to
the window's hard limit, that the call cannot cross it — what is used plus the
request's estimated input (the compaction policy's estimate, else the conservative
bytes estimator) plus its output limit. Either blocks the run with ``budget_exceeded``
(``RunBudgetExceeded``) until it is resumed with a raised budget; the call is not sent.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

from agentloom_runtime._json import canonical, digest, storable_message
from agentloom_runtime.context.estimators import Utf8BytesEstimator
from agentloom_runtime.contracts import (
    DEFAULT_RUN_TOKENS,
    Message,
    ModelRequest,
    ModelResponse,
)
from agentloom_runtime.errors import (
    BudgetExceeded,
    ModelError,
    ModelResponseError,
    ModelTransportError,
    ResumeMismatch,
)

from ._context import BlockRun, StepContext, now
from ._hooks import HookRunner
from ._state import Head, ModelOp, UsageTotals, model_op

_FALLBACK_ESTIMATOR = Utf8BytesEstimator()


class RunBudgetExceeded(BudgetExceeded):
    """The run's token or cost budget is used up (way out: ``raise_budget``)."""


@dataclass(frozen=True)
class RunUsage:
    """Provider usage of the run so far (``Engine.usage()``) and its budget."""

    calls: int
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost: float | None  # None when the model connection has no prices
    max_tokens: int | None
    max_cost: float | None


def usage_numbers(usage: Any) -> tuple[int, int]:
    """(prompt, completion) tokens from a provider's usage (chat-completions or
    responses names); missing or malformed numbers count as 0."""
    if not isinstance(usage, dict):
        return 0, 0

    def number(*names: str) -> int:
        for name in names:
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
        return 0

    return number("prompt_tokens", "input_tokens"), number("completion_tokens",
                                                           "output_tokens")


def call_cost(ctx: StepContext, usage: Any) -> float | None:
    model = ctx.snapshot.model
    if model.input_price_per_million is None or model.output_price_per_million is None:
        return None
    given, produced = usage_numbers(usage)
    return round((given * model.input_price_per_million
                  + produced * model.output_price_per_million) / 1_000_000, 9)


def totals(head: Head) -> UsageTotals:
    return head.get("usage") or UsageTotals(calls=0, input_tokens=0, output_tokens=0,
                                            cost=0.0)


def budget_limits(ctx: StepContext) -> tuple[int | None, float | None]:
    """The run's (max_tokens, max_cost): an operator's raise, else the version's."""
    raised = ctx.head.get("budget")
    if raised is not None:
        return raised["max_tokens"], raised["max_cost"]
    limits = ctx.modules.limits
    return limits.max_tokens, limits.max_cost


def run_usage(ctx: StepContext) -> RunUsage:
    used = totals(ctx.head)
    max_tokens, max_cost = budget_limits(ctx)
    return RunUsage(calls=used["calls"], input_tokens=used["input_tokens"],
                    output_tokens=used["output_tokens"],
                    total_tokens=used["input_tokens"] + used["output_tokens"],
                    cost=used["cost"] if ctx.snapshot.model.priced else None,
                    max_tokens=max_tokens, max_cost=max_cost)


@dataclass(frozen=True)
class NextCall:
    """What a model call about to be sent may use at most: its estimated input plus its
    output limit, in tokens, and their cost at the connection's prices (None: no
    prices)."""

    purpose: str
    input_tokens: int
    output_tokens: int
    cost: float | None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def next_call(ctx: StepContext, request: ModelRequest, estimate: int | None) -> NextCall:
    """The most ``request`` may use: ``estimate`` (the policy's, else the bytes
    estimator's, which over-counts) and the output limit the gateway applies."""
    model = ctx.snapshot.model
    given = estimate if estimate is not None else \
        _FALLBACK_ESTIMATOR.estimate(request.messages, request.tools)
    asked = request.options.get("max_output_tokens")
    output = min(asked, model.max_output_tokens) if isinstance(asked, int) \
        and not isinstance(asked, bool) and asked > 0 else model.max_output_tokens
    cost = call_cost(ctx, {"prompt_tokens": given, "completion_tokens": output})
    return NextCall(purpose=request.purpose, input_tokens=given, output_tokens=output,
                    cost=cost)


def check_budget(ctx: StepContext, call: NextCall | None = None) -> None:
    """Block before a model call when the run's token or cost budget is used up or,
    given ``call``, when sending it could cross the budget."""
    usage = run_usage(ctx)
    spent: list[str] = []
    need, need_cost = (call.tokens, call.cost or 0.0) if call else (0, 0.0)
    if usage.max_tokens is not None and (usage.total_tokens + need > usage.max_tokens
                                         if call else usage.total_tokens >= usage.max_tokens):
        spent.append(f"tokens: {usage.total_tokens:,} used of {usage.max_tokens:,}")
    used_cost = usage.cost or 0.0
    if usage.max_cost is not None and (used_cost + need_cost > usage.max_cost
                                       if call else used_cost >= usage.max_cost):
        spent.append(f"cost: {used_cost:.6g} used of {usage.max_cost:.6g}")
    if not spent:
        return
    which = [part.split(":")[0] for part in spent]
    raise BlockRun(RunBudgetExceeded(
        _budget_message(ctx, spent, which, call, usage),
        details={"budget": which, "used_tokens": usage.total_tokens,
                 "max_tokens": usage.max_tokens, "used_cost": usage.cost,
                 "max_cost": usage.max_cost,
                 "next_call": None if call is None else {
                     "purpose": call.purpose, "input_tokens": call.input_tokens,
                     "output_tokens": call.output_tokens, "cost": call.cost}}))


def _budget_message(ctx: StepContext, spent: list[str], which: list[str],
                    call: NextCall | None, usage: RunUsage) -> str:
    source = "an operator's raise" if ctx.head.get("budget") is not None else \
        f"version {ctx.snapshot.version}'s limits (max_tokens defaults to " \
        f"{DEFAULT_RUN_TOKENS:,})"
    if call is None:
        what = f"the run's budget is used up ({'; '.join(spent)})"
        above = "above what is used"
    else:
        what = (f"the next {call.purpose} call was not sent: it may use up to "
                f"{call.tokens:,} tokens ({call.input_tokens:,} estimated input + "
                f"{call.output_tokens:,} output limit"
                + (f", cost up to {call.cost:.6g}" if call.cost is not None else "")
                + f"), which could cross the run's budget ({'; '.join(spent)})")
        wanted = []
        if "tokens" in which:
            wanted.append(f"max_tokens of at least {usage.total_tokens + call.tokens:,}")
        if "cost" in which:
            wanted.append(f"max_cost of at least "
                          f"{(usage.cost or 0.0) + (call.cost or 0.0):.6g}")
        above = " and ".join(wanted)
    return (f"{what}; the budget is {source}, and all model calls of every purpose, "
            f"sub-agent and execution count. It goes on only with a raised budget "
            f"({above}), or the question is asked again in a new run of a version with "
            "higher limits")


def count_usage(ctx: StepContext, usage: Any) -> float | None:
    """Add one response's usage to the head's totals; returns its cost."""
    head = ctx.head
    given, produced = usage_numbers(usage)
    cost = call_cost(ctx, usage)
    used = totals(head)
    head["usage"] = UsageTotals(calls=used["calls"] + 1,
                                input_tokens=used["input_tokens"] + given,
                                output_tokens=used["output_tokens"] + produced,
                                cost=round(used["cost"] + (cost or 0.0), 9))
    return cost


def next_op_id(head: Head) -> str:
    """The id the next new model operation of this execution gets."""
    return f"m{head['execution']}-{head['total_calls'] + 1}"


def request_hash(request: ModelRequest) -> str:
    return digest([list(request.messages), list(request.tools), request.purpose,
                   dict(request.options)])


class RequestDigests:
    """``request_digest``: the identity of a model request (messages, tools, purpose,
    instance, options), ``sha256:<hex>`` of the messages' canonical JSON texts joined by
    commas, then a newline and the canonical JSON of the rest. The hash state after the
    messages is kept: a request whose messages extend the previous one's (the same
    objects: the view's stripped copies are reused step after step, ``model_view``)
    hashes only the new ones; any other (a new engine, a view a compaction rebuilt)
    hashes them all, in one serialization."""

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._state: hashlib._Hash | None = None  # the sha256 after self._messages

    def __call__(self, request: ModelRequest) -> str:
        messages = list(request.messages)
        before = self._messages
        if self._state is not None and len(before) <= len(messages) and all(
                a is b for a, b in zip(before, messages, strict=False)):
            state = self._state.copy()
            if len(messages) > len(before):
                state.update((b"," if before else b"") +
                             _canonical_bytes(messages[len(before):])[1:-1])
        else:
            state = hashlib.sha256(_canonical_bytes(messages)[1:-1])
        self._messages, self._state = messages, state.copy()
        state.update(b"\n" + _canonical_bytes([list(request.tools), request.purpose,
                                               request.instance, dict(request.options)]))
        return "sha256:" + state.hexdigest()


def _canonical_bytes(value: Any) -> bytes:
    return canonical(value).encode("utf-8", "surrogatepass")


class ModelCaller:
    """One per engine; ``__call__`` is the ``ModelCall`` handed to policies."""

    def __init__(self, ctx: StepContext, hooks: HookRunner) -> None:
        self._ctx = ctx
        self._hooks = hooks
        self._digests = RequestDigests()
        self.last_call: dict[str, Any] = {}  # metadata of the last call, for its record

    async def __call__(self, request: ModelRequest) -> ModelResponse:
        """The effective (hook-processed) response."""
        return (await self.op(request))[1]

    async def op(self, request: ModelRequest) -> tuple[ModelResponse, ModelResponse]:
        """One durable model call; returns (raw, effective)."""
        ctx = self._ctx
        head = ctx.head
        index = len(head["step_ops"])
        checked = request_hash(request) if request.purpose == "compaction" else None
        done = head.get("step_done", [])
        if index < len(done):
            return self._replay(done[index], checked)
        op = head["op"]
        if op and op["kind"] == "model" and op["phase"] == "raw_saved" and op["index"] == index:
            saved = ctx.journal.read("ops", op["ops_seq"] - 1, 1)[0].body
            raw = ModelResponse.from_dict(saved["raw_output"])
            self.last_call = {"op_id": op["id"], "attempts": op["attempts"],
                              "request_digest": saved.get("request_digest"),
                              "usage": saved.get("usage")}
            if saved.get("cost") is not None:
                self.last_call["cost"] = saved["cost"]
            return raw, await self._finish(request, op, raw)
        limit = ctx.modules.limits.max_model_calls
        if head["calls"] >= limit:
            raise BlockRun(BudgetExceeded(
                f"the run used its {limit} model calls for this execution; resume to "
                "continue with a fresh budget"))
        check_budget(ctx)
        retry = head.pop("retry_op", None)
        if retry is not None and retry["purpose"] != request.purpose:
            retry = None  # the retried call is not this one (it is sent when reached)
        op_id = retry["id"] if retry else next_op_id(head)
        request, final_input = await self._before_chat(request, retry, op_id)
        try:
            estimate = self._validate(request)
            check_budget(ctx, next_call(ctx, request, estimate))
        except BlockRun:
            if retry is not None:  # the verdict's retry stays for the resume
                head["retry_op"] = retry
            raise
        op = model_op(op_id=op_id, execution=head["execution"], purpose=request.purpose,
                      instance=request.instance, index=index, request_hash=checked,
                      attempts=(retry["attempts"] if retry else 0) + 1, started_at=now(),
                      final_input=final_input)
        head["op"] = op
        head["calls"] += 1
        head["total_calls"] += 1
        ctx.commit("model.sent")
        ctx.emit("model.started", {"run_id": ctx.run_id, "op_id": op_id,
                                   "purpose": request.purpose, "instance": request.instance})
        sent = self._digests(request)
        raw = await self._invoke(request)
        after = self._hooks.has("model.chat.after", request.instance, purpose=request.purpose)
        self.last_call = {"op_id": op_id, "attempts": op["attempts"], "request_digest": sent,
                          "usage": dict(raw.usage) if raw.usage is not None else None}
        cost = count_usage(ctx, raw.usage)  # carried by the commit that saves the response
        if cost is not None:
            self.last_call["cost"] = cost
        if request.purpose != "action" or after:
            op["ops_seq"] = ctx.journal.append("ops", {
                **self.last_call, "purpose": request.purpose, "instance": request.instance,
                "request_hash": checked, "final_input": final_input,
                "raw_output": raw.to_dict()})
        if after:
            op["phase"] = "raw_saved"
            ctx.commit("model.raw_saved")
        return raw, await self._finish(request, op, raw)

    async def _invoke(self, request: ModelRequest) -> ModelResponse:
        head = self._ctx.head
        try:
            response = await self._ctx.modules.model.invoke(request)
        except ModelError as err:
            if not (isinstance(err, ModelTransportError) and err.details.get("sent")):
                head["op"] = None  # no response exists: the call may simply be made again
            raise
        if not (response.content or response.tool_calls):
            head["op"] = None
            raise ModelResponseError("the model response has neither an answer nor tool "
                                     "calls")
        # Text from a model is made storable here, at the boundary (lone surrogates; in
        # tool-call arguments they stay escapes, for the tool runtime to refuse the call).
        return ModelResponse.from_dict(storable_message(response.to_dict()))

    async def _before_chat(self, request: ModelRequest, retry: Any, op_id: str
                           ) -> tuple[ModelRequest, dict[str, Any] | None]:
        """Apply model.chat.before; a retried operation reuses its saved final input
        instead of running the stage again."""
        if retry is not None:
            delta = retry.get("final_input")
            return (_apply_input(request, delta) if delta else request), delta
        if not self._hooks.has("model.chat.before", request.instance, purpose=request.purpose):
            return request, None
        payload = {"messages": list(request.messages), "tools": list(request.tools),
                   "purpose": request.purpose, "instance": request.instance,
                   "options": dict(request.options), "extra_messages": []}
        key = f"chat:{request.instance}:{self._ctx.head['total_calls'] + 1}"
        payload, _ = await self._hooks.run("model.chat.before", payload,
                                           instance=request.instance, key=key,
                                           purpose=request.purpose, operation_id=op_id)
        delta = {"extra_messages": payload["extra_messages"], "options": payload["options"]}
        return _apply_input(request, delta), delta

    async def _finish(self, request: ModelRequest, op: ModelOp,
                      raw: ModelResponse) -> ModelResponse:
        """The after-stage (if any), then the op is done; the caller's commit carries it."""
        ctx = self._ctx
        effective = raw
        seq = op.get("ops_seq")
        if op["phase"] == "raw_saved":
            payload: dict[str, Any] = {
                "purpose": request.purpose, "instance": request.instance,
                "content": raw.content, "tool_calls": [c.to_dict() for c in raw.tool_calls],
                "reasoning_content": raw.reasoning_content,
                "usage": dict(raw.usage) if raw.usage is not None else None,
                "annotations": {}}
            payload, _ = await self._hooks.run("model.chat.after", payload,
                                               instance=request.instance,
                                               key=f"chat-after:{op['id']}",
                                               purpose=request.purpose,
                                               operation_id=op["id"])
            effective = dataclasses.replace(raw, content=payload["content"])
            seq = ctx.journal.append("ops", {
                "op_id": op["id"], "raw_seq": op["ops_seq"],
                "effective_output": effective.to_dict(),
                "annotations": payload.get("annotations") or {}})
        ctx.head["op"] = None
        if seq is not None:  # an action is never replayed: it ends its step
            ctx.head["step_ops"].append(seq)
        ctx.emit("model.completed", {
            "run_id": ctx.run_id, "op_id": op["id"], "purpose": request.purpose,
            "instance": request.instance, "content": effective.content,
            "tool_calls": [c.name for c in effective.tool_calls]})
        await self._hooks.observe("operation.finally", {
            "operation_id": op["id"], "kind": "model", "instance": request.instance,
            "status": "completed"}, instance=request.instance)
        return effective

    def _replay(self, seq: int, checked: str | None) -> tuple[ModelResponse, ModelResponse]:
        journal = self._ctx.journal
        saved = journal.read("ops", seq - 1, 1)[0].body
        raw_entry = saved if "raw_output" in saved else journal.read(
            "ops", saved["raw_seq"] - 1, 1)[0].body
        if raw_entry.get("request_hash") != checked:
            raise ResumeMismatch("a replayed model call differs from the saved one; the "
                                 "policy is not deterministic for the same input")
        self._ctx.head["step_ops"].append(seq)
        raw = ModelResponse.from_dict(raw_entry["raw_output"])
        effective = ModelResponse.from_dict(saved.get("effective_output") or
                                            raw_entry["raw_output"])
        return raw, effective

    def end_step(self) -> None:
        self._ctx.head["step_ops"] = []
        self._ctx.head.pop("step_done", None)

    def _validate(self, request: ModelRequest) -> int | None:
        """The request's estimate (None: the policy does not measure, or gives no
        count); a request over the window's hard limit blocks the run."""
        try:
            size = self._ctx.modules.compaction.validate_request(request)
        except BudgetExceeded as err:
            raise BlockRun(err) from None
        return size if isinstance(size, int) and not isinstance(size, bool) else None


def _apply_input(request: ModelRequest, delta: dict[str, Any]) -> ModelRequest:
    return dataclasses.replace(
        request, messages=[*request.messages, *delta["extra_messages"]],
        options=delta["options"])
