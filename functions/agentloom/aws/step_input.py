"""The step function's input: what the state machine hands each ``Step`` invocation.

``{"run_id": "run_…", "generation": g, "command": null | {"request_id": …, …},
"failure"?: {…}}`` (``infra/agentloom_infra/state_machine.py`` builds it). Validated as
a strict pydantic model: no coercion (``"1"`` or ``true`` is not a generation), no
other top-level keys (a drift between the state machine and this function is refused,
not ignored). ``command`` is the previous step's reply coming back after the sandbox
task, so its other keys (``task_definition``, ``overrides``) are allowed and dropped;
``command.task`` is how that task ended, as RunCommand reported it (``{"Error": ""}``,
or the Catch's ``{"Error", "Cause"}``).
A bad input is a ``StepInputError`` (``invalid_step_input``) naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentloom_runtime.errors import ConfigError

RUN_ID = r"^run_[A-Za-z0-9]{1,64}$"
REQUEST_ID = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"

# What each field must be, in the words of the error message.
_EXPECTED = {
    "run_id": "must be a run id (run_ and 1 to 64 letters or digits)",
    "generation": "must be a positive integer",
    "command": 'must be null or {"request_id": …}',
    "command.request_id": "must be a command request id (1 to 128 letters, digits or "
                          "._:- , starting with a letter or digit)",
    "command.task": 'must be {"Error": …, "Cause"?: …} (how the sandbox task ended)',
    "failure": "must be an object (the state machine's Catch)",
}


class StepInputError(ConfigError):
    code = "invalid_step_input"


class TaskEnd(BaseModel):
    """How the sandbox task ended (RunCommand's result or Catch): ``Error`` is empty when
    its container exited 0; ``Cause`` is the error's detail (for ``States.TaskFailed``
    the stopped task's description as JSON)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="ignore")

    Error: str | None = None
    Cause: str | None = None


class StepCommand(BaseModel):
    """The command whose task ran: its request id, and how its task ended."""

    model_config = ConfigDict(strict=True, frozen=True, extra="ignore")

    request_id: str = Field(pattern=REQUEST_ID)
    task: TaskEnd | None = None


class StepInput(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    run_id: str = Field(pattern=RUN_ID, description="The run this step drives")
    generation: int = Field(ge=1, description="The execution's generation (the fence)")
    command: StepCommand | None = Field(
        default=None, description="The command whose sandbox task just ended, if any")
    failure: dict[str, Any] | None = Field(
        default=None, description="The state machine's Catch output: the step failed")

    @property
    def request_id(self) -> str | None:
        return self.command.request_id if self.command is not None else None

    @classmethod
    def parse(cls, event: Mapping[str, Any]) -> StepInput:
        try:
            return cls.model_validate(event)
        except ValidationError as err:
            raise _refused(err) from None


def _refused(err: ValidationError) -> StepInputError:
    """The first problem, by field (never the value: a step input carries no content,
    but a malformed one could)."""
    errors = err.errors()
    fields = [".".join(str(part) for part in e["loc"]) for e in errors]
    field, kind = fields[0], errors[0]["type"]
    expected = _EXPECTED.get(field) or _EXPECTED.get(".".join(field.split(".")[:2])) or \
        _EXPECTED.get(field.split(".", 1)[0], "is invalid")
    if not field:
        message = "the step input must be an object"
    elif kind == "extra_forbidden":
        message = f"the step input has an unknown field {field[:64]!r}"
    elif kind == "missing":
        message = f"the step input has no {field}: it {expected}"
    else:
        message = f"the step input's {field} {expected}"
    return StepInputError(message, details={"field": field, "fields": fields})
