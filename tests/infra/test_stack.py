"""Property assertions on the synthesized stack, one group per construct (no logical ids:
resources are found by their properties, Match patterns)."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match

HANDLERS = {"api": "agentloom.handlers.api.handler",
            "step": "agentloom.handlers.step.handler",
            "trigger": "agentloom.handlers.trigger.handler"}
COMMON = {"AGENTLOOM_CHECKPOINT_TABLE", "AGENTLOOM_PLATFORM_TABLE", "AGENTLOOM_KMS_KEY_ID",
          "AGENTLOOM_STATE_MACHINE_ARN", "POWERTOOLS_SERVICE_NAME",
          "POWERTOOLS_METRICS_NAMESPACE", "AGENTLOOM_STAGE", "AGENTLOOM_VECTOR_BUCKET"}
STEP = {"AGENTLOOM_WORKSPACE_ROOT", "AGENTLOOM_EFS_FILE_SYSTEM_ID", "AGENTLOOM_EFS_ROOT_PATH",
        "AGENTLOOM_SANDBOX_CLUSTER", "AGENTLOOM_SANDBOX_FAMILY_PREFIX",
        "AGENTLOOM_SANDBOX_EXECUTION_ROLE_ARN", "AGENTLOOM_SANDBOX_TASK_ROLE_ARN",
        "AGENTLOOM_SANDBOX_IMAGE",
        "AGENTLOOM_SANDBOX_SUBNETS", "AGENTLOOM_SANDBOX_SECURITY_GROUP",
        "AGENTLOOM_SANDBOX_LOG_GROUP", "AGENTLOOM_SANDBOX_UID", "AGENTLOOM_SANDBOX_GID",
        "AGENTLOOM_ROLLOVER_CYCLES"}
TRIGGER = {"AGENTLOOM_IDEMPOTENCY_TABLE", "AGENTLOOM_TRIGGERS", "AGENTLOOM_SQS_TRIGGER"}


def _statements(synthesized, role_lid):
    out = []
    for policy in synthesized.of_type("AWS::IAM::Policy").values():
        if {"Ref": role_lid} in policy["Properties"]["Roles"]:
            out += policy["Properties"]["PolicyDocument"]["Statement"]
    return out


def _actions(statements):
    found = set()
    for s in statements:
        found |= set([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    return found


def _role_of(synthesized, handler):
    lid = synthesized.logical_id("AWS::Lambda::Function", Handler=handler)
    return synthesized.resources[lid]["Properties"]["Role"]["Fn::GetAtt"][0]


# DataStores


def test_tables_match_the_adapters_key_schemas_with_cmk_pitr_and_ttl(synthesized):
    key_schema = [{"AttributeName": "pk", "KeyType": "HASH"},
                  {"AttributeName": "sk", "KeyType": "RANGE"}]
    for name, ttl in (("agentloom-test-checkpoints", None), ("agentloom-test-platform", "ttl")):
        synthesized.assertions.has_resource_properties("AWS::DynamoDB::Table", {
            "TableName": name, "KeySchema": key_schema, "BillingMode": "PAY_PER_REQUEST",
            "SSESpecification": {"SSEEnabled": True, "SSEType": "KMS",
                                 "KMSMasterKeyId": Match.any_value()},
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "TimeToLiveSpecification": Match.absent() if ttl is None else {
                "AttributeName": ttl, "Enabled": True}})
    synthesized.assertions.has_resource_properties("AWS::DynamoDB::Table", {
        "TableName": "agentloom-test-idempotency",
        "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
        "TimeToLiveSpecification": {"AttributeName": "expiration", "Enabled": True}})
    synthesized.assertions.has_resource_properties("AWS::KMS::Key",
                                                   {"EnableKeyRotation": True})


def test_platform_ttl_attribute_is_the_stores(synthesized):
    from agentloom_infra.data_stores import PLATFORM_TTL_ATTRIBUTE

    from agentloom.platform.store.dynamodb import TTL_ATTRIBUTE

    assert PLATFORM_TTL_ATTRIBUTE == TTL_ATTRIBUTE


def test_non_prod_stage_destroys_data_on_delete(synthesized):
    synthesized.assertions.has_resource("AWS::DynamoDB::Table", {
        "DeletionPolicy": "Delete", "Properties": Match.object_like({
            "TableName": "agentloom-test-checkpoints"})})


# Network


def _endpoints(synthesized):
    """(service suffix, type) → the endpoint's properties."""
    found = {}
    for endpoint in synthesized.of_type("AWS::EC2::VPCEndpoint").values():
        props = endpoint["Properties"]
        # com.amazonaws.<region>.<service>: a Join of the prefix, the region and the suffix
        service = props["ServiceName"]["Fn::Join"][1][-1].removeprefix(".")
        found[(service, props.get("VpcEndpointType", "Gateway"))] = props
    return found


