"""``never_started``: from the error the ``ecs:runTask.sync`` state reports, whether the
sandbox task of a command never ran its container (so the command did not run)."""

from __future__ import annotations

import json

import pytest

from agentloom.sandbox.fargate import never_started


def _task(**fields: object) -> str:
    return json.dumps({"LastStatus": "STOPPED", **fields})


@pytest.mark.parametrize(("error", "cause", "words"), [
    ("ECS.AmazonECSException", "Rate exceeded", "RunTask failed (ECS.AmazonECSException)"),
    ("AmazonECS.Unknown", "Failures: RESOURCE:MEMORY", "RunTask failed (AmazonECS.Unknown)"),
    ("ECS.InvalidParameterException", "bad revision", "RunTask failed"),
    ("States.TaskFailed", _task(StopCode="TaskFailedToStart", StoppedReason=(
        "CannotPullContainerError: pull access denied"), Containers=[{"Name": "command"}]),
     "TaskFailedToStart: CannotPullContainerError"),
    # camelCase descriptions read alike; no startedAt and no exit code: it never ran
    ("States.TaskFailed", json.dumps({"stopCode": "UserInitiated", "stoppedReason": "by hand",
                                      "containers": [{"name": "command"}]}),
     "UserInitiated: by hand"),
    ("States.TaskFailed", _task(StoppedReason="ResourceInitializationError: EFS mount",
                                StartedAt=1.0, Containers=[{"Name": "command"}]),
     "stopped: ResourceInitializationError: EFS mount"),
])
def test_a_task_that_never_ran_its_container_is_recognised(error: str, cause: str,
                                                           words: str) -> None:
    reason = never_started(error, cause)
    assert reason is not None and reason.startswith(words), reason


@pytest.mark.parametrize(("error", "cause"), [
    (None, None), ("", ""),
    # the container ran (an exit code), however the task ended: the command may have run
    ("States.TaskFailed", _task(StopCode="EssentialContainerExited", StartedAt=1.0,
                                Containers=[{"Name": "command", "ExitCode": 137}])),
    ("States.TaskFailed", _task(StopCode="UserInitiated",
                                Containers=[{"Name": "command", "ExitCode": 1}])),
    # it reached RUNNING: its container started, even without an exit code
    ("States.TaskFailed", _task(StopCode="UserInitiated", StartedAt=1.0,
                                StoppedReason="run cancelled", Containers=[{}])),
    ("States.Timeout", ""),  # 65 minutes: it ran
    ("ECS.ServerException", "Service unavailable"),  # a 5xx: the task may exist
    ("States.TaskFailed", "not json"), ("States.TaskFailed", "[1]"),
    ("States.TaskFailed", None),
])
def test_a_task_that_ran_or_may_have_run_is_not(error: str | None, cause: str | None
                                                ) -> None:
    assert never_started(error, cause) is None
