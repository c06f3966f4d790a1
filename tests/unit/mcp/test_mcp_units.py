"""MCP pure logic: result mapping and caps, alias derivation, spec and credential
rules, and the ToolDefinition a binding becomes (identity, recovery flags, fingerprint)."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from pydantic import ValidationError

from agentloom.mcp.errors import McpToolFailure
from agentloom.mcp.resources import Credential, McpSpec
from agentloom.mcp.results import tool_value
from agentloom.mcp.tools import McpCapability, derive_alias
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.snapshot import McpToolBinding
from agentloom_runtime.tools import ToolRegistry


def _result(*content: Any, structured: Any = None, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), structured_content=structured,
                                is_error=error)


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def test_text_parts_become_one_string_and_structured_content_is_kept() -> None:
    assert tool_value(_result(_text("a"), _text("b")), max_chars=100) == "a\n\nb"
    assert tool_value(_result(_text("3"), structured={"r": 3}), max_chars=100) == \
        {"content": ["3"], "structured": {"r": 3}}
    # the text only serializes the structured value, or is the SDK's {"result": …}
    assert tool_value(_result(_text('{"r": 3}'), structured={"r": 3}),
                      max_chars=100) == {"r": 3}
    assert tool_value(_result(_text("3"), structured={"result": 3}), max_chars=100) == "3"
    assert tool_value(_result(_text("hi"), structured={"result": "hi"}),
                      max_chars=100) == "hi"


def test_media_becomes_a_hashed_placeholder_everywhere() -> None:
    image = types.ImageContent(type="image", data="aGVsbG8=", mime_type="image/png")
    value = tool_value(_result(image, structured={"x": [{"type": "image",
                                                         "data": "aGVsbG8="}]}),
                       max_chars=10_000)
    assert value["content"][0]["bytes"] == 5 and "aGVsbG8=" not in str(value)
    assert value["structured"]["x"][0]["bytes"] == 5
    link = types.ResourceLink(type="resource_link", uri="file:///a", name="a")
    embedded = types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
        uri="file:///b", text="inside"))
    parts = tool_value(_result(link, embedded), max_chars=1_000)["content"]
    assert parts[0] == {"type": "resource_link", "uri": "file:///a", "name": "a"}
    assert parts[1]["text"] == "inside"


def test_is_error_is_a_failure_the_model_reads_and_big_values_are_cut() -> None:
    with pytest.raises(McpToolFailure) as failed:
        tool_value(_result(_text("no such city"), error=True), max_chars=100)
    assert failed.value.code == "mcp_tool_error" and failed.value.message == "no such city"
    cut = tool_value(_result(_text("y" * 5_000)), max_chars=1_000)
    assert cut["truncated"] and cut["total_chars"] == 5_000 and len(cut["text"]) == 1_000


def test_aliases_are_valid_unique_function_names() -> None:
    assert derive_alias("calc", "add", set()) == "calc_add"
    assert derive_alias(None, "get.current time!", set()) == "get_current_time"
    assert derive_alias(None, "9lives", set()) == "mcp_9lives"
    assert derive_alias(None, "add", {"add"}) == "add_2"
    assert derive_alias(None, "skill_load", set()) == "skill_load_2"
    assert derive_alias(None, "workspace_read", set()) == "mcp_workspace_read"
    assert len(derive_alias(None, "x" * 200, set())) <= 64


@pytest.mark.parametrize("spec", [
    {"transport": "streamable_http"}, {"transport": "sse", "url": "file:///x"},
    {"transport": "sse", "url": "http://h/s", "protocol": "2026-07-28"},
    {"transport": "stdio", "url": "http://h/"},
    {"transport": "stdio", "command": "x", "mounts": {"/p": "Bad Name"}},
    {"transport": "streamable_http", "url": "http://h/", "command": "x"},
    {"transport": "streamable_http", "url": "http://h/", "timeout_seconds": 0},
    {"transport": "streamable_http", "url": "http://h/", "alias_prefix": "Bad"}])
def test_bad_specs(spec: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        McpSpec.model_validate(spec)


@pytest.mark.parametrize("credential", [
    {"kind": "bearer", "value": "a\nb"}, {"kind": "bearer", "name": "X", "value": "v"},
    {"kind": "header", "name": "Mcp-Session-Id", "value": "v"},
    {"kind": "header", "value": "v"}, {"kind": "env", "name": "lower", "value": "v"},
    {"kind": "bearer", "value": ""}])
def test_bad_credentials(credential: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Credential.model_validate(credential)


def _binding(**kw: Any) -> McpToolBinding:
    data: dict[str, Any] = {"resource_id": "mcp_0123456789abcdef0123", "tool": "add",
                            "alias": "add", "schema_digest": "sha256:ab",
                            "parameters": {"type": "object", "properties": {}}}
    return McpToolBinding.model_validate({**data, **kw})


@pytest.mark.parametrize("trust,ro,idem,safe", [
    (False, True, True, False), (True, False, False, False), (True, True, False, True),
    (True, False, True, True)])
def test_recovery_flags_follow_trusted_hints(trust: bool, ro: bool, idem: bool,
                                             safe: bool) -> None:
    d = McpCapability(service=None).definition(  # type: ignore[arg-type]
        "spc", _binding(trust_annotations=trust, read_only_hint=ro, idempotent_hint=idem))
    assert d.resume_inflight is safe and d.read_only is (trust and ro)
    assert d.tool_id == "mcp:mcp_0123456789abcdef0123:add"
    ToolRegistry([d])  # a valid catalog entry


def test_the_fingerprint_binds_the_published_and_the_seen_schema() -> None:
    cap = McpCapability(service=None)  # type: ignore[arg-type]
    plain = cap.definition("spc", _binding()).fingerprint()
    assert cap.definition("spc", _binding()).fingerprint() == plain
    assert cap.definition("spc", _binding(schema_digest="sha256:cd")).fingerprint() != plain
    assert cap.definition("spc", _binding(), {"add"}).fingerprint() != plain
    with pytest.raises(ConfigError):
        cap.definition("spc", _binding(parameters=None))
