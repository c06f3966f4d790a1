"""The workspace disk quota holds inside the sandbox: commands that try to write far more
stop, report ``disk_quota_exceeded``, and the host never holds more than the quota plus
one file limit. Files persist; a workspace over its quota can still be cleaned up."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest

from agentloom.sandbox._quota import disk_usage
from agentloom_runtime.workspace import CommandLimits, CommandResult, CommandSpec, MarkerStore

pytestmark = pytest.mark.sandbox

MB = 1024 * 1024
QUOTA_MB, FILE_MB = 64, 32
LIMITS = CommandLimits(disk_quota_mb=QUOTA_MB, file_size_mb=FILE_MB)
BOUND = (QUOTA_MB + FILE_MB) * MB
_ids = itertools.count()

WRITERS = {
    "sequential files": f"for i in $(seq 1 40); do head -c {FILE_MB}M /dev/zero > f$i; done",
    "parallel files": f"for i in $(seq 1 40); do head -c {FILE_MB}M /dev/zero > f$i & done; "
                      "wait",
    "one process": "python3 -c \"b = b'x' * (1 << 20)\n"
                   "for i in range(100):\n"
                   "    with open('p%d' % i, 'wb') as f:\n"
                   f"        for _ in range({FILE_MB}): f.write(b)\n\"",
}


def _run(runner: Any, ws: Any, command: str, limits: CommandLimits = LIMITS) -> CommandResult:
    spec = CommandSpec(request_id=f"quota-{next(_ids)}", command=command, timeout_s=120,
                       limits=limits)
    result = runner.run_sync(spec, ws.root, ws.lock_dir)
    assert MarkerStore(ws.lock_dir).pending() == []
    return result


def _on_disk(root: Path) -> int:
    return disk_usage(root).bytes


def _give(path: Path, sandbox_user: Any) -> None:
    """Host-made files belong to the sandbox user, as the file tools make them."""
    if sandbox_user is not None:
        os.chown(path, *sandbox_user)


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_many_large_files_stop_at_the_quota(runner: Any, ws: Any, writer: str) -> None:
    result = _run(runner, ws, WRITERS[writer])  # each would write 1.3-3.2 GB
    assert result.error == "disk_quota_exceeded", result
    assert result.exit_code != 0 and not result.timed_out
    used = _on_disk(ws.root)
    assert QUOTA_MB * MB <= used <= BOUND, used / MB
    assert len(list(ws.root.iterdir())) >= 2  # what was written persists


def test_remaining_quota_caps_a_single_file(runner: Any, ws: Any, sandbox_user: Any) -> None:
    """A workspace already holding 40 MB of its 64: no file may grow past the 24 left."""
    prior = ws.root / "prior.bin"
    prior.write_bytes(b"p" * (40 * MB))
    _give(prior, sandbox_user)
    result = _run(runner, ws, "head -c 30M /dev/zero > big.bin")
    assert result.exit_code != 0, result
    assert result.error == "disk_quota_exceeded"  # the model is told why
    assert (ws.root / "big.bin").stat().st_size <= 24 * MB
    assert _on_disk(ws.root) <= QUOTA_MB * MB + MB


def test_over_quota_workspace_can_still_be_cleaned(runner: Any, ws: Any,
                                                   sandbox_user: Any) -> None:
    """Over the quota (the file tools wrote it), commands still run and may delete; they
    only may not grow the workspace (and a failure there is reported as the quota's)."""
    (ws.root / "junk").mkdir()
    _give(ws.root / "junk", sandbox_user)
    for i in range(3):
        (ws.root / "junk" / f"j{i}").write_bytes(b"j" * (30 * MB))
        _give(ws.root / "junk" / f"j{i}", sandbox_user)
    ls = _run(runner, ws, "ls junk | wc -l")
    assert ls.exit_code == 0 and ls.stdout_head.strip() == "3" and ls.error is None
    grow = _run(runner, ws, "head -c 1M /dev/zero > more.bin")
    assert grow.exit_code != 0 and grow.error == "disk_quota_exceeded"
    clean = _run(runner, ws, "rm -rf junk more.bin && echo clean")
    assert clean.exit_code == 0 and clean.stdout_head == "clean\n" and clean.error is None
    assert _on_disk(ws.root) < MB


def test_a_command_within_the_quota_is_untouched(runner: Any, ws: Any) -> None:
    result = _run(runner, ws, "head -c 10M /dev/zero > ok.bin && echo done")
    assert result.exit_code == 0 and result.error is None and result.stdout_head == "done\n"
    assert (ws.root / "ok.bin").stat().st_size == 10 * MB
