"""The trigger configuration (docs/triggers.md): ``AGENTLOOM_TRIGGERS`` maps a trigger
name to the agent version, space and service identity its runs use and the question
they ask; ``AGENTLOOM_SQS_TRIGGER`` names the trigger of queue messages that name none.
Parsed once per container; a bad value is a ``ConfigError`` naming the variable and the
trigger.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentloom_runtime.errors import ConfigError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_DETAIL_CHARS = 8_000  # the detail's JSON in a question is capped (and marked)


class TriggerSpec(BaseModel):
    """One trigger: who asks what of which agent version, where."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    space_id: str = Field(pattern=r"^spc_[0-9a-f]{20}$")
    agent_id: str = Field(pattern=r"^agt_[0-9a-f]{20}$")
    version: int | None = Field(default=None, ge=1, description="None: the latest "
                                "published version when the event arrives")
    user_id: str = Field(min_length=1, max_length=128, description="The service identity: "
                         "a member of the space; the runs and sessions are its own")
    question: str = Field(min_length=1, max_length=20_000, description="'{detail}' is "
                          "replaced by the event's detail as JSON (capped)")

    def ask(self, detail: object) -> str:
        text = json.dumps(detail, ensure_ascii=False, sort_keys=True, default=str)
        if len(text) > MAX_DETAIL_CHARS:
            text = text[:MAX_DETAIL_CHARS] + f"… [detail cut at {MAX_DETAIL_CHARS:,} chars]"
        return self.question.replace("{detail}", text)


class TriggerConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    triggers: dict[str, TriggerSpec]
    sqs_trigger: str | None = None
    idempotency_table: str

    @classmethod
    def from_environ(cls, env: Mapping[str, str]) -> TriggerConfig:
        table = env.get("AGENTLOOM_IDEMPOTENCY_TABLE", "").strip()
        if not table:
            raise _bad("AGENTLOOM_IDEMPOTENCY_TABLE", "is not set", "config_missing")
        raw = env.get("AGENTLOOM_TRIGGERS", "").strip() or "{}"
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as err:
            raise _bad("AGENTLOOM_TRIGGERS", f"is not JSON ({err.msg})") from None
        if not isinstance(data, dict):
            raise _bad("AGENTLOOM_TRIGGERS", "must be a JSON object: name → trigger")
        triggers: dict[str, TriggerSpec] = {}
        for name, spec in data.items():
            if not NAME.fullmatch(name):
                raise _bad("AGENTLOOM_TRIGGERS", f"has an invalid trigger name {name[:80]!r}")
            try:
                triggers[name] = TriggerSpec.model_validate(spec)
            except ValidationError as err:
                fields = ", ".join(".".join(map(str, e["loc"])) or "(trigger)"
                                   for e in err.errors())
                raise _bad("AGENTLOOM_TRIGGERS", f"trigger {name!r}: invalid {fields}") \
                    from None
        sqs = env.get("AGENTLOOM_SQS_TRIGGER", "").strip() or None
        if sqs is not None and sqs not in triggers:
            raise _bad("AGENTLOOM_SQS_TRIGGER", f"names {sqs!r}, which AGENTLOOM_TRIGGERS "
                       "does not define")
        return cls(triggers=triggers, sqs_trigger=sqs, idempotency_table=table)


def _bad(variable: str, problem: str, code: str = "config_invalid") -> ConfigError:
    return ConfigError(f"the environment variable {variable} {problem} (docs/triggers.md)",
                       details={"code": code, "variable": variable})