def _subnets(synthesized, tier):
    return {lid for lid, r in synthesized.of_type("AWS::EC2::Subnet").items()
            if {"Key": "aws-cdk:subnet-name", "Value": tier} in r["Properties"]["Tags"]}


def _route_tables(synthesized, subnets):
    return {a["Properties"]["RouteTableId"]["Ref"]
            for a in synthesized.of_type("AWS::EC2::SubnetRouteTableAssociation").values()
            if a["Properties"]["SubnetId"]["Ref"] in subnets}


def test_dev_stage_is_one_az_with_one_nat(synthesized):
    synthesized.assertions.has_resource_properties("AWS::EC2::VPC", {
        "EnableDnsHostnames": True, "EnableDnsSupport": True})
    for tier in ("public", "lambda", "sandbox"):
        assert len(_subnets(synthesized, tier)) == 1, tier
    synthesized.assertions.resource_count_is("AWS::EC2::NatGateway", 1)
    synthesized.assertions.resource_count_is("AWS::EC2::EIP", 1)
    synthesized.assertions.resource_count_is("AWS::EFS::MountTarget", 1)


def test_interface_endpoints_are_only_what_the_sandbox_needs_to_start(synthesized):
    # ECR (api + dkr) for a private image pull, logs for awslogs; no STS (no code path
    # calls it), and the Lambdas' KMS/Step Functions/ECS/EFS calls go through NAT.
    endpoints = _endpoints(synthesized)
    assert set(endpoints) == {("ecr.api", "Interface"), ("ecr.dkr", "Interface"),
                              ("logs", "Interface"), ("s3", "Gateway"),
                              ("dynamodb", "Gateway")}
    sandbox = _subnets(synthesized, "sandbox")
    for (_, kind), props in endpoints.items():
        if kind == "Interface":
            assert {s["Ref"] for s in props["SubnetIds"]} == sandbox
            assert props["PrivateDnsEnabled"] is True


def test_sandbox_subnets_route_only_locally_and_to_s3(synthesized):
    sandbox = _route_tables(synthesized, _subnets(synthesized, "sandbox"))
    lambdas = _route_tables(synthesized, _subnets(synthesized, "lambda"))
    routes = [r["Properties"] for r in synthesized.of_type("AWS::EC2::Route").values()]
    assert not [r for r in routes if r["RouteTableId"]["Ref"] in sandbox]  # no way out
    assert any("NatGatewayId" in r for r in routes if r["RouteTableId"]["Ref"] in lambdas)
    endpoints = _endpoints(synthesized)
    tables = {service: {t["Ref"] for t in props["RouteTableIds"]}
              for (service, kind), props in endpoints.items() if kind == "Gateway"}
    # S3 only for the sandbox's image layers (the Lambdas read no S3; their other S3
    # traffic leaves through NAT), DynamoDB only for the Lambdas
    assert tables == {"s3": sandbox, "dynamodb": lambdas}


