"""A server's ``CallToolResult`` as the JSON value a tool returns (what the run stores).

- text → the text; a result of text parts only is one string (parts joined by a blank
  line), which is what a model reads best;
- ``structuredContent`` → ``{"structured": …}`` beside the content — unless the text
  is just its serialization (or the SDK's ``{"result": value}`` wrapping of the text's
  value): the result is then kept once, as the structured value or the text;
- images and audio (also inside structured content) → a placeholder ``{"type",
  "mime_type", "bytes", "sha256"}``: the data is not stored nor shown (a model
  cannot read base64 usefully);
- embedded resources → their text (``{"type": "resource", "uri", "text"}``) or a
  placeholder for a blob; resource links → ``{"type": "resource_link", "uri", "name"}``.

``isError`` becomes an ``McpToolFailure`` (``mcp_tool_error``): a failure result the
model sees with the tool's own message. A value over the resource's ``max_result_chars``
is cut there and says so; anything over the run's visible cap is shown through the
runtime's large-result reference (``read_result``), as every tool's is.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

import mcp_types as types

from agentloom.mcp.errors import McpToolFailure

ERROR_TEXT = 2_000


def _blob(kind: str, mime: str | None, data: str) -> dict[str, Any]:
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        raw = data.encode()
    return {"type": kind, "mime_type": mime, "bytes": len(raw),
            "sha256": hashlib.sha256(raw).hexdigest(),
            "note": f"{kind} content is not shown to the model"}


def _part(item: Any) -> str | dict[str, Any]:
    if isinstance(item, types.TextContent):
        return item.text
    if isinstance(item, types.ImageContent | types.AudioContent):
        return _blob(item.type, item.mime_type, item.data)
    if isinstance(item, types.EmbeddedResource):
        res = item.resource
        if isinstance(res, types.TextResourceContents):
            return {"type": "resource", "uri": str(res.uri), "text": res.text}
        return {**_blob("resource", res.mime_type, getattr(res, "blob", "")),
                "uri": str(res.uri)}
    if isinstance(item, types.ResourceLink):
        return {"type": "resource_link", "uri": str(item.uri), "name": item.name}
    return {"type": str(getattr(item, "type", "unknown")), "note": "unsupported content"}


def _scrub(value: Any, depth: int = 0) -> Any:
    """Structured content without inline media (a server may echo its images there)."""
    if depth > 32:
        return "…"
    if isinstance(value, dict):
        if value.get("type") in ("image", "audio") and isinstance(value.get("data"), str):
            return _blob(str(value["type"]), value.get("mimeType"), value["data"])
        return {k: _scrub(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, depth + 1) for v in value]
    return value


def _text(parts: list[str | dict[str, Any]]) -> str:
    return "\n\n".join(p if isinstance(p, str) else json.dumps(p) for p in parts)


def tool_value(result: types.CallToolResult, *, max_chars: int) -> Any:
    parts = [_part(item) for item in result.content]
    if result.is_error:
        message = _text(parts) or "the MCP tool reported an error without a message"
        raise McpToolFailure("mcp_tool_error", message[:ERROR_TEXT])
    structured = result.structured_content
    value: Any
    if all(isinstance(p, str) for p in parts) and (
            structured is None or _same(_text(parts), structured)):
        wrapped = structured is not None and list(structured) == ["result"]
        value = _text(parts) if structured is None or wrapped else structured
    else:
        value = {"content": parts}
        if structured is not None:
            value["structured"] = _scrub(structured)
    return cap(value, max_chars)


def _same(text: str, structured: dict[str, Any]) -> bool:
    """The text is the structured content serialized (the spec's advice for clients
    that read text only), or the ``{"result": …}`` the SDK wraps a plain value in: the
    result is then stored and shown once."""
    try:
        decoded: Any = json.loads(text)
    except ValueError:
        decoded = text
    if decoded == structured:
        return True
    return list(structured) == ["result"] and structured["result"] in (text, decoded)


def cap(value: Any, max_chars: int) -> Any:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) <= max_chars:
        return value
    return {"truncated": True, "total_chars": len(text), "shown_chars": max_chars,
            "note": "the MCP result was larger than this resource's max_result_chars",
            "text": text[:max_chars]}
