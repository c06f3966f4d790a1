"""Least privilege on the synthesized template, statement by statement: no AWS-managed
policy on the functions, every ``Resource: "*"`` action named here (a new one fails),
KMS limited to what the codec calls, the api and trigger roles without table scans or
vector writes they do not need, EFS actions on this file system."""

from __future__ import annotations

import json

HANDLERS = {name: f"agentloom.handlers.{name}.handler" for name in ("api", "step", "trigger")}
# Every action the template grants on Resource "*", and why it cannot be narrower.
UNSCOPED = {
    # X-Ray segments (functions, state machine)
    "xray:PutTraceSegments", "xray:PutTelemetryRecords",
    "xray:GetSamplingRules", "xray:GetSamplingTargets",
    # Lambda's VPC ENIs (functions.VPC_ENI_ACTIONS)
    "ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
    # ECS: no resource-level permissions (step; api: a deleted session's revisions),
    # ListTasks conditioned on the cluster
    "ecs:RegisterTaskDefinition", "ecs:DescribeTaskDefinition", "ecs:ListTasks",
    "ecs:DeregisterTaskDefinition",
    # the state machine's log delivery (CDK's LogOptions)
    "logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery", "logs:ListLogDeliveries", "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
    # the sandbox image pull, the S3 prefix-list lookup
    "ecr:GetAuthorizationToken", "ec2:DescribeManagedPrefixLists",
    # CDK's BucketDeployment (the console) invalidates its distribution: its grant
    "cloudfront:CreateInvalidation", "cloudfront:GetInvalidation",
}


def _listed(value):
    return [value] if isinstance(value, str | dict) else list(value)


def _policies(synthesized, role_lid):
    return [p for p in synthesized.of_type("AWS::IAM::Policy").values()
            if {"Ref": role_lid} in p["Properties"]["Roles"]]


def _statements(synthesized, role_lid):
    return [s for p in _policies(synthesized, role_lid)
            for s in p["Properties"]["PolicyDocument"]["Statement"]]


def _role(synthesized, name):
    lid = synthesized.logical_id("AWS::Lambda::Function", Handler=HANDLERS[name])
    return synthesized.resources[lid]["Properties"]["Role"]["Fn::GetAtt"][0]


def _actions(statements, resource_contains=""):
    return {a for s in statements for a in _listed(s["Action"])
            if resource_contains in json.dumps(s["Resource"])}


def test_only_named_actions_have_resource_star(synthesized):
    star = {a for p in synthesized.of_type("AWS::IAM::Policy").values()
            for s in p["Properties"]["PolicyDocument"]["Statement"]
            if s["Effect"] == "Allow" and "*" in _listed(s["Resource"])
            for a in _listed(s["Action"])}
    assert star == UNSCOPED, (star - UNSCOPED, UNSCOPED - star)


def test_function_roles_have_no_managed_policy_and_write_only_their_log_group(synthesized):
    for name in HANDLERS:
        role = synthesized.resources[_role(synthesized, name)]["Properties"]
        assert "ManagedPolicyArns" not in role, name
        statements = _statements(synthesized, _role(synthesized, name))
        logs = [s for s in statements if any(a.startswith("logs:")
                                             for a in _listed(s["Action"]))]
        (write,) = logs
        assert set(write["Action"]) == {"logs:CreateLogStream", "logs:PutLogEvents"}
        (group,) = [lid for lid, r in synthesized.of_type("AWS::Logs::LogGroup").items()
                    if r["Properties"].get("LogGroupName") == f"/aws/lambda/agentloom-test-{name}"]
        assert write["Resource"] == {"Fn::GetAtt": [group, "Arn"]}


def test_the_only_managed_policy_is_cdks_custom_resource_providers(synthesized):
    managed = {(lid, json.dumps(arn)) for lid, r in synthesized.of_type("AWS::IAM::Role").items()
               for arn in r["Properties"].get("ManagedPolicyArns", [])}
    # CDK's own singletons: the S3 prefix-list lookup, and the console's deployment and
    # its buckets' emptying on delete
    providers = ("AWS679f53fac002430cb0da5b7982bd2287",
                 "CustomCDKBucketDeployment8693BB64968944B69AAFB0CC9EB8756C",
                 "CustomS3AutoDeleteObjectsCustomResourceProvider")
    assert len(managed) == 3 and all(lid.startswith(providers) for lid, _ in managed)
    assert all("AWSLambdaBasicExecutionRole" in arn for _, arn in managed)


def test_function_star_statements_are_only_in_their_unscoped_policy(synthesized):
    for name in HANDLERS:
        for policy in _policies(synthesized, _role(synthesized, name)):
            doc = policy["Properties"]["PolicyDocument"]["Statement"]
            has_star = any("*" in _listed(s["Resource"]) for s in doc)
            unscoped = "Unscoped" in policy["Properties"]["PolicyName"]
            assert has_star == unscoped, (name, policy["Properties"]["PolicyName"])


