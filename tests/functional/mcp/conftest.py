"""Fixtures of the MCP tests: an MCP service on a real SQLite platform store with the
envelope codec (a local key file), a space Alice owns (Bob a member), and real servers
on 127.0.0.1 (``functional.mcp.servers``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from functional.mcp.servers import Running, serve

from agentloom.crypto import LocalKeyring
from agentloom.mcp import McpPolicy, McpService
from agentloom.platform.admin import AdminService
from agentloom.platform.identity import Principal
from agentloom.platform.secrets import CodecSecrets
from agentloom.platform.store import SqlitePlatformStore

ALICE = Principal("alice", "token")
BOB = Principal("bob", "token")
EVE = Principal("eve", "token")


@dataclass
class Env:
    service: McpService
    admin: AdminService
    store: SqlitePlatformStore
    space_id: str
    path: Path
    admin_principal: Principal = ALICE


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    store = SqlitePlatformStore(tmp_path / "platform.sqlite3")
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
