"""cdk-nag and cfn-lint on the synthesized template; a second stage's variant synth
(prod, an existing JWT issuer, EventBridge and Scheduler triggers); context errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from agentloom_infra import ConfigError, build_app
from aws_cdk.assertions import Match, Template

TRIGGERS = {"nightly": {"space_id": "spc_1", "agent_id": "agt_1", "version": "3",
                        "user_id": "usr_service", "question": "Report on {detail}"}}
# A stage named neither "prod" nor "dev", with no retain value: it retains (the default).
PROD = {"aws:cdk:bundling-stacks": [], "stage": "prod-eu",
        "jwtIssuer": "https://issuer.example.com/", "jwtAudience": "agentloom,cli",
        "sandboxImage": "123456789012.dkr.ecr.us-east-1.amazonaws.com/sbx:1",
        "triggers": json.dumps(TRIGGERS), "sqsTrigger": "nightly",
        "eventTrigger": "nightly", "eventPattern": json.dumps({"source": ["acme.orders"]}),
        "scheduleTrigger": "nightly", "scheduleCron": "cron(0 3 * * ? *)",
        "reservedConcurrency": json.dumps({"step": 50, "trigger": 5}),
        "memoryMb": json.dumps({"step": 640, "api": 384}),
        "stateMachineLogLevel": "ALL", "dnsAllowedDomains": "mcp.example.com,*.llm.example",
        "powertoolsLayerArn": "arn:aws:lambda:eu-west-1:123456789012:layer:pt-mirror:4",
        "otelLayerArn": "arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-python-arm64:1"}


@pytest.fixture(scope="module")
def prod():
    # A concrete environment: cdk-nag ids then carry a literal region and account.
    app = cdk.App(context=PROD)
    env = cdk.Environment(account="123456789012", region="eu-west-1")
    return Template.from_stack(build_app(app, env=env))


def test_nag_runs_on_the_app_and_every_finding_is_acknowledged(synthesized, tmp_path):
    # The fixture's synth ran AwsSolutions (Template.from_stack raises ValidationFailed
    # on any unacknowledged finding); a new unacknowledged finding fails the same way.
    app = cdk.App(context={"aws:cdk:bundling-stacks": [], "stage": "nag",
                           "userPoolMfa": "REQUIRED"}, outdir=str(tmp_path))
    stack = build_app(app)
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_sqs as sqs

    sqs.Queue(stack, "Plain")  # no SSL enforcement, no DLQ: SQS3/SQS4
    # A new Resource "*" on a role whose other "*" actions are acknowledged (on its
    # unscoped policy, never on the role) is a finding of its own
    stack.functions.step.add_to_role_policy(iam.PolicyStatement(
        actions=["s3:GetObject"], resources=["*"]))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    # (CDK's own "CloudFormation Validate" report comes with it: none of its findings)
    (nag,) = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert not [v for r in report["pluginReports"] for v in r["violations"]
                if r is not nag]
    found = {(v["ruleName"], c["constructPath"]) for v in nag["violations"]
             for c in v["violatingConstructs"]}
    # Only the new queue's findings: everything else stays acknowledged.
    assert found == {("AwsSolutions-SQS3", "AgentLoom-nag/Plain/Resource"),
                     ("AwsSolutions-SQS4", "AgentLoom-nag/Plain/Resource"),
                     ("AwsSolutions-IAM5[Resource::*]",
                      "AgentLoom-nag/Functions/StepRole/DefaultPolicy/Resource")}
    assert nag["suppressedViolations"]  # the acknowledgements are visible in the report
    # userPoolMfa=REQUIRED: the pool requires TOTP, and COG2 passes unacknowledged
    from aws_cdk import aws_cognito as cognito

    assert stack.http.user_pool is not None
    pool = stack.http.user_pool.node.default_child
    assert isinstance(pool, cognito.CfnUserPool)
    assert (pool.mfa_configuration, pool.enabled_mfas) == ("ON", ["SOFTWARE_TOKEN_MFA"])


def test_cfn_lint_finds_no_errors(synthesized, tmp_path):
    path = tmp_path / "template.json"
    path.write_text(json.dumps(synthesized.template))
    cfn_lint = str(Path(sys.executable).parent / "cfn-lint")
    done = subprocess.run([cfn_lint, "--format", "json",
                           "--regions", "us-east-1", "--ignore-checks", "W3005",
                           "--", str(path)], capture_output=True, text=True, check=False)
    findings = json.loads(done.stdout or "[]")
    errors = [f for f in findings if f["Level"] == "Error"]
    assert errors == [], errors
    assert done.returncode in (0, 4), done.stderr  # 4 = warnings only


def test_prod_retains_data_and_uses_a_nat_per_az(prod):
    prod.has_resource("AWS::DynamoDB::Table", {"DeletionPolicy": "Retain",
                                               "UpdateReplacePolicy": "Retain"})
    prod.has_resource_properties("AWS::DynamoDB::Table", {"DeletionProtectionEnabled": True})
    prod.resource_count_is("AWS::EC2::NatGateway", 2)
    prod.resource_count_is("AWS::EC2::Subnet", 6)  # 2 AZs × public, lambda, sandbox
    prod.resource_count_is("AWS::EFS::MountTarget", 2)
    prod.has_resource("AWS::KMS::Key", {"DeletionPolicy": "Retain"})


def test_prod_puts_the_sandbox_endpoints_in_each_az(prod):
    endpoints = prod.find_resources("AWS::EC2::VPCEndpoint",
                                    {"Properties": {"VpcEndpointType": "Interface"}})
    assert len(endpoints) == 3
    assert {len(e["Properties"]["SubnetIds"]) for e in endpoints.values()} == {2}


def test_state_machine_log_level_from_context(prod, synthesized):
    def level(template):
        (machine,) = template.find_resources("AWS::StepFunctions::StateMachine").values()
        return machine["Properties"]["LoggingConfiguration"]
    default = level(synthesized.assertions)
    assert (default["Level"], default["IncludeExecutionData"]) == ("ERROR", False)
    assert level(prod)["Level"] == "ALL"


def test_dns_allowed_domains_from_context(prod):
    prod.has_resource_properties("AWS::Route53Resolver::FirewallDomainList", {
        "Domains": Match.array_with(["*.llm.example", "api.openai.com", "mcp.example.com"])})


def test_user_pool_mfa_is_optional_totp_by_default(synthesized):
    synthesized.assertions.has_resource_properties("AWS::Cognito::UserPool", {
        "MfaConfiguration": "OPTIONAL", "EnabledMfas": ["SOFTWARE_TOKEN_MFA"]})


def test_memory_per_function_from_context(prod):
    from agentloom_infra.functions import MEMORY_MB

    for name, size in (("step", 640), ("api", 384), ("trigger", MEMORY_MB["trigger"])):
        prod.has_resource_properties("AWS::Lambda::Function", {
            "Handler": f"agentloom.handlers.{name}.handler", "MemorySize": size})


def test_prod_at_rest_cost_is_the_documented_one(prod):
    from support.at_rest import documented_totals, monthly, total

    assert total(monthly(prod.to_json())) == documented_totals()["prod"]


def test_reserved_concurrency_from_context(prod):
    prod.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "agentloom.handlers.step.handler", "ReservedConcurrentExecutions": 50})
    prod.has_resource_properties("AWS::Lambda::Function", {
        "Handler": "agentloom.handlers.api.handler",
        "ReservedConcurrentExecutions": Match.absent()})


def test_powertools_layer_arn_from_context(prod):
    for handler in ("api", "step", "trigger"):
        prod.has_resource_properties("AWS::Lambda::Function", {
            "Handler": f"agentloom.handlers.{handler}.handler",
            "Layers": Match.array_with([PROD["powertoolsLayerArn"]])})


def test_the_adot_layer_from_context_exports_the_genai_spans(prod):
    for handler in ("api", "step", "trigger"):
        prod.has_resource_properties("AWS::Lambda::Function", {
            "Handler": f"agentloom.handlers.{handler}.handler",
            "Layers": Match.array_with([PROD["otelLayerArn"]]),
            "Environment": {"Variables": Match.object_like(
                {"AWS_LAMBDA_EXEC_WRAPPER": "/opt/otel-instrument"})}})


def test_without_an_adot_layer_no_exec_wrapper_is_set(synthesized):
    for handler in ("api", "step", "trigger"):
        env = synthesized.function_env(f"agentloom.handlers.{handler}.handler")
        assert "AWS_LAMBDA_EXEC_WRAPPER" not in env


def test_existing_issuer_replaces_cognito(prod):
    prod.resource_count_is("AWS::Cognito::UserPool", 0)
    prod.has_resource_properties("AWS::ApiGatewayV2::Authorizer", {"JwtConfiguration": {
        "Issuer": "https://issuer.example.com/", "Audience": ["agentloom", "cli"]}})


def test_with_an_existing_issuer_the_console_takes_a_token_and_no_cognito(prod):
    # no user pool, so no console client or domain: config.json says kind "token"
    prod.resource_count_is("AWS::Cognito::UserPoolDomain", 0)
    prod.resource_count_is("AWS::CloudFront::Distribution", 1)
    (policy,) = prod.find_resources("AWS::CloudFront::ResponseHeadersPolicy").values()
    _, parts = policy["Properties"]["ResponseHeadersPolicyConfig"][
        "SecurityHeadersConfig"]["ContentSecurityPolicy"]["ContentSecurityPolicy"]["Fn::Join"]
    csp = "".join(p if isinstance(p, str) else f"<{p['Ref']}>" for p in parts)
    assert "amazoncognito" not in csp and csp.endswith("; form-action 'self'")
    assert "; connect-src 'self' https://*.execute-api.eu-west-1.<AWS::URLSuffix>;" in csp
    (api,) = prod.find_resources("AWS::ApiGatewayV2::Api").values()
    assert len(api["Properties"]["CorsConfiguration"]["AllowOrigins"]) == 1
    # the log bucket is kept with the stage; the site bucket is rebuilt by every deploy
    buckets = prod.find_resources("AWS::S3::Bucket")
    assert sorted(b["DeletionPolicy"] for b in buckets.values()) == ["Delete", "Retain"]


def test_existing_sandbox_image_is_used_as_is(prod):
    prod.has_resource_properties("AWS::ECS::TaskDefinition", {"ContainerDefinitions": [
        Match.object_like({"Image": PROD["sandboxImage"]})]})
    prod.has_resource_properties("AWS::Lambda::Function", {"Environment": {"Variables":
        Match.object_like({"AGENTLOOM_SANDBOX_IMAGE": PROD["sandboxImage"]})}})


def test_triggers_carry_their_name_and_an_idempotency_id(prod):
    prod.has_resource_properties("AWS::Events::Rule", {
        "EventPattern": {"source": ["acme.orders"]},
        "Targets": [Match.object_like({"InputTransformer": Match.object_like({
            "InputPathsMap": {"id": "$.id", "detail": "$.detail"},
            "InputTemplate": Match.string_like_regexp('"trigger":"nightly"')})})]})
    prod.has_resource_properties("AWS::Scheduler::Schedule", {
        "ScheduleExpression": "cron(0 3 * * ? *)", "FlexibleTimeWindow": {"Mode": "OFF"},
        "Target": Match.object_like({"Input": Match.string_like_regexp(
            "aws.scheduler.execution-id")})})
    prod.has_resource_properties("AWS::Lambda::Function", {"Environment": {"Variables":
        Match.object_like({"AGENTLOOM_SQS_TRIGGER": "nightly",
                           "AGENTLOOM_TRIGGERS": json.dumps(TRIGGERS, sort_keys=True)})}})


@pytest.mark.parametrize(("context", "names"), [
    ({"stage": "Prod!"}, "'stage'"),
    ({"jwtIssuer": "https://x/"}, "'jwtIssuer' and 'jwtAudience'"),
    ({"jwtIssuer": "http://x/", "jwtAudience": "a"}, "https://"),
    ({"eventPattern": "{not json"}, "'eventPattern' is not valid JSON"),
    ({"scheduleCron": "0 3 * * *"}, "'scheduleCron'"),
    ({"triggers": json.dumps({"t": {"space_id": "s"}})}, "'triggers'['t']"),
    ({"sqsTrigger": "missing"}, "'sqsTrigger' names 'missing'"),
    ({"rolloverCycles": "50000"}, "'rolloverCycles' must be within"),
    ({"reservedConcurrency": json.dumps({"worker": 3})}, "'reservedConcurrency'"),
    ({"memoryMb": json.dumps({"step": 64})}, "'memoryMb'['step']"),
    ({"stage": "prod", "maxAzs": "1"}, "'maxAzs' must be at least 2 for a retained stage"),
    ({"retain": "no"}, "'retain' must be true or false"),
    ({"powertoolsLayerArn": "arn:aws:lambda:eu-west-1:1:layer:pt"}, "'powertoolsLayerArn'"),
])
def test_bad_context_is_refused_naming_the_key(context, names):
    app = cdk.App(context={"aws:cdk:bundling-stacks": [], **context})
    with pytest.raises(ConfigError) as error:
        build_app(app)
    assert names in str(error.value)


# The prod-eu variant: retained by default (no "retain" in PROD), a rule and a schedule.


def test_a_stage_not_named_prod_retains_every_data_store_by_default(prod):
    # (no user pool here: an existing issuer; test_stack covers the pool's protection)
    for kind in ("AWS::DynamoDB::Table", "AWS::KMS::Key", "AWS::EFS::FileSystem",
                 "AWS::S3Vectors::VectorBucket", "AWS::Logs::LogGroup"):
        found = prod.find_resources(kind)
        assert found, kind
        assert {r.get("DeletionPolicy") for r in found.values()} == {"Retain"}, kind
    tables = prod.find_resources("AWS::DynamoDB::Table")
    assert all(t["Properties"]["DeletionProtectionEnabled"] for t in tables.values())
    prod.has_resource_properties("AWS::EFS::FileSystem", {  # EFS automatic backups
        "BackupPolicy": {"Status": "ENABLED"}})


def _queue_arn_of(template, name):
    (lid,) = [lid for lid, q in template.find_resources("AWS::SQS::Queue").items()
              if q["Properties"].get("QueueName") == name]
    return {"Fn::GetAtt": [lid, "Arn"]}


def test_rule_and_schedule_targets_and_async_failures_reach_an_encrypted_dlq(prod):
    failures = _queue_arn_of(prod, "agentloom-prod-eu-trigger-failures")
    prod.has_resource_properties("AWS::SQS::Queue", {
        "QueueName": "agentloom-prod-eu-trigger-failures",
        "KmsMasterKeyId": Match.any_value()})
    prod.has_resource_properties("AWS::Events::Rule", {"Targets": [Match.object_like({
        "DeadLetterConfig": {"Arn": failures},
        "RetryPolicy": {"MaximumRetryAttempts": 4, "MaximumEventAgeInSeconds": 21600}})]})
    prod.has_resource_properties("AWS::Scheduler::Schedule", {"Target": Match.object_like({
        "DeadLetterConfig": {"Arn": failures}})})
    prod.has_resource_properties("AWS::Lambda::EventInvokeConfig", {
        "MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 21600,
        "DestinationConfig": {"OnFailure": {"Destination": failures}}})
    # EventBridge writes dead letters with its own principal: the queue policy and the key
    prod.has_resource_properties("AWS::SQS::QueuePolicy", {"PolicyDocument": {
        "Statement": Match.array_with([Match.object_like({
            "Action": "sqs:SendMessage", "Principal": {"Service": "events.amazonaws.com"}})])}})
    prod.has_resource_properties("AWS::KMS::Key", {"KeyPolicy": {"Statement":
        Match.array_with([Match.object_like({
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": ["kms:Decrypt", "kms:GenerateDataKey"]})])}})


def test_the_schedule_role_may_write_only_to_the_failures_queue_and_its_key(prod):
    roles = [lid for lid, r in prod.find_resources("AWS::IAM::Role").items()
             if "scheduler.amazonaws.com" in json.dumps(r["Properties"]
                                                        ["AssumeRolePolicyDocument"])]
    (role,) = roles
    statements = [s for p in prod.find_resources("AWS::IAM::Policy").values()
                  if {"Ref": role} in p["Properties"]["Roles"]
                  for s in p["Properties"]["PolicyDocument"]["Statement"]]
    actions = {a for s in statements for a in
               ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert actions == {"lambda:InvokeFunction", "sqs:SendMessage", "kms:GenerateDataKey",
                       "kms:Decrypt"}


def test_a_retained_stage_alarms_on_errors_throttles_5xx_and_table_throttles(prod):
    alarms = {a["Properties"]["AlarmName"].removeprefix("agentloom-prod-eu-"): a["Properties"]
              for a in prod.find_resources("AWS::CloudWatch::Alarm").values()}
    assert set(alarms) == {
        "FailedExecutions", "DeadLetters", "UnknownOutcomes", "StepErrors",
        "TriggerFailures", "ApiErrors", "TriggerErrors", "ApiThrottles", "StepThrottles",
        "TriggerThrottles", "Api5xx", "TableThrottles"}
    for name in ("ApiThrottles", "StepThrottles", "TriggerThrottles"):
        assert alarms[name]["MetricName"] == "Throttles"
    assert (alarms["Api5xx"]["Namespace"], alarms["Api5xx"]["MetricName"]) == \
        ("AWS/ApiGateway", "5xx")
    assert alarms["TriggerFailures"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
    read = [m for m in alarms["TableThrottles"]["Metrics"] if "MetricStat" in m]
    assert sorted({m["MetricStat"]["Metric"]["MetricName"] for m in read}) == [
        "ReadThrottleEvents", "WriteThrottleEvents"] and len(read) == 6
    for alarm in alarms.values():  # every alarm notifies and names its way out
        assert alarm["AlarmActions"] and "docs/operations.md" in alarm["AlarmDescription"]


def test_a_retained_stage_keeps_its_vector_indexes(prod):
    prod.resource_count_is("Custom::VectorBucketTeardown", 0)
