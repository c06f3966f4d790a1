"""The step function's input model: what the state machine sends is accepted as sent;
anything else is a ``StepInputError`` (``invalid_step_input``) naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from agentloom.aws.step_input import StepInput, StepInputError


def test_the_state_machine_payloads_parse() -> None:
    first = StepInput.parse({"run_id": "run_abc", "generation": 1, "command": None})
    assert (first.run_id, first.generation, first.request_id, first.failure) == \
        ("run_abc", 1, None, None)
    # after RunCommand the previous reply's command comes back whole
    after = StepInput.parse({"run_id": "run_abc", "generation": 2, "command": {
        "request_id": "cmd_1:a.b-c", "task_definition": "arn:td", "overrides": {}}})
    assert after.request_id == "cmd_1:a.b-c"
    assert after.command is not None and after.command.task is None
    # AfterCommand: how the task ended, success ({"Error": ""}) or the Catch's
    ok = StepInput.parse({"run_id": "run_abc", "generation": 2, "command": {
        "request_id": "cmd_1", "task": {"Error": ""}}})
    assert ok.command is not None and ok.command.task is not None
    assert ok.command.task.Error == ""
    caught = StepInput.parse({"run_id": "run_abc", "generation": 2, "command": {
        "request_id": "cmd_1", "task": {"Error": "States.TaskFailed", "Cause": "{}"}}})
    assert caught.command is not None and caught.command.task is not None
    assert (caught.command.task.Error, caught.command.task.Cause) == ("States.TaskFailed",
                                                                     "{}")
    failed = StepInput.parse({"run_id": "run_abc", "generation": 1, "command": None,
                              "failure": {"Error": "States.Timeout", "Cause": "…"}})
    assert failed.failure == {"Error": "States.Timeout", "Cause": "…"}
    assert StepInput.parse({"run_id": "run_abc", "generation": 3}).command is None


@pytest.mark.parametrize(("event", "field", "words"), [
    ({}, "run_id", "has no run_id"),
    ({"run_id": "x", "generation": 1}, "run_id", "must be a run id"),
    ({"run_id": "run_abc\n", "generation": 1}, "run_id", "must be a run id"),
    ({"run_id": "run_" + "a" * 65, "generation": 1}, "run_id", "must be a run id"),
    ({"run_id": "run_abc"}, "generation", "has no generation"),
    ({"run_id": "run_abc", "generation": 0}, "generation", "positive integer"),
    ({"run_id": "run_abc", "generation": True}, "generation", "positive integer"),
    ({"run_id": "run_abc", "generation": "1"}, "generation", "positive integer"),
    ({"run_id": "run_abc", "generation": 1.0}, "generation", "positive integer"),
    ({"run_id": "run_abc", "generation": 1, "command": "go"}, "command", "must be null"),
    ({"run_id": "run_abc", "generation": 1, "command": {}}, "command.request_id",
     "has no command.request_id"),
    ({"run_id": "run_abc", "generation": 1, "command": {"request_id": "../x"}},
     "command.request_id", "must be a command request id"),
    ({"run_id": "run_abc", "generation": 1, "command": {"request_id": 7}},
     "command.request_id", "must be a command request id"),
    ({"run_id": "run_abc", "generation": 1, "command": {"request_id": "c", "task": "x"}},
     "command.task", "how the sandbox task ended"),
    ({"run_id": "run_abc", "generation": 1, "command": {"request_id": "c", "task": {
        "Error": 3}}}, "command.task.Error", "how the sandbox task ended"),
    ({"run_id": "run_abc", "generation": 1, "failure": "x"}, "failure", "an object"),
    ({"run_id": "run_abc", "generation": 1, "question": "hi"}, "question",
     "unknown field 'question'"),
])
def test_a_bad_input_names_its_field(event: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(StepInputError) as refused:
        StepInput.parse(event)
    assert refused.value.code == "invalid_step_input"
    assert refused.value.details["field"] == field
    assert words in refused.value.message and field in refused.value.message


def test_an_input_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(StepInputError) as refused:
        StepInput.parse(["run_abc", 1])  # type: ignore[arg-type]
    assert refused.value.message == "the step input must be an object"


def test_the_message_never_quotes_the_value() -> None:
    with pytest.raises(StepInputError) as refused:
        StepInput.parse({"run_id": "run_abc", "generation": 1,
                         "command": {"request_id": "secret text from a tool"}})
    assert "secret" not in refused.value.message and "secret" not in str(
        refused.value.details)


def test_a_parsed_input_is_frozen() -> None:
    step = StepInput.parse({"run_id": "run_abc", "generation": 1})
    with pytest.raises(ValueError, match="frozen"):
        step.generation = 2
