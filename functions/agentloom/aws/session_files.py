"""A deleted session's files on the EFS volume (``agentloom.aws.teardown``, ADR 0006).

The API function does not mount the volume, so it asks the step function, which does:
``StepFilesRemoval.remove`` invokes the step synchronously with exactly
``{"teardown_session": "ses_…"}``, and the step handler answers it with
``remove_session_files`` instead of a run's cycle. The step deletes the session's
workspace directory (``spaces/{space}/agents/{agent}/sessions/{session}``: every run's
and instance's files) and its lock directory (``.agentloom-locks/{scope hash}``: command
markers and results) — the runtime's layout (``WorkspaceProvider``), the same paths
``agentloom.local.teardown`` removes embedded.

The event names a session only; what to delete comes from the platform store: the step
acts only while the session's teardown marker exists (written when the delete closed
the session: a live session has none), and builds the paths from the marker's space and
agent, so a forged or stray event cannot remove a live session's files. The id is
checked as the platform issues them, every path component as the runtime does, and the
directories' parents must resolve to where the layout puts them (no link out of the
volume); directories a command made read-only are given back to their owner first. A
missing directory counts as removed; any failure — a refusal, an error, a
timeout, an invoke the Lambda service refused — is ``TeardownIncomplete`` (503) on the
API side: the marker stays and a retried delete asks again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from agentloom.platform.access import check_id
from agentloom.platform.domain import Session
from agentloom.platform.errors import Conflict, NotFound
from agentloom.platform.store import PlatformStore
from agentloom.platform.teardown import TeardownIncomplete
from agentloom_runtime.workspace import WorkspaceError, provider

TEARDOWN_EVENT = "teardown_session"


class TeardownRefused(Conflict):
    """The step will not remove files for this event (no teardown marker, a malformed
    event, a path that does not stay where the layout puts it)."""

    code = "teardown_refused"


def session_directories(root: Path, session: Session) -> list[Path]:
    """The session's workspace and lock directories under ``root`` (existing or not): the
    workspace provider's layout, as embedded (``agentloom.local.teardown``)."""
    return provider.session_directories(root, session.space_id, session.agent_id,
                                        session.session_id)


def remove_session_files(store: PlatformStore, root: str,
                         event: Mapping[str, Any]) -> dict[str, Any]:
    """The step's side: remove the files of the session ``event`` names, if its teardown
    began (``TeardownRefused`` otherwise)."""
    if set(event) != {TEARDOWN_EVENT} or not isinstance(event[TEARDOWN_EVENT], str):
        raise TeardownRefused(f"a teardown event is exactly {{{TEARDOWN_EVENT!r}: id}}")
    session_id = event[TEARDOWN_EVENT]
    try:
        check_id(session_id, "ses", "session")
    except NotFound:
        raise TeardownRefused(f"not a session id: {session_id[:80]!r}") from None
    session = store.teardown.marker(session_id)
    if session is None:
        raise TeardownRefused(f"session {session_id} has no teardown marker; its files "
                              "stay", details={"session_id": session_id})
    base = Path(root)
    if not base.is_dir():
        raise WorkspaceError("volume_unavailable",
                             f"the workspace volume is not mounted at {root}")
    for directory in session_directories(base, session):
        _remove(base, directory)
    return {TEARDOWN_EVENT: session_id, "removed": True}


def _remove(root: Path, directory: Path) -> None:
    real_root = root.resolve()
    parent = real_root / directory.parent.relative_to(root)
    if directory.parent.resolve() != parent:  # a link among the parents: refuse
        raise TeardownRefused("a session directory's parent is not where the layout puts "
                              "it", details={"path": str(directory.relative_to(root))})
    provider.remove_directory(directory)  # no link followed; read-only dirs given back


class StepFilesRemoval:
    """The API's side: the step function (``function_name``) removes the files."""

    def __init__(self, client: Any, function_name: str) -> None:
        self.client = client  # botocore's lambda client (no stubs in the dev extra)
        self.function_name = function_name

    def remove(self, session_id: str) -> None:
        payload = json.dumps({TEARDOWN_EVENT: session_id}).encode()
        try:
            answer = self.client.invoke(FunctionName=self.function_name,
                                        InvocationType="RequestResponse", Payload=payload)
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "error")
            raise TeardownIncomplete(f"could not ask the step function to remove the "
                                     f"session's files ({code}); retry the delete",
                                     details={"aws_error": code}) from err
        body = answer["Payload"].read()
        if answer.get("FunctionError"):
            kind = _error_type(body)
            raise TeardownIncomplete(f"the step function could not remove the session's "
                                     f"files ({kind}); retry the delete",
                                     details={"step_error": kind})
        try:
            reply = json.loads(body)
        except ValueError:
            reply = None
        if reply != {TEARDOWN_EVENT: session_id, "removed": True}:
            raise TeardownIncomplete("the step function did not confirm the removal of "
                                     "the session's files; retry the delete",
                                     details={"step_error": "unconfirmed"})


def _error_type(body: bytes) -> str:
    """The ``errorType`` of a function error (never its message: it may quote a path)."""
    try:
        found = json.loads(body)
    except ValueError:
        return "unknown"
    kind = found.get("errorType") if isinstance(found, dict) else None
    return str(kind)[:80] if kind else "unknown"
