"""Line-range reads that never hold the whole file in memory.

One streaming pass hashes the file (sha256), counts lines and collects a forward range.
A negative ``start_line`` (``-100`` = the last 100 lines) is served by reading backwards
from the end after the hash pass, so a tail of a 50 MB log costs one hash pass plus a few
blocks. Lines are counted as ``count("\\n")`` plus one for a final unterminated line.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

CHUNK = 1 << 20
BACK_BLOCK = 64 * 1024


@dataclass(frozen=True)
class ReadRequest:
    start_line: int = 1  # 1-based; negative counts from the end
    end_line: int | None = None  # inclusive; None = as far as max_lines / max_bytes allow
    max_lines: int = 2000
    max_bytes: int = 64 * 1024


class _Collector:
    def __init__(self, start: int, end: int, max_bytes: int) -> None:
        self.start, self.end, self.max_bytes = start, end, max_bytes
        self.lines: list[bytes] = []
        self.size = 0
        self.full = False  # stopped by max_bytes
        self.cut_line = False

    def add(self, line_no: int, line: bytes) -> None:
        if self.full or not self.start <= line_no <= self.end:
            return
        if self.size + len(line) > self.max_bytes:
            self.full = True
            if not self.lines:  # one huge line: return its head rather than nothing
                self.lines.append(line[: self.max_bytes])
                self.cut_line = True
            return
        self.lines.append(line)
        self.size += len(line)


def _pass(fd: int, collector: _Collector | None) -> tuple[str, int, int]:
    """Hash, count lines, feed the collector. Returns (sha256, lines, bytes)."""
    digest = hashlib.sha256()
    newlines, total, line_no = 0, 0, 1
    partial = b""
    last = b""
    while True:
        chunk = os.read(fd, CHUNK)
        if not chunk:
            break
        digest.update(chunk)
        total += len(chunk)
        count = chunk.count(b"\n")
        newlines += count
        last = chunk[-1:]
        if collector is None or collector.full or line_no + count < collector.start \
                or line_no > collector.end:
            # the pending partial line is before the range (or past it): never collected
            line_no += count
            partial = b""
            continue
        pieces = (partial + chunk).split(b"\n")
        for piece in pieces[:-1]:
            collector.add(line_no, piece + b"\n")
            line_no += 1
        partial = pieces[-1]
    if collector is not None and partial:
        collector.add(line_no, partial)
    lines = newlines + (1 if total and last != b"\n" else 0)
    return digest.hexdigest(), lines, total


def _tail(fd: int, size: int, count: int, max_bytes: int) -> tuple[list[bytes], bool]:
    """The last ``count`` lines, reading backwards; stops after max_bytes (+1 block)."""
    pos, buf = size, b""
    ends_with_newline = size > 0 and os.pread(fd, 1, size - 1) == b"\n"
    needed = count + (1 if ends_with_newline else 0)
    while pos > 0 and buf.count(b"\n") < needed and len(buf) <= max_bytes + BACK_BLOCK:
        step = min(BACK_BLOCK, pos)
        pos -= step
        buf = os.pread(fd, step, pos) + buf
    lines = buf.split(b"\n")
    if ends_with_newline:
        lines = lines[:-1]
    if pos > 0 and len(lines) <= count:
        return [], False  # the range is larger than the byte budget
    picked = [line + b"\n" for line in lines[-count:]]
    if not ends_with_newline and picked:
        picked[-1] = picked[-1][:-1]
    return picked, True


def read_range(fd: int, req: ReadRequest) -> dict[str, Any]:
    """Everything the model needs: range, content, size, sha256 and truncation."""
    start = req.start_line
    collector = None
    if start > 0:
        end = req.end_line if req.end_line is not None else start + req.max_lines - 1
        end = min(end, start + req.max_lines - 1)
        collector = _Collector(start, end, req.max_bytes)
    sha, total_lines, size = _pass(fd, collector)
    if collector is None:  # tail request
        want = min(-start, total_lines, req.max_lines)
        start = max(total_lines - want + 1, 1)
        end = total_lines if req.end_line is None else min(req.end_line, total_lines)
        lines, ok = _tail(fd, size, total_lines - start + 1, req.max_bytes) if want else ([], True)
        collector = _Collector(start, end, req.max_bytes)
        if not ok:  # huge lines: fall back to a forward pass over the same fd
            os.lseek(fd, 0, os.SEEK_SET)
            _pass(fd, collector)
        else:
            for i, line in enumerate(lines):
                collector.add(start + i, line)
    got = len(collector.lines)
    last = collector.start + got - 1 if got else collector.start - 1
    wanted_end = min(req.end_line if req.end_line is not None else total_lines, total_lines)
    truncated = collector.cut_line or last < wanted_end
    data = b"".join(collector.lines)
    return {"size": size, "sha256": sha, "total_lines": total_lines,
            "start_line": collector.start, "end_line": last, "content":
            data.decode("utf-8", "replace"), "truncated": truncated,
            "next_start_line": last + 1 if truncated and last < total_lines else None,
            "line_truncated": collector.cut_line}
