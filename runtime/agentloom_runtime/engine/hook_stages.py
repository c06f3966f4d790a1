"""Hook stages inside durable operations (seed 002 §11, §14).

One mechanism for every point: ``run_stage`` runs the matched bindings in order and
keeps a cursor with the payload's writable fields (never the read-only bulk such as
messages, which the step rebuilds). A binding that is not ``replay_safe`` (the default)
is announced in the head before it runs and its cursor is committed after it, so it never
runs twice unseen; if the process dies while it runs, resume refuses to repeat it unless
the execution was started with ``confirm_hooks=True``. Replay-safe bindings cost no
commit: their progress rides on the operation's next commit, and after a crash they may
simply run again. An empty stage costs nothing.
"""

from __future__ import annotations

from typing import Any

from agentloom_runtime.errors import CheckpointConflict, RunError

from .core import BlockRun, EngineCore


class HookReplayRequired(RunError):
    code = "hook_replay_requires_confirmation"


class HookRejected(RunError):
    code = "hook_rejected"


def in_flight(head: dict[str, Any], record: dict[str, Any], what: str) -> None:
    """An operation started in the *current* execution belongs to a step that may still
    be running (a duplicate or concurrent invocation): do nothing. Only a resume (a new
    execution) may decide that its fate is unknown."""
    if record.get("execution") == head["execution"]:
        raise CheckpointConflict(
            f"{what} of run {head['run_id']} is in flight in this execution; a step that "
            "died here is continued by resuming the run", details={"run_id": head["run_id"]})


class HookStages(EngineCore):
    def _hook_scope(self, point: str, instance: str, **fields: Any) -> Any:
        from agentloom_runtime.hooks import HookScope

        snap = self.snapshot
        return HookScope(run_id=self.run_id, instance=instance, point=point,
                         space_id=snap.space_id, agent_id=snap.agent_id,
                         agent_version=str(snap.version), **fields)

    def has_hooks(self, point: str, instance: str, **fields: Any) -> bool:
        hooks = self.modules.hooks
        return hooks is not None and bool(
            hooks.stage(point, self._hook_scope(point, instance, **fields)))

    async def run_stage(self, point: str, payload: dict[str, Any], *, instance: str,
                        key: str, **fields: Any) -> tuple[dict[str, Any], Any]:
        """Run ``point``'s stage; returns (payload, rejection or None). ``key`` names the
        operation, so a resumed step continues the same stage at its saved cursor."""
        hooks = self.modules.hooks
        if hooks is None:
            return payload, None
        scope = self._hook_scope(point, instance, **fields)
        stage = hooks.stage(point, scope)
        if not stage:
            return payload, None
        j = self._journal()
        writable = sorted(hooks.points.get(point).writable)
        saved = j.head.get("hook")
        start = 0
        if saved and saved["key"] == key and saved["point"] == point:
            start = saved["cursor"]
            payload = {**payload, **saved["fields"]}
            if saved.get("running") is not None:
                in_flight(j.head, saved, f"hook {point}")
            if saved.get("running") is not None and not j.head["exec_options"].get(
                    "confirm_hooks"):
                binding = stage[saved["running"]]
                raise BlockRun(HookReplayRequired(
                    f"hook {binding.hook_id} ({point}) may have run partly before the "
                    "interruption and is not replay_safe; resume with confirm_hooks=True "
                    "after checking its effects", details={"hook_id": binding.hook_id}))
        for item in stage[start:]:
            # Only a hook that must not run twice costs commits: announced before it runs,
            # its cursor saved after. Replay-safe progress rides on the next commit.
            risky = hooks.replay_required(item)
            if risky:
                self._save_hook(key, point, item.index, payload, writable, running=True)
            outcome = await hooks.run_binding(item, payload, scope,
                                              stage_deadline=self._stage_deadline(hooks))
            payload = outcome.payload
            for diagnostic in outcome.diagnostics:
                self.emit("hook.diagnostic", diagnostic.to_dict())
            if outcome.rejected is not None:
                j.head.pop("hook", None)
                return payload, outcome.rejected
            self._save_hook(key, point, item.index + 1, payload, writable, running=False,
                            commit=risky)
        j.head.pop("hook", None)  # committed with the operation that consumes the payload
        return payload, None

    def _save_hook(self, key: str, point: str, cursor: int, payload: dict[str, Any],
                   writable: list[str], *, running: bool, commit: bool = True) -> None:
        j = self._journal()
        fields = {k: payload[k] for k in writable if k in payload}
        j.head["hook"] = {"key": key, "point": point, "cursor": cursor,
                          "execution": j.head["execution"],
                          "running": cursor if running else None, "fields": fields}
        if commit:
            j.commit()

    @staticmethod
    def _stage_deadline(hooks: Any) -> float:
        import asyncio

        return asyncio.get_running_loop().time() + float(hooks.stage_timeout)

    async def observe(self, point: str, payload: dict[str, Any], *, instance: str,
                      **fields: Any) -> None:
        """Read-only stages (operation.error/finally, *.after observers): failures are
        diagnostics; nothing is persisted and nothing can change the outcome."""
        hooks = self.modules.hooks
        if hooks is None:
            return
        scope = self._hook_scope(point, instance, **fields)
        if not hooks.stage(point, scope):
            return
        outcome = await hooks.run(point, payload, scope)
        for diagnostic in outcome.diagnostics:
            self.emit("hook.diagnostic", diagnostic.to_dict())
