"""Lambda "step": one model/tool cycle of a run per invocation (``agentloom.aws.steps``).

The state machine invokes it with ``{"run_id", "generation", "command"}`` (and
``"failure"`` from its Catch). The API function invokes it with exactly
``{"teardown_session": "ses_…"}`` when a session is deleted: the step, which mounts the
workspace volume, removes that session's files if its teardown marker exists
(``agentloom.aws.session_files``). The service is wired once per container from the
environment (``agentloom.aws.config``) and kept warm: its attached engine, its sandbox
registry cache and its clients are reused by later invocations. Imports are deferred to
the first invocation so a cold start pays only for what it uses; ``configure`` replaces
the wiring (tests).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from agentloom.cold_start import cold_start

if TYPE_CHECKING:
    from agentloom.aws.steps import StepService

_service: StepService | None = None


@cold_start
def _wire() -> StepService:
    from agentloom.aws.config import AwsConfig
    from agentloom.aws.platform import AwsPlatform
    from agentloom.aws.sandbox import SandboxRegistry
    from agentloom.aws.steps import StepService

    config = AwsConfig.from_environ(os.environ, sandbox=True)
    platform = AwsPlatform.open(config)
    sandbox = SandboxRegistry(config.require_sandbox(), platform.store,
                              efs=platform.clients.efs, ecs=platform.clients.ecs,
                              region=config.region)
    return StepService(platform, sandbox)


def configure(service: StepService | None) -> None:
    global _service
    _service = service


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _service
    if _service is None:
        _service = _wire()
    if "teardown_session" in event:
        from agentloom.aws.session_files import remove_session_files

        return remove_session_files(_service.store, _service.platform.config.workspace_root,
                                    event)
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return _service.handle(event, remaining_seconds=remaining() / 1000 if remaining else None)
