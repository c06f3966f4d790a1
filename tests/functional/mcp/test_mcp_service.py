"""McpService against real MCP servers on 127.0.0.1: both Streamable HTTP revisions,
legacy SSE, credentials, content mapping, caps, errors, timeouts, the SSRF guard."""

from __future__ import annotations

import time
from typing import Any

import pytest
from functional.mcp.conftest import ALICE, BOB, EVE, Env
from functional.mcp.servers import TOKEN, Running, change_lookup, serve

from agentloom.mcp import McpPolicy, McpSchemaChanged, McpService, McpToolFailure
from agentloom.mcp.connect import open_client
from agentloom.platform.errors import Conflict, Forbidden, Invalid, NotFound
from agentloom_runtime.snapshot import McpToolBinding


def _binding(env: Env, resource_id: str, tool: str) -> McpToolBinding:
    from agentloom.mcp.service import run_sync, tool_digest

    resource = env.service.resource(env.space_id, resource_id)
    assert resource is not None
    listed = {t.name: t for t in run_sync(env.service.list_tools(resource))}
    return McpToolBinding(resource_id=resource_id, tool=tool, alias=tool,
                          parameters=dict(listed[tool].input_schema),
                          schema_digest=tool_digest(listed[tool]))


def _register(env: Env, url: str, **spec: Any) -> str:
    return env.service.create(ALICE, env.space_id, "srv",
                              {"transport": "streamable_http", "url": url, **spec}).resource_id


@pytest.mark.parametrize("protocol,expected", [("auto", "2026-07-28"),
                                               ("2026-07-28", "2026-07-28"),
                                               ("2025-11-25", "2025-11-25")])
async def test_streamable_http_both_revisions(env: Env, http_server: Running,
                                              protocol: str, expected: str) -> None:
    rid = _register(env, http_server.url, protocol=protocol)
    resource = env.service.resource(env.space_id, rid)
    assert resource is not None
    async with open_client(resource.spec, None, env.service.policy) as client:
        assert client.protocol_version == expected
    value = await env.service.call(env.space_id, _binding(env, rid, "add"), {"a": 2, "b": 3})
    assert value == "5"
    assert http_server.state.calls[-1] == ("add", {"a": 2, "b": 3})



def test_sse_and_bearer_credential(env: Env) -> None:
    with serve("sse", auth=True) as running:
        made = env.service.create(ALICE, env.space_id, "sse", {
            "transport": "sse", "url": running.url},
            credential={"kind": "bearer", "value": TOKEN})
        assert made.credential_kind == "bearer" and made.sealed_credential
        binding = _binding(env, made.resource_id, "add")
        from agentloom.mcp.service import run_sync
        assert run_sync(env.service.call(env.space_id, binding, {"a": 1, "b": 1})) == "2"
        assert f"Bearer {TOKEN}" in running.state.auth_seen
        # a wrong credential: the server says 401, the tool fails clearly
        env.service.update(ALICE, env.space_id, made.resource_id, revision=1,
                           credential={"kind": "bearer", "value": "wrong"})
        with pytest.raises(McpToolFailure) as failed:
            run_sync(env.service.call(env.space_id, binding, {"a": 1, "b": 1}))
        assert failed.value.code == "mcp_credential_refused"
        assert "refused the resource's bearer credential (HTTP 401)" in failed.value.message
        assert "wrong" not in failed.value.message
    # the token is stored sealed: not in the raw SQLite file
    raw = env.path.read_bytes() + (env.path.with_name(env.path.name + "-wal").read_bytes()
                                   if env.path.with_name(env.path.name + "-wal").exists()
                                   else b"")
    assert TOKEN.encode() not in raw and b"wrong" not in raw


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_a_401_says_the_credential_was_refused(env: Env, protocol: str) -> None:
    """Streamable HTTP (issue 17): a 401 is "the credential was refused" (or "needs
    one"), not a generic server error — discovery and calls alike."""
    from agentloom.mcp.service import McpServerFailed, run_sync

    with serve("http", auth=True) as running:
        rid = env.service.create(ALICE, env.space_id, "srv", {
            "transport": "streamable_http", "url": running.url, "protocol": protocol},
            credential={"kind": "bearer", "value": TOKEN}).resource_id
        binding = _binding(env, rid, "add")
        env.service.update(ALICE, env.space_id, rid, revision=1,
                           credential={"kind": "header", "name": "X-Api-Key",
                                       "value": "not-the-token"})
        with pytest.raises(McpToolFailure) as refused:
            run_sync(env.service.call(env.space_id, binding, {"a": 1, "b": 1}))
        assert refused.value.code == "mcp_credential_refused"
        assert refused.value.details == {"status": 401}
        assert "header credential (HTTP 401)" in refused.value.message
        assert "not-the-token" not in refused.value.message
        env.service.update(ALICE, env.space_id, rid, revision=2, clear_credential=True)
        with pytest.raises(McpServerFailed) as listing:
            env.service.discover(ALICE, env.space_id, rid)
        assert listing.value.details["reason"] == "mcp_credential_refused"
        assert "requires a credential (HTTP 401)" in listing.value.message
    assert not any(c[0] == "add" for c in running.state.calls)


