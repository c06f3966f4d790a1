"""Lambda "api": API Gateway HTTP API (payload 2.0, JWT authorizer) → the resolver.

Identity is the authorizer's verified ``sub`` claim (``JwtClaims``). The platform is
wired once per container from the environment: in AWS (``AGENTLOOM_PLATFORM_TABLE`` set;
``agentloom.aws.config``) the DynamoDB stores encrypted under KMS and the Step Functions
run launcher (``agentloom.aws.platform.AwsPlatform``); otherwise a state directory
(``AGENTLOOM_HOME``) whose asks answer 503 ``launcher_unavailable`` (no run launcher
there; reading, admin routes, resolve, cancel and supplement work). ``configure``
replaces the wiring (tests, other deployments). Imports are deferred to the first
request (``bench_serverless`` prints the module's cold import and the wiring's).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom.cold_start import cold_start

if TYPE_CHECKING:  # the resolver and the platform load on the first request
    from agentloom.api._resolver import ApiResolver
    from agentloom.platform.launcher import RunJob
    from agentloom.platform.lease import Driver

_app: ApiResolver | None = None


class NoLauncher:
    """Runs cannot start from a function without Step Functions configured."""

    def launch(self, job: RunJob) -> None:
        from agentloom.platform.errors import Unavailable

        raise Unavailable("this deployment cannot start runs (no run launcher: set the AWS "
                          "environment, docs/deploy.md)", code="launcher_unavailable")

    def stop(self, run_id: str, *, timeout: float = 30.0) -> bool:
        return False

    def driving(self, run_id: str) -> bool:
        return False

    def holder(self) -> Driver:
        from agentloom.platform.lease import this_process

        return this_process()

    def close(self) -> None:
        return None


@cold_start
def _wire() -> ApiResolver:
    from agentloom.api.app import build_app
    from agentloom.aws.config import is_aws
    from agentloom.platform.identity import JwtClaims

    if is_aws(os.environ):
        from agentloom.aws.config import AwsConfig
        from agentloom.aws.platform import AwsPlatform

        aws = AwsPlatform.open(AwsConfig.from_environ(os.environ))
        return build_app(aws.admin, aws.sessions, JwtClaims())
    from agentloom.local.embedded import EmbeddedPlatform
    from agentloom.platform.sessions import SessionService

    platform = EmbeddedPlatform.open(Path(os.environ.get("AGENTLOOM_HOME", "/tmp/agentloom")))
    platform.launcher.close()
    sessions = SessionService(platform.store, platform.tracker, NoLauncher(),
                              platform.sessions.engines,
                              resources=platform.sessions.teardown.resources)
    return build_app(platform.admin, sessions, JwtClaims())


def configure(app: ApiResolver | None) -> None:
    global _app
    _app = app


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _app
    if _app is None:
        _app = _wire()
    return _app.resolve(event, context)
