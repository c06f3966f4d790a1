"""cdk-nag AwsSolutions acknowledgements, each with the reason it is accepted.

Kept in one place so a reviewer reads every accepted finding together. A finding about a
wildcard names its resource (``AwsSolutions-IAM5[Resource::…]``); those ids are built here
from the same tokens the policies use (``nag_ref``), so they follow renamed constructs
instead of hard-coding logical ids.

Acknowledgements are per finding and on the narrowest construct: a function's
``Resource::*`` only on its ``unscoped`` policy (functions.py), never on its role, so a
new ``Resource: "*"`` statement on a function role fails the synth
(tests/infra/test_checks.py). The state machine's and the sandbox execution role's
``Resource::*`` statements are CDK's own (X-Ray, log delivery, ECR authorization) inside
their default policies; tests/infra/test_iam.py pins every ``Resource: "*"`` action of
the template, so a new one fails there too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aws_cdk as cdk
from aws_cdk import aws_cognito as cognito
from constructs import IConstruct

from agentloom_infra.config import FUNCTIONS, Function

if TYPE_CHECKING:
    from agentloom_infra.stack import AgentLoomStack

PREFIX = "AwsSolutions::AwsSolutions-"


def nag_ref(stack: cdk.Stack, value: str) -> str:
    """``value`` (a string with tokens) as cdk-nag writes it in a finding id."""
    resolved: Any = stack.resolve(value)
    return _render(resolved)


def _render(node: Any) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, dict) and "Ref" in node:
        return f"<{node['Ref']}>"
    if isinstance(node, dict) and "Fn::GetAtt" in node:
        return f"<{node['Fn::GetAtt'][0]}.{node['Fn::GetAtt'][1]}>"
    if isinstance(node, dict) and "Fn::Join" in node:
        sep, parts = node["Fn::Join"]
        return str(sep).join(_render(p) for p in parts)
    raise ValueError(f"cannot render {node!r} as a cdk-nag id")


def _role(fn: Any) -> IConstruct:
    role = fn.role
    assert role is not None
    return role  # type: ignore[no-any-return]


def _ack(construct: IConstruct, rule: str, reason: str) -> None:
    cdk.Validations.of(construct).acknowledge(cdk.Acknowledgment(id=PREFIX + rule,
                                                                 reason=reason))


def _arn(stack: cdk.Stack, service: str, resource: str, name: str) -> str:
    """An ARN in this stack's environment as cdk-nag prints it (region and account are
    literal when the stack has a concrete env, pseudo parameters otherwise)."""
    sep = cdk.ArnFormat.COLON_RESOURCE_NAME if service == "states" else None
    return nag_ref(stack, stack.format_arn(service=service, resource=resource,
                                           resource_name=name, arn_format=sep))


def acknowledge(stack: AgentLoomStack) -> None:
    fns = stack.functions
    cluster = nag_ref(stack, stack.sandbox.cluster.cluster_name)
    task_wildcard = f"IAM5[Resource::{_arn(stack, 'ecs', 'task', f'{cluster}/*')}]"
    families = f"IAM5[Resource::" \
               f"{_arn(stack, 'ecs', 'task-definition', stack.sandbox.family_prefix + '-*')}]"
    unscoped_reasons: dict[Function, str] = {
        "api": "X-Ray PutTraceSegments/PutTelemetryRecords, Lambda's VPC ENI actions and "
               "ECS DeregisterTaskDefinition (a deleted session's revisions) have no "
               "resource; ecs:ListTasks is conditioned on the sandbox cluster",
        "step": "X-Ray, Lambda's VPC ENI actions, ECS Register/DescribeTaskDefinition have "
                "no resource-level permissions; ecs:ListTasks is conditioned on the cluster",
        "trigger": "X-Ray PutTraceSegments/PutTelemetryRecords and Lambda's VPC ENI actions "
                   "have no resource"}
    for name in FUNCTIONS:
        fn = fns.function(name)
        _ack(fn, "L1", "Python 3.12 is the runtime the bundle's wheels are built for "
             "(cp312 manylinux aarch64); moving runtime is a deliberate, tested change")
        _ack(fns.unscoped[name], "IAM5[Resource::*]", unscoped_reasons[name])
    indexes = f"IAM5[Resource::{nag_ref(stack, stack.knowledge.bucket_arn)}/index/*]"
    roles = {name: _role(fns.function(name)) for name in FUNCTIONS}
    for role in roles.values():
        _ack(role, indexes, "one S3 Vectors index per knowledge base, created at run time; "
             "scoped to the stage's one vector bucket")
    for name in ("api", "step"):
        _ack(roles[name], task_wildcard, "cancel stops the run's task, whose id is known "
             "only at run time; scoped to the sandbox cluster")
    _ack(roles["step"], families, "the step registers one task-definition revision per "
         "session (docs/adr/0004); scoped to the stage's family prefix")
    _ack(roles["api"], families, "deleting a session deletes its task-definition revisions "
         "(docs/adr/0004); scoped to the stage's family prefix")
    _ack(roles["api"], f"IAM5[Resource::{_arn(stack, 'elasticfilesystem', 'access-point', '*')}]",
         "deleting a session deletes its access points (ids exist only at run time), "
         "conditioned on their agentloom:mount tag (workspace or results, never a skill's)")
    _ack(roles["step"], f"IAM5[Resource::{_arn(stack, 'elasticfilesystem', 'access-point', '*')}]",
         "tag-on-create of the per-session access points (ids exist only at run time), "
         "conditioned on CreateAccessPoint, which is scoped to the file system")
    executions = f"IAM5[Resource::{_arn(stack, 'states', 'execution', stack.runs.name + ':*')}]"
    _ack(roles["api"], executions, "cancel stops the run's current execution (any "
         "generation) of this one state machine")
    _ack(roles["trigger"], executions, "reads the status of this state machine's executions "
         "(is a run still driven)")
    runs = stack.runs.state_machine
    step_arn = nag_ref(stack, fns.step.function_arn)
    _ack(runs, f"IAM5[Resource::{step_arn}:*]", "invoking the step function's versions "
         "(CDK's LambdaInvoke grant)")
    _ack(runs, task_wildcard, "ecs:runTask.sync stops/describes the task it started")
    _ack(runs, families, "RunTask of the session's revision, passed by the step at run "
         "time; conditioned on the sandbox cluster")
    _ack(runs, "IAM5[Resource::*]", "X-Ray and CloudWatch Logs delivery actions support "
         "no resource-level permissions")
    if stack.config.state_machine_log_level != "ALL":
        _ack(runs, "SF1", "logs ERROR by default (context stateMachineLogLevel): ALL writes "
             "every history event to CloudWatch; the history itself stays in Step Functions")
    _ack(stack.sandbox.execution_role, "IAM5[Resource::*]", "ecr:GetAuthorizationToken "
         "has no resource; image pulls are scoped to the image repository")
    _ack(stack.network.endpoint_sg, "EC23", "interface endpoints accept HTTPS from the "
         "VPC CIDR only (not 0.0.0.0/0); the check cannot read the intrinsic CIDR")
    cdk.Annotations.of(stack.network.lambda_sg).acknowledge_warning(
        "@aws-cdk/aws-ec2:ipv4IgnoreEgressRule",
        "the Lambdas' group allows all egress (model providers); the EFS rule is redundant")
    _ack_custom_resource(stack)
    _ack_trigger_failures(stack)
    _ack_vector_teardown(stack)
    _ack_console(stack)
    if stack.http.user_pool is not None and stack.http.mfa != cognito.Mfa.REQUIRED:
        _ack(stack.http.user_pool, "COG2", "MFA is optional (TOTP) by default so the first "
             "admin can sign in from the CLI; context userPoolMfa=REQUIRED requires it")
    if stack.http.user_pool is not None:
        _ack(stack.http.user_pool, "COG8", "the Plus feature plan (threat protection) is "
             "a per-user cost; a deployment may opt in (docs/deploy.md)")


def _ack_custom_resource(stack: AgentLoomStack) -> None:
    lookup = stack.network.node.find_child("S3PrefixList")
    _ack(lookup, "IAM5[Resource::*]", "ec2:DescribeManagedPrefixLists has no resource")
    provider = stack.node.try_find_child("AWS679f53fac002430cb0da5b7982bd2287")
    if provider is not None:  # the AwsCustomResource singleton function
        _ack(provider, "IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
             "AWSLambdaBasicExecutionRole]", "CDK's AwsCustomResource provider: logs only")
        _ack(provider, "L1", "CDK's AwsCustomResource provider picks its own runtime")


def _ack_trigger_failures(stack: AgentLoomStack) -> None:
    failures = stack.triggers.failures
    if failures is not None:
        _ack(failures, "SQS3", "it is the dead-letter queue of the EventBridge rule and "
             "Scheduler targets and the trigger function's on-failure destination (not an "
             "SQS redrive, which the check reads); alarm TriggerFailures watches it")


def _ack_vector_teardown(stack: AgentLoomStack) -> None:
    teardown = stack.knowledge.teardown
    if teardown is None:
        return
    _ack(teardown.function, "L1", "Python 3.12, the stack's runtime (the other functions'); "
         "the inline handler uses only the standard library and the runtime's boto3")
    indexes = f"IAM5[Resource::{nag_ref(stack, stack.knowledge.bucket_arn)}/index/*]"
    _ack(teardown, indexes, "deletes the indexes the functions created at run time (their "
         "names are unknown to the stack); scoped to the stage's one vector bucket")
    logs = nag_ref(stack, teardown.function.log_group.log_group_arn)
    _ack(teardown, f"IAM5[Resource::{logs}:*]", "the log streams of the function's own "
         "log group")


def _asset_bucket_objects(stack: cdk.Stack) -> str:
    """The bootstrap file-asset bucket's objects as cdk-nag prints them."""
    synthesizer = stack.synthesizer
    qualifier = (synthesizer.bootstrap_qualifier
                 if isinstance(synthesizer, cdk.DefaultStackSynthesizer) else None)
    name = cdk.DefaultStackSynthesizer.DEFAULT_FILE_ASSETS_BUCKET_NAME.replace(
        "${Qualifier}", qualifier or cdk.DefaultStackSynthesizer.DEFAULT_QUALIFIER)
    for pseudo, value in (("AWS::AccountId", stack.account), ("AWS::Region", stack.region)):
        name = name.replace("${" + pseudo + "}", value if not cdk.Token.is_unresolved(value)
                            else f"<{pseudo}>")
    return f"arn:<AWS::Partition>:s3:::{name}/*"


