"""``SfnRunLauncher`` answers Step Functions' errors through the client's modeled
exceptions (``sfn.exceptions``), against moto: a start of an execution name already used
is the run's own execution, a missing execution is neither stopped nor driving."""

from __future__ import annotations

import pytest
from functional.aws.harness import ALICE, Bench

from agentloom.aws import fence
from agentloom.aws.launcher import execution_arn


def test_a_start_of_an_ended_execution_is_that_execution(bench: Bench) -> None:
    """moto, like Step Functions, answers a second start of an ended execution's name
    with ``ExecutionAlreadyExists``: the launcher returns that name, starts nothing."""
    run, _ = bench.api.sessions.ask(ALICE, bench.session_id, "Copy the notes")
    bench.end_execution(run.run_id, 1)
    sfn = bench.aws.sfn
    machine = bench.resources.env["AGENTLOOM_STATE_MACHINE_ARN"]
    arn = execution_arn(machine, f"{run.run_id}-g1")
    with pytest.raises(sfn.exceptions.ExecutionAlreadyExists):  # what the launcher meets
        sfn.start_execution(stateMachineArn=machine, name=f"{run.run_id}-g1", input="{}")
    assert bench.api.launcher.start(run.run_id, 1) == f"{run.run_id}-g1"
    listed = sfn.list_executions(stateMachineArn=machine)["executions"]
    assert [e["executionArn"] for e in listed] == [arn]
    assert sfn.describe_execution(executionArn=arn)["status"] == "ABORTED"


def test_an_execution_that_does_not_exist_is_not_stopped_nor_driving(bench: Bench) -> None:
    run, _ = bench.api.sessions.ask(ALICE, bench.session_id, "Copy the notes")
    launcher = bench.api.launcher
    assert launcher.driving(run.run_id)
    generation = fence.advance(bench.api.store, run.run_id)  # g2 recorded, never started
    sfn = bench.aws.sfn
    machine = bench.resources.env["AGENTLOOM_STATE_MACHINE_ARN"]
    with pytest.raises(sfn.exceptions.ExecutionDoesNotExist):
        sfn.describe_execution(
            executionArn=execution_arn(machine, fence.execution_name(run.run_id,
                                                                     generation)))
    assert launcher.driving(run.run_id) is False
    assert launcher.stop(run.run_id) is False  # nothing to stop, no sandbox cluster yet


def test_another_stop_error_is_raised(bench: Bench) -> None:
    run, _ = bench.api.sessions.ask(ALICE, bench.session_id, "Copy the notes")
    launcher = bench.api.launcher
    launcher.state_machine_arn = "arn:aws:states:nowhere:1:stateMachine:m"  # not an ARN
    with pytest.raises(bench.aws.sfn.exceptions.InvalidArn):
        launcher.stop(run.run_id)
