"""AgentLoom agents as MCP servers, driven by the ``mcp`` SDK's own client (Streamable
HTTP) against servers on 127.0.0.1 with a scripted model.

- On a real ``agentloom serve`` process, at 2026-07-28 (the client's default ``auto``:
  ``server/discover``): list the tools, ask and get the answer with progress
  notifications on the response stream; a second question in a busy session refused; a
  run cancelled with cancel_run; a run whose server died mid-model-call is interrupted,
  resumed with resume_run, reported blocked in MCP terms (the unknown and the
  resolve_run calls that move it on), resolved with send_again, and followed with
  run_status to its answer.
- On the ``api`` fixture (the same resolver and server in this process), at 2025-11-25
  (``mode="legacy"``: ``initialize``, no session id): the space's endpoint
  asks an agent by id; another member's call on alice's session is refused
  (session_not_found); no token or a wrong one is 401 before any MCP handling; a
  non-member is 404; the same route answers a Lambda-style event without a stream.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, redirect_stdout
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agentloom.api.client import Client as ApiClient
from agentloom.api.mcp_server import protocol
from agentloom.api.serve import main as serve_main
from agentloom.api.server import http_event

from .conftest import Api

Wait = Callable[..., Any]
TOOLS = {"ask", "run_status", "resume_run", "resolve_run", "cancel_run"}


@asynccontextmanager
async def _client(url: str, token: str | None, mode: str = "auto") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=60.0)) \
            as http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        yield client


def _report(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    report: dict[str, Any] = result.structured_content
    return report


def _has(err: BaseException, kind: type[BaseException]) -> bool:
    """``err`` is ``kind`` or a group (the SDK's task groups) holding one."""
    if isinstance(err, BaseExceptionGroup):
        return any(_has(inner, kind) for inner in err.exceptions)
    return isinstance(err, kind)


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content)


def test_the_meta_keys_are_the_sdks() -> None:
    assert protocol.META_VERSION == mcp_types.PROTOCOL_VERSION_META_KEY
    assert protocol.META_CAPABILITIES == mcp_types.CLIENT_CAPABILITIES_META_KEY
    assert protocol.META_SERVER_INFO == mcp_types.SERVER_INFO_META_KEY
    assert protocol.MODERN_VERSIONS == mcp_types.version.MODERN_PROTOCOL_VERSIONS


@contextmanager
def _serve(home: Path, env: dict[str, str], log: Path) -> Iterator[tuple[str, Any]]:
    """``python -m agentloom.api.serve`` (what ``agentloom serve`` runs) on a free port with
    the scripted model of ``support.mcp_model``: its API URL and the process."""
    command = [sys.executable, "-m", "agentloom.api.serve", "--home", str(home), "--port",
               "0", "--model-factory", "support.mcp_model:factory"]
    with log.open("a") as err, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err,
                                                 text=True, env=env) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "agentloom serve: http://127.0.0.1:" in line, line
            yield line.split()[2], proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def test_an_agent_on_agentloom_serve_over_mcp(tmp_path: Path, wait: Wait) -> None:
    """The flow of the module's first point, on a real ``agentloom serve``; the run of
    unknown outcome is made by killing the server mid-model-call and serving again."""
    home, gate = tmp_path / "home", tmp_path / "gate"
    tests = str(Path(__file__).resolve().parents[1])  # support.mcp_model, as pytest sees it
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "AGENTLOOM_TEST_GATE": str(gate),
           "PYTHONPATH": os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH"))
                                         if p)}
    printed = io.StringIO()
    with redirect_stdout(printed):  # `agentloom serve bootstrap` (test_api_serve runs it)
        assert serve_main(["bootstrap", "--home", str(home), "--user", "alice",
                           "--space", "Team"]) == 0
    boot = json.loads(printed.getvalue())
    token, space = boot["token"], boot["space_id"]
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async def first(url: str) -> dict[str, Any]:
        async with _client(url, token) as client:
            assert client.protocol_version == "2026-07-28"
            listed = await client.list_tools()
            assert {tool.name for tool in listed.tools} == TOOLS
            ask = next(tool for tool in listed.tools if tool.name == "ask")
            assert "Helper" in (ask.description or "") and ask.output_schema
            result = await client.call_tool("ask", {"question": "Q what is 2+2"},
                                            progress_callback=on_progress)
            done = _report(result)
            assert done["status"] == "completed" and done["done"]
            assert _text(result) == done["answer"] == "Answer to: Q what is 2+2"
            values = [value for value, _ in seen]
            assert values and values == sorted(values)  # the run's events, in order
            assert any(m == "run.status (completed)" for _, m in seen), seen

            never = _report(await client.call_tool("ask", {"question": "Q never ends",
                                                           "wait_seconds": 0}))
            assert never["status"] in ("queued", "running") and not never["done"]
            assert never["next"][0].startswith("run_status ")
            busy = await client.call_tool("ask", {"question": "Q again",
                                                  "session_id": never["session_id"]})
            assert busy.is_error and _text(busy).startswith("run_active:")
            cancelled = _report(await client.call_tool("cancel_run", {
                "session_id": never["session_id"], "run_id": never["run_id"]}))
            assert cancelled["status"] == "cancelled"

            hang = _report(await client.call_tool("ask", {"question": "Q hang please",
                                                          "wait_seconds": 0}))
            return {"session_id": hang["session_id"], "run_id": hang["run_id"]}

    async def second(url: str, ref: dict[str, Any]) -> None:
        async with _client(url, token) as client:
            stopped = _report(await client.call_tool("run_status", ref))
            assert stopped["status"] == "interrupted"
            assert stopped["next"] == [f"resume_run {json.dumps(ref)}"]
            await client.call_tool("resume_run", ref)
            blocked_call = await client.call_tool("run_status", {**ref, "wait_seconds": 10})
            blocked = _report(blocked_call)
            assert blocked["status"] == "blocked" and blocked["way_out"] == "resolve"
            assert blocked["unknown"] and "blocked" in _text(blocked_call)
            assert blocked["next"] == [
                f"resolve_run {json.dumps({**ref, 'verdict': 'send_again'})}",
                f"resolve_run {json.dumps({**ref, 'verdict': 'treat_as_failed'})}"]
            resolved = _report(await client.call_tool("resolve_run",
                                                      {**ref, "verdict": "send_again"}))
            assert resolved["run_id"] == ref["run_id"]
            answered = _report(await client.call_tool("run_status",
                                                      {**ref, "wait_seconds": 10}))
            assert answered["status"] == "completed"
            assert answered["answer"] == "Answer to: Q hang please"

    with _serve(home, env, tmp_path / "serve.log") as (api, proc):
        with ApiClient(api.removesuffix("/api/v1"), token) as admin:
            agent = admin.create_agent(space, "Helper", {
                "prompt": "You answer questions.", "model": {"model": "m"}}).agent
            admin.publish(space, agent.agent_id)
        url = f"{api}/spaces/{space}/agents/{agent.agent_id}/mcp"
        ref = asyncio.run(first(url))
        wait(lambda: gate.with_suffix(".started").exists(), what="the hanging model call")
        proc.kill()  # the server dies while the model call is out: its outcome is unknown
        proc.wait(30)
    gate.touch()
    with _serve(home, env, tmp_path / "serve.log") as (api, _):
        asyncio.run(second(f"{api}/spaces/{space}/agents/{agent.agent_id}/mcp", ref))


