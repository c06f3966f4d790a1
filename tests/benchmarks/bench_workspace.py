"""Workspace benchmarks (prints figures; asserts nothing).

    python tests/benchmarks/bench_workspace.py            # 10,000 files / 200 MB
    python tests/benchmarks/bench_workspace.py --quick    # 1,000 files / 20 MB

- workspace_grep (literal, case-insensitive, regex) over the generated tree;
- workspace_read of a 50 MB file's last 100 lines (time and peak Python memory);
- sandbox start-up latency: median of N ``true`` commands through BubblewrapRunner.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from agentloom_runtime.workspace import (
    CommandSpec,
    PosixWorkspaceStore,
    SandboxUnavailable,
    ScanBudget,
    StoreLimits,
    WorkspaceProvider,
)

NEEDLE = "needle-4f2a"


def generate_tree(root: Path, files: int, total_bytes: int) -> None:
    per_file = total_bytes // files
    line = b"the quick brown fox jumps over the lazy dog 0123456789 lorem ipsum dolor\n"
    body = (line * (per_file // len(line) + 1))[:per_file]
    for i in range(files):
        folder = root / f"pkg{i % 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        data = body if i % 100 else body[:-40] + f"\n{NEEDLE} {i}\n".encode().rjust(40, b" ")
        (folder / f"module_{i:05d}.txt").write_bytes(data)


def generate_log(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        i, written = 0, 0
        while written < size:
            chunk = b"".join(f"2026-10-09T12:00:00Z INFO request {j:09d} handled in 12ms\n"
                             .encode() for j in range(i, i + 10_000))
            fh.write(chunk)
            written += len(chunk)
            i += 10_000


async def bench_grep(store: PosixWorkspaceStore) -> None:
    cases: list[tuple[str, dict[str, Any]]] = [
        ("literal", {"regex": False}), ("case-insensitive", {"case_sensitive": False}),
        ("regex", {"regex": True})]
    for name, options in cases:
        pattern = NEEDLE if name != "regex" else r"needle-[0-9a-f]{4} \d+"
        started = time.perf_counter()
        result = await store.grep(pattern, max_results=100_000, **options)
        elapsed = time.perf_counter() - started
        mb = result["bytes_scanned"] / 1e6
        print(f"grep {name:17s} {elapsed * 1000:8.0f} ms  {result['files_scanned']:6d} files "
              f"{mb:7.1f} MB  {mb / elapsed:7.0f} MB/s  matches={len(result['matches'])} "
              f"truncated={result['truncated']} timed_out={result['timed_out']}")


async def bench_tail(store: PosixWorkspaceStore, log: Path) -> None:
    for attempt in ("first", "second"):
        tracemalloc.start()
        started = time.perf_counter()
        result = await store.read(log.name, start_line=-100)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"read last 100 lines of {result['size'] / 1e6:.0f} MB ({attempt}): "
              f"{elapsed * 1000:.0f} ms, peak Python memory {peak / 1e6:.2f} MB, "
              f"lines {result['start_line']}-{result['end_line']} of {result['total_lines']} "
              "(includes the sha256 pass)")


def bench_sandbox(runs: int) -> None:
    try:
        from agentloom.sandbox import BubblewrapRunner
    except ImportError as exc:
        print(f"sandbox: skipped ({exc})")
        return
    base = Path(tempfile.mkdtemp(prefix="agentloom-bench-", dir="/tmp"))
    base.chmod(0o755)
    try:
        user = (65534, 65534) if os.geteuid() == 0 else None
        runner = BubblewrapRunner(sandbox_user=user)
        try:
            runner.ensure_available()
        except SandboxUnavailable as exc:
            print(f"sandbox: unavailable ({exc.message})")
            return
        ws = WorkspaceProvider(base / "vol").for_instance("s", "a", "sess", "r", "main")
        if user:
            os.chown(ws.root, *user)
        times = []
        for i in range(runs):
            started = time.perf_counter()
            result = runner.run_sync(CommandSpec(request_id=f"b-{i}", argv=("/bin/true",)),
                                     ws.root, ws.lock_dir)
            times.append(time.perf_counter() - started)
            assert result.exit_code == 0, result
        raw = []
        spec = CommandSpec(request_id="raw", argv=("/bin/true",))
        for _ in range(runs):
            started = time.perf_counter()
            subprocess.run(runner.build_argv(spec, ws.root, "bench"), check=True,
                           env={"PATH": "/usr/bin:/bin"}, **runner._user_kwargs())
            raw.append(time.perf_counter() - started)
        print(f"bwrap alone (`true`), {runs} runs: median "
              f"{statistics.median(raw) * 1000:.1f} ms, min {min(raw) * 1000:.1f} ms")
        print(f"sandbox start-up (bwrap + markers + result, `true`), {runs} runs: "
              f"median {statistics.median(times) * 1000:.1f} ms, "
              f"p90 {sorted(times)[int(runs * 0.9) - 1] * 1000:.1f} ms, "
              f"min {min(times) * 1000:.1f} ms")
    finally:
        shutil.rmtree(base, ignore_errors=True)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="1,000 files / 20 MB")
    parser.add_argument("--sandbox-runs", type=int, default=21)
    parser.add_argument("--log-mb", type=int, default=50)
    args = parser.parse_args()
    files, total = (1_000, 20_000_000) if args.quick else (10_000, 200_000_000)
    tmp = Path(tempfile.mkdtemp(prefix="agentloom-bench-"))
    try:
        ws = WorkspaceProvider(tmp / "vol").for_instance("s", "a", "sess", "r", "main")
        limits = StoreLimits(regex_seconds=120.0, scan=ScanBudget(
            max_entries=100_000, max_files=100_000, max_bytes=1 << 30, seconds=120.0))
        store = PosixWorkspaceStore(ws.root, ws.lock_dir, limits=limits)
        started = time.perf_counter()
        generate_tree(ws.root / "tree", files, total)
        print(f"generated {files} files / {total / 1e6:.0f} MB in "
              f"{time.perf_counter() - started:.1f} s (python {sys.version.split()[0]}, "
              f"{os.cpu_count()} cpus)")
        await bench_grep(store)
        log = ws.root / "app.log"
        generate_log(log, args.log_mb * 1_000_000)
        await bench_tail(store, log)
        bench_sandbox(args.sandbox_runs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
