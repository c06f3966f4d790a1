"""The sandbox's isolation as the synthesized template states it (docs/deploy.md, "Threat
model of the sandbox"): the EFS file-system policy, the sandbox task role, the VPC
endpoints' policies and the DNS firewall. Resources are found by type and properties."""

from __future__ import annotations

import json

MOUNT = {"elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"}
ACCESS_POINT = "elasticfilesystem:AccessPointArn"


def _as_set(value):
    return {value} if isinstance(value, str) else set(value)


def _file_system_policy(synthesized):
    (fs,) = synthesized.of_type("AWS::EFS::FileSystem").values()
    return {s["Sid"]: s for s in fs["Properties"]["FileSystemPolicy"]["Statement"]}


def _role_lid(synthesized, description_start):
    (lid,) = [lid for lid, r in synthesized.of_type("AWS::IAM::Role").items()
              if r["Properties"].get("Description", "").startswith(description_start)]
    return lid


def _role_statements(synthesized, role_lid):
    return [s for p in synthesized.of_type("AWS::IAM::Policy").values()
            if {"Ref": role_lid} in p["Properties"]["Roles"]
            for s in p["Properties"]["PolicyDocument"]["Statement"]]


def test_file_system_policy_requires_tls_access_points_and_iam_and_denies_root(
        synthesized):
    policy = _file_system_policy(synthesized)
    tls = policy["DenyWithoutTls"]
    assert (tls["Effect"], tls["Principal"], tls["Action"]) == ("Deny", {"AWS": "*"}, "*")
    assert tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    no_ap = policy["DenyWithoutAccessPoint"]
    assert (no_ap["Effect"], no_ap["Principal"]) == ("Deny", {"AWS": "*"})
    assert _as_set(no_ap["Action"]) == MOUNT
    assert no_ap["Condition"] == {"Null": {ACCESS_POINT: "true"}}
    root = policy["DenyRootAccess"]
    assert (root["Effect"], root["Principal"], root["Action"]) == (
        "Deny", {"AWS": "*"}, "elasticfilesystem:ClientRootAccess")
    # IAM required: the only Allow names two roles (anonymous NFS clients match none)
    allows = [s for s in policy.values() if s["Effect"] == "Allow"]
    assert [s["Sid"] for s in allows] == ["AllowStepAndSandboxThroughAccessPoints"]
    (allow,) = allows
    assert _as_set(allow["Action"]) == MOUNT  # never ClientRootAccess
    principals = json.dumps(allow["Principal"])
    assert "SandboxTaskRole" in principals and ":role/agentloom-test-step-" in principals
    assert allow["Condition"]["Bool"] == {
        "elasticfilesystem:AccessedViaMountTarget": "true"}
    assert "access-point/*" in json.dumps(allow["Condition"]["ArnLike"][ACCESS_POINT])


def test_the_step_role_named_in_the_policy_is_the_step_functions_role(synthesized):
    """The policy names the step's role by ARN (built from its fixed name: a reference
    would make a cycle with the Lambda's mount), so the name must be the role's."""
    allow = _file_system_policy(synthesized)["AllowStepAndSandboxThroughAccessPoints"]
    (named,) = [p["Fn::Join"][1] for p in allow["Principal"]["AWS"] if "Fn::Join" in p]
    step = synthesized.logical_id("AWS::Lambda::Function",
                                  Handler="agentloom.handlers.step.handler")
    role = synthesized.resources[step]["Properties"]["Role"]["Fn::GetAtt"][0]
    role_name = synthesized.resources[role]["Properties"]["RoleName"]["Fn::Join"][1]
    assert named[-2].endswith(":role/" + role_name[0]) and named[-1] == role_name[1]


def test_sandbox_task_role_only_mounts_session_access_points(synthesized):
    role = _role_lid(synthesized, "Mounts the session's EFS access points")
    trust = synthesized.resources[role]["Properties"]["AssumeRolePolicyDocument"]
    (assume,) = trust["Statement"]
    assert assume["Principal"] == {"Service": "ecs-tasks.amazonaws.com"}
    assert set(assume["Condition"]) == {"StringEquals", "ArnLike"}  # this account's ECS
    statements = _role_statements(synthesized, role)
    assert {a for s in statements for a in _as_set(s["Action"])} == MOUNT
    (allow,) = [s for s in statements if s["Effect"] == "Allow"]
    (deny,) = [s for s in statements if s["Effect"] == "Deny"]
    (fs,) = synthesized.of_type("AWS::EFS::FileSystem")
    for statement in (allow, deny):  # this file system, not "*"
        assert statement["Resource"] == {"Fn::GetAtt": [fs, "Arn"]}
    # the Lambda's access point is rooted above every session: denied to the sandbox
    (lambda_ap,) = synthesized.of_type("AWS::EFS::AccessPoint")
    assert lambda_ap in json.dumps(deny["Condition"]["ArnEquals"][ACCESS_POINT])


def test_sandbox_task_definitions_pass_the_task_role(synthesized):
    (template,) = synthesized.of_type("AWS::ECS::TaskDefinition").values()
    role = _role_lid(synthesized, "Mounts the session's EFS access points")
    assert template["Properties"]["TaskRoleArn"] == {"Fn::GetAtt": [role, "Arn"]}
    env = synthesized.function_env("agentloom.handlers.step.handler")
    assert env["AGENTLOOM_SANDBOX_TASK_ROLE_ARN"] == {"Fn::GetAtt": [role, "Arn"]}
    # RunTask of a revision with a task role passes it: the state machine may
    (machine,) = synthesized.of_type("AWS::StepFunctions::StateMachine").values()
    machine_role = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    passes = [s for s in _role_statements(synthesized, machine_role)
              if s["Action"] == "iam:PassRole"]
    assert {"Fn::GetAtt": [role, "Arn"]} in [r for s in passes
                                            for r in (s["Resource"] if isinstance(
                                                s["Resource"], list) else [s["Resource"]])]
