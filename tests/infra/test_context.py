"""``StageConfig``, the stack's context as one pydantic model: the forms the CDK CLI
passes (text) and cdk.json holds (JSON values) read alike, a bad value is refused naming
its key (and the trigger or function inside it), and docs/deploy.md lists every key.
Nothing is synthesized here: the model reads an app's context node."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from agentloom_infra.config import ConfigError, StageConfig

DEPLOY_MD = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
TRIGGER = {"space_id": "spc_1", "agent_id": "agt_1", "version": "3", "user_id": "svc",
           "question": "Report on {detail}"}


def config(**context: Any) -> StageConfig:
    return StageConfig.from_context(cdk.App(context=context).node)


def test_no_context_is_the_dev_stage() -> None:
    dev = config()
    assert (dev.stage, dev.prefix, dev.retain) == ("dev", "agentloom-dev", False)
    assert (dev.rollover_cycles, dev.azs, dev.triggers, dev.jwt_audience) == \
        (500, 1, {}, ())
    assert dev.memory_mb == {}  # functions.MEMORY_MB applies


def test_one_az_outside_prod_two_in_prod_unless_maxazs_says() -> None:
    assert (config().azs, config(stage="prod").azs) == (1, 2)
    assert (config(maxAzs="2").azs, config(stage="prod", maxAzs=3).azs) == (2, 3)


def test_cli_text_and_cdk_json_values_read_alike() -> None:
    text = config(stage="prod", rolloverCycles="40", maxAzs="3", jwtIssuer="https://i/",
                  jwtAudience="a,b", triggers=json.dumps({"t": TRIGGER}),
                  reservedConcurrency='{"step": 5}', eventPattern='{"source": ["x"]}',
                  eventTrigger="t", memoryMb='{"step": 640}')
    values = config(stage="prod", rolloverCycles=40, maxAzs=3, jwtIssuer="https://i/",
                    jwtAudience=["a", "b"], triggers={"t": TRIGGER},
                    reservedConcurrency={"step": 5}, eventPattern={"source": ["x"]},
                    eventTrigger="t", memoryMb={"step": 640})
    assert text == values
    assert (text.rollover_cycles, text.jwt_audience, text.reserved_concurrency) == \
        (40, ("a", "b"), {"step": 5})
    assert text.retain and text.triggers == {"t": TRIGGER}
    assert (text.memory_mb, text.azs) == ({"step": 640}, 3)


def test_tokenizers_name_families_or_none() -> None:
    assert config().tokenizers == ("deepseek", "openai")
    assert config(tokenizers="openai").tokenizers == ("openai",)
    assert config(tokenizers="openai,deepseek,openai") == config(tokenizers=["deepseek",
                                                                             "openai"])
    assert config(tokenizers="none").tokenizers == ()


def test_an_empty_value_takes_the_default() -> None:
    assert config(stage="", sandboxImage="", powertoolsLayerArn="") == config()


@pytest.mark.parametrize(("context", "message"), [
    ({"stage": "a" * 17}, "context 'stage' must be lowercase"),
    ({"stage": 7}, "context 'stage' must be lowercase"),  # no coercion of a number
    ({"rolloverCycles": "lots"}, "context 'rolloverCycles' must be within 10..3000"),
    ({"rolloverCycles": 9}, "context 'rolloverCycles' must be within 10..3000"),
    ({"rolloverCycles": True}, "context 'rolloverCycles' must be within"),
    ({"maxAzs": "2.5"}, "context 'maxAzs' must be within 1..3"),
    ({"maxAzs": 4}, "context 'maxAzs' must be within 1..3"),
    ({"stage": "prod", "maxAzs": 1}, "context 'maxAzs' must be at least 2 for stage 'prod'"),
    ({"memoryMb": {"step": 127}}, "context 'memoryMb'['step'] must be one of"),
    ({"memoryMb": {"worker": 512}}, "context 'memoryMb'['worker'] must be one of"),
    ({"memoryMb": '{"step": "512"}'}, "context 'memoryMb'['step']"),
    ({"eventPattern": "[1, 2]"}, "context 'eventPattern' must be a JSON object"),
    ({"triggers": "[]"}, "context 'triggers' must be a JSON object"),
    ({"triggers": {"t": {**TRIGGER, "extra": "x"}}}, "context 'triggers'['t'] needs exactly"),
    ({"triggers": {"t": {**TRIGGER, "version": 3}}}, "context 'triggers'['t'] needs exactly"),
    ({"triggers": {"t": {**TRIGGER, "question": ""}}}, "context 'triggers'['t']"),
    ({"reservedConcurrency": {"step": 0}}, "context 'reservedConcurrency'['step']"),
    ({"reservedConcurrency": {"step": True}}, "context 'reservedConcurrency'['step']"),
    ({"reservedConcurrency": '{"step": 5'}, "context 'reservedConcurrency' is not valid JSON"),
    ({"jwtIssuer": "https://i/", "jwtAudience": "a,,b"}, "context 'jwtAudience'"),
    ({"jwtAudience": "a"}, "context 'jwtIssuer' and 'jwtAudience' go together"),
    ({"scheduleCron": "rate(1 day) and more)"}, "context 'scheduleCron'"),
    ({"otelLayerArn": "arn:aws:lambda:eu-west-1:1:function:x"}, "context 'otelLayerArn'"),
    ({"tokenizers": "openai,llama"}, "context 'tokenizers' must be 'none' or"),
    ({"tokenizers": "none,openai"}, "context 'tokenizers' must be 'none' or"),
    ({"triggers": {"t": TRIGGER}, "scheduleTrigger": "u"},
     "context 'scheduleTrigger' names 'u', which is not in 'triggers'"),
])
def test_a_bad_value_is_refused_naming_its_key(context: dict[str, Any],
                                               message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config(**context)
    assert message in str(refused.value)


def test_keys_outside_the_model_are_not_read() -> None:
    """CDK's own feature flags and bundling switches live in the same context."""
    assert config(**{"@aws-cdk/core:checkSecretUsage": True,
                     "aws:cdk:bundling-stacks": []}) == config()


def test_docs_list_every_context_key() -> None:
    section = DEPLOY_MD.read_text().split("### Context values", 1)[1].split("\n## ", 1)[0]
    documented = {key for row in re.findall(r"^\| (`[^|]+)\|", section, re.M)
                  for key in re.findall(r"`([A-Za-z]+)`", row)}
    assert documented == set(StageConfig.keys())
