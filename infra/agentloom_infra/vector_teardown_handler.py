"""The inline code of ``VectorBucketTeardown``'s function (a CloudFormation custom
resource): on Delete it removes every index of the stage's vector bucket, which the
functions created at run time and the stack does not know, so CloudFormation can then
delete the bucket. Create and Update do nothing. It answers CloudFormation itself through
the pre-signed ``ResponseURL`` (no provider framework, no cfn-response module). Only the
standard library and the runtime's boto3.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any


def handler(event: dict[str, Any], context: Any) -> None:
    import boto3

    bucket = str(event["ResourceProperties"]["VectorBucketName"])
    status, reason = "SUCCESS", ""
    try:
        if event["RequestType"] == "Delete":
            empty(boto3.client("s3vectors"), bucket)
    except Exception as exc:  # CloudFormation must hear of it, or it waits an hour
        status, reason = "FAILED", f"{type(exc).__name__}: {exc}"[:500]
    respond(event, status, reason, event.get("PhysicalResourceId") or f"{bucket}-indexes")


def empty(client: Any, bucket: str) -> int:
    """Delete every index of ``bucket`` (listed again until none is left); a bucket that
    is already gone is empty. Returns how many were deleted."""
    deleted = 0
    while True:
        try:
            page = client.list_indexes(vectorBucketName=bucket)
        except client.exceptions.NotFoundException:
            return deleted
        names = [index["indexName"] for index in page.get("indexes", [])]
        if not names:
            return deleted
        for name in names:
            client.delete_index(vectorBucketName=bucket, indexName=name)
            deleted += 1


def respond(event: dict[str, Any], status: str, reason: str, physical_id: str) -> None:
    body = json.dumps({"Status": status, "Reason": reason or status,
                       "PhysicalResourceId": physical_id, "StackId": event["StackId"],
                       "RequestId": event["RequestId"],
                       "LogicalResourceId": event["LogicalResourceId"]}).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": ""})
    with urllib.request.urlopen(request, timeout=30):  # CloudFormation's pre-signed URL
        pass
