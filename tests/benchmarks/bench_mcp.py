"""MCP call overhead over a direct local call.

Run: PYTHONPATH=tests .venv/bin/python tests/benchmarks/bench_mcp.py   (prints; asserts none)

The same tool (``add(a, b)``) four ways, median and p95 of N calls on this machine:

- **direct**: the ToolDefinition handler of a local Python tool awaited in-process;
- **session per call** (what runs do, ``McpService.call``): connect, list the tools to
  check the published schema digest, call, close — over Streamable HTTP with the
  stateless 2026-07-28 core (``auto``), with the 2025-11-25 initialize handshake, over
  legacy SSE, and (fewer calls) a stdio server started in the bubblewrap sandbox;
- **one reused session**: N calls on one open client — the floor a connection pool
  could reach (no pool is built: see docs/mcp.md).

The server is the SDK's ``MCPServer`` served by uvicorn in a thread of this process, so
client and server share the 2 CPU cores and the GIL: figures are upper bounds of the
client's own overhead on loopback, not a network's latency.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from functional.mcp.servers import serve

from agentloom.crypto import LocalKeyring
from agentloom.mcp import McpPolicy, McpService
from agentloom.mcp.connect import open_client
from agentloom.mcp.service import tool_digest
from agentloom.platform.admin import AdminService
from agentloom.platform.identity import Principal
from agentloom.platform.secrets import CodecSecrets
from agentloom.platform.store import PlatformStore, SqliteItemStore
from agentloom_runtime.snapshot import McpToolBinding

ALICE = Principal("alice", "token")
BASE = os.path.realpath(sys.base_prefix)
N = 100


async def timed(label: str, n: int, call: Callable[[], Awaitable[Any]]) -> None:
    await call()  # warm up
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    p95 = samples[min(len(samples) - 1, int(len(samples) * 0.95))]
    print(f"{label:<48} n={n:<4} median {statistics.median(samples):8.3f} ms   "
          f"p95 {p95:8.3f} ms")


async def bench(service: McpService, space_id: str, url: str, sse_url: str) -> None:
    async def direct_add(context: Any, arguments: dict[str, Any]) -> Any:
        return arguments["a"] + arguments["b"]

    await timed("direct local handler", 1000, lambda: direct_add(None, {"a": 1, "b": 2}))
    for label, spec in [
            ("session per call, streamable HTTP 2026-07-28",
             {"transport": "streamable_http", "url": url, "protocol": "auto"}),
            ("session per call, streamable HTTP 2025-11-25",
             {"transport": "streamable_http", "url": url, "protocol": "2025-11-25"}),
            ("session per call, legacy SSE", {"transport": "sse", "url": sse_url})]:
        made = service.create(ALICE, space_id, "b", spec)
        tool = next(t for t in await service.list_tools(made) if t.name == "add")
        binding = McpToolBinding(resource_id=made.resource_id, tool="add", alias="add",
                                 parameters=dict(tool.input_schema),
                                 schema_digest=tool_digest(tool))
        def per_call(b: McpToolBinding = binding) -> Awaitable[Any]:
            return service.call(space_id, b, {"a": 1, "b": 2})

        await timed(label, N, per_call)
        async with open_client(made.spec, None, service.policy) as client:
            def reused(c: Any = client) -> Awaitable[Any]:
                return c.call_tool("add", {"a": 1, "b": 2})

            await timed(label.replace("session per call", "one reused session"), N, reused)
    await bench_stdio(service, space_id)


async def bench_stdio(service: McpService, space_id: str) -> None:
    from agentloom.sandbox import BubblewrapRunner
    from agentloom_runtime.workspace import SandboxUnavailable

    runner = BubblewrapRunner(sandbox_user=(65534, 65534) if os.geteuid() == 0 else None)
    try:
        runner.ensure_available()
    except SandboxUnavailable as exc:
        print(f"stdio: skipped ({exc.message})")
        return
    base, venv = BASE, sys.prefix
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    code = (f"import sys; sys.path.insert(0, '/skills/venv/lib/python{py}/site-packages'); "
            "import runpy; runpy.run_module('mcp_server_time', run_name='__main__')")
    stdio = McpService(service.platform, service.secrets,
                       McpPolicy(stdio_roots=(base, venv), sandbox=runner))
    made = stdio.create(ALICE, space_id, "time", {
        "transport": "stdio", "command": "/usr/bin/env",
        "args": ["LD_LIBRARY_PATH=/skills/py/lib", f"/skills/py/bin/python{py}", "-c", code],
        "mounts": {base: "py", venv: "venv"}})
    tool = next(t for t in await stdio.list_tools(made) if t.name == "get_current_time")
    binding = McpToolBinding(resource_id=made.resource_id, tool=tool.name, alias="t",
                             parameters=dict(tool.input_schema), schema_digest=tool_digest(tool))
    await timed("session per call, stdio in bubblewrap (time)", 10,
                lambda: stdio.call(space_id, binding, {"timezone": "UTC"}))


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    store = PlatformStore(SqliteItemStore(home / "p.sqlite3"))
    secrets = CodecSecrets(LocalKeyring(home / "k.key"), store)
    space = AdminService(store, secrets=secrets).create_space(ALICE, "Bench")
    service = McpService(store, secrets, McpPolicy(allow_loopback=True))
    with serve("http") as http, serve("sse") as sse:
        asyncio.run(bench(service, space.space_id, http.url, sse.url))
    store.close()


if __name__ == "__main__":
    main()