def test_functions_use_the_key_only_to_seal_and_open(synthesized):
    for name in HANDLERS:
        kms = {a for a in _actions(_statements(synthesized, _role(synthesized, name)))
               if a.startswith("kms:")}
        assert kms == {"kms:GenerateDataKey", "kms:Decrypt"}, name


def test_no_function_scans_and_only_checkpoints_take_batch_writes(synthesized):
    (checkpoints,) = [lid for lid, r in synthesized.of_type("AWS::DynamoDB::Table").items()
                      if r["Properties"]["TableName"] == "agentloom-test-checkpoints"]
    for name in HANDLERS:
        statements = _statements(synthesized, _role(synthesized, name))
        dynamodb = _actions(statements, "")
        assert "dynamodb:Scan" not in dynamodb and not any(
            a.endswith("*") for a in dynamodb if a.startswith("dynamodb:")), name
        batch = [s for s in statements if "dynamodb:BatchWriteItem" in _listed(s["Action"])]
        assert [_listed(s["Resource"]) for s in batch] == [
            [{"Fn::GetAtt": [checkpoints, "Arn"]}]], name  # blob parts (grants.py)


def test_only_the_api_writes_vectors(synthesized):
    for name in HANDLERS:
        actions = _actions(_statements(synthesized, _role(synthesized, name)))
        writes = {a for a in actions if a.startswith(("s3vectors:Put", "s3vectors:Delete",
                                                      "s3vectors:Create"))}
        assert bool(writes) == (name == "api"), name
        assert "s3vectors:QueryVectors" in actions


def test_efs_actions_are_on_this_file_system(synthesized):
    (fs,) = synthesized.of_type("AWS::EFS::FileSystem")
    statements = _statements(synthesized, _role(synthesized, "step"))
    for statement in statements:
        actions = _listed(statement["Action"])
        if any(a in ("elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite",
                     "elasticfilesystem:CreateAccessPoint") for a in actions):
            assert fs in json.dumps(statement["Resource"]), actions
            assert "*" not in _listed(statement["Resource"])
    (tag,) = [s for s in statements if "elasticfilesystem:TagResource" in
              _listed(s["Action"])]
    assert tag["Condition"] == {"StringEquals": {
        "elasticfilesystem:CreateAction": "CreateAccessPoint"}}  # never an existing one


def test_the_api_removes_only_sessions_access_points_and_sandbox_revisions(synthesized):
    """Deleting a session (functions/agentloom/aws/teardown.py): the access points listed
    on this file system, deleted only when tagged as a session's own; the revisions
    deleted only in the stage's sandbox families; nothing of it for the other roles."""
    (fs,) = synthesized.of_type("AWS::EFS::FileSystem")
    statements = _statements(synthesized, _role(synthesized, "api"))
    (listing,) = [s for s in statements
                  if "elasticfilesystem:DescribeAccessPoints" in _listed(s["Action"])]
    assert fs in json.dumps(listing["Resource"]) and "*" not in _listed(listing["Resource"])
    (removal,) = [s for s in statements
                  if "elasticfilesystem:DeleteAccessPoint" in _listed(s["Action"])]
    assert _listed(removal["Action"]) == ["elasticfilesystem:DeleteAccessPoint"]
    assert removal["Condition"] == {"StringEquals": {
        "aws:ResourceTag/agentloom:mount": ["workspace", "results"]}}  # never a skill's
    (revisions,) = [s for s in statements
                    if "ecs:DeleteTaskDefinitions" in _listed(s["Action"])]
    assert "task-definition/agentloom-test-sbx-*" in json.dumps(revisions["Resource"])
    for name in ("step", "trigger"):
        actions = _actions(_statements(synthesized, _role(synthesized, name)))
        assert not actions & {"elasticfilesystem:DeleteAccessPoint",
                              "ecs:DeleteTaskDefinitions", "ecs:DeregisterTaskDefinition"}


def test_only_the_api_invokes_and_only_the_step_function(synthesized):
    """A deleted session's files (functions/agentloom/aws/session_files.py): the api
    invokes the step function, which mounts the volume; nothing else invokes a function
    (the state machine's own role aside)."""
    step = synthesized.logical_id("AWS::Lambda::Function", Handler=HANDLERS["step"])
    statements = _statements(synthesized, _role(synthesized, "api"))
    (invoke,) = [s for s in statements if any(a.startswith("lambda:")
                                               for a in _listed(s["Action"]))]
    assert _listed(invoke["Action"]) == ["lambda:InvokeFunction"]
    assert _listed(invoke["Resource"]) == [{"Fn::GetAtt": [step, "Arn"]}]
    assert "Condition" not in invoke
    for name in ("step", "trigger"):
        actions = _actions(_statements(synthesized, _role(synthesized, name)))
        assert not any(a.startswith("lambda:") for a in actions), name