def _ack_console(stack: AgentLoomStack) -> None:
    console = stack.console
    if console is None:
        return
    distribution = console.distribution
    _ack(distribution, "CFR1", "the console is for the stage's users wherever they are; "
         "it serves static files only, and every API call needs a Cognito sign-in")
    _ack(distribution, "CFR2", "a WAF web ACL costs $5 a month plus rules and requests; "
         "the distribution serves the same static files to everyone (no data), and the "
         "API it calls is JWT-authorized and throttled")
    _ack(distribution, "CFR4", "on the default *.cloudfront.net certificate CloudFront "
         "fixes the viewer security policy (a minimum TLS version needs a custom domain's "
         "certificate); browsers negotiate TLS 1.2+ with it")
    assert stack.http.preflight is not None
    _ack(stack.http.preflight, "APIG4", "OPTIONS is the CORS preflight, which carries no "
         "Authorization header; API Gateway answers it from the CORS configuration")
    handler = next(child for child in stack.node.children
                   if child.node.id.startswith("Custom::CDKBucketDeployment"))
    _ack(handler, "L1", "CDK's BucketDeployment handler picks its own runtime")
    _ack(handler, "IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
         "AWSLambdaBasicExecutionRole]", "CDK's BucketDeployment handler: logs only")
    bucket = nag_ref(stack, console.bucket.bucket_arn)
    for finding, reason in (
            ("Action::s3:GetObject*", "reads the console's asset and the site bucket"),
            ("Action::s3:GetBucket*", "reads the console's asset and the site bucket"),
            ("Action::s3:List*", "lists the asset and the site bucket to sync them"),
            ("Action::s3:DeleteObject*", "prunes files gone from the console folder, in "
             "the site bucket only"),
            ("Action::s3:Abort*", "aborts its own multipart uploads to the site bucket"),
            (f"Resource::{bucket}/*", "writes every file of the site bucket (the "
             "console's alone)"),
            (f"Resource::{_asset_bucket_objects(stack)}", "reads its source zip from "
             "the bootstrap asset bucket (CDK's grant; the object key is the asset's hash)"),
            ("Resource::*", "CDK grants cloudfront:CreateInvalidation/GetInvalidation on "
             "every distribution; it invalidates the console's only")):
        _ack(handler, f"IAM5[{finding}]", f"CDK's BucketDeployment: {reason}")
