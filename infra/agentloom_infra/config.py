"""``StageConfig``: every deploy-time choice, read once from CDK context (docs/deploy.md).

One pydantic model of the stack's context: each field is a context key (its alias: the
camelCase name passed as ``cdk deploy -c stage=prod -c jwtIssuer=…`` or put under
``"context"`` in infra/cdk.json), typed and described below. Values are strict (no
coercion) except for the forms the CDK CLI can only pass as text: a JSON object may be
given as JSON text (``triggers``, ``eventPattern``, ``reservedConcurrency``,
``memoryMb``), an integer as its digits (``rolloverCycles``, ``maxAzs``), a boolean as
``true``/``false`` (``retain``, ``console``), the audiences as a comma-separated list.
An unset or empty value takes the default. A malformed value raises ``ConfigError``
naming the key, before anything is synthesized; keys this model does not know (CDK's own
feature flags, ``aws:cdk:…``) are not read.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, get_args

from constructs import Node
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)
from typing_extensions import TypedDict  # pydantic validates only this one before 3.12

STAGE = r"^[a-z][a-z0-9-]{0,15}$"
LAYER_ARN = r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:layer:[A-Za-z0-9_-]+:\d+$"
SCHEDULE = r"^(cron\([^()]+\)|rate\([^()]+\))$"
# A Cognito domain prefix: lowercase letters, digits and '-', not at either end
DOMAIN_PREFIX = r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"
COGNITO_RESERVED = ("aws", "amazon", "cognito")  # words a Cognito domain may not contain
DOMAIN = r"^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$"
Function = Literal["api", "step", "trigger"]  # the stack's Lambda functions
FUNCTIONS = get_args(Function)
Tokenizer = Literal["openai", "deepseek"]  # vendor tokenizer families (bundling.TOKENIZERS)
TOKENIZER_FAMILIES = get_args(Tokenizer)
TRIGGER_KEYS = ("agent_id", "question", "space_id", "user_id", "version")
# The step function's reservation in a retained stage unless reservedConcurrency says:
# 50 concurrent steps are 50 runs stepping at once; an account needs a concurrency limit of
# at least 150 (Lambda keeps 100 unreserved).
DEFAULT_STEP_RESERVED = 50


class ConfigError(ValueError):
    """A context value is missing or malformed; the message names the key."""


def _json_text(value: object) -> object:
    """A JSON value, or JSON text (what ``-c key=…`` passes) decoded."""
    if not isinstance(value, str):
        return value  # cdk.json may hold the value as JSON already
    try:
        return json.loads(value)
    except ValueError as exc:
        raise ValueError(f"is not valid JSON: {exc}") from None


def _digits(value: object) -> object:
    """An integer, or its decimal digits as text; never a bool or a float."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return value


def _bool_text(value: object) -> object:
    """A boolean, or ``true``/``false`` as text (``-c retain=false``)."""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


def _comma_list(value: object) -> object:
    """Comma-separated text, or a JSON list (cdk.json), as a tuple."""
    if isinstance(value, str):
        return tuple(value.split(","))
    return tuple(value) if isinstance(value, list) else value


def _families(value: object) -> object:
    """``_comma_list``, with ``none`` for no family at all."""
    if value == "none" or value == ["none"]:
        return ()
    listed = _comma_list(value)
    return tuple(sorted(set(listed))) if isinstance(listed, tuple) else listed


NonEmpty = Annotated[str, StringConstraints(min_length=1)]
JsonObject = Annotated[dict[str, Any], BeforeValidator(_json_text)]