def test_the_space_endpoint_auth_and_ownership(api: Api, wait: Wait) -> None:
    space_url = f"{api.url}/api/v1/spaces/{api.space_id}/mcp"

    async def flow() -> None:
        async with _client(space_url, api.tokens["alice"], mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            listed = await client.list_tools()
            ask = next(tool for tool in listed.tools if tool.name == "ask")
            assert ask.input_schema["properties"]["agent_id"]["enum"] == [api.agent_id]
            done = _report(await client.call_tool("ask", {"question": "Q hello",
                                                          "agent_id": api.agent_id}))
            assert done["status"] == "completed" and done["answer"] == "Answer to: Q hello"
        ref = {"session_id": done["session_id"], "run_id": done["run_id"]}
        async with _client(space_url, api.tokens["bob"], mode="legacy") as other:
            refused = await other.call_tool("run_status", ref)
            assert refused.is_error and _text(refused).startswith("session_not_found:")
            assert "Q hello" not in json.dumps(refused.structured_content)
        for token in (None, "agl_not-a-token"):
            with pytest.raises(BaseException) as refused_connect:
                async with _client(space_url, token) as client:
                    await client.list_tools()
            assert _has(refused_connect.value, MCPError), refused_connect.value

    asyncio.run(flow())
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for token, status in ((None, 401), ("agl_not-a-token", 401), (api.tokens["eve"], 404)):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        answer = httpx.post(space_url, json=message, headers=headers)
        assert answer.status_code == status and "error" in answer.json()
    alice = {"Authorization": f"Bearer {api.tokens['alice']}"}
    assert httpx.get(space_url, headers=alice).headers["allow"] == "POST"  # stateless
    taken = httpx.post(space_url, headers=alice,
                       json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert taken.status_code == 202 and taken.content == b""
    modern = {**alice, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
    for headers, params, status, code in (
            (modern, None, 400, -32602),  # no _meta envelope
            (modern, {"_meta": {protocol.META_VERSION: "2026-07-28",
                                protocol.META_CAPABILITIES: {}}}, 200, None),
            ({**modern, "Mcp-Method": "tools/call"}, {"_meta": {
                protocol.META_VERSION: "2026-07-28", protocol.META_CAPABILITIES: {}}},
             400, -32020),  # the header says another method
            ({**alice, "MCP-Protocol-Version": "1999-01-01"}, None, 400, -32022)):
        answer = httpx.post(space_url, headers=headers,
                            json={**message, **({"params": params} if params else {})})
        assert answer.status_code == status, answer.text
        assert answer.json().get("error", {}).get("code") == code
    # the same route without a stream (as the Lambda calls it): JSON
    event = http_event("POST", f"/api/v1/spaces/{api.space_id}/mcp",
                       {"authorization": f"Bearer {api.tokens['alice']}",
                        "content-type": "application/json",
                        "accept": "application/json, text/event-stream"},
                       json.dumps(message).encode(), "127.0.0.1")
    from agentloom.api.app import build_app

    app = build_app(api.platform.admin, api.platform.sessions, api.platform.tokens)
    response = app.resolve(event, None)
    assert response["statusCode"] == 200
    body = json.loads(response["body"])
    assert {tool["name"] for tool in body["result"]["tools"]} == TOOLS
