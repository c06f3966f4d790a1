"""The skill routes through a real HTTP server on 127.0.0.1: import (zip, Git from a
local repository), list, get, delete; idempotent re-import; hostile uploads get 4xx
with stable codes naming the file; roles (member reads, admin imports), non-members and
other spaces 404, no token 401; publish pins the skill and a re-import after publish
leaves the published version as it was; nothing of the skill in the SQLite file."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from unit.skills.builders import SCRIPT, hello_zip, skill_md, zip_of

from agentloom.api.app import build_app
from agentloom.api.server import ApiServer
from agentloom.capabilities import Capabilities
from agentloom.local.app import DATABASE
from agentloom.local.embedded import EmbeddedPlatform
from agentloom.platform.identity import Principal
from agentloom.skills.wiring import embedded_skills

ALICE = Principal("alice", "token")


@dataclass
class Api:
    url: str
    tokens: dict[str, str]
    space: str
    other_space: str
    home: Path
    platform: EmbeddedPlatform

    def call(self, user: str | None, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[user]}"} if user else {}
        return httpx.request(method, f"{self.url}/api/v1{path}", headers=headers,
                             timeout=30, **kw)

    def upload(self, data: bytes, user: str = "alice", space: str | None = None
               ) -> httpx.Response:
        return self.call(user, "POST", f"/spaces/{space or self.space}/skills",
                         json={"zip_base64": base64.b64encode(data).decode()})


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    home = tmp_path / "home"
    capability = embedded_skills(home, allow_local_git=True)
    platform = EmbeddedPlatform.open(home, capabilities=Capabilities.of([capability]))
    app = build_app(platform.admin, platform.sessions, platform.tokens)
    server = ApiServer(app, platform.sessions).start()
    tokens = {u: platform.tokens.issue(u)[1] for u in ("alice", "bob", "carol", "eve")}
    space = platform.admin.create_space(ALICE, "Team")
    platform.admin.set_member(ALICE, space.space_id, "bob", "member")
    platform.admin.set_member(ALICE, space.space_id, "carol", "admin")
    other = platform.admin.create_space(Principal("eve", "token"), "Eve's")
    try:
        yield Api(server.url, tokens, space.space_id, other.space_id, home, platform)
    finally:
        server.close()
        platform.close()


def test_import_list_get_delete(api: Api) -> None:
    first = api.upload(hello_zip())
    assert first.status_code == 201, first.text
    skill = first.json()["skill"]
    assert skill["name"] == "hello" and skill["ref"] == f"hello@{skill['content_hash']}"
    again = api.upload(hello_zip())
    assert again.status_code == 200 and again.json()["created"] is False
    listed = api.call("bob", "GET", f"/spaces/{api.space}/skills").json()["items"]
    assert [s["name"] for s in listed] == ["hello"]
    detail = api.call("bob", "GET", f"/spaces/{api.space}/skills/hello").json()
    assert [f["path"] for f in detail["files"]] == ["SKILL.md", "references/guide.md",
                                                    "scripts/x.py"]
    assert api.call("bob", "DELETE", f"/spaces/{api.space}/skills/hello").status_code == 403
    assert api.call("carol", "DELETE", f"/spaces/{api.space}/skills/hello").status_code == 200
    gone = api.call("bob", "GET", f"/spaces/{api.space}/skills/hello")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "skill_not_found"


def test_access(api: Api) -> None:
    assert api.upload(hello_zip(), user="bob").status_code == 403
    assert api.upload(hello_zip(), user="eve").status_code == 404
    assert api.call(None, "GET", f"/spaces/{api.space}/skills").status_code == 401
    assert api.call("eve", "GET", f"/spaces/{api.space}/skills").status_code == 404
    assert api.upload(hello_zip(), user="eve", space=api.other_space).status_code == 201
    assert api.call("alice", "GET", f"/spaces/{api.space}/skills").json()["items"] == []
    assert api.call("alice", "GET", f"/spaces/{api.other_space}/skills/hello"
                    ).status_code == 404


@pytest.mark.parametrize(("data", "status", "code", "path"), [
    (zip_of({"hello/SKILL.md": skill_md(), "hello/../../x": "x"}), 422,
     "skill_file_refused", "hello/../../x"),
    (zip_of({"hello/SKILL.md": skill_md(), "hello/l": "/etc"}, modes={"hello/l": 0o120777}),
     422, "skill_file_refused", "hello/l"),
    (zip_of({"hello/SKILL.md": skill_md(), "hello/z": b"\0" * 2_000_000}), 413,
     "skill_too_large", "hello/z"),
    (zip_of({"hello/SKILL.md": "no frontmatter"}), 422, "skill_format", "SKILL.md"),
    (b"not a zip", 422, "skill_archive_invalid", None),
])
def test_hostile_uploads(api: Api, data: bytes, status: int, code: str,
                         path: str | None) -> None:
    response = api.upload(data)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["details"].get("path") == path


def test_bad_bodies(api: Api) -> None:
    url = f"/spaces/{api.space}/skills"
    assert api.call("alice", "POST", url, json={}).status_code == 422
    both = {"zip_base64": "", "git": {"url": "https://x", "revision": "main"}}
    assert api.call("alice", "POST", url, json=both).status_code == 422
    bad = api.call("alice", "POST", url, json={"zip_base64": "***"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "skill_archive_invalid"
    ssh = api.call("alice", "POST", url, json={"git": {"url": "ssh://h/x", "revision": "m"}})
    assert ssh.status_code == 422 and ssh.json()["error"]["code"] == "skill_source_failed"


def test_git_import_and_publish_pins(api: Api, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "skills" / "hello" / "scripts").mkdir(parents=True)
    (repo / "skills" / "hello" / "SKILL.md").write_text(skill_md())
    (repo / "skills" / "hello" / "scripts" / "x.py").write_text(SCRIPT)
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q", "-b", "main"], ["add", "."],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    body = {"git": {"url": f"file://{repo}", "revision": "main", "path": "skills/hello"}}
    imported = api.call("alice", "POST", f"/spaces/{api.space}/skills", json=body)
    assert imported.status_code == 201, imported.text
    assert imported.json()["skill"]["source"]["commit"]
    ref = imported.json()["skill"]["ref"]
    agent, _ = api.platform.admin.create_agent(ALICE, api.space, "A", {
        "model": {"model": "m"}, "skills": ["hello"]})
    version, _ = api.platform.admin.publish(ALICE, api.space, agent.agent_id)
    assert version.snapshot["skills"] == [ref]
    assert api.upload(hello_zip()).status_code == 201  # other content, same name
    pinned = api.platform.admin.version(ALICE, api.space, agent.agent_id, 1)
    assert pinned.snapshot["skills"] == [ref]  # the old version is unchanged
    second, created = api.platform.admin.publish(ALICE, api.space, agent.agent_id)
    assert created and second.snapshot["skills"] != [ref]  # a new content: a new version
    missing, _ = api.platform.admin.create_agent(ALICE, api.space, "B", {
        "model": {"model": "m"}, "skills": ["nope"]})
    refused = api.call("alice", "POST",
                       f"/spaces/{api.space}/agents/{missing.agent_id}/publish", json={})
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "skill_not_found"
    raw = b"".join(p.read_bytes() for p in api.home.glob(f"{DATABASE}*"))
    assert b"Says hello" not in raw and b"hello from the skill" not in raw
