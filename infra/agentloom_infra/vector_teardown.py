"""``VectorBucketTeardown``: a disposable stage's vector bucket is deleted with the stack.

CloudFormation cannot delete an S3 Vectors bucket that still has indexes, and the
functions create one per knowledge base at run time, so a disposable stage's
``cdk destroy`` failed once one existed. This custom resource depends on the bucket, so
CloudFormation deletes it first: its function (``vector_teardown_handler``, inline code)
deletes every index, then the bucket goes. Its role may list and delete this bucket's
indexes and write its own log group, nothing else. Retained stages keep the bucket and
its indexes and have no such resource (docs/deploy.md, "Teardown").
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct

HANDLER = Path(__file__).with_name("vector_teardown_handler.py")


class VectorBucketTeardown(Construct):
    """Attributes: ``function``, ``resource`` (the custom resource)."""

    def __init__(self, scope: Construct, construct_id: str, *, prefix: str,
                 bucket_name: str, bucket_arn: str, bucket: IConstruct,
                 key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        name = f"{prefix}-kb-teardown"
        log_group = logs.LogGroup(self, "Logs", log_group_name=f"/aws/lambda/{name}",
                                  retention=logs.RetentionDays.ONE_WEEK, encryption_key=key,
                                  removal_policy=cdk.RemovalPolicy.DESTROY)
        role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Deletes the vector bucket's indexes when the stack is deleted",
            inline_policies={"teardown": iam.PolicyDocument(statements=[
                iam.PolicyStatement(actions=["s3vectors:ListIndexes"],
                                    resources=[bucket_arn]),
                iam.PolicyStatement(actions=["s3vectors:DeleteIndex"],
                                    resources=[f"{bucket_arn}/index/*"]),
                iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                                    resources=[f"{log_group.log_group_arn}:*"])])})
        self.function = lambda_.Function(
            self, "Function", function_name=name, runtime=lambda_.Runtime.PYTHON_3_12,
            architecture=lambda_.Architecture.ARM_64, handler="index.handler",
            code=lambda_.Code.from_inline(HANDLER.read_text()), role=role,
            timeout=cdk.Duration.minutes(5), log_group=log_group)
        self.function.node.add_dependency(role)
        self.resource = cdk.CustomResource(
            self, "Resource", service_token=self.function.function_arn,
            resource_type="Custom::VectorBucketTeardown",
            properties={"VectorBucketName": bucket_name})
        self.resource.node.add_dependency(bucket)  # deleted before the bucket
