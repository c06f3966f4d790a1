"""Issue 12's must-show run, whole, through the HTTP API of the embedded platform with the
default capability set of ``agentloom serve`` (``embedded_capabilities``): an admin
imports a skill (zip), registers a real MCP server (Streamable HTTP on 127.0.0.1, with a
bearer credential), creates a knowledge base on a local embeddings endpoint and uploads a
document; the agent binds all three and is published; one member's run loads the skill,
runs its script in the bubblewrap sandbox with the skill mounted read-only, calls the MCP
tool, searches the base and answers citing the passage; the citations are read back
through the API, and nothing secret is stored in clear."""

from __future__ import annotations

import base64
import json
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from functional.mcp.servers import TOKEN, serve
from unit.knowledge.builders import hashing_server
from unit.skills.builders import hello_zip

from agentloom.api.app import build_app
from agentloom.api.server import ApiServer
from agentloom.local.capabilities import embedded_capabilities
from agentloom.local.embedded import EmbeddedPlatform
from agentloom.local.workspaces import NOBODY
from agentloom.platform.identity import Principal
from agentloom.sandbox import BubblewrapRunner
from agentloom_runtime.contracts import ModelRequest, ModelResponse, ToolCall
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.testing import FunctionModel, ScriptedModel
from agentloom_runtime.workspace import SandboxUnavailable

pytestmark = pytest.mark.sandbox
ALICE = Principal("alice", "token")
GUIDE = "# Refunds\n\nRefunds are paid within 14 days of the return.\n"


