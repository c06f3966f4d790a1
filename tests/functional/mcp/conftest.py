"""Fixtures of the MCP tests: an MCP service on a real SQLite platform store with the
envelope codec (a local key file), a space Alice owns (Bob a member), and real servers
on 127.0.0.1 (``functional.mcp.servers``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from functional.mcp.servers import Running, serve

from agentloom.crypto import LocalKeyring
from agentloom.mcp import McpPolicy, McpService
from agentloom.platform.admin import AdminService
from agentloom.platform.identity import Principal
from agentloom.platform.secrets import CodecSecrets
from agentloom.platform.store import PlatformStore, SqliteItemStore
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.testing import FunctionModel, ScriptedModel

ALICE = Principal("alice", "token")
BOB = Principal("bob", "token")
EVE = Principal("eve", "token")


@dataclass
class Env:
    service: McpService
    admin: AdminService
    store: PlatformStore
    space_id: str
    path: Path
    admin_principal: Principal = ALICE


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    store = PlatformStore(SqliteItemStore(tmp_path / "platform.sqlite3"))
    secrets = CodecSecrets(LocalKeyring(tmp_path / "agentloom.key"), store)
    admin = AdminService(store, secrets=secrets)
    space = admin.create_space(ALICE, "Team")
    admin.set_member(ALICE, space.space_id, "bob", "member")
    service = McpService(store, secrets, McpPolicy(allow_loopback=True))
    try:
        yield Env(service, admin, store, space.space_id, tmp_path / "platform.sqlite3")
    finally:
        store.close()


@pytest.fixture
def http_server() -> Iterator[Running]:
    with serve("http") as running:
        yield running


def tool_then_answer(alias: str, arguments: dict[str, Any]) -> FunctionModel:
    """A model that calls the tool once, then answers with what it returned; reviews
    say complete (its answers depend on the request only, so a resumed run is alike)."""
    def reply(request: ModelRequest) -> ModelResponse:
        if request.purpose == "verification":
            return ScriptedModel.verdict("complete")
        last = request.messages[-1]
        if last.get("role") == "tool":
            return ScriptedModel.answer(f"the tool said: {str(last.get('content'))[:200]}")
        return ScriptedModel.call(alias, arguments, id="c1")
    return FunctionModel(reply)
