"""CommandSpec / CommandResult contracts, output capping and the marker store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentloom_runtime.workspace import (
    CommandLimits,
    CommandResult,
    CommandSpec,
    MarkerStore,
    OutputCapture,
    WorkspaceError,
)


def test_spec_round_trips_through_json() -> None:
    spec = CommandSpec(request_id="r-1", command="echo hi && ls", cwd="src", timeout_s=12.5,
                       limits=CommandLimits(cpu_seconds=5, memory_mb=256, pids=16,
                                            file_size_mb=8, output_cap_bytes=1000),
                       skills={"pdf": "/skills/pdf"})
    again = CommandSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec
    assert again.resolved_argv() == ["/bin/sh", "-c", "echo hi && ls"]
    argv = CommandSpec(request_id="r-2", argv=("python3", "-c", "print(1)"))
    assert CommandSpec.from_dict(json.loads(json.dumps(argv.to_dict()))) == argv


@pytest.mark.parametrize("kwargs", [
    {"request_id": "../x", "command": "ls"},
    {"request_id": "r", "command": "ls", "argv": ("ls",)},
    {"request_id": "r"},
    {"request_id": "r", "command": ""},
    {"request_id": "r", "command": "a\x00b"},
    {"request_id": "r", "command": "x" * 20_000},
    {"request_id": "r", "argv": ()},
    {"request_id": "r", "command": "ls", "timeout_s": 0},
    {"request_id": "r", "command": "ls", "skills": {"../up": "/x"}},
])
def test_spec_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(WorkspaceError) as info:
        CommandSpec(**kwargs)  # type: ignore[arg-type]
    assert info.value.code == "invalid_argument"


def test_limits_validation() -> None:
    with pytest.raises(WorkspaceError):
        CommandLimits(pids=0)
    with pytest.raises(WorkspaceError):
        CommandLimits(memory_mb=True)
    assert CommandLimits.from_dict({"pids": 4, "unknown": 1}).pids == 4


def test_result_round_trip() -> None:
    result = CommandResult(request_id="r", exit_code=3, stdout_head="a", stdout_tail="b",
                           stdout_truncated=True, stdout_bytes=10, duration_s=0.5)
    assert CommandResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    with pytest.raises(WorkspaceError):
        CommandResult.from_dict({"request_id": "r", "exit_code": 0})


def test_output_capture_keeps_head_and_tail() -> None:
    cap = OutputCapture(10)
    for chunk in (b"0123", b"456789", b"abcdefghij"):
        cap.feed(chunk)
    assert cap.texts() == ("01234", "fghij") and cap.truncated and cap.total == 20
    small = OutputCapture(10)
    small.feed(b"12345678")
    assert small.texts() == ("12345", "678") and not small.truncated


def test_marker_store_lifecycle(tmp_path: Path) -> None:
    markers = MarkerStore(tmp_path / "locks")
    assert markers.pending() == [] and markers.lookup("r1") == ("absent", None)
    markers.claim("r1", {"runner": "test", "state": "starting"})
    assert [m["request_id"] for m in markers.pending()] == ["r1"]
    assert markers.lookup("r1") == ("started", None)
    with pytest.raises(WorkspaceError) as again:
        markers.claim("r1", {"runner": "test"})  # unknown fate: never re-run blindly
    assert again.value.code == "sandbox_marker_present"
    with pytest.raises(WorkspaceError):
        markers.claim("r2", {"runner": "test"})
    result = CommandResult(request_id="r1", exit_code=0, stdout_head="ok")
    markers.write_result(result)
    state, data = markers.lookup("r1")
    assert state == "done" and data is not None and data["stdout_head"] == "ok"
    markers.remove("r1")
    assert markers.pending() == [] and markers.read_result("r1") == result
    markers.claim("r2", {"runner": "test"})
    assert (tmp_path / "locks" / "markers" / "r2.json").exists()