def test_sandbox_security_group_egress_is_only_efs_endpoints_and_s3(synthesized):
    sg = next(lid for lid, r in synthesized.of_type("AWS::EC2::SecurityGroup").items()
              if "sandbox" in r["Properties"]["GroupDescription"])
    inline = synthesized.resources[sg]["Properties"]["SecurityGroupEgress"]
    assert [r["CidrIp"] for r in inline] == ["255.255.255.255/32"]  # default egress off
    rules = [r["Properties"] for r in synthesized.of_type("AWS::EC2::SecurityGroupEgress")
             .values() if r["Properties"]["GroupId"] == {"Fn::GetAtt": [sg, "GroupId"]}]
    assert sorted((r["FromPort"], r["ToPort"]) for r in rules) == [(443, 443), (443, 443),
                                                                    (2049, 2049)]
    assert all("CidrIp" not in r for r in rules)
    assert {"DestinationPrefixListId" in r for r in rules} == {True, False}


# Workspace


def test_efs_encrypted_with_a_posix_access_point(synthesized):
    synthesized.assertions.has_resource_properties("AWS::EFS::FileSystem", {
        "Encrypted": True, "KmsKeyId": Match.any_value()})
    synthesized.assertions.has_resource_properties("AWS::EFS::AccessPoint", {
        "PosixUser": {"Uid": "1000", "Gid": "1000"},
        "RootDirectory": {"Path": "/workspaces", "CreationInfo": {
            "OwnerUid": "1000", "OwnerGid": "1000", "Permissions": "750"}}})


# Functions


def test_functions_are_arm64_python312_traced_json_logged_in_the_vpc(synthesized):
    for handler in HANDLERS.values():
        synthesized.assertions.has_resource_properties("AWS::Lambda::Function", {
            "Handler": handler, "Runtime": "python3.12", "Architectures": ["arm64"],
            "TracingConfig": {"Mode": "Active"},
            "LoggingConfig": Match.object_like({"LogFormat": "JSON"}),
            "VpcConfig": Match.object_like({"SubnetIds": Match.any_value()}),
            "KmsKeyArn": Match.any_value()})
    synthesized.assertions.has_resource_properties("AWS::Lambda::Function", {
        "Handler": HANDLERS["step"], "FileSystemConfigs": [
            {"Arn": Match.any_value(), "LocalMountPath": "/mnt/workspaces"}]})
    synthesized.assertions.has_resource_properties("AWS::Lambda::Function", {
        "Handler": HANDLERS["api"], "FileSystemConfigs": Match.absent()})


def test_function_memory_is_the_measured_default(synthesized):
    from agentloom_infra.functions import MEMORY_MB

    for name, size in MEMORY_MB.items():
        lid = synthesized.logical_id("AWS::Lambda::Function", Handler=HANDLERS[name])
        assert synthesized.resources[lid]["Properties"]["MemorySize"] == size
    # the step waits on the model: at most 0.5 GB-s per second of that wait
    assert MEMORY_MB["step"] <= 512


def test_environment_is_exactly_the_contract(synthesized):
    env = {name: synthesized.function_env(h) for name, h in HANDLERS.items()}
    # the api deletes a deleted session's access points on the workspace file system and
    # asks the step function (which mounts it) to remove the session's files
    assert set(env["api"]) == COMMON | {"AGENTLOOM_EFS_FILE_SYSTEM_ID",
                                        "AGENTLOOM_STEP_FUNCTION_NAME"}
    assert env["api"]["AGENTLOOM_EFS_FILE_SYSTEM_ID"] == env["step"][
        "AGENTLOOM_EFS_FILE_SYSTEM_ID"]
    step_lid = synthesized.logical_id("AWS::Lambda::Function", Handler=HANDLERS["step"])
    assert env["api"]["AGENTLOOM_STEP_FUNCTION_NAME"] in (
        {"Ref": step_lid}, synthesized.resources[step_lid]["Properties"]["FunctionName"])
    assert set(env["step"]) == COMMON | STEP
    assert set(env["trigger"]) == COMMON | TRIGGER
    step = env["step"]
    assert step["AGENTLOOM_WORKSPACE_ROOT"] == "/mnt/workspaces"
    # = the root of the Lambda's access point, so session access points land where the
    # step writes (docs/deploy.md, "What the orchestration adds")
    (ap,) = synthesized.of_type("AWS::EFS::AccessPoint").values()
    assert step["AGENTLOOM_EFS_ROOT_PATH"] == ap["Properties"]["RootDirectory"]["Path"]
    assert step["AGENTLOOM_SANDBOX_FAMILY_PREFIX"] == "agentloom-test-sbx"
    assert step["AGENTLOOM_ROLLOVER_CYCLES"] == "500"
    assert (step["AGENTLOOM_SANDBOX_UID"], step["AGENTLOOM_SANDBOX_GID"]) == ("1000", "1000")
    assert env["api"]["POWERTOOLS_METRICS_NAMESPACE"] == "AgentLoom"
    assert json.loads(env["trigger"]["AGENTLOOM_TRIGGERS"]) == {}
    # The machine ARN is built from its fixed name, not a reference (no cycle).
    assert "agentloom-test-run" in json.dumps(env["step"]["AGENTLOOM_STATE_MACHINE_ARN"])


