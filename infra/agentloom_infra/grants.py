"""The functions' data-plane grants, written as the actions the code calls (no CDK
``grant_read_write_data``: it adds ``Scan``, ``BatchWriteItem`` and the key's
``kms:ReEncrypt*``/``kms:GenerateDataKey*``/``kms:Encrypt`` to every grantee).

- Tables: the operations of the adapters (functions/agentloom/stores/dynamodb_checkpoints.py,
  functions/agentloom/platform/store/dynamodb.py; transactions authorize each action as
  its own operation, ``ConditionCheckItem`` included). ``BatchWriteItem`` only on the
  checkpoint table: a value over the item limit is written as blob parts in batches, and
  every function commits engine steps (api: start/resolve/supplement/cancel, trigger: the
  first step of a run it starts, step: every cycle). No ``Scan`` anywhere: no code path
  scans.
- The key: the envelope codec calls only ``GenerateDataKey`` (seal) and ``Decrypt``
  (open); S3 Vectors' SSE-KMS uses the same two on the caller's behalf.
"""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms

ITEM_ACTIONS = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
                "dynamodb:DeleteItem", "dynamodb:Query", "dynamodb:ConditionCheckItem"]
BATCH_WRITE = "dynamodb:BatchWriteItem"
KEY_ACTIONS = ["kms:GenerateDataKey", "kms:Decrypt"]


def grant_items(grantee: iam.IGrantable, tables: Iterable[dynamodb.ITable], *,
                batch_write: bool = False) -> None:
    """The item operations on ``tables`` (and ``BatchWriteItem`` when ``batch_write``)."""
    actions = ITEM_ACTIONS + ([BATCH_WRITE] if batch_write else [])
    grantee.grant_principal.add_to_principal_policy(iam.PolicyStatement(
        actions=actions, resources=[table.table_arn for table in tables]))


def grant_key_use(grantee: iam.IGrantable, key: kms.IKey) -> None:
    """Seal and open envelopes (and SSE-KMS data) under ``key``; nothing else."""
    key.grant(grantee, *KEY_ACTIONS)
