"""Git import from a local repository (no network), idempotent content-addressed
storage, pinning at publish (a later import never changes an old version), what each
instance sees (main: all; a sub-agent: its template's), the prompt section and paging."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from unit.skills.builders import SCRIPT, hello_zip, memory_store, skill_md, zip_of

from agentloom.capabilities import RunScope
from agentloom.platform.errors import Invalid
from agentloom.skills import (
    GitPolicy,
    SkillsCapability,
    SkillSource,
    SkillStore,
    content_hash,
    tree_from_git,
    tree_from_zip,
)
from agentloom.skills.errors import SkillFileRefused, SkillFormatError, SkillSourceFailed
from agentloom_runtime.errors import SnapshotError
from agentloom_runtime.snapshot import parse_snapshot
from agentloom_runtime.tool_contracts import ToolContext

LOCAL = GitPolicy(allow_local=True, timeout_s=30)
SCOPE = RunScope("spc", "agt", 1, "ses", "run")


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c",
                           "user.name=t", *args], check=True, capture_output=True,
                          env=env).stdout.decode().strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "skills" / "hello" / "scripts").mkdir(parents=True)
    (root / "skills" / "hello" / "SKILL.md").write_text(skill_md())
    (root / "skills" / "hello" / "scripts" / "x.py").write_text(SCRIPT)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "one")
    _git(root, "tag", "v1")
    return root


def test_git_import_by_branch_tag_and_commit(repo: Path) -> None:
    commit = _git(repo, "rev-parse", "HEAD")
    for revision in ("main", "v1", commit):
        tree, source = tree_from_git(f"file://{repo}", revision, "skills/hello",
                                     policy=LOCAL)
        assert [f.path for f in tree.files] == ["SKILL.md", "scripts/x.py"]
        assert source.commit == commit and source.path == "skills/hello"
    same = tree_from_zip(zip_of({"hello/SKILL.md": skill_md(), "hello/scripts/x.py": SCRIPT}))
    assert content_hash(tree) == content_hash(same)  # the source is not in the hash


def test_git_refusals(repo: Path) -> None:
    with pytest.raises(SkillSourceFailed, match="scheme 'file'"):
        tree_from_git(f"file://{repo}", "main", "skills/hello")  # production policy
    for url in ("ssh://git@example.com/x", "git://example.com/x", "http://example.com/x",
                "ext::sh -c touch% /tmp/pwned", "https://user:pw@example.com/x"):
        with pytest.raises(SkillSourceFailed):
            tree_from_git(url, "main", "skills/hello")
    with pytest.raises(SkillSourceFailed, match="revision"):
        tree_from_git(f"file://{repo}", "--upload-pack=touch /tmp/x", "", policy=LOCAL)
    with pytest.raises(SkillSourceFailed, match="fetch failed"):
        tree_from_git(f"file://{repo}", "no-such-branch", "skills/hello", policy=LOCAL)
    with pytest.raises(SkillFileRefused):
        tree_from_git(f"file://{repo}", "main", "../etc", policy=LOCAL)
    (repo / "skills" / "hello" / "scripts" / "link").symlink_to("/etc/passwd")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "link")
    with pytest.raises(SkillFileRefused, match="symbolic"):
        tree_from_git(f"file://{repo}", "main", "skills/hello", policy=LOCAL)
    with pytest.raises(SkillFormatError):  # the repository root holds no SKILL.md
        tree_from_git(f"file://{repo}", "v1", "", policy=LOCAL)


def test_identical_content_is_stored_once_and_changes_make_a_version(tmp_path: Path) -> None:
    store = memory_store(tmp_path)
    first, created = store.import_tree("spc", tree_from_zip(hello_zip()),
                                       SkillSource(kind="zip"), user_id="u")
    again, created_again = store.import_tree("spc", tree_from_zip(hello_zip(folder="")),
                                             SkillSource(kind="zip"), user_id="u")
    assert created and not created_again and again == first
    changed, created = store.import_tree(
        "spc", tree_from_zip(hello_zip(**{"scripts/x.py": "print(2)\n"})),
        SkillSource(kind="zip"), user_id="u")
    assert created and changed.content_hash != first.content_hash
    assert store.manifest("spc", first.content_hash) is not None  # the old version stays
    assert store.manifest("other", first.content_hash) is None  # per space


def _capability(tmp_path: Path) -> tuple[SkillsCapability, SkillStore]:
    store = memory_store(tmp_path)
    store.import_tree("spc", tree_from_zip(hello_zip()), SkillSource(kind="zip"),
                      user_id="u")
    other = tree_from_zip(hello_zip(folder="", **{"SKILL.md": skill_md(
        name="other", description="Other things.")}))
    store.import_tree("spc", other, SkillSource(kind="zip"), user_id="u")
    return SkillsCapability(store, tmp_path / "ws"), store


CONFIG: dict[str, Any] = {
    "model": {"model": "m"}, "skills": ["hello", "other"], "subagents": [
        {"id": "helper", "name": "H", "duty": "d", "tools": ["skill_load", "skill_read"],
         "skills": ["other"]}]}


def test_pin_freezes_the_content_and_old_versions_keep_it(tmp_path: Path) -> None:
    capability, store = _capability(tmp_path)
    pinned = capability.pin("spc", CONFIG)
    hello_hash = store.get("spc", "hello").content_hash  # type: ignore[union-attr]
    assert pinned["skills"][0] == f"hello@{hello_hash}"
    assert pinned["subagents"][0]["skills"] == ["other"]
    store.import_tree("spc", tree_from_zip(hello_zip(**{"scripts/x.py": "print(3)\n"})),
                      SkillSource(kind="zip"), user_id="u")
    assert capability.pin("spc", CONFIG)["skills"][0] != pinned["skills"][0]
    assert capability.pin("spc", {**CONFIG, "skills": pinned["skills"]}) == pinned
    with pytest.raises(Invalid) as caught:
        capability.pin("spc", {**CONFIG, "skills": ["nope"]})
    assert caught.value.code == "skill_not_found"
    assert caught.value.details["fields"][0]["field"] == "config.skills.0"
    with pytest.raises(Invalid):
        capability.pin("spc", {**CONFIG, "skills": ["hello@sha256:" + "0" * 64]})


async def test_tools_prompt_and_template_restriction(tmp_path: Path) -> None:
    capability, _ = _capability(tmp_path)
    snap = parse_snapshot({**capability.pin("spc", CONFIG), "space_id": "spc",
                           "agent_id": "agt"})
    load, read = capability.tools(snap, SCOPE)
    config = snap.model_dump(mode="json")
    assert load.prompt(config, None).endswith("- hello: Says hello.\n- other: Other things.")
    assert load.prompt(config, "helper").endswith("- other: Other things.")
    assert load.read_only and load.resume_inflight and read.read_only

    def ctx(template: str | None) -> ToolContext:
        return ToolContext(config=config, instance="x", run_id="r", call_id="c",
                           request_id="q", template=template)

    body = await load.handler(ctx(None), {"name": "hello"})
    assert body["body"].startswith("# Hello") and body["mount"] == "/skills/hello"
    with pytest.raises(Exception, match="no skill 'hello' is bound here"):
        await load.handler(ctx("helper"), {"name": "hello"})
    page = await read.handler(ctx(None), {"name": "hello", "path": "references/guide.md",
                                          "limit": 10})
    assert page["content"] == "# Guide\nli" and page["next_offset"] == 10
    last = await read.handler(ctx(None), {"name": "hello", "path": "references/guide.md",
                                          "offset": page["total_chars"] - 3})
    assert last["next_offset"] is None


def test_mounts_are_materialized_read_only_per_template(tmp_path: Path) -> None:
    capability, _ = _capability(tmp_path)
    snap = parse_snapshot({**capability.pin("spc", CONFIG), "space_id": "spc",
                           "agent_id": "agt"})
    mounts = capability.services(snap, SCOPE)["skills"]
    helper = mounts("helper")
    assert list(helper) == ["other"] and list(mounts(None)) == ["hello", "other"]
    folder = Path(helper["other"])
    assert (folder / "SKILL.md").read_text().startswith("---\nname: other")
    assert oct(folder.stat().st_mode & 0o777) == "0o555"
    assert oct((folder / "SKILL.md").stat().st_mode & 0o777) == "0o444"
    assert mounts("helper") == helper  # written once; the same folder again
    assert [m.skill_id for m in capability.mounts(snap)] == ["hello", "other"]
    assert capability.mounts(snap, "helper")[0].directory == str(
        folder.relative_to(tmp_path / "ws"))


def test_snapshot_checks_skill_references() -> None:
    base = {"agent_id": "a", "model": {"model": "m"}}
    parse_snapshot({**base, "skills": ["hello"]})  # names only stay valid
    parse_snapshot({**base, "skills": ["hello@sha256:" + "a" * 64]})
    for bad in (["Hello"], ["hello@md5:x"], ["hello", "hello@sha256:" + "a" * 64]):
        with pytest.raises(SnapshotError):
            parse_snapshot({**base, "skills": bad})
    sub = {"id": "s", "name": "S", "duty": "d", "skills": ["hello"]}
    with pytest.raises(SnapshotError, match="skill_load"):
        parse_snapshot({**base, "skills": ["hello"], "subagents": [sub]})
    with pytest.raises(SnapshotError, match="not among"):
        parse_snapshot({**base, "subagents": [{**sub, "tools": ["skill_load"]}]})


def test_materialize_sweeps_a_dead_writers_folder_and_checks_content(tmp_path: Path) -> None:
    import os

    from agentloom.skills import materialize, skill_directory
    from agentloom_runtime.errors import PersistenceError

    store = memory_store(tmp_path)
    record, _ = store.import_tree("spc", tree_from_zip(hello_zip()), SkillSource(kind="zip"),
                                  user_id="u")
    manifest = store.manifest("spc", record.content_hash)
    assert manifest is not None
    parent = (tmp_path / "ws" / skill_directory("spc", record.content_hash)).parent
    parent.mkdir(parents=True)
    dead, fresh = parent / ".tmp-dead", parent / ".tmp-fresh"
    dead.mkdir()
    fresh.mkdir()
    os.utime(dead, (1, 1))
    with pytest.raises(PersistenceError, match="does not match"):
        materialize(tmp_path / "ws", "spc", manifest, lambda path: b"tampered")
    assert not dead.exists() and fresh.exists()  # an hour-old leftover only
    assert sorted(p.name for p in parent.iterdir()) == [".tmp-fresh"]  # nothing half-made
    folder = materialize(tmp_path / "ws", "spc", manifest,
                         lambda path: store.read_file("spc", manifest, path))
    assert (folder / "scripts" / "x.py").read_text() == SCRIPT
