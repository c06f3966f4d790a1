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
from agentloom_infra.config import DEFAULT_STEP_RESERVED, ConfigError, StageConfig

DEPLOY_MD = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
TRIGGER = {"space_id": "spc_1", "agent_id": "agt_1", "version": "3", "user_id": "svc",
           "question": "Report on {detail}"}


def config(**context: Any) -> StageConfig:
    return StageConfig.from_context(cdk.App(context=context).node)


def test_no_context_is_the_dev_stage_and_it_retains_its_data() -> None:
    dev = config()
    assert (dev.stage, dev.prefix, dev.retain) == ("dev", "agentloom-dev", True)
    assert (dev.rollover_cycles, dev.azs, dev.triggers, dev.jwt_audience) == \
        (500, 2, {}, ())
    assert dev.memory_mb == {}  # functions.MEMORY_MB applies
    assert (dev.state_machine_log_level, dev.user_pool_mfa, dev.dns_allowed_domains) == \
        ("ERROR", "OPTIONAL", ())


@pytest.mark.parametrize("stage", ["prod", "production", "prod-eu", "dev", "staging"])
def test_every_stage_retains_unless_it_opts_out(stage: str) -> None:
    """Retention is the context value ``retain``, never the stage's name."""
    kept = config(stage=stage)
    assert kept.retain and kept.azs == 2
    assert kept.reservations == {"step": DEFAULT_STEP_RESERVED}
    for opted_out in (config(stage=stage, retain=False), config(stage=stage, retain="false"),
                      config(stage=stage, retain="False")):
        assert not opted_out.retain and opted_out.azs == 1
        assert opted_out.reservations == {}  # a disposable stage reserves nothing
    assert config(stage=stage, retain="true") == kept


def test_reserved_concurrency_replaces_the_default_and_empty_reserves_none() -> None:
    assert config(reservedConcurrency='{"trigger": 5}').reservations == {"trigger": 5}
    assert config(reservedConcurrency="{}").reservations == {}
    assert config(retain="false", reservedConcurrency={"step": 8}).reservations == {"step": 8}


def test_one_az_when_disposable_two_when_retained_unless_maxazs_says() -> None:
    assert (config(retain="false").azs, config(stage="prod").azs) == (1, 2)
    assert (config(retain="false", maxAzs="2").azs, config(stage="prod", maxAzs=3).azs) == \
        (2, 3)


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
    assert config(retain="false") == config(retain=False)
    assert (text.memory_mb, text.azs) == ({"step": 640}, 3)


def test_tokenizers_name_families_or_none() -> None:
    assert config().tokenizers == ("deepseek", "openai")
    assert config(tokenizers="openai").tokenizers == ("openai",)
    assert config(tokenizers="openai,deepseek,openai") == config(tokenizers=["deepseek",
                                                                             "openai"])
    assert config(tokenizers="none").tokenizers == ()


def test_dns_domains_read_as_a_comma_separated_list() -> None:
    assert config(dnsAllowedDomains="mcp.example.com,*.models.example.org") == \
        config(dnsAllowedDomains=["mcp.example.com", "*.models.example.org"])
    assert config(dnsAllowedDomains="mcp.example.com").dns_allowed_domains == \
        ("mcp.example.com",)


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
    ({"stage": "prod", "maxAzs": 1}, "context 'maxAzs' must be at least 2 for a retained"),
    ({"maxAzs": 1}, "context 'maxAzs' must be at least 2 for a retained stage"),
    ({"retain": "yes"}, "context 'retain' must be true or false"),
    ({"retain": 0}, "context 'retain' must be true or false"),
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
    ({"dnsAllowedDomains": "mcp.example.com,Evil..com"}, "context 'dnsAllowedDomains'"),
    ({"dnsAllowedDomains": "*"}, "context 'dnsAllowedDomains' must be comma-separated"),
    ({"stateMachineLogLevel": "DEBUG"}, "context 'stateMachineLogLevel' must be one of"),
    ({"userPoolMfa": "required"}, "context 'userPoolMfa' must be one of OFF"),
    ({"triggers": {"t": TRIGGER}, "scheduleTrigger": "u"},
     "context 'scheduleTrigger' names 'u', which is not in 'triggers'"),
    ({"console": "yes"}, "context 'console' must be true or false"),
    ({"consoleDomainPrefix": "Team_Console"}, "context 'consoleDomainPrefix' must be lowercase"),
    ({"consoleDomainPrefix": "-team"}, "context 'consoleDomainPrefix' must be lowercase"),
    ({"stage": "aws-test"}, "context 'stage' makes the Cognito domain prefix "
     "'agentloom-aws-test', which may not contain 'aws'"),
    ({"consoleDomainPrefix": "team-cognito"}, "context 'consoleDomainPrefix' makes the "
     "Cognito domain prefix 'team-cognito', which may not contain 'cognito'"),
])
def test_a_bad_value_is_refused_naming_its_key(context: dict[str, Any],
                                               message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config(**context)
    assert message in str(refused.value)


def test_the_console_is_on_unless_turned_off() -> None:
    assert config().console and config(console="true") == config()
    assert not config(console="false").console and config(console=False) == \
        config(console="False")
    assert config().console_domain_prefix is None
    assert config(consoleDomainPrefix="team-console-7").console_domain_prefix == \
        "team-console-7"
    # a stage name Cognito refuses in a domain needs its own prefix, or no console domain
    for fine in ({"consoleDomainPrefix": "team-x"}, {"console": "false"},
                 {"jwtIssuer": "https://i/", "jwtAudience": "a"}):
        assert config(stage="aws-test", **fine).stage == "aws-test"


def test_keys_outside_the_model_are_not_read() -> None:
    """CDK's own feature flags and bundling switches live in the same context."""
    assert config(**{"@aws-cdk/core:checkSecretUsage": True,
                     "aws:cdk:bundling-stacks": []}) == config()


def test_docs_list_every_context_key() -> None:
    section = DEPLOY_MD.read_text().split("### Context values", 1)[1].split("\n## ", 1)[0]
    documented = {key for row in re.findall(r"^\| (`[^|]+)\|", section, re.M)
                  for key in re.findall(r"`([A-Za-z]+)`", row)}
    assert documented == set(StageConfig.keys())