def test_step_role_may_set_up_per_session_sandboxes_and_nothing_broader(synthesized):
    statements = _statements(synthesized, _role_of(synthesized, HANDLERS["step"]))
    actions = _actions(statements)
    assert {"elasticfilesystem:CreateAccessPoint", "elasticfilesystem:TagResource",
            "ecs:RegisterTaskDefinition",
            "ecs:DescribeTaskDefinition", "ecs:StopTask", "ecs:ListTasks",
            "iam:PassRole"} <= actions
    (pass_role,) = [s for s in statements if s["Action"] == "iam:PassRole"]
    assert pass_role["Condition"] == {"StringEquals": {
        "iam:PassedToService": "ecs-tasks.amazonaws.com"}}
    passed = sorted(r["Fn::GetAtt"][0] for r in pass_role["Resource"])
    assert [p.startswith(("SandboxExecutionRole", "SandboxTaskRole")) for p in passed] == \
        [True, True] and passed[0] != passed[1]
    assert not any(a.startswith("states:") for a in actions)
    assert not any(a.endswith(":*") or a == "*" for a in actions)


def test_api_role_cancels_but_cannot_set_up_sandboxes(synthesized):
    actions = _actions(_statements(synthesized, _role_of(synthesized, HANDLERS["api"])))
    assert {"states:StartExecution", "states:StopExecution", "ecs:StopTask",
            "ecs:ListTasks"} <= actions
    assert not {"ecs:RegisterTaskDefinition", "iam:PassRole",
                "elasticfilesystem:CreateAccessPoint"} & actions


# CommandSandbox


def test_sandbox_task_is_hardened_and_its_task_role_only_mounts(synthesized):
    synthesized.assertions.has_resource_properties("AWS::ECS::TaskDefinition", {
        "Family": "agentloom-test-sbx-base", "RequiresCompatibilities": ["FARGATE"],
        "NetworkMode": "awsvpc", "Cpu": "1024", "Memory": "2048",
        "TaskRoleArn": Match.any_value(), "ExecutionRoleArn": Match.any_value(),
        "ContainerDefinitions": [Match.object_like({
            "Name": "command", "ReadonlyRootFilesystem": True, "User": "1000:1000",
            "Privileged": False,
            "EntryPoint": ["python", "-m", "agentloom.command_entry"],
            "LinuxParameters": Match.object_like({"Capabilities": {"Drop": ["ALL"]}}),
            "Ulimits": Match.array_with([{"Name": "nproc", "SoftLimit": 256,
                                          "HardLimit": 256}])})]})
    roles = [r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
             for r in synthesized.of_type("AWS::IAM::Role").values()]
    # the execution role and the task role (tests/infra/test_isolation.py: EFS mounts only)
    assert roles.count({"Service": "ecs-tasks.amazonaws.com"}) == 2
    synthesized.assertions.has_resource_properties("AWS::ECS::Cluster", {
        "ClusterSettings": [{"Name": "containerInsights", "Value": "enabled"}]})


