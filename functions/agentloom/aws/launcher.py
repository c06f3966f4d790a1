"""``SfnRunLauncher``: the platform's ``RunLauncher`` on Step Functions.

``launch`` does in the API function what the embedded worker does before its first
step (``RunHost.begin``: the run's history from the session stream and its start, or a
resume's new execution; ``continue`` after a verdict needs nothing) — the session's
lease names ``STEP_FUNCTIONS`` as its driver (``agentloom.platform.lease``) — then moves
the run's fence to the next generation and calls
``StartExecution`` with the derived name ``{run}-g{generation}`` and the tiny input
``{"run_id", "generation", "command": null}`` — never the question. A duplicate start is
``ExecutionAlreadyExists``: already started, not an error.

``stop`` stops the run's current execution (``StopExecution``) and its sandbox task, if
one runs (``ListTasks startedBy=run`` + ``StopTask`` in the cluster the step recorded on
the fence). ``driving`` is ``DescribeExecution`` = ``RUNNING``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentloom.aws import fence
from agentloom.platform.errors import Unavailable
from agentloom.platform.host import RunHost, run_sync, scope_of
from agentloom.platform.launcher import RunJob
from agentloom.platform.lease import STEP_FUNCTIONS, Driver
from agentloom.platform.store import PlatformStore
from agentloom_runtime.errors import ConfigError

if TYPE_CHECKING:  # the boto3 stubs (the dev extra)
    from mypy_boto3_ecs import ECSClient
    from mypy_boto3_stepfunctions import SFNClient

log = logging.getLogger(__name__)


def execution_arn(state_machine_arn: str, name: str) -> str:
    """``arn:…:stateMachine:M`` → ``arn:…:execution:M:name``."""
    prefix, _, machine = state_machine_arn.rpartition(":stateMachine:")
    if not prefix:
        raise ConfigError(f"not a state machine ARN: {state_machine_arn[:80]!r}")
    return f"{prefix}:execution:{machine}:{name}"


def _error_code(exc: Exception) -> str:
    """A botocore ``ClientError``'s code ("" for another error, e.g. no connection)."""
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


class SfnRunLauncher:
    def __init__(self, host: RunHost, store: PlatformStore, *, sfn: SFNClient,
                 ecs: ECSClient, state_machine_arn: str) -> None:
        self.host = host
        self.tracker = host.tracker
        self.store = store
        self.sfn = sfn
        self.ecs = ecs
        self.state_machine_arn = state_machine_arn

    # -- launch --------------------------------------------------------------------------

    def launch(self, job: RunJob) -> None:
        """The session's lease is already the run's (the session service took it, naming
        ``holder()``); a failure here leaves the run to resume (the service records it)."""
        run = job.run
        run_sync(self._prepare(job))
        self.start(run.run_id, fence.advance(self.store, run.run_id))
        self.tracker.started(run.session_id, run.run_id)

    def holder(self) -> Driver:
        return STEP_FUNCTIONS

    async def _prepare(self, job: RunJob) -> None:
        if job.kind == "continue":
            return
        engine, _ = self.host.engine(scope_of(job.run), job.snapshot,
                                     attach=job.kind != "ask")
        try:
            await self.host.begin(engine, job)
        finally:
            await engine.close()

    def start(self, run_id: str, generation: int) -> str:
        """StartExecution (idempotent by name); returns the execution name."""
        import json

        name = fence.execution_name(run_id, generation)
        try:
            self.sfn.start_execution(
                stateMachineArn=self.state_machine_arn, name=name,
                input=json.dumps({"run_id": run_id, "generation": generation,
                                  "command": None}))
        except self.sfn.exceptions.ExecutionAlreadyExists:
            return name  # a retried start: that execution drives the run
        except Exception as exc:
            log.warning("run %s: StartExecution failed (%s)", run_id, _error_code(exc))
            raise Unavailable(f"the run could not be started on Step Functions "
                              f"({_error_code(exc) or type(exc).__name__}); resume it to "
                              "try again", code="launch_failed",
                              details={"run_id": run_id, "way_out": "resume"}) from None
        return name

    # -- stop / driving ------------------------------------------------------------------

    def _current(self, run_id: str) -> tuple[str, fence.Fence] | None:
        found = fence.read(self.store, run_id)
        if found is None or found.value.generation == 0:
            return None
        name = fence.execution_name(run_id, found.value.generation)
        return execution_arn(self.state_machine_arn, name), found.value

    def stop(self, run_id: str, *, timeout: float = 30.0) -> bool:
        current = self._current(run_id)
        if current is None:
            return False
        arn, state = current
        stopped = False
        try:
            self.sfn.stop_execution(executionArn=arn, cause="cancelled through the API")
            stopped = True
        except self.sfn.exceptions.ExecutionDoesNotExist:
            pass  # never started, or its history expired
        except self.sfn.exceptions.ClientError as exc:
            # an ended execution needs no stop; "ExecutionNotRunning" is no modeled
            # StopExecution error (no class in sfn.exceptions), so it is matched by code
            if _error_code(exc) != "ExecutionNotRunning":
                raise
        if state.cluster:
            tasks = self.ecs.list_tasks(cluster=state.cluster, startedBy=run_id,
                                        desiredStatus="RUNNING").get("taskArns", [])
            for task in tasks:
                self.ecs.stop_task(cluster=state.cluster, task=task,
                                   reason="run cancelled")
                stopped = True
        return stopped

    def driving(self, run_id: str) -> bool:
        current = self._current(run_id)
        if current is None:
            return False
        try:
            status = self.sfn.describe_execution(executionArn=current[0])["status"]
        except self.sfn.exceptions.ExecutionDoesNotExist:
            return False
        return bool(status == "RUNNING")

    def close(self) -> None:
        return None  # executions outlive the function
