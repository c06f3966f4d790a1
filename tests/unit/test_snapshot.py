"""The agent snapshot: strict context policy, the default policy and the legacy flag, tool
names, and reading an agent file."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from agentloom_runtime.errors import ConfigError, SnapshotError
from agentloom_runtime.snapshot import (
    AGENT_TOOLS,
    BUILTIN_TOOLS,
    MAX_AGENT_FILE_BYTES,
    TOOL_GROUPS,
    AgentSnapshot,
    ContextPolicy,
    load_agent_file,
    parse_snapshot,
)
from agentloom_runtime.workspace import WORKSPACE_GROUP, file_tools, granted

ROOT = Path(__file__).resolve().parents[2]
BASE: dict[str, Any] = {"agent_id": "a", "model": {"model": "m"}}


def snapshot(**fields: Any) -> AgentSnapshot:
    return parse_snapshot({**BASE, **fields})


def refused(**fields: Any) -> str:
    with pytest.raises(SnapshotError) as info:
        snapshot(**fields)
    assert isinstance(info.value, ConfigError)
    return str(info.value)


# ---------------------------------------------------------------- context policy


@pytest.mark.parametrize(("policy", "where"), [
    ({"user_turns": True}, "context_policy.user_turns"),
    ({"user_turns": 2.0}, "context_policy.user_turns"),
    ({"user_turns": "3"}, "context_policy.user_turns"),
    ({"user_turns": 0}, "context_policy.user_turns"),
    ({"model_steps": False}, "context_policy.model_steps"),
    ({"model_steps": -1}, "context_policy.model_steps"),
    ({"context_ratio": "0.9"}, "context_policy.context_ratio"),
    ({"context_ratio": True}, "context_policy.context_ratio"),
    ({"context_ratio": 2.0}, "context_policy.context_ratio"),
    ({"context_ratio": float("nan")}, "context_policy.context_ratio"),
    ({"target_ratio": 0}, "context_policy.target_ratio"),
    ({"target_ratio": "0.5"}, "context_policy.target_ratio"),
    ({"max_compaction_calls": 0}, "context_policy.max_compaction_calls"),
    ({"max_compaction_calls": 17}, "context_policy.max_compaction_calls"),
    ({"max_compaction_calls": True}, "context_policy.max_compaction_calls"),
    ({"max_compaction_calls": 4.0}, "context_policy.max_compaction_calls"),
    ({"target_ratio": 0.8, "context_ratio": 0.8}, "context_policy: target_ratio (0.8)"),
    ({"target_ratio": 0.9}, "context_policy: target_ratio (0.9) must be below"),
    ({"ratio": 0.5}, "context_policy.ratio"),
])
def test_context_policy_is_validated_strictly(policy: dict[str, Any], where: str) -> None:
    assert where in refused(context_policy=policy)


def test_context_policy_error_shows_what_was_given() -> None:
    assert "context_policy.user_turns: Input should be a valid integer (got True)" in \
        refused(context_policy={"user_turns": True})


def test_context_policy_accepts_real_numbers_and_positive_counts() -> None:
    policy = snapshot(context_policy={"context_ratio": 1, "target_ratio": 0.25,
                                      "user_turns": 6, "model_steps": None,
                                      "max_compaction_calls": 16}).context_policy
    assert policy == ContextPolicy(context_ratio=1.0, target_ratio=0.25, user_turns=6,
                                   max_compaction_calls=16)
    assert isinstance(policy.context_ratio, float)


# ---------------------------------------------------------------- default and legacy


def test_a_new_agent_without_context_policy_gets_the_default_budget_policy() -> None:
    snap = snapshot()
    assert snap.legacy is False
    assert snap.context_policy == ContextPolicy()
    assert snap.context_policy.model_dump() == {
        "context_ratio": 0.8, "target_ratio": 0.6, "user_turns": None, "model_steps": None,
        "max_compaction_calls": 4}
    assert AgentSnapshot.model_validate({"agent_id": "a", "model": {"model": "m"}}) \
        .context_policy == ContextPolicy()


def test_only_a_legacy_snapshot_keeps_the_character_policy() -> None:
    legacy = snapshot(legacy=True)
    assert legacy.context_policy is None  # the engine factory: character policy
    assert snapshot(legacy=True, context_policy=None).context_policy is None
    with_policy = snapshot(legacy=True, context_policy={"context_ratio": 0.5,
                                                        "target_ratio": 0.3})
    assert with_policy.context_policy == ContextPolicy(context_ratio=0.5, target_ratio=0.3)
    # a stored snapshot reads back as it was
    for snap in (legacy, with_policy, snapshot()):
        assert parse_snapshot(snap.model_dump(mode="json")) == snap


@pytest.mark.parametrize("legacy", [False, "yes", 1])
def test_an_explicit_null_policy_needs_the_legacy_flag(legacy: Any) -> None:
    fields: dict[str, Any] = {"context_policy": None}
    if legacy is not False:
        fields["legacy"] = legacy
    message = refused(**fields)
    assert "context_policy: null is not a policy" in message
    assert "legacy: true" in message
    if legacy is not False:
        assert "legacy: Input should be a valid boolean" in message


# ---------------------------------------------------------------- tool names


def test_unknown_tool_groups_are_refused() -> None:
    message = refused(tools=["workspace", "rm_rf"])
    assert "tools: unknown tool group or tool 'rm_rf'" in message
    assert "allowed: read_result, update_plan, workspace, workspace_command" in message
    assert "unknown tool group or tool 'delegate_task'" in refused(tools=["delegate_task"])


def test_known_tool_groups_and_tools_are_accepted() -> None:
    names = ("workspace", "workspace_command", "workspace_read", "update_plan")
    assert snapshot(tools=list(names)).tools == names
    assert ROOT.joinpath("docs/examples/hello/agent.yaml").is_file()
    assert load_agent_file(ROOT / "docs/examples/hello/agent.yaml").tools == (
        "workspace", "workspace_command")


def test_the_builtin_tool_table_is_the_file_tools() -> None:
    defined = [t.name for t in file_tools()]
    assert list(BUILTIN_TOOLS) == defined
    assert TOOL_GROUPS["workspace"] == tuple(n for n in defined if n != "workspace_command")
    assert AGENT_TOOLS == {*defined, "workspace", "update_plan", "read_result"}


def test_the_workspace_group_a_snapshot_accepts_grants_exactly_its_file_tools() -> None:
    """One group name for the snapshot's table, the grant rule and the factory's check."""
    assert WORKSPACE_GROUP == "workspace" and WORKSPACE_GROUP in AGENT_TOOLS
    granted_tools = [t.name for t in file_tools() if granted({WORKSPACE_GROUP}, t.name)]
    assert tuple(granted_tools) == TOOL_GROUPS[WORKSPACE_GROUP]


def _template(tools: list[str]) -> dict[str, Any]:
    return {"subagents": [{"id": "s", "name": "S", "duty": "d", "tools": tools}]}


@pytest.mark.parametrize(("tools", "expected"), [
    (["workspace", "workspace_rm"], "subagents.0.tools: unknown tool group or tool "
                                    "'workspace_rm'"),
    (["workspaces"], "unknown tool group or tool 'workspaces'"),
    (["delegate_task"], "a sub-agent cannot delegate"),
    (["rm -rf"], "invalid tool names 'rm -rf'"),
    ([""], "invalid tool names ''"),
])
def test_unknown_subagent_tool_names_are_refused(tools: list[str], expected: str) -> None:
    assert expected in refused(**_template(tools))


def test_subagents_may_grant_host_registered_tools() -> None:
    """Templates grant the main agent's tools, host-registered ones included (checked
    against the catalog when the engine is assembled, not here)."""
    snap = snapshot(**_template(["workspace", "workspace_command", "count_words"]))
    assert snap.subagents[0].tools == ("workspace", "workspace_command", "count_words")


# ---------------------------------------------------------------- agent files


def load_refused(path: Path | str) -> str:
    with pytest.raises(SnapshotError) as info:
        load_agent_file(path)
    err = info.value
    # no chained traceback behind the message
    assert err.__cause__ is None and (err.__context__ is None or err.__suppress_context__)
    return str(err)


def test_an_agent_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("\ufeffagent_id: a\nmodel: {model: m}\nprompt: héllo\n", encoding="utf-8")
    snap = load_agent_file(path)
    assert snap.prompt == "héllo" and snap.context_policy == ContextPolicy()


def test_a_missing_agent_file_is_a_clear_error(tmp_path: Path) -> None:
    assert "does not exist" in load_refused(tmp_path / "nope.yaml")


def test_a_directory_is_not_an_agent_file(tmp_path: Path) -> None:
    assert "is a directory" in load_refused(tmp_path)


def test_a_non_utf8_agent_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("agent_id: a\nprompt: caf\xe9\n".encode("latin-1"))
    assert "is not UTF-8 text (invalid byte at offset 23)" in load_refused(path)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_device_is_not_read() -> None:
    assert "is not a regular file" in load_refused("/dev/zero")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "agent.yaml"
    os.mkfifo(fifo)
    messages: list[str] = []
    reader = threading.Thread(target=lambda: messages.append(load_refused(fifo)),
                              daemon=True)
    reader.start()
    reader.join(timeout=5)
    if reader.is_alive():  # unblock the reader so the test run can end
        with open(fifo, "wb"):
            pass
        pytest.fail("load_agent_file blocked on a FIFO without a writer")
    assert messages and "is not a regular file" in messages[0]


def test_an_oversized_agent_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"# " + b"x" * MAX_AGENT_FILE_BYTES + b"\n")
    assert "larger than 1048576 bytes" in load_refused(path)


@pytest.mark.parametrize(("text", "expected"), [
    ("agent_id: [unclosed\n", "is not valid YAML"),
    ("- a\n- b\n", "expected a mapping at the top level"),
    ("agent_id: a\nmodel: {model: m}\ntools: [workspace, rm_rf]\n",
     "tools: unknown tool group or tool 'rm_rf'"),
    ("agent_id: a\nmodel: {model: m}\ncontext_policy: {user_turns: true}\n",
     "context_policy.user_turns"),
])
def test_agent_file_problems_name_the_file_and_field(tmp_path: Path, text: str,
                                                     expected: str) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(text, encoding="utf-8")
    message = load_refused(path)
    assert str(path) in message and expected in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_agent_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "secret.yaml"
    path.write_text("agent_id: a\n", encoding="utf-8")
    path.chmod(0)
    assert "cannot read agent file" in load_refused(path)
    assert "Permission denied" in load_refused(path)
