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
    # and EFS checks that the principal exists: the file system is created after it
    (fs,) = synthesized.of_type("AWS::EFS::FileSystem").values()
    assert role in fs["DependsOn"]


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


# VPC endpoints


def _endpoint_policies(synthesized):
    """Service suffix (``ecr.api``, ``s3``…) → the endpoint's policy statements."""
    found = {}
    for endpoint in synthesized.of_type("AWS::EC2::VPCEndpoint").values():
        props = endpoint["Properties"]
        service = props["ServiceName"]["Fn::Join"][1][-1].removeprefix(".")
        found[service] = props["PolicyDocument"]["Statement"]  # absent: no policy = any
    return found


OUR_ACCOUNT = {"StringEquals": {"aws:PrincipalAccount": {"Ref": "AWS::AccountId"}}}


def test_every_endpoint_has_a_policy_for_this_accounts_resources(synthesized):
    policies = _endpoint_policies(synthesized)
    assert set(policies) == {"ecr.api", "ecr.dkr", "logs", "s3", "dynamodb"}
    for service in ("ecr.api", "ecr.dkr"):
        by_action = {frozenset(_as_set(s["Action"])): s for s in policies[service]}
        token = by_action[frozenset({"ecr:GetAuthorizationToken"})]
        assert token["Resource"] == "*" and token["Condition"] == OUR_ACCOUNT  # no ARN
        pull = by_action[frozenset({"ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer",
                                    "ecr:BatchCheckLayerAvailability"})]
        assert pull["Condition"] == OUR_ACCOUNT
        assert pull["Resource"]["Fn::Join"][1][-3:] == [
            ":", {"Ref": "AWS::AccountId"}, ":repository/*"]  # this account's only
        assert len(by_action) == 2
    (logs,) = policies["logs"]
    (sandbox_logs,) = [lid for lid, r in synthesized.of_type("AWS::Logs::LogGroup").items()
                       if lid.startswith("SandboxLogs")]
    assert logs["Resource"] == {"Fn::GetAtt": [sandbox_logs, "Arn"]}
    assert _as_set(logs["Action"]) == {"logs:CreateLogStream", "logs:PutLogEvents"}
    assert logs["Condition"] == OUR_ACCOUNT
    (dynamodb,) = policies["dynamodb"]
    tables = set(synthesized.of_type("AWS::DynamoDB::Table"))
    assert {r["Fn::GetAtt"][0] for r in dynamodb["Resource"]} == tables
    assert dynamodb["Condition"] == OUR_ACCOUNT
    assert not any(a.endswith("*") or a == "dynamodb:Scan" for a in dynamodb["Action"])


def test_s3_from_the_sandbox_reaches_only_the_ecr_layer_bucket_read_only(synthesized):
    (s3,) = _endpoint_policies(synthesized)["s3"]
    assert (s3["Effect"], s3["Action"]) == ("Allow", "s3:GetObject")  # no PUT anywhere
    # ECR's layer bucket of the region (pre-signed by ECR: no principal condition)
    assert s3["Resource"] == {"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, ":s3:::prod-", {"Ref": "AWS::Region"},
        "-starport-layer-bucket/*"]]}


def test_an_image_in_another_account_adds_only_its_repository():
    import aws_cdk as cdk
    from agentloom_infra.endpoints import image_repository

    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(account="111111111111",
                                                          region="eu-west-1"))
    arn = image_repository(stack, "222222222222.dkr.ecr.us-east-2.amazonaws.com/sbx:1")
    assert stack.resolve(arn)["Fn::Join"][1][-1] == \
        ":ecr:us-east-2:222222222222:repository/sbx"
    assert image_repository(stack, None) is None
    assert image_repository(stack, "docker.io/library/python:3.12") is None


def test_sandbox_security_group_reaches_only_the_endpoints_it_needs(synthesized):
    """Its 443 egress names the endpoints' group; that group is on the three endpoints a
    task needs to start and nothing else (test_stack checks the egress rules)."""
    (endpoint_sg,) = [lid for lid, r in synthesized.of_type("AWS::EC2::SecurityGroup").items()
                      if r["Properties"]["GroupDescription"].startswith("VPC interface")]
    users = [props for r in synthesized.resources.values()
             for props in [r.get("Properties", {})]
             if {"Fn::GetAtt": [endpoint_sg, "GroupId"]} in props.get("SecurityGroupIds", [])]
    assert len(users) == 3
    assert all(u["VpcEndpointType"] == "Interface" for u in users)


# DNS


def test_dns_firewall_allows_the_list_and_blocks_everything_else(synthesized):
    lists = {r["Properties"]["Name"]: (lid, r["Properties"]["Domains"])
             for lid, r in synthesized.of_type(
                 "AWS::Route53Resolver::FirewallDomainList").items()}
    allowed_lid, allowed = lists["agentloom-test-allowed"]
    everything_lid, everything = lists["agentloom-test-everything"]
    assert everything == ["*"]
    assert set(allowed) == {"amazonaws.com", "*.amazonaws.com", "*.api.aws",
                            "api.openai.com", "api.deepseek.com"}
    (group,) = synthesized.of_type("AWS::Route53Resolver::FirewallRuleGroup").values()
    rules = sorted(group["Properties"]["FirewallRules"], key=lambda r: r["Priority"])
    assert [(r["Action"], r["FirewallDomainListId"]["Fn::GetAtt"][0]) for r in rules] == [
        ("ALLOW", allowed_lid), ("BLOCK", everything_lid)]
    assert rules[1]["BlockResponse"] == "NXDOMAIN"
    # an allowed host behind a CDN CNAME still resolves (the chain is not re-checked)
    assert rules[0]["FirewallDomainRedirectionAction"] == "TRUST_REDIRECTION_DOMAIN"
    (association,) = synthesized.of_type(
        "AWS::Route53Resolver::FirewallRuleGroupAssociation").values()
    (vpc,) = synthesized.of_type("AWS::EC2::VPC")
    assert association["Properties"]["VpcId"] == {"Ref": vpc}  # every subnet of the VPC


def test_the_allowed_model_domains_are_the_catalogues_providers():
    from urllib.parse import urlsplit

    from agentloom_infra.dns_firewall import MODEL_DOMAINS

    from agentloom.models import DEFAULT_BASE_URLS

    assert sorted(MODEL_DOMAINS) == sorted(str(urlsplit(url).hostname)
                                           for url in DEFAULT_BASE_URLS.values())
