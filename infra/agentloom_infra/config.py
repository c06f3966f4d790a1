"""``StageConfig``: every deploy-time choice, read once from CDK context (docs/deploy.md).

Context values (``cdk deploy -c stage=prod -c jwtIssuer=…``): ``stage`` (default ``dev``;
``prod`` retains data on stack deletion), ``sandboxImage`` (an existing image URI instead
of building infra/sandbox/Dockerfile), ``jwtIssuer`` + ``jwtAudience`` (an existing OIDC
issuer instead of the Cognito user pool), ``eventPattern`` (JSON EventBridge pattern),
``scheduleCron`` (an EventBridge Scheduler ``cron(...)`` body), ``triggers`` (JSON: trigger
name → {space_id, agent_id, version, user_id, question}), ``sqsTrigger``, ``eventTrigger``,
``scheduleTrigger`` (the trigger names each source uses), ``rolloverCycles``, ``maxAzs``,
``reservedConcurrency`` (JSON: function name → reserved concurrent executions; none by
default, since an account whose concurrency limit is still 10 rejects any reservation),
``powertoolsLayerArn`` (a Powertools v3 python3.12 arm64 layer version ARN instead of the
public one in the stack's region: another partition, a pinned or private copy).
A malformed value raises ``ConfigError`` naming the key, before anything is synthesized.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from constructs import Node

STAGE_RE = re.compile(r"^[a-z][a-z0-9-]{0,15}$")
LAYER_ARN_RE = re.compile(r"^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:layer:[A-Za-z0-9_-]+:\d+$")
TRIGGER_KEYS = frozenset({"space_id", "agent_id", "version", "user_id", "question"})


class ConfigError(ValueError):
    """A context value is missing or malformed; the message names the key."""


def _json(node: Node, key: str, default: Any) -> Any:
    raw = node.try_get_context(key)
    if raw is None:
        return default
    if not isinstance(raw, str):
        return raw  # cdk.json may hold the value as JSON already
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"context {key!r} is not valid JSON: {exc}") from None


def _int(node: Node, key: str, default: int, low: int, high: int) -> int:
    raw = node.try_get_context(key)
    try:
        value = default if raw is None else int(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"context {key!r} must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise ConfigError(f"context {key!r} must be within {low}..{high}, got {value}")
    return value


FUNCTIONS = frozenset({"api", "step", "trigger"})


def _reserved(node: Node) -> dict[str, int]:
    reserved = _json(node, "reservedConcurrency", {})
    if not isinstance(reserved, dict) or not set(reserved) <= FUNCTIONS or not all(
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 1000
            for v in reserved.values()):
        raise ConfigError("context 'reservedConcurrency' must map some of "
                          f"{sorted(FUNCTIONS)} to integers 1..1000")
    return reserved


def _triggers(node: Node) -> dict[str, dict[str, str]]:
    triggers = _json(node, "triggers", {})
    if not isinstance(triggers, dict):
        raise ConfigError("context 'triggers' must be a JSON object: name → definition")
    for name, spec in triggers.items():
        if not isinstance(spec, dict) or set(spec) != TRIGGER_KEYS or not all(
                isinstance(v, str) and v for v in spec.values()):
            raise ConfigError(f"context 'triggers'[{name!r}] needs exactly the string keys "
                              f"{sorted(TRIGGER_KEYS)}")
    return triggers


@dataclass(frozen=True, kw_only=True)
class StageConfig:
    stage: str = "dev"
    sandbox_image: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: tuple[str, ...] = ()
    event_pattern: dict[str, Any] | None = None
    schedule_cron: str | None = None
    triggers: dict[str, dict[str, str]] = field(default_factory=dict)
    sqs_trigger: str | None = None
    event_trigger: str | None = None
    schedule_trigger: str | None = None
    rollover_cycles: int = 500
    max_azs: int = 2
    reserved_concurrency: dict[str, int] = field(default_factory=dict)
    powertools_layer_arn: str | None = None
    otel_layer_arn: str | None = None

    @property
    def prefix(self) -> str:
        return f"agentloom-{self.stage}"

    @property
    def retain(self) -> bool:
        return self.stage == "prod"

    @classmethod
    def from_context(cls, node: Node) -> StageConfig:
        stage = str(node.try_get_context("stage") or "dev")
        if not STAGE_RE.match(stage):
            raise ConfigError(f"context 'stage' must match {STAGE_RE.pattern}, got {stage!r}")
        issuer = node.try_get_context("jwtIssuer")
        audience = node.try_get_context("jwtAudience")
        if bool(issuer) != bool(audience):
            raise ConfigError("context 'jwtIssuer' and 'jwtAudience' go together")
        if issuer and not str(issuer).startswith("https://"):
            raise ConfigError("context 'jwtIssuer' must be an https:// URL")
        pattern = _json(node, "eventPattern", None)
        if pattern is not None and not isinstance(pattern, dict):
            raise ConfigError("context 'eventPattern' must be a JSON object")
        cron = node.try_get_context("scheduleCron")
        if cron is not None and not re.fullmatch(r"cron\([^()]+\)|rate\([^()]+\)", str(cron)):
            raise ConfigError("context 'scheduleCron' must be 'cron(...)' or 'rate(...)'")
        triggers = _triggers(node)
        layer = node.try_get_context("powertoolsLayerArn")
        if layer is not None and not LAYER_ARN_RE.match(str(layer)):
            raise ConfigError("context 'powertoolsLayerArn' must be a layer version ARN "
                              "(arn:aws:lambda:<region>:<account>:layer:<name>:<version>)")
        otel = node.try_get_context("otelLayerArn")
        if otel is not None and not LAYER_ARN_RE.match(str(otel)):
            raise ConfigError("context 'otelLayerArn' must be a layer version ARN (the ADOT "
                              "Python layer for arm64 of your region)")
        names = {k: node.try_get_context(k) for k in
                 ("sqsTrigger", "eventTrigger", "scheduleTrigger")}
        for key, name in names.items():
            if name is not None and name not in triggers:
                raise ConfigError(f"context {key!r} names {name!r}, which is not in "
                                  "'triggers'")
        return cls(
            stage=stage, sandbox_image=node.try_get_context("sandboxImage") or None,
            jwt_issuer=issuer or None,
            jwt_audience=tuple(str(audience).split(",")) if audience else (),
            event_pattern=pattern, schedule_cron=str(cron) if cron else None,
            triggers=triggers, sqs_trigger=names["sqsTrigger"],
            event_trigger=names["eventTrigger"], schedule_trigger=names["scheduleTrigger"],
            rollover_cycles=_int(node, "rolloverCycles", 500, 10, 3000),
            max_azs=_int(node, "maxAzs", 2, 1, 3), reserved_concurrency=_reserved(node),
            powertools_layer_arn=str(layer) if layer is not None else None,
            otel_layer_arn=str(otel) if otel is not None else None)