@pytest.mark.parametrize("kind,protocol", [("http", "2025-11-25"), ("sse", "2025-11-25"),
                                           ("http", "2026-07-28")])
async def test_a_result_over_1_mib_is_cut_to_max_result_chars_not_refused(
        env: Env, kind: str, protocol: str) -> None:
    """Issue 17: a result streamed as one server-sent event over the SDK's 1 MiB event
    limit ("Server-sent event exceeded the 1048576 byte limit", or mcp_unreachable on
    legacy SSE) gets the resource's cap instead: cut to max_result_chars."""
    with serve(kind) as running:
        transport = "sse" if kind == "sse" else "streamable_http"
        rid = env.service.create(ALICE, env.space_id, "big", {
            "transport": transport, "url": running.url, "protocol": protocol}).resource_id
        value = await env.service.call(env.space_id, _binding(env, rid, "big"),
                                       {"size": 1_500_000})
    assert value["truncated"] is True and value["total_chars"] == 1_500_000
    assert len(value["text"]) == 1_000_000  # the default max_result_chars


async def test_a_lost_session_starts_a_new_one_and_runs_the_call_once(
        env: Env, http_server: Running) -> None:
    """Issue 17: a 404 for the session id means the server forgot the session (the
    request never ran); the client starts a new session and sends the call again —
    once: a server that forgets again fails the call, which ran nowhere."""
    rid = _register(env, http_server.url, protocol="2025-11-25")
    binding = _binding(env, rid, "add")
    http_server.state.forget = 1
    assert await env.service.call(env.space_id, binding, {"a": 2, "b": 3}) == "5"
    assert http_server.state.forgotten == 1
    assert [c for c in http_server.state.calls if c[0] == "add"] == \
        [("add", {"a": 2, "b": 3})], "run exactly once, in the new session"
    http_server.state.forget = 5
    with pytest.raises(McpToolFailure) as lost:
        await env.service.call(env.space_id, binding, {"a": 1, "b": 1})
    assert lost.value.code == "mcp_session_lost" and "not run" in lost.value.message
    assert http_server.state.forgotten == 3  # the call and one retry, nothing more
    assert len([c for c in http_server.state.calls if c[0] == "add"]) == 1


def test_a_tool_that_requires_tasks_is_refused_at_discovery_publish_and_call(
        env: Env) -> None:
    """Issue 17: a tool with ``execution.taskSupport: required`` would always fail here
    (no MCP tasks): discovery marks it with the reason, publish refuses to bind it and
    a call (a binding made elsewhere) is refused before it is sent."""
    from agentloom.mcp import McpCapability
    from agentloom.mcp.service import run_sync, unusable

    with serve("http") as running:
        rid = _register(env, running.url, protocol="2025-11-25")
        tools = {t.name: t for t in env.service.discover(ALICE, env.space_id, rid)}
        reason = unusable(tools["long_job"])
        assert reason is not None and "requires MCP tasks" in reason
        assert unusable(tools["add"]) is None
        with pytest.raises(Invalid) as refused:
            McpCapability(env.service).pin(env.space_id, {"mcp_tools": [
                {"resource_id": rid, "tool": "long_job"}]})
        assert refused.value.details["fields"][0]["field"] == "config.mcp_tools.0.tool"
        assert "requires MCP tasks" in refused.value.message
        from agentloom.mcp.service import tool_digest
        binding = McpToolBinding(resource_id=rid, tool="long_job", alias="long_job",
                                 parameters=dict(tools["long_job"].input_schema),
                                 schema_digest=tool_digest(tools["long_job"]))
        with pytest.raises(McpToolFailure) as unsupported:
            run_sync(env.service.call(env.space_id, binding, {"items": 3}))
        assert unsupported.value.code == "mcp_tool_unsupported"
        assert running.state.calls == []


