"""AWS teardown of a session (``agentloom.platform.teardown``): what the step made for
it on first use (``agentloom.aws.sandbox``, ADR 0004), run by the API function on
``DELETE /api/v1/sessions/{session}``.

1. Its task-definition revisions — every ARN its ``sandbox#{session}`` items name (the
   base revision of each deployment shape, and one per set of mounted skills) — are
   deregistered and then deleted (``DeleteTaskDefinitions`` takes INACTIVE revisions).
2. Its access points: those its items name (workspace and results) and those on this
   file system tagged ``agentloom:session={session}`` with ``agentloom:mount`` workspace
   or results (one made before a crash kept its id from the table). The skill
   versions' access points are shared by every session of the space and never
   touched; another session's carry another tag.
3. Its files on the volume — its workspace and lock directories — removed by the step
   function, which mounts the volume (``agentloom.aws.session_files``): after the
   revisions and access points, so no task can mount them any more.
4. Its ``sandbox#{session}`` items, last: while they remain, a retry finds the ARNs.

"Already gone" is done (a revision ECS no longer knows, an access point EFS no longer
has), so a retry after a crash finishes. Any other failure is ``TeardownIncomplete``
(503): the session's teardown marker stays and the delete can be retried (see
docs/operations.md, "Per-session sandbox resources").
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from agentloom.aws.session_files import StepFilesRemoval
from agentloom.platform.domain import Session
from agentloom.platform.store import PlatformStore, delete
from agentloom.platform.teardown import TeardownIncomplete

if TYPE_CHECKING:  # the boto3 stubs (the dev extra)
    from mypy_boto3_ecs import ECSClient
    from mypy_boto3_efs import EFSClient

SESSION_TAG = "agentloom:session"
SESSION_MOUNTS = frozenset({"workspace", "results"})  # not "skill": shared
DELETE_BATCH = 10  # DeleteTaskDefinitions takes at most 10 revisions


class SandboxTeardown:
    def __init__(self, store: PlatformStore, *, efs: EFSClient, ecs: ECSClient,
                 file_system_id: str, files: StepFilesRemoval | None = None) -> None:
        self.store = store
        self.files = files  # none: no step function named to ask; the files stay
        self.efs = efs
        self.ecs = ecs
        self.file_system_id = file_system_id

    def remove(self, session: Session) -> None:
        sid = session.session_id
        items = self.store.items.query_raw(f"sandbox#{sid}", "")
        revisions: set[str] = set()
        access_points: set[str] = set()
        for stored in items:
            body: dict[str, Any] = json.loads(stored.text)
            revisions.add(str(body["task_definition"]))
            access_points.update(str(body[k]) for k in ("workspace_access_point",
                                                          "results_access_point") if k in body)
        access_points.update(self._tagged_access_points(sid))
        self._remove_revisions(sorted(revisions))
        for access_point in sorted(access_points):
            self._remove_access_point(access_point)
        if self.files is not None:
            self.files.remove(sid)
        if items:
            self.store.items.transact([delete(f"sandbox#{sid}", s.sk) for s in items])

    def _tagged_access_points(self, session_id: str) -> list[str]:
        found: list[str] = []
        try:
            pages = self.efs.get_paginator("describe_access_points").paginate(
                FileSystemId=self.file_system_id)
            for page in pages:
                for point in page["AccessPoints"]:
                    tags = {t["Key"]: t["Value"] for t in point.get("Tags", [])}
                    if tags.get(SESSION_TAG) == session_id and \
                            tags.get("agentloom:mount") in SESSION_MOUNTS:
                        found.append(point["AccessPointId"])
        except ClientError as err:
            raise _incomplete("list the access points", err) from err
        return found

    def _remove_revisions(self, arns: list[str]) -> None:
        present = []
        for arn in arns:
            try:
                self.ecs.deregister_task_definition(taskDefinition=arn)
                present.append(arn)
            except ClientError as err:
                if not _revision_gone(err):
                    raise _incomplete(f"deregister {arn}", err) from err
        for start in range(0, len(present), DELETE_BATCH):
            try:
                answer = self.ecs.delete_task_definitions(
                    taskDefinitions=present[start:start + DELETE_BATCH])
            except ClientError as err:
                raise _incomplete("delete the revisions", err) from err
            failed = [f for f in answer.get("failures", [])
                      if "does not exist" not in str(f.get("reason", ""))]
            if failed:
                raise TeardownIncomplete(
                    f"{len(failed)} task-definition revision(s) could not be deleted yet "
                    f"({failed[0].get('reason', 'unknown')}); retry the delete",
                    details={"arns": [str(f.get("arn", "")) for f in failed]})

    def _remove_access_point(self, access_point: str) -> None:
        try:
            self.efs.delete_access_point(AccessPointId=access_point)
        except self.efs.exceptions.AccessPointNotFound:
            return
        except ClientError as err:
            raise _incomplete(f"delete access point {access_point}", err) from err


def _revision_gone(err: ClientError) -> bool:
    """ECS answers ClientException for a revision it does not know (deleted)."""
    error = err.response.get("Error", {})
    message = str(error.get("Message", "")).lower()
    return error.get("Code") in ("ClientException", "TaskDefinitionNotFoundException") \
        and ("does not exist" in message or "unable to describe" in message)


def _incomplete(what: str, err: ClientError) -> TeardownIncomplete:
    code = err.response.get("Error", {}).get("Code", "error")
    return TeardownIncomplete(f"could not {what} ({code}); retry the delete",
                              details={"aws_error": code})