# HttpApi


def test_http_api_jwt_authorized_throttled_and_logged(synthesized):
    synthesized.assertions.has_resource_properties("AWS::ApiGatewayV2::Authorizer", {
        "AuthorizerType": "JWT", "IdentitySource": ["$request.header.Authorization"],
        "JwtConfiguration": {"Audience": Match.any_value(), "Issuer": Match.any_value()}})
    synthesized.assertions.has_resource_properties("AWS::ApiGatewayV2::Route", {
        "RouteKey": "ANY /{proxy+}", "AuthorizationType": "JWT"})
    synthesized.assertions.has_resource_properties("AWS::ApiGatewayV2::Stage", {
        "StageName": "$default", "AutoDeploy": True,
        "DefaultRouteSettings": {"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100},
        "AccessLogSettings": {"DestinationArn": Match.any_value(),
                              "Format": Match.string_like_regexp(r"\$context\.requestId")}})
    synthesized.assertions.has_resource_properties("AWS::Cognito::UserPool", {
        "AdminCreateUserConfig": {"AllowAdminCreateUserOnly": True}})


# Triggers and Alarms


def test_queue_with_dlq_encrypted_tls_only_and_batch_failures(synthesized):
    synthesized.assertions.has_resource_properties("AWS::SQS::Queue", {
        "QueueName": "agentloom-test-triggers", "KmsMasterKeyId": Match.any_value(),
        "RedrivePolicy": {"deadLetterTargetArn": Match.any_value(), "maxReceiveCount": 5}})
    synthesized.assertions.has_resource_properties("AWS::SQS::QueuePolicy", {
        "PolicyDocument": {"Statement": Match.array_with([Match.object_like({
            "Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])}})
    synthesized.assertions.has_resource_properties("AWS::Lambda::EventSourceMapping", {
        "FunctionResponseTypes": ["ReportBatchItemFailures"], "BatchSize": 10})


def test_alarms_cover_failures_dlq_unknown_outcomes_and_step_errors(synthesized):
    names = {a["Properties"].get("MetricName"): a["Properties"]
             for a in synthesized.of_type("AWS::CloudWatch::Alarm").values()}
    assert set(names) == {"ExecutionsFailed", "ApproximateNumberOfMessagesVisible",
                          "UnknownOutcomes", "Errors"}
    unknown = names["UnknownOutcomes"]
    assert unknown["Namespace"] == "AgentLoom"
    # The dimension set the step's Powertools metrics use (observability/_metrics.py)
    assert unknown["Dimensions"] == [{"Name": "service", "Value": "agentloom"},
                                     {"Name": "stage", "Value": "test"}]
    assert all(a["Threshold"] == 0 and a["AlarmActions"] for a in names.values())


def test_alarm_notifications_can_use_the_encrypted_topic(synthesized):
    synthesized.assertions.has_resource_properties("AWS::KMS::Key", {"KeyPolicy": {
        "Statement": Match.array_with([Match.object_like({
            "Principal": {"Service": "cloudwatch.amazonaws.com"},
            "Action": ["kms:Decrypt", "kms:GenerateDataKey*"]})])}})
    synthesized.assertions.has_resource_properties("AWS::SNS::Topic", {
        "KmsMasterKeyId": Match.any_value()})


def test_knowledge_vectors_bucket_is_kms_encrypted_and_named_to_every_engine_builder(
        synthesized):
    (bucket,) = synthesized.of_type("AWS::S3Vectors::VectorBucket").values()
    assert bucket["Properties"]["EncryptionConfiguration"]["SseType"] == "aws:kms"
    for handler in ("api", "step", "trigger"):
        env = synthesized.function_env(f"agentloom.handlers.{handler}.handler")
        assert env["AGENTLOOM_VECTOR_BUCKET"] == bucket["Properties"]["VectorBucketName"]
    policies = json.dumps(synthesized.of_type("AWS::IAM::Policy"))
    assert "s3vectors:QueryVectors" in policies and "s3vectors:PutVectors" in policies