async def test_content_types_errors_and_caps(env: Env, http_server: Running) -> None:
    rid = _register(env, http_server.url, max_result_chars=5_000)
    svc = env.service
    picture = await svc.call(env.space_id, _binding(env, rid, "picture"), {})
    image = picture["content"][0]
    assert image["type"] == "image" and image["mime_type"] == "image/png"
    assert image["bytes"] == 8 and len(image["sha256"]) == 64
    assert "iVBOR" not in str(picture) and picture["content"][1] == "a tiny picture"
    big = await svc.call(env.space_id, _binding(env, rid, "big"), {"size": 20_000})
    assert big["truncated"] is True and big["total_chars"] == 20_000
    assert len(big["text"]) == 5_000
    small = await svc.call(env.space_id, _binding(env, rid, "big"), {"size": 100})
    assert small == "x" * 100
    with pytest.raises(McpToolFailure) as failed:
        await svc.call(env.space_id, _binding(env, rid, "fail"), {"reason": "because"})
    assert failed.value.code == "mcp_tool_error" and "because" in failed.value.message


async def test_hanging_server_times_out(env: Env, http_server: Running) -> None:
    rid = _register(env, http_server.url, timeout_seconds=0.5)
    started = time.monotonic()
    with pytest.raises(McpToolFailure) as failed:
        await env.service.call(env.space_id, _binding(env, rid, "hang"), {})
    assert failed.value.code == "mcp_timeout"
    assert time.monotonic() - started < 5


async def test_changed_schema_is_refused_before_the_call(env: Env,
                                                         http_server: Running) -> None:
    rid = _register(env, http_server.url)
    binding = _binding(env, rid, "lookup")
    assert await env.service.call(env.space_id, binding, {"key": "k"}) == \
        "found k"
    assert env.service.drifted(env.space_id, (binding,)) == set()
    change_lookup(http_server.server, http_server.state)
    calls = len(http_server.state.calls)
    with pytest.raises(McpSchemaChanged) as changed:
        await env.service.call(env.space_id, binding, {"key": "k"})
    assert "publish" in changed.value.message.lower()
    assert len(http_server.state.calls) == calls  # not sent
    assert env.service.drifted(env.space_id, (binding,)) == {"lookup"}


async def test_unreachable_and_missing(env: Env) -> None:
    rid = _register(env, "http://127.0.0.1:9/mcp", timeout_seconds=2)
    binding = McpToolBinding(resource_id=rid, tool="add", alias="add", parameters={},
                             schema_digest="x")
    with pytest.raises(McpToolFailure) as failed:
        await env.service.call(env.space_id, binding, {})
    assert failed.value.code == "mcp_unreachable"
    gone = binding.model_copy(update={"resource_id": "mcp_000000000000aaaaaaaa"})
    with pytest.raises(McpToolFailure) as missing:
        await env.service.call(env.space_id, gone, {})
    assert missing.value.code == "mcp_resource_missing"


@pytest.mark.parametrize("url,reason", [
    ("http://169.254.169.254/mcp", "metadata"), ("http://[fe80::1]/mcp", "link_local"),
    ("http://127.0.0.1:8000/mcp", "loopback"), ("http://10.0.0.8/mcp", "private")])
async def test_ssrf_guard(env: Env, url: str, reason: str) -> None:
    strict = McpService(env.store, env.service.secrets, McpPolicy())
    rid = _register(env, url)
    binding = McpToolBinding(resource_id=rid, tool="t", alias="t", parameters={},
                             schema_digest="x")
    with pytest.raises(McpToolFailure) as refused:
        await strict.call(env.space_id, binding, {})
    assert refused.value.code == "mcp_address_refused"
    assert refused.value.details["reason"] == reason


