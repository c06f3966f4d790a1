"""``KnowledgeVectors``: the S3 Vectors bucket of knowledge bases (docs/knowledge.md,
docs/adr/0005-knowledge-vector-store.md), SSE-KMS under the stage's data key.

The functions create one index per knowledge base (``kb-{base_id}``) at run time, so the
grant covers the bucket's indexes by ARN pattern; vectors carry only chunk keys and a
document id (the passages stay in the platform table, sealed). The stack grants it to,
and names it (``AGENTLOOM_VECTOR_BUCKET``) in, every function that builds engines.
Retained with the stage's other data stores (context ``retain``); a disposable stage's
bucket is deleted with the stack, its indexes first (``VectorBucketTeardown``;
docs/deploy.md, "Teardown").
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3vectors as s3vectors
from constructs import Construct

from agentloom_infra.vector_teardown import VectorBucketTeardown

# what agentloom.knowledge.s3vectors_index calls (QueryVectors with metadata also
# needs GetVectors): reading serves a run's search; writing only the api's knowledge
# routes (POST documents, DELETE documents and bases, POST reindex)
READ_ACTIONS = ["s3vectors:GetIndex", "s3vectors:GetVectors", "s3vectors:ListVectors",
                "s3vectors:QueryVectors"]
WRITE_ACTIONS = ["s3vectors:CreateIndex", "s3vectors:DeleteIndex", "s3vectors:PutVectors",
                 "s3vectors:DeleteVectors"]


class KnowledgeVectors(Construct):
    """Attributes: ``bucket`` (the L1 vector bucket), ``bucket_name``, ``bucket_arn``,
    ``teardown`` (a disposable stage's ``VectorBucketTeardown``, else None)."""

    def __init__(self, scope: Construct, construct_id: str, *, prefix: str,
                 key: kms.IKey,
                 removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN) -> None:
        super().__init__(scope, construct_id)
        self.bucket_name = f"{prefix}-kb".lower()
        self.bucket = s3vectors.CfnVectorBucket(
            self, "Bucket", vector_bucket_name=self.bucket_name,
            encryption_configuration=s3vectors.CfnVectorBucket
            .EncryptionConfigurationProperty(sse_type="aws:kms", kms_key_arn=key.key_arn))
        self.bucket.apply_removal_policy(removal_policy)
        self.bucket_arn = self.bucket.attr_vector_bucket_arn
        self.key = key
        self.teardown: VectorBucketTeardown | None = None
        if removal_policy == cdk.RemovalPolicy.DESTROY:
            self.teardown = VectorBucketTeardown(
                self, "Teardown", prefix=prefix, bucket_name=self.bucket_name,
                bucket_arn=self.bucket_arn, bucket=self.bucket, key=key)

    def grant(self, grantee: iam.IGrantable, *, write: bool = False) -> None:
        """The index and vector reads on this bucket's indexes (and the writes when
        ``write``), and the key's GenerateDataKey/Decrypt (SSE-KMS)."""
        grantee.grant_principal.add_to_principal_policy(iam.PolicyStatement(
            actions=READ_ACTIONS + (WRITE_ACTIONS if write else []),
            resources=[self.bucket_arn, f"{self.bucket_arn}/index/*"]))
        self.key.grant(grantee, "kms:GenerateDataKey", "kms:Decrypt")
