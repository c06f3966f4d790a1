"""The workspace disk quota of one command, without privileges or daemons.

Before the start the workspace is measured (allocated bytes, like ``du``); the command's
``RLIMIT_FSIZE`` becomes ``min(file_size_mb, quota - usage)``, so no single file can take
more than what is left. While it runs, ``QuotaWatch`` polls and kills the sandbox once
the workspace holds more than the quota (or more than it held at the start, when it was
already over): a cheap ``statvfs`` of the workspace's filesystem every few milliseconds
triggers an exact scan when the filesystem has grown by more than the headroom, and an
exact scan also runs periodically (a filesystem that others shrink could hide growth).
Files persist: nothing is ever deleted or truncated by the watch.

The overshoot is what the command writes between two polls plus the kill; with the
per-file limit that keeps the host at about quota + one file limit. An unreadable
directory makes a scan incomplete; the filesystem's growth then counts instead.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MB = 1024 * 1024
QUOTA_EXCEEDED = "disk_quota_exceeded"  # CommandResult.error


@dataclass(frozen=True)
class Usage:
    bytes: int
    complete: bool  # False: an entry could not be read (its size is unknown)


def disk_usage(root: str | Path) -> Usage:
    """Bytes allocated under ``root`` (st_blocks × 512); hard links counted once,
    symlinks never followed."""
    seen: set[tuple[int, int]] = set()
    total, complete = 0, True
    stack = [os.fspath(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        complete = False
                        continue
                    if not is_dir and st.st_nlink > 1:
                        if (st.st_dev, st.st_ino) in seen:
                            continue
                        seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
                    if is_dir:
                        stack.append(entry.path)
        except OSError:
            complete = False
    return Usage(total, complete)


def _fs_used(path: str) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


class QuotaWatch:
    """Measure now (``start_usage``, ``remaining``); ``start(kill)`` polls in a thread
    until ``stop()``; ``exceeded`` says whether it killed the command."""

    def __init__(self, root: str | Path, quota_bytes: int, *, poll_s: float = 0.001,
                 far_poll_s: float = 0.01, near_bytes: int = 256 * MB,
                 scan_every_s: float = 1.0, use_statvfs: bool = True) -> None:
        self.root = os.fspath(root)
        self.quota = quota_bytes
        self.poll_s = poll_s  # within ``near_bytes`` of the ceiling
        self.far_poll_s = max(far_poll_s, poll_s)
        self.near_bytes = near_bytes
        self.scan_every_s = scan_every_s
        self.use_statvfs = use_statvfs
        self.start_usage = disk_usage(self.root).bytes
        self.ceiling = max(quota_bytes, self.start_usage)
        self.exceeded = False
        self.peak = self.start_usage  # the largest usage a scan saw
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def remaining(self) -> int:
        return max(self.quota - self.start_usage, 0)

    def file_limit(self, file_size_bytes: int) -> int:
        """The RLIMIT_FSIZE to apply: no file may take more than the quota has left."""
        return min(file_size_bytes, self.remaining)

    def start(self, kill: Callable[[], None]) -> None:
        self._thread = threading.Thread(target=self._run, args=(kill,),
                                        name="agentloom-quota", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def hit(self, file_size_bytes: int, exit_code: int | None) -> bool:
        """Whether the command ran into the quota: the watch stopped it, or it failed
        while its file-size limit was the quota's remainder and the workspace is full
        now (within 1 MiB of the quota)."""
        if self.exceeded:
            return True
        clamped = self.remaining < file_size_bytes
        return clamped and exit_code != 0 and disk_usage(self.root).bytes + MB >= self.quota

    def _run(self, kill: Callable[[], None]) -> None:
        fs_base = _fs_used(self.root) if self.use_statvfs else 0
        next_scan = time.monotonic() + self.scan_every_s
        not_before = 0.0
        wait = self.poll_s
        while not self._stop.wait(wait):
            fs_now = _fs_used(self.root) if self.use_statvfs else 0
            estimate = self.start_usage + fs_now - fs_base
            wait = self.poll_s if estimate + self.near_bytes > self.ceiling else self.far_poll_s
            now = time.monotonic()
            triggered = self.use_statvfs and estimate > self.ceiling and now >= not_before
            if not (triggered or now >= next_scan):
                continue
            usage = disk_usage(self.root)
            took = time.monotonic() - now
            used = usage.bytes if usage.complete or not self.use_statvfs else max(
                usage.bytes, estimate)
            self.peak = max(self.peak, used)
            if used > self.ceiling:
                self.exceeded = True
                kill()
                return
            # growth the scan does not see belongs to others: measure from here
            fs_base = fs_now - (used - self.start_usage)
            not_before = now + 4 * took  # a scan costs at most ~20% of the time
            next_scan = now + max(self.scan_every_s, 10 * took)
