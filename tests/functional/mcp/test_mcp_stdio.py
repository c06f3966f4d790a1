"""stdio MCP servers in the bubblewrap sandbox: the public ``mcp-server-time`` package
(an independently written server), a small SDK server that reports its environment
(the env credential arrives; the host's environment does not), and a Node server that
reserves WebAssembly memory at start (as Node's own ``fetch`` does): it needs more
address space than the default limit, and says so when it dies."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
from functional.mcp.conftest import ALICE, Env

from agentloom.mcp import McpPolicy, McpService, McpToolFailure
from agentloom.mcp.tools import McpCapability
from agentloom.platform.errors import Invalid
from agentloom.sandbox import BubblewrapRunner
from agentloom_runtime.snapshot import parse_snapshot
from agentloom_runtime.workspace import SandboxUnavailable

pytestmark = pytest.mark.sandbox

BASE = os.path.realpath(sys.base_prefix)
VENV = sys.prefix
PY = "3.11" if sys.version_info[:2] == (3, 11) else f"{sys.version_info[0]}.{sys.version_info[1]}"
# The interpreter and the virtualenv are mounted read-only at /skills/py and
# /skills/venv; the venv's packages are put on the path by the command.
PREAMBLE = (f"import sys; sys.path.insert(0, '/skills/venv/lib/python{PY}/site-packages'); ")
ENV_SERVER = PREAMBLE + (
    "import os; from mcp.server.mcpserver import MCPServer; s = MCPServer('env', "
    "log_level='ERROR')\n@s.tool()\ndef environment() -> str:\n    'The environment.'\n"
    "    return __import__('json').dumps(dict(os.environ))\ns.run('stdio')")


# A dependency-free Node MCP server (newline-delimited JSON-RPC on stdio) that, like any
# server using Node's fetch (undici's WebAssembly parser), reserves wasm memory at start.
NODE_SERVER = """
new WebAssembly.Memory({initial: 1});
const send = (m) => process.stdout.write(JSON.stringify(m) + "\\n");
require("readline").createInterface({input: process.stdin}).on("line", (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  const ok = (result) => send({jsonrpc: "2.0", id: m.id, result});
  if (m.method === "initialize") ok({protocolVersion: m.params.protocolVersion,
    capabilities: {tools: {}}, serverInfo: {name: "node", version: "1"}});
  else if (m.method === "tools/list") ok({tools: [{name: "echo", description: "Echo.",
    inputSchema: {type: "object", properties: {text: {type: "string"}},
                  required: ["text"]}}]});
  else if (m.method === "tools/call") ok({content: [{type: "text",
    text: "node says " + m.params.arguments.text + " " + (process.env.API_KEY || "")}]});
  else send({jsonrpc: "2.0", id: m.id, error: {code: -32601, message: "no such method"}});
});
"""


def _spec(code: str, *args: str) -> dict[str, object]:
    return {"transport": "stdio", "command": "/usr/bin/env",
            "args": ["LD_LIBRARY_PATH=/skills/py/lib", f"/skills/py/bin/python{PY}", "-c",
                     code, *args],
            "mounts": {BASE: "py", VENV: "venv"}, "timeout_seconds": 30}


@pytest.fixture
def stdio(env: Env) -> McpService:
    runner = BubblewrapRunner(sandbox_user=(65534, 65534) if os.geteuid() == 0 else None)
    try:
        runner.ensure_available()
    except SandboxUnavailable as exc:
        pytest.skip(f"bubblewrap sandbox unusable here: {exc.message}")
    return McpService(env.store, env.service.secrets,
                      McpPolicy(stdio_roots=(BASE, VENV), sandbox=runner))


def test_mcp_server_time_in_the_sandbox(env: Env, stdio: McpService) -> None:
    code = PREAMBLE + ("import runpy; runpy.run_module('mcp_server_time', "
                       "run_name='__main__')")
    resource = stdio.create(ALICE, env.space_id, "time", _spec(code, "--local-timezone",
                                                                "UTC"))
    capability = McpCapability(stdio)
    pinned = capability.pin(env.space_id, {"mcp_tools": [
        {"resource_id": resource.resource_id, "tool": "get_current_time",
         "alias": "time_now"}]})
    snapshot = parse_snapshot({"agent_id": "a", "space_id": env.space_id,
                               "model": {"model": "m"}, **pinned})
    binding = snapshot.mcp_tools[0]
    assert binding.alias == "time_now" and "timezone" in json.dumps(binding.parameters)
    from agentloom.mcp.service import run_sync
    value = run_sync(stdio.call(env.space_id, binding, {"timezone": "Europe/Paris"}))
    text = value if isinstance(value, str) else json.dumps(value)
    assert "Europe/Paris" in text and "datetime" in text


def test_env_credential_reaches_only_the_server(env: Env, stdio: McpService) -> None:
    os.environ["AGENTLOOM_HOST_ONLY"] = "host-secret"
    try:
        resource = stdio.create(ALICE, env.space_id, "env", _spec(ENV_SERVER),
                                credential={"kind": "env", "name": "API_KEY",
                                            "value": "k-123"})
        capability = McpCapability(stdio)
        pinned = capability.pin(env.space_id, {"mcp_tools": [
            {"resource_id": resource.resource_id, "tool": "environment"}]})
        binding = parse_snapshot({"agent_id": "a", "space_id": env.space_id,
                                  "model": {"model": "m"}, **pinned}).mcp_tools[0]
        from agentloom.mcp.service import run_sync
        value = run_sync(stdio.call(env.space_id, binding, {}))
        seen = json.loads(value if isinstance(value, str) else value["content"][0])
    finally:
        del os.environ["AGENTLOOM_HOST_ONLY"]
    assert seen["API_KEY"] == "k-123"
    assert "AGENTLOOM_HOST_ONLY" not in seen and seen["HOME"] == "/workspace"


def test_stdio_rules(env: Env, stdio: McpService) -> None:
    outside = _spec("pass") | {"mounts": {"/etc": "etc"}}
    resource = stdio.create(ALICE, env.space_id, "x", outside)
    from agentloom.mcp.service import run_sync
    from agentloom_runtime.snapshot import McpToolBinding
    binding = McpToolBinding(resource_id=resource.resource_id, tool="t", alias="t",
                             parameters={}, schema_digest="x")
    with pytest.raises(McpToolFailure) as refused:
        run_sync(stdio.call(env.space_id, binding, {}))
    assert refused.value.code == "mcp_sandbox_unavailable"
    # without a sandbox a deployment refuses stdio resources outright
    with pytest.raises(Invalid) as no_sandbox:
        env.service.create(ALICE, env.space_id, "x", _spec("pass"))
    assert no_sandbox.value.code == "mcp_stdio_unavailable"
    with pytest.raises(Invalid):
        stdio.create(ALICE, env.space_id, "x", _spec("pass"),
                     credential={"kind": "bearer", "value": "t"})


def _node(stdio: McpService, env: Env, **spec: object) -> str:
    node = shutil.which("node")
    if node is None or not node.startswith("/usr/"):
        pytest.skip("no Node.js under /usr on this machine")
    return stdio.create(ALICE, env.space_id, "node", {
        "transport": "stdio", "command": node, "args": ["-e", NODE_SERVER],
        "protocol": "2025-11-25", "timeout_seconds": 30, **spec},
        credential={"kind": "env", "name": "API_KEY", "value": "k-node-secret"}).resource_id


def test_a_server_that_dies_at_start_says_why_and_under_which_limits(
        env: Env, stdio: McpService) -> None:
    """Issue 17: a Node server dies at start under the default 1 GiB address space; the
    failure names the exit, the server's own last words and the limits to raise —
    not the SDK's bare "Connection closed"."""
    from agentloom.mcp.service import McpServerFailed

    rid = _node(stdio, env)
    with pytest.raises(McpServerFailed) as failed:
        stdio.discover(ALICE, env.space_id, rid)
    assert failed.value.details["reason"] == "mcp_server_exited"
    message = failed.value.message
    assert "exited with status 1 before it answered" in message
    assert "WebAssembly.Memory(): could not allocate memory" in message  # its stderr
    assert "memory_mb=1024" in message and "spec.limits" in message
    assert "Connection closed" not in message


def test_per_resource_limits_let_a_node_server_run(env: Env, stdio: McpService) -> None:
    """The same server with a larger address space (``spec.limits.memory_mb``) starts,
    lists its tool and answers; the limits are validated per field."""
    from agentloom.mcp.service import run_sync, tool_digest
    from agentloom_runtime.snapshot import McpToolBinding

    rid = _node(stdio, env, limits={"memory_mb": 16_384, "cpu_seconds": 30})
    tool = next(t for t in stdio.discover(ALICE, env.space_id, rid) if t.name == "echo")
    binding = McpToolBinding(resource_id=rid, tool="echo", alias="echo",
                             parameters=dict(tool.input_schema),
                             schema_digest=tool_digest(tool))
    assert run_sync(stdio.call(env.space_id, binding, {"text": "hi"})) == \
        "node says hi k-node-secret"
    with pytest.raises(Invalid) as small:
        stdio.create(ALICE, env.space_id, "x", _spec("pass") | {"limits": {"memory_mb": 8}})
    assert small.value.details["fields"][0]["field"] == "spec.limits.memory_mb"
