"""The disk quota's parts without a sandbox: measuring a workspace, the file-size limit it
leaves, and the watch that stops a writer once the workspace holds more than its quota."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from agentloom.sandbox._quota import QuotaWatch, disk_usage

MB = 1024 * 1024


def _fill(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        fh.write(b"q" * size)
        fh.flush()
        os.fsync(fh.fileno())


def test_disk_usage_counts_allocated_bytes_once(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    _fill(tmp_path / "d" / "a", 2 * MB)
    os.link(tmp_path / "d" / "a", tmp_path / "hard")  # the same blocks: counted once
    os.symlink("/usr", tmp_path / "link")  # never followed
    with open(tmp_path / "sparse", "wb") as fh:
        fh.truncate(100 * MB)  # no blocks
    usage = disk_usage(tmp_path)
    assert usage.complete
    assert 2 * MB <= usage.bytes < 2 * MB + 256 * 1024


def test_file_limit_is_what_the_quota_leaves(tmp_path: Path) -> None:
    _fill(tmp_path / "a", 3 * MB)
    watch = QuotaWatch(tmp_path, 8 * MB)
    assert 3 * MB <= watch.start_usage < 4 * MB
    assert watch.file_limit(256 * MB) == watch.remaining == 8 * MB - watch.start_usage
    assert watch.file_limit(1 * MB) == 1 * MB
    full = QuotaWatch(tmp_path, 2 * MB)  # already over: nothing may grow
    assert full.file_limit(256 * MB) == 0 and full.ceiling == full.start_usage


def _writer(root: Path, stop: threading.Event, total: int) -> None:
    for i in range(total // MB):
        if stop.is_set():
            return
        _fill(root / f"w{i}", MB)
        time.sleep(0.001)


def test_the_watch_stops_a_writer_past_the_quota(tmp_path: Path) -> None:
    stop = threading.Event()
    watch = QuotaWatch(tmp_path, 16 * MB, poll_s=0.001, scan_every_s=0.05)
    writer = threading.Thread(target=_writer, args=(tmp_path, stop, 200 * MB))
    writer.start()
    watch.start(stop.set)
    writer.join(timeout=30)
    watch.stop()
    assert watch.exceeded and stop.is_set()
    assert 16 * MB < disk_usage(tmp_path).bytes <= 24 * MB
    assert watch.hit(256 * MB, None)


def test_the_watch_leaves_a_writer_within_the_quota_alone(tmp_path: Path) -> None:
    stop = threading.Event()
    watch = QuotaWatch(tmp_path, 64 * MB, poll_s=0.001, scan_every_s=0.02)
    watch.start(stop.set)
    _writer(tmp_path, stop, 8 * MB)
    time.sleep(0.1)
    watch.stop()
    assert not watch.exceeded and not stop.is_set()
    assert not watch.hit(256 * MB, 0) and not watch.hit(256 * MB, 1)  # not clamped


def test_scan_only_mode_for_shared_volumes(tmp_path: Path) -> None:
    """EFS: no statvfs trigger, periodic scans only (the command entry point's mode)."""
    stop = threading.Event()
    watch = QuotaWatch(tmp_path, 4 * MB, poll_s=0.01, far_poll_s=0.01, scan_every_s=0.02,
                       use_statvfs=False)
    watch.start(stop.set)
    _writer(tmp_path, stop, 64 * MB)
    watch.stop()
    assert watch.exceeded and disk_usage(tmp_path).bytes < 64 * MB


def test_the_fargate_entry_point_enforces_the_quota(tmp_path: Path) -> None:
    """``command_entry.run`` (the task's container side): the file-size limit is cut to
    what is left and its scan stops a writer past the quota."""
    from agentloom import command_entry
    from agentloom_runtime.workspace import CommandLimits, CommandSpec

    _fill(tmp_path / "prior", 2 * MB)
    big = command_entry.run(CommandSpec(
        request_id="fg-1", argv=("/bin/sh", "-c", "head -c 8M /dev/zero > one.bin"),
        limits=CommandLimits(disk_quota_mb=6, file_size_mb=64)), str(tmp_path))
    assert big.exit_code != 0 and big.error == "disk_quota_exceeded"
    assert (tmp_path / "one.bin").stat().st_size <= 4 * MB  # 6 - 2 left for one file
    slow = ("import time\n"
            "for i in range(200):\n"
            "    open('s%d' % i, 'wb').write(b'x' * (1 << 20)); time.sleep(0.01)\n")
    many = command_entry.run(CommandSpec(
        request_id="fg-2", argv=("python3", "-c", slow), timeout_s=30,
        limits=CommandLimits(disk_quota_mb=16, file_size_mb=4)), str(tmp_path))
    assert many.error == "disk_quota_exceeded" and many.duration_s < 10
    assert disk_usage(tmp_path).bytes <= 16 * MB + 64 * MB  # scans only, every 0.5 s