def test_resource_rules(env: Env) -> None:
    svc, space = env.service, env.space_id
    with pytest.raises(Forbidden):
        svc.create(BOB, space, "x", {"transport": "sse", "url": "http://a.example/sse"})
    with pytest.raises(NotFound):
        svc.list_resources(EVE, space)
    for spec, field in [({"transport": "sse"}, "spec"),
                        ({"transport": "streamable_http", "url": "ftp://x/"}, "spec"),
                        ({"transport": "streamable_http", "url": "http://u:p@x/"}, "spec"),
                        ({"transport": "stdio", "command": "x"}, None)]:
        with pytest.raises(Invalid) as bad:
            svc.create(ALICE, space, "x", spec)
        if field:
            assert bad.value.details["fields"][0]["field"].startswith(field)
    with pytest.raises(Invalid) as no_limits:  # sandbox limits are for stdio servers
        svc.create(ALICE, space, "x", {"transport": "sse", "url": "http://a.example/sse",
                                       "limits": {"memory_mb": 4096}})
    assert "limits" in no_limits.value.details["fields"][0]["message"]
    with pytest.raises(Invalid) as bad:
        svc.create(ALICE, space, "x", {"transport": "sse", "url": "http://a.example/sse"},
                   credential={"kind": "header", "name": "Host", "value": "v"})
    assert bad.value.details["fields"][0]["field"].startswith("credential")
    made = svc.create(ALICE, space, "x", {"transport": "sse", "url": "http://a.example/s"},
                      credential={"kind": "header", "name": "X-Api-Key", "value": "k1"})
    assert [r.resource_id for r in svc.list_resources(BOB, space)] == [made.resource_id]
    with pytest.raises(Conflict):
        svc.update(ALICE, space, made.resource_id, revision=7, name="y")
    kept = svc.update(ALICE, space, made.resource_id, revision=1, name="y")
    assert kept.sealed_credential == made.sealed_credential and kept.revision == 2
    credential = svc.credential(kept)
    assert credential is not None and credential.value == "k1"
    assert credential.header_name() == "X-Api-Key"
    svc.delete(ALICE, space, made.resource_id)
    with pytest.raises(NotFound):
        svc.get(ALICE, space, made.resource_id)


def test_sealed_credential_does_not_open_elsewhere(env: Env) -> None:
    made = env.service.create(ALICE, env.space_id, "x", {
        "transport": "sse", "url": "http://a.example/s"},
        credential={"kind": "bearer", "value": "tok"})
    other = env.service.create(ALICE, env.space_id, "y", {
        "transport": "sse", "url": "http://a.example/s"})
    moved = other.model_copy(update={"sealed_credential": made.sealed_credential,
                                     "credential_kind": "bearer"})
    with pytest.raises(Exception) as failed:
        env.service.credential(moved)
    assert "tok" not in str(failed.value)


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
async def test_an_oversized_response_is_refused_while_it_streams(
        env: Env, http_server: Running, protocol: str) -> None:
    rid = _register(env, http_server.url, max_result_chars=1_000, protocol=protocol)
    binding = _binding(env, rid, "big")
    with pytest.raises(McpToolFailure) as refused:
        await env.service.call(env.space_id, binding, {"size": 3_000_000})
    assert refused.value.code == "mcp_result_too_large"
    assert "x" * 100 not in refused.value.message
    # under the byte limit but over max_result_chars: cut to the cap
    cut = await env.service.call(env.space_id, binding, {"size": 50_000})
    assert cut["truncated"] and len(cut["text"]) == 1_000


def test_publish_refuses_reserved_aliases_and_unknown_tools(env: Env,
                                                            http_server: Running) -> None:
    from agentloom.mcp import McpCapability

    rid = _register(env, http_server.url)
    capability = McpCapability(env.service)
    with pytest.raises(Invalid) as reserved:
        capability.pin(env.space_id, {"mcp_tools": [
            {"resource_id": rid, "tool": "add", "alias": "skill_load"}]})
    assert reserved.value.details["fields"][0]["field"] == "config.mcp_tools.0.alias"
    with pytest.raises(Invalid) as unknown:
        capability.pin(env.space_id, {"mcp_tools": [{"resource_id": rid, "tool": "nope"}]})
    assert "add" in unknown.value.message  # it lists what the server has
    with pytest.raises(Invalid) as twice:
        capability.pin(env.space_id, {"mcp_tools": [
            {"resource_id": rid, "tool": "add"}, {"resource_id": rid, "tool": "add",
                                                  "alias": "add_again"}]})
    assert twice.value.details["fields"][0]["field"] == "config.mcp_tools.1.tool"
    pinned = capability.pin(env.space_id, {"mcp_tools": [
        {"resource_id": rid, "tool": "add"}, {"resource_id": rid, "tool": "big",
                                              "alias": "add"}]})
    assert [b["alias"] for b in pinned["mcp_tools"]] == ["add_2", "add"]