class TriggerDefinition(TypedDict):
    """One trigger, as the trigger function reads it (``AGENTLOOM_TRIGGERS``)."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    space_id: NonEmpty
    agent_id: NonEmpty
    version: NonEmpty
    user_id: NonEmpty
    question: NonEmpty


# What each key must be, in the words of the error message (a failed built-in check).
_EXPECTED = {
    "stage": "must be lowercase letters, digits and '-', starting with a letter, at most "
             "16 characters",
    "sandboxImage": "must be an image URI",
    "jwtIssuer": "must be an https:// URL",
    "jwtAudience": "must be comma-separated audiences",
    "eventPattern": "must be a JSON object (an EventBridge pattern)",
    "scheduleCron": "must be 'cron(...)' or 'rate(...)'",
    "triggers": "must be a JSON object: trigger name → definition",
    "sqsTrigger": "must be a trigger name", "eventTrigger": "must be a trigger name",
    "scheduleTrigger": "must be a trigger name",
    "rolloverCycles": "must be within 10..3000 (an integer)",
    "maxAzs": "must be within 1..3 (an integer)",
    "retain": "must be true or false",
    "reservedConcurrency": f"must map some of {list(FUNCTIONS)} to integers 1..1000",
    "memoryMb": f"must map some of {list(FUNCTIONS)} to integers 128..10240 (MB)",
    "powertoolsLayerArn": "must be a layer version ARN "
                          "(arn:aws:lambda:<region>:<account>:layer:<name>:<version>)",
    "otelLayerArn": "must be a layer version ARN (the ADOT Python layer for arm64 of your "
                    "region)",
    "tokenizers": f"must be 'none' or comma-separated families of "
                  f"{list(TOKENIZER_FAMILIES)}",
    "dnsAllowedDomains": "must be comma-separated domain names (lowercase; '*.' allowed "
                         "as the first label)",
    "stateMachineLogLevel": "must be one of ALL, ERROR, FATAL, OFF",
    "userPoolMfa": "must be one of OFF, OPTIONAL, REQUIRED",
    "console": "must be true or false",
    "consoleDomainPrefix": "must be lowercase letters, digits and '-' (not at either end), "
                           "at most 63 characters",
}
# ... and what one entry of a mapping key must be (the entry is named too).
_EXPECTED_ENTRY = {
    "triggers": f"needs exactly the non-empty string keys {list(TRIGGER_KEYS)}",
    "reservedConcurrency": f"must be one of {list(FUNCTIONS)} mapped to an integer "
                           "1..1000",
    "memoryMb": f"must be one of {list(FUNCTIONS)} mapped to an integer 128..10240 (MB)",
}


class StageConfig(BaseModel):
    """The stage's context values (docs/deploy.md, "Context values")."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    stage: str = Field(default="dev", pattern=STAGE, description=(
        "Names every resource (agentloom-<stage>-…); says nothing about retention"))
    retain_data: Annotated[bool, BeforeValidator(_bool_text)] = Field(
        default=True, alias="retain", description=(
            "Keep the data stores when the stack or a resource is deleted (tables with "
            "deletion protection, EFS with backups, the key, the vector bucket, logs), a "
            "NAT gateway per AZ, 2 AZs; false (a disposable dev stage) deletes them"))
    sandbox_image: NonEmpty | None = Field(default=None, alias="sandboxImage", description=(
        "An existing image URI instead of building infra/sandbox/Dockerfile"))
    jwt_issuer: str | None = Field(default=None, alias="jwtIssuer", pattern=r"^https://",
                                   description="An existing OIDC issuer instead of the "
                                   "Cognito user pool (with jwtAudience)")
    jwt_audience: Annotated[tuple[NonEmpty, ...], BeforeValidator(_comma_list)] = Field(
        default=(), alias="jwtAudience", description="The issuer's accepted audiences")
    event_pattern: JsonObject | None = Field(default=None, alias="eventPattern",
                                             description="An EventBridge rule pattern")
    schedule_cron: str | None = Field(default=None, alias="scheduleCron", pattern=SCHEDULE,
                                      description="An EventBridge Scheduler expression, UTC")
    triggers: Annotated[dict[str, TriggerDefinition], BeforeValidator(_json_text)] = Field(
        default_factory=dict, description="Trigger name → what its runs ask of which agent")
    sqs_trigger: str | None = Field(default=None, alias="sqsTrigger", description=(
        "The trigger of a queue message that names none"))
    event_trigger: str | None = Field(default=None, alias="eventTrigger",
                                      description="The trigger eventPattern starts")
    schedule_trigger: str | None = Field(default=None, alias="scheduleTrigger",
                                         description="The trigger scheduleCron starts")
    rollover_cycles: Annotated[int, BeforeValidator(_digits)] = Field(
        default=500, ge=10, le=3000, alias="rolloverCycles",
        description="Cycles per execution before the run continues in a new one")
    max_azs: Annotated[int | None, BeforeValidator(_digits)] = Field(
        default=None, ge=1, le=3, alias="maxAzs", description=(
            "AZs of the VPC (``azs``): 2 when retained, 1 otherwise; a retained stage "
            "needs 2+"))
    reserved_concurrency: Annotated[
        dict[Function, Annotated[int, Field(ge=1, le=1000)]] | None,
        BeforeValidator(_json_text)] = Field(
        default=None, alias="reservedConcurrency", description=(
            "Reserved concurrent executions per function; the default reserves "
            "DEFAULT_STEP_RESERVED for the step function of a retained stage (none for a "
            "disposable one: an account whose concurrency limit is still 10 rejects any "
            "reservation); '{}' reserves none"))
    memory_mb: Annotated[
        dict[Function, Annotated[int, Field(ge=128, le=10240)]],
        BeforeValidator(_json_text)] = Field(
        default_factory=dict, alias="memoryMb", description=(
            "Memory (MB) per function instead of the measured defaults "
            "(functions.MEMORY_MB, docs/deploy.md \"Function memory\")"))
    powertools_layer_arn: str | None = Field(
        default=None, alias="powertoolsLayerArn", pattern=LAYER_ARN, description=(
            "A Powertools v3 (>=3.29) python3.12 arm64 layer instead of the one built "
            "from pyproject's pin with bytecode (e.g. the public layer of the region)"))
    tokenizers: Annotated[tuple[Tokenizer, ...], BeforeValidator(_families)] = Field(
        default=tuple(sorted(TOKENIZER_FAMILIES)), description=(
            "The vendor tokenizers the tokenizer layer ships ('none': no layer, every "
            "connection counts with the byte estimator; docs/deploy.md \"Lambda code "
            "and layers\")"))
    dns_allowed_domains: Annotated[
        tuple[Annotated[str, StringConstraints(pattern=DOMAIN)], ...],
        BeforeValidator(_comma_list)] = Field(
        default=(), alias="dnsAllowedDomains", description=(
            "Domains the VPC may resolve beyond AWS's and the built-in model providers' "
            "(dns_firewall.py): openai_compatible base URLs, MCP servers"))
    state_machine_log_level: Literal["ALL", "ERROR", "FATAL", "OFF"] = Field(
        default="ERROR", alias="stateMachineLogLevel", description=(
            "Step Functions log level (ALL writes every history event to CloudWatch)"))
    user_pool_mfa: Literal["OFF", "OPTIONAL", "REQUIRED"] = Field(
        default="OPTIONAL", alias="userPoolMfa", description=(
            "MFA (TOTP) of the Cognito user pool"))
    otel_layer_arn: str | None = Field(default=None, alias="otelLayerArn",
                                       pattern=LAYER_ARN, description=(
                                           "The ADOT Python layer (arm64): the GenAI spans "
                                           "reach X-Ray"))

    console: Annotated[bool, BeforeValidator(_bool_text)] = Field(
        default=True, description=(
            "The web console: S3 + CloudFront, a Cognito hosted-UI domain and app client, "
            "CORS on the API for its origin (console.py); false leaves all of it out"))
    console_domain_prefix: str | None = Field(
        default=None, alias="consoleDomainPrefix", pattern=DOMAIN_PREFIX, description=(
            "The Cognito hosted UI's domain prefix (<prefix>.auth.<region>.amazoncognito"
            ".com); default agentloom-<stage>-<12 hex of the stack's id>"))

    @model_validator(mode="after")
    def _together(self) -> StageConfig:
        if bool(self.jwt_issuer) != bool(self.jwt_audience):
            raise ValueError("context 'jwtIssuer' and 'jwtAudience' go together")
        for key, name in (("sqsTrigger", self.sqs_trigger),
                          ("eventTrigger", self.event_trigger),
                          ("scheduleTrigger", self.schedule_trigger)):
            if name is not None and name not in self.triggers:
                raise ValueError(f"context {key!r} names {name!r}, which is not in "
                                 "'triggers'")
        if self.retain and self.max_azs is not None and self.max_azs < 2:
            raise ValueError("context 'maxAzs' must be at least 2 for a retained stage "
                             "(a NAT gateway and an EFS mount target per AZ; "
                             "-c retain=false for a disposable one)")
        if self.console and not self.jwt_issuer:
            domain, key = ((self.console_domain_prefix, "consoleDomainPrefix")
                           if self.console_domain_prefix else (self.prefix, "stage"))
            reserved = [w for w in COGNITO_RESERVED if w in domain]
            if reserved:
                raise ValueError(f"context {key!r} makes the Cognito domain prefix "
                                 f"{domain!r}, which may not contain {reserved[0]!r} "
                                 "(set consoleDomainPrefix, or -c console=false)")
        return self

    @property
    def prefix(self) -> str:
        return f"agentloom-{self.stage}"

    @property
    def retain(self) -> bool:
        """Whether the stage's data outlives the stack: context ``retain``, true unless a
        disposable stage opts out — never inferred from the stage's name."""
        return self.retain_data

    @property
    def reservations(self) -> dict[Function, int]:
        """Reserved concurrency per function: ``reservedConcurrency`` when given (``{}``:
        none), else ``DEFAULT_STEP_RESERVED`` for the step of a retained stage, so an
        API or trigger burst cannot take the concurrency the running runs need."""
        if self.reserved_concurrency is not None:
            return dict(self.reserved_concurrency)
        return {"step": DEFAULT_STEP_RESERVED} if self.retain else {}

    @property
    def azs(self) -> int:
        """The VPC's AZs: ``maxAzs``, else 2 for prod and 1 for any other stage."""
        return self.max_azs if self.max_azs is not None else (2 if self.retain else 1)

    @classmethod
    def keys(cls) -> list[str]:
        """The context keys this model reads."""
        return [field.alias or name for name, field in cls.model_fields.items()]

    @classmethod
    def from_context(cls, node: Node) -> StageConfig:
        values = {key: node.try_get_context(key) for key in cls.keys()}
        try:
            return cls.model_validate({k: v for k, v in values.items()
                                       if v is not None and v != ""})
        except ValidationError as err:
            raise ConfigError(_message(err)) from None


def _message(err: ValidationError) -> str:
    """The first problem, naming its context key (and the trigger or function in it)."""
    error = err.errors()[0]
    if not error["loc"]:  # a rule across keys: its message names them
        return str(error["ctx"]["error"]) if "ctx" in error else error["msg"]
    key, *inner = (str(part) for part in error["loc"])
    if error["type"] == "value_error":  # one of the validators above
        return f"context {key!r} {error['ctx']['error']}"
    if inner and key in _EXPECTED_ENTRY:
        return f"context {key!r}[{inner[0]!r}] {_EXPECTED_ENTRY[key]}"
    where = f"context {key!r}"
    if inner:  # an item of a list
        return f"{where} {_EXPECTED.get(key, 'is invalid')}"
    got = error.get("input")
    shown = f", got {str(got)[:80]!r}" if isinstance(got, str | int) else ""
    return f"{where} {_EXPECTED.get(key, 'is invalid')}{shown}"
