"""Hook stages inside durable operations (docs/contract.md#hooks).

The stage loop is ``HookManager.run`` (its stage budget, its payload validation); this
runner only adds durability around it. A cursor with the payload's writable fields is
kept in the head. A binding that is not ``replay_safe`` (the default) is announced in
the head before it runs and its cursor committed after it, so it never runs twice
unseen; if the process dies while it runs, a resume refuses to repeat it unless the
execution was started with ``confirm_hooks``. Replay-safe progress costs no commit: it
rides on the operation's next commit. An empty stage costs nothing.
"""

from __future__ import annotations

from typing import Any

from agentloom_runtime._json import storable, storable_text
from agentloom_runtime.errors import RunError
from agentloom_runtime.hook_contracts import HookRejection, HookScope, HookStageBinding

from ._context import BlockRun, StepContext, in_flight
from ._state import HookCursor


class HookReplayRequired(RunError):
    code = "hook_replay_requires_confirmation"


class HookRejected(RunError):
    code = "hook_rejected"


class HookRunner:
    def __init__(self, ctx: StepContext) -> None:
        self._ctx = ctx

    def _scope(self, point: str, instance: str, **fields: Any) -> HookScope:
        """The scope of a stage: the run's identities (its session from the host's
        ``session`` label) and the operation the caller names (``operation_id``)."""
        ctx, snap = self._ctx, self._ctx.snapshot
        return HookScope(run_id=ctx.run_id, instance=instance, point=point,
                         space_id=snap.space_id, agent_id=snap.agent_id,
                         agent_version=str(snap.version),
                         session_id=ctx.head["labels"].get("session"), **fields)

    def has(self, point: str, instance: str, **fields: Any) -> bool:
        hooks = self._ctx.modules.hooks
        return hooks is not None and bool(
            hooks.stage(point, self._scope(point, instance, **fields)))

    async def run(self, point: str, payload: dict[str, Any], *, instance: str, key: str,
                  **fields: Any) -> tuple[dict[str, Any], HookRejection | None]:
        """Run ``point``'s stage; returns (payload, rejection or None). ``key`` names the
        operation, so a resumed step continues the same stage at its saved cursor."""
        ctx = self._ctx
        hooks = ctx.modules.hooks
        if hooks is None:
            return payload, None
        scope = self._scope(point, instance, **fields)
        stage = hooks.stage(point, scope)
        if not stage:
            return payload, None
        head = ctx.head
        writable = sorted(hooks.writable(point))
        start = 0
        saved = head.get("hook")
        if saved and saved["key"] == key and saved["point"] == point:
            start = saved["cursor"]
            payload = {**payload, **saved["fields"]}
            if saved["running"] is not None:
                in_flight(head, saved, f"hook {point}")
                if not head["exec_options"]["confirm_hooks"]:
                    binding = stage[saved["running"]]
                    raise BlockRun(HookReplayRequired(
                        f"hook {binding.hook_id} ({point}) may have run partly before the "
                        "interruption and is not replay_safe: its effects are to be "
                        "checked, then the run resumed confirming its hooks",
                        details={"hook_id": binding.hook_id}))

        def save(cursor: int, current: dict[str, Any], running: bool) -> None:
            head["hook"] = HookCursor(
                key=key, point=point, cursor=cursor, execution=head["execution"],
                running=cursor if running else None,
                fields={k: storable(current[k]) for k in writable if k in current})

        async def before(binding: HookStageBinding, current: dict[str, Any]) -> None:
            if hooks.replay_required(binding):
                save(binding.index, current, running=True)
                ctx.commit("hook.started")

        async def after(binding: HookStageBinding, cursor: int,
                        current: dict[str, Any]) -> None:
            save(cursor, current, running=False)
            if hooks.replay_required(binding):
                ctx.commit("hook.done")

        outcome = await hooks.run(point, payload, scope, start=start, before=before,
                                  after=after)
        for diagnostic in outcome.diagnostics:
            ctx.emit("hook.diagnostic", diagnostic.to_dict())
        head.pop("hook", None)  # committed with the operation that consumes the payload
        # Text from a hook is made storable here, at the boundary (lone surrogates): only
        # the writable fields can have changed.
        payload = {**outcome.payload, **{k: storable(outcome.payload[k])
                                         for k in writable if k in outcome.payload}}
        rejected = outcome.rejected
        if rejected is not None:
            from agentloom_runtime.hooks.results import Reject  # hooks bound: loaded

            rejected = Reject(storable_text(rejected.reason), rejected.hook_id)
        return payload, rejected

    async def observe(self, point: str, payload: dict[str, Any], *, instance: str,
                      **fields: Any) -> None:
        """Read-only stages (operation.error/finally, *.after observers): failures are
        diagnostics; nothing is persisted and nothing can change the outcome. The scope's
        operation is the payload's ``operation_id`` unless the caller names one."""
        hooks = self._ctx.modules.hooks
        if hooks is None:
            return
        fields.setdefault("operation_id", payload.get("operation_id"))
        scope = self._scope(point, instance, **fields)
        if not hooks.stage(point, scope):
            return
        outcome = await hooks.run(point, payload, scope)
        for diagnostic in outcome.diagnostics:
            self._ctx.emit("hook.diagnostic", diagnostic.to_dict())

    async def prepare_context(self, instance: str, messages: list[dict[str, Any]],
                              tools: list[dict[str, Any]], counters: dict[str, int],
                              key: str, operation_id: str) -> list[dict[str, Any]]:
        """context.prepare.before may add labelled, temporary user material (this request
        only, never saved to the view); context.prepare.after observes. Both run in the
        scope of the action call they prepare (``operation_id``)."""
        if self.has("context.prepare.before", instance):
            payload: dict[str, Any] = {"instance": instance, "messages": messages,
                                       "tools": tools, "extra_messages": []}
            payload, _ = await self.run("context.prepare.before", payload,
                                        instance=instance, key=key,
                                        operation_id=operation_id)
            messages = messages + [
                {"role": "user", "content": f"[material from {m['source']}]\n{m['content']}"}
                for m in payload["extra_messages"]]
        if self.has("context.prepare.after", instance):
            await self.observe("context.prepare.after", {
                "instance": instance, "messages": messages, "tools": tools,
                "counters": dict(counters)}, instance=instance, operation_id=operation_id)
        return messages
