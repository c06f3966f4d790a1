"""``DataStores``: the customer-managed key and the three DynamoDB tables.

Key schemas are those of the adapters' ``create_table`` (functions/agentloom/stores/
dynamodb_checkpoints.py, functions/agentloom/platform/store/dynamodb.py): ``pk``/``sk``
strings, on-demand. The platform table expires items through ``ttl`` (the store copies a
body's ``expires_at`` there); checkpoints never expire. The idempotency table is the
Powertools layout (``id`` hash key, TTL ``expiration``) used by the trigger Lambda. All
tables are encrypted with the CMK (rotation on) and have point-in-time recovery.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

PLATFORM_TTL_ATTRIBUTE = "ttl"
IDEMPOTENCY_TTL_ATTRIBUTE = "expiration"


class DataStores(Construct):
    """Attributes: ``key``, ``checkpoints``, ``platform``, ``idempotency``."""

    def __init__(self, scope: Construct, construct_id: str, *, prefix: str,
                 removal_policy: cdk.RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(self, "Key", alias=f"alias/{prefix}", enable_key_rotation=True,
                           description="AgentLoom data key: tables, envelopes, logs",
                           removal_policy=removal_policy)
        region = cdk.Stack.of(self).region
        # CloudWatch Logs encrypts the log groups of this stack with the same key.
        self.key.add_to_resource_policy(iam.PolicyStatement(
            actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*",
                     "kms:Describe*"],
            principals=[iam.ServicePrincipal(f"logs.{region}.amazonaws.com")],
            resources=["*"],
            conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": cdk.Stack.of(
                self).format_arn(service="logs", resource="log-group", resource_name="*",
                                 arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)}}))
        self.checkpoints = self._table("Checkpoints", f"{prefix}-checkpoints", "pk", "sk",
                                       None, removal_policy)
        self.platform = self._table("Platform", f"{prefix}-platform", "pk", "sk",
                                    PLATFORM_TTL_ATTRIBUTE, removal_policy)
        self.idempotency = self._table("Idempotency", f"{prefix}-idempotency", "id", None,
                                       IDEMPOTENCY_TTL_ATTRIBUTE, removal_policy)

    def _table(self, construct_id: str, name: str, pk: str, sk: str | None,
               ttl: str | None, removal_policy: cdk.RemovalPolicy) -> dynamodb.Table:
        string = dynamodb.AttributeType.STRING
        return dynamodb.Table(
            self, construct_id, table_name=name,
            partition_key=dynamodb.Attribute(name=pk, type=string),
            sort_key=dynamodb.Attribute(name=sk, type=string) if sk else None,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED, encryption_key=self.key,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            time_to_live_attribute=ttl, removal_policy=removal_policy,
            deletion_protection=removal_policy == cdk.RemovalPolicy.RETAIN)
