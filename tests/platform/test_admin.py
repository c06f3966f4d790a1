"""AdminService: spaces and roles, drafts validated with the field named, default
context policy written out, immutable content-hashed versions that freeze the whole
snapshot, and what a draft may reach on the host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentloom.platform.admin import AdminService
from agentloom.platform.agents import DraftRules
from agentloom.platform.domain import AgentVersion, content_hash, now
from agentloom.platform.errors import Conflict, Forbidden, Invalid, NotFound
from agentloom.platform.identity import Principal
from agentloom.platform.store import InMemoryItemStore, PlatformStore
from agentloom_runtime.snapshot import AgentSnapshot

ALICE = Principal("alice", "token")
BOB = Principal("bob", "token")
CAROL = Principal("carol", "token")
CONFIG = {"prompt": "Help.", "model": {"model": "m-1"}}
DEFAULT_POLICY = {"context_ratio": 0.8, "target_ratio": 0.6, "user_turns": None,
                  "model_steps": None, "max_compaction_calls": 4}


@pytest.fixture
def admin() -> AdminService:
    return AdminService(PlatformStore(InMemoryItemStore()))


def test_the_creator_owns_a_space_and_others_do_not_see_it(admin: AdminService) -> None:
    space = admin.create_space(ALICE, " Team ")
    assert space.name == "Team"
    assert [(s.space_id, role) for s, role in admin.spaces(ALICE)] == [(space.space_id,
                                                                       "owner")]
    assert admin.spaces(BOB) == []
    with pytest.raises(NotFound):
        admin.space(BOB, space.space_id)
    with pytest.raises(NotFound):
        admin.space(ALICE, "spc_nothere")


def test_roles_admins_manage_members_owners_manage_owners(admin: AdminService) -> None:
    space = admin.create_space(ALICE, "Team").space_id
    admin.set_member(ALICE, space, "bob", "admin")
    admin.set_member(BOB, space, "carol", "member")
    with pytest.raises(Forbidden):
        admin.set_member(CAROL, space, "dave", "member")  # a member manages nobody
    with pytest.raises(Forbidden):
        admin.set_member(BOB, space, "carol", "owner")  # an admin grants no ownership
    with pytest.raises(Forbidden):
        admin.remove_member(BOB, space, "alice")
    with pytest.raises(Conflict) as caught:
        admin.remove_member(ALICE, space, "alice")
    assert caught.value.code == "last_owner"
    with pytest.raises(Conflict):
        admin.set_member(ALICE, space, "alice", "member")
    admin.set_member(ALICE, space, "bob", "owner")
    admin.set_member(BOB, space, "alice", "member")  # now bob is the owner left
    assert {m.user_id: m.role for m in admin.members(CAROL, space)} == \
        {"alice": "member", "bob": "owner", "carol": "member"}
    admin.remove_member(BOB, space, "carol")
    with pytest.raises(NotFound):
        admin.members(CAROL, space)


def test_a_new_draft_gets_the_default_context_policy(admin: AdminService) -> None:
    space = admin.create_space(ALICE, "Team").space_id
    _, draft = admin.create_agent(ALICE, space, "Helper", CONFIG)
    assert draft.config["context_policy"] == DEFAULT_POLICY
    assert "legacy" not in draft.config and "agent_id" not in draft.config
    saved = admin.save_draft(ALICE, space, draft.agent_id, {**CONFIG, "prompt": "Other"})
    assert saved.revision == 2 and saved.config["context_policy"] == DEFAULT_POLICY


@pytest.mark.parametrize(("config", "field"), [
    ({"prompt": "x"}, "config.model"),
    ({**CONFIG, "context_policy": {"context_ratio": 0.5, "target_ratio": 0.7}},
     "config.context_policy"),
    ({**CONFIG, "context_policy": {"max_compaction_calls": 17}},
     "config.context_policy.max_compaction_calls"),
    ({**CONFIG, "context_policy": None}, "config.context_policy"),
    ({**CONFIG, "legacy": True}, "config.legacy"),
    ({**CONFIG, "agent_id": "x"}, "config.agent_id"),
    ({**CONFIG, "tools": ["shell"]}, "config.tools"),
    ({**CONFIG, "model": {"model": "m", "api_key_ref": "AWS_SECRET_ACCESS_KEY"}},
     "config.model.api_key_ref"),
    ({**CONFIG, "hook_packages": ["/tmp"]}, "config.hook_packages"),
])
def test_validation_errors_name_the_field(admin: AdminService, config: dict[str, Any],
                                          field: str) -> None:
    space = admin.create_space(ALICE, "Team").space_id
    with pytest.raises(Invalid) as caught:
        admin.create_agent(ALICE, space, "Helper", config)
    fields = [f["field"] for f in caught.value.details["fields"]]
    assert field in fields, fields
    assert caught.value.message.startswith(fields[0])


def test_hook_packages_only_under_an_allowed_root(tmp_path: Path) -> None:
    package = tmp_path / "hooks" / "pkg"
    package.mkdir(parents=True)
    admin = AdminService(PlatformStore(InMemoryItemStore()),
                         DraftRules(hook_roots=(tmp_path / "hooks",)))
    space = admin.create_space(ALICE, "Team").space_id
    _, draft = admin.create_agent(ALICE, space, "Hooked",
                                  {**CONFIG, "hook_packages": [str(package)]})
    assert draft.config["hook_packages"] == [str(package)]
    with pytest.raises(Invalid):
        admin.create_agent(ALICE, space, "Escape",
                           {**CONFIG, "hook_packages": [str(package / ".." / ".." / "x")]})


def test_publish_freezes_the_whole_snapshot_and_hashes_it(admin: AdminService) -> None:
    space = admin.create_space(ALICE, "Team").space_id
    config = {**CONFIG, "subagents": [{"id": "checker", "name": "Checker", "duty": "check"}],
              "hooks": [{"hook_id": "audit", "version": "1", "point": "run.before"}],
              "context_policy": {"context_ratio": 0.7, "target_ratio": 0.5}}
    agent, draft = admin.create_agent(ALICE, space, "Helper", config)
    version, created = admin.publish(ALICE, space, agent.agent_id)
    assert created and version.version == 1
    snapshot = AgentSnapshot.model_validate(version.snapshot)
    assert (snapshot.space_id, snapshot.agent_id, snapshot.version) == \
        (space, agent.agent_id, 1)
    assert snapshot.subagents[0].id == "checker" and snapshot.hooks[0].hook_id == "audit"
    assert snapshot.context_policy is not None and snapshot.context_policy.context_ratio == 0.7
    assert version.content_hash == content_hash(version.snapshot)
    again, created = admin.publish(ALICE, space, agent.agent_id)  # unchanged: no copy
    assert not created and again == version
    admin.save_draft(ALICE, space, agent.agent_id, {**config, "prompt": "Changed"},
                     revision=draft.revision)
    second, created = admin.publish(ALICE, space, agent.agent_id)
    assert created and second.version == 2 and second.content_hash != version.content_hash
    assert admin.version(ALICE, space, agent.agent_id, 1) == version
    assert [v.version for v in admin.versions(ALICE, space, agent.agent_id)] == [1, 2]


def test_a_stale_draft_revision_is_a_conflict(admin: AdminService) -> None:
    space = admin.create_space(ALICE, "Team").space_id
    agent, draft = admin.create_agent(ALICE, space, "Helper", CONFIG)
    admin.save_draft(ALICE, space, agent.agent_id, CONFIG, revision=draft.revision)
    with pytest.raises(Conflict) as caught:
        admin.save_draft(ALICE, space, agent.agent_id, CONFIG, revision=draft.revision)
    assert caught.value.code == "draft_changed"
    with pytest.raises(Conflict):
        admin.publish(ALICE, space, agent.agent_id, revision=draft.revision)


def test_members_read_versions_but_not_drafts(admin: AdminService) -> None:
    space = admin.create_space(ALICE, "Team").space_id
    admin.set_member(ALICE, space, "bob", "member")
    agent, _ = admin.create_agent(ALICE, space, "Helper", CONFIG)
    admin.publish(ALICE, space, agent.agent_id)
    assert [v.version for v in admin.versions(BOB, space, agent.agent_id)] == [1]
    with pytest.raises(Forbidden):
        admin.draft(BOB, space, agent.agent_id)
    with pytest.raises(Forbidden):
        admin.publish(BOB, space, agent.agent_id)


def test_only_legacy_versions_keep_the_character_policy(admin: AdminService) -> None:
    store = admin.store
    space = admin.create_space(ALICE, "Team").space_id
    agent, _ = admin.create_agent(ALICE, space, "Old", CONFIG)
    current = store.agents.get(space, agent.agent_id)
    assert current is not None
    legacy = {"legacy": True, "space_id": space, "agent_id": agent.agent_id, "version": 1,
              "model": {"model": "m-1"}}
    store.agents.publish(current, AgentVersion(
        space_id=space, agent_id=agent.agent_id, version=1, content_hash=content_hash(legacy),
        snapshot=legacy, legacy=True, published_by="migration", published_at=now()))
    kept = AgentSnapshot.model_validate(admin.version(ALICE, space, agent.agent_id, 1).snapshot)
    assert kept.legacy and kept.context_policy is None
    new, _ = admin.publish(ALICE, space, agent.agent_id)  # a publish of the draft
    assert AgentSnapshot.model_validate(new.snapshot).context_policy is not None