@dataclass
class Script:
    """skill_load → the skill's script → the MCP tool → knowledge_search → an answer that
    quotes the script's output, the tool's sum and the first citation id."""

    requests: list[ModelRequest] = field(default_factory=list)
    calls: ClassVar[list[tuple[str, dict[str, Any]]]] = [("skill_load", {"name": "hello"}),
             ("workspace_command", {"command": "python3 /skills/hello/scripts/x.py A; "
                                               "touch /skills/hello/w || echo read-only"}),
             ("calc_add", {"a": 40, "b": 2}),
             ("knowledge_search", {"query": "how long do refunds take", "top_k": 1})]

    def reply(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        results = [str(m.get("content")) for m in request.messages if m.get("role") == "tool"]
        if len(results) < len(self.calls):
            name, args = self.calls[len(results)]
            return ModelResponse(tool_calls=(ToolCall(f"c{len(results)}", name,
                                                      json.dumps(args)),))
        cited = re.findall(r"kb-[0-9a-f]{6}-\d+", results[3]) or [f"none in {results}"]
        return ModelResponse(content=f"Refunds take 14 days [{cited[0]}]; 40 + 2 = 42.")

    def factory(self, snapshot: AgentSnapshot) -> FunctionModel:
        return FunctionModel(self.reply)


@pytest.fixture
def home() -> Iterator[Path]:
    user = NOBODY if __import__("os").geteuid() == 0 else None
    try:
        BubblewrapRunner(sandbox_user=user).ensure_available()
    except SandboxUnavailable as exc:
        pytest.skip(f"bubblewrap sandbox unusable here: {exc.message}")
    base = Path(tempfile.mkdtemp(prefix="agentloom-e2e-", dir="/tmp"))
    base.chmod(0o755)  # the sandbox user must traverse to the workspace
    (base / "home").mkdir(mode=0o711)
    yield base / "home"
    shutil.rmtree(base, ignore_errors=True)


def test_one_run_uses_a_skill_an_mcp_tool_and_a_knowledge_base(home: Path) -> None:
    script = Script()
    platform = EmbeddedPlatform.open(home, model_factory=script.factory,
                                     capabilities=embedded_capabilities(home,
                                                                        allow_loopback=True))
    server = ApiServer(build_app(platform.admin, platform.sessions, platform.tokens),
                       platform.sessions).start()
    try:
        with serve("http", auth=True) as mcp, hashing_server() as embeddings:
            _run(platform, server.url, mcp, embeddings, script)
    finally:
        server.close()
        platform.close()


def _run(platform: EmbeddedPlatform, url: str, mcp: Any, embeddings: Any,
         script: Script) -> None:
    tokens = {u: platform.tokens.issue(u)[1] for u in ("alice", "bob")}
    space_id = platform.admin.create_space(ALICE, "Team").space_id
    platform.admin.set_member(ALICE, space_id, "bob", "member")

    def call(method: str, path: str, body: Any = None, user: str = "alice") -> Any:
        got = httpx.request(method, f"{url}/api/v1{path}", json=body, timeout=30,
                            headers={"Authorization": f"Bearer {tokens[user]}"})
        assert got.status_code < 300, (path, got.status_code, got.text)
        return got.json()

    spaces = f"/spaces/{space_id}"
    call("POST", f"{spaces}/skills",
         {"zip_base64": base64.b64encode(hello_zip()).decode()})
    resource = call("POST", f"{spaces}/mcp/resources", {
        "name": "Calculator", "spec": {"transport": "streamable_http", "url": mcp.url,
                                       "alias_prefix": "calc"},
        "credential": {"kind": "bearer", "value": TOKEN}})
    call("POST", f"{spaces}/mcp/resources/{resource['resource_id']}/discover")
    connection = call("POST", f"{spaces}/models/connections", {
        "name": "Embeddings", "spec": {"provider": "openai_compatible",
                                       "base_url": embeddings.url, "model_id": "chat-model"}})
    kb = call("POST", f"{spaces}/knowledge/bases", {
        "name": "Policies", "connection_id": connection["connection_id"],
        "document_model": "hash-passage", "query_model": "hash-query", "chunk_size": 200,
        "chunk_overlap": 0})
    call("POST", f"{spaces}/knowledge/bases/{kb['base_id']}/documents",
         {"name": "policies.md", "text": GUIDE})
    agent = call("POST", f"{spaces}/agents", {"name": "Helper", "config": {
        "prompt": "You help.", "model": {"model": "m"},
        "tools": ["workspace_command"], "skills": ["hello"],
        "mcp_tools": [{"resource_id": resource["resource_id"], "tool": "add"}],
        "knowledge_bases": [kb["base_id"]]}})
    agent_id = agent["agent"]["agent_id"] if "agent" in agent else agent["agent_id"]
    call("POST", f"{spaces}/agents/{agent_id}/publish", {})

    session = call("POST", f"{spaces}/sessions", {"agent_id": agent_id}, user="bob")
    sid = session["session_id"]
    run_id = call("POST", f"/sessions/{sid}/runs", {"question": "Q refunds and a sum"},
                  user="bob")["run"]["run_id"]
    deadline = time.monotonic() + 60
    view = call("GET", f"/sessions/{sid}/runs/{run_id}", user="bob")
    while (view["status"] in ("queued", "running") or view.get("driven")) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
        view = call("GET", f"/sessions/{sid}/runs/{run_id}", user="bob")
    assert view["status"] == "completed", view

    system = script.requests[0].messages[0]["content"]
    assert "hello" in system and "Says hello." in system  # the skill is listed, not loaded
    results = [str(m.get("content")) for m in script.requests[-2].messages
               if m.get("role") == "tool"]
    assert "Run `python3 /skills/hello/scripts/x.py`" in results[0]  # skill_load's body
    assert "hello from the skill ['A']" in results[1] and "read-only" in results[1]
    assert "42" in results[2] and ("add", {"a": 40, "b": 2}) in mcp.state.calls
    citations = call("GET", f"/sessions/{sid}/runs/{run_id}/citations", user="bob")["items"]
    assert citations[0]["document"] == "policies.md" and "14 days" in citations[0]["text"]
    assert f"[{citations[0]['citation_id']}]" in view["answer"]
    # alice (an owner, not the session's creator) may not read bob's citations
    denied = httpx.get(f"{url}/api/v1/sessions/{sid}/runs/{run_id}/citations",
                       headers={"Authorization": f"Bearer {tokens['alice']}"})
    assert denied.status_code == 404

    stored = b"".join(p.read_bytes() for p in platform.home.glob("agentloom.sqlite3*"))
    for secret in (TOKEN, "Refunds are paid within 14 days", "hello from the skill"):
        assert secret.encode() not in stored, secret
