"""AdminService: spaces, members and roles, agents, drafts, publishing, versions.

Rules (``access`` for who may): any signed-in user may create a space and becomes its
owner; members read the space, its members, agents and published versions; admins
manage agents, drafts, publishing and members; only an owner grants, changes or removes
the owner role, and a space always keeps one owner. Membership changes are serialized
on the space item (``PlatformStore.write_member``), so the last-owner rule holds under
concurrency. A draft saved with ``revision`` must still be at that revision (409
``draft_changed`` otherwise); publishing an unchanged draft returns the latest version
instead of a copy (``created`` false).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentloom.platform.access import check_id, member_of
from agentloom.platform.agents import (
    PLATFORM_FIELDS,
    DraftRules,
    config_hash,
    freeze,
    validate_draft,
)
from agentloom.platform.domain import (
    RANK,
    Agent,
    AgentVersion,
    Draft,
    Member,
    Role,
    Space,
    new_id,
    now,
)
from agentloom.platform.errors import Conflict, Forbidden, Invalid, NotFound
from agentloom.platform.identity import Principal, check_user_id
from agentloom.platform.store import PlatformStore, WriteConflict, retry_conflicts

MAX_NAME = 200


def _name(value: str, what: str) -> str:
    text = value.strip()
    if not text or len(text) > MAX_NAME:
        raise Invalid(f"{what}: 1-{MAX_NAME} characters", code="invalid_field",
                      details={"fields": [{"field": what, "message": "1-200 characters"}]})
    return text


class AdminService:
    def __init__(self, store: PlatformStore, rules: DraftRules | None = None) -> None:
        self.store = store
        self.rules = rules or DraftRules()

    # -- spaces and members --------------------------------------------------------------

    def create_space(self, who: Principal, name: str) -> Space:
        space = Space(space_id=new_id("spc"), name=_name(name, "name"), created_by=who.user_id,
                      created_at=now())
        self.store.create_space(space, Member(space_id=space.space_id, user_id=who.user_id,
                                              role="owner", added_by=who.user_id,
                                              added_at=space.created_at))
        return space

    def spaces(self, who: Principal) -> list[tuple[Space, str]]:
        out = []
        for space_id, role in self.store.user_spaces(who.user_id):
            found = self.store.get_space(space_id)
            if found is not None:
                out.append((found.value, role))
        return out

    def space(self, who: Principal, space_id: str) -> tuple[Space, Member]:
        member = member_of(self.store, who, space_id)
        found = self.store.get_space(space_id)
        if found is None:
            raise NotFound(f"space {space_id} not found", code="space_not_found")
        return found.value, member

    def members(self, who: Principal, space_id: str) -> list[Member]:
        member_of(self.store, who, space_id)
        return self.store.members(space_id)

    def set_member(self, who: Principal, space_id: str, user_id: str, role: Role) -> Member:
        """Add a member or change a role (admin; owner for anything touching owners)."""
        me = member_of(self.store, who, space_id, "admin")
        check_user_id(user_id)

        def change() -> Member:
            space = self._space_item(space_id)
            current = self.store.get_member(space_id, user_id)
            self._may_touch(me, current, role)
            if current is not None and current.role == role:
                return current
            if current is not None and current.role == "owner":
                self._keep_an_owner(space_id, user_id)
            member = Member(space_id=space_id, user_id=user_id, role=role,
                            added_by=who.user_id, added_at=now())
            self.store.write_member(space, user_id, member)
            return member

        return retry_conflicts(change)

    def remove_member(self, who: Principal, space_id: str, user_id: str) -> None:
        me = member_of(self.store, who, space_id, "admin")

        def change() -> None:
            space = self._space_item(space_id)
            current = self.store.get_member(space_id, user_id)
            if current is None:
                raise NotFound(f"{user_id!r} is not a member of space {space_id}",
                               code="member_not_found")
            self._may_touch(me, current, None)
            if current.role == "owner":
                self._keep_an_owner(space_id, user_id)
            self.store.write_member(space, user_id, None)

        retry_conflicts(change)

    def _space_item(self, space_id: str) -> Any:
        found = self.store.get_space(space_id)
        if found is None:
            raise NotFound(f"space {space_id} not found", code="space_not_found")
        return found

    @staticmethod
    def _may_touch(me: Member, current: Member | None, role: Role | None) -> None:
        touches_owner = role == "owner" or (current is not None and current.role == "owner")
        if touches_owner and me.role != "owner":
            raise Forbidden("only an owner grants, changes or removes the owner role",
                            code="role_required", details={"role": "owner"})
        if RANK[me.role] < RANK["admin"]:  # pragma: no cover (member_of checked it)
            raise Forbidden("admins manage members", code="role_required")

    def _keep_an_owner(self, space_id: str, leaving: str) -> None:
        owners = [m for m in self.store.members(space_id) if m.role == "owner"]
        if [m.user_id for m in owners] == [leaving]:
            raise Conflict("a space keeps at least one owner: make another member owner "
                           "first", code="last_owner")

    # -- agents, drafts, versions --------------------------------------------------------

    def create_agent(self, who: Principal, space_id: str, name: str,
                     config: Mapping[str, Any]) -> tuple[Agent, Draft]:
        member_of(self.store, who, space_id, "admin")
        agent_id = new_id("agt")
        stored = validate_draft(config, space_id=space_id, agent_id=agent_id, rules=self.rules)
        at = now()
        agent = Agent(space_id=space_id, agent_id=agent_id, name=_name(name, "name"),
                      created_by=who.user_id, created_at=at)
        draft = Draft(space_id=space_id, agent_id=agent_id, revision=1, config=stored,
                      updated_by=who.user_id, updated_at=at)
        self.store.create_agent(agent, draft)
        return agent, draft

    def agents(self, who: Principal, space_id: str) -> list[Agent]:
        member_of(self.store, who, space_id)
        return self.store.agents(space_id)

    def agent(self, who: Principal, space_id: str, agent_id: str,
              role: Role = "member") -> Agent:
        member_of(self.store, who, space_id, role)
        check_id(agent_id, "agt", "agent")
        found = self.store.get_agent(space_id, agent_id)
        if found is None:
            raise NotFound(f"agent {agent_id} not found", code="agent_not_found")
        return found.value

    def draft(self, who: Principal, space_id: str, agent_id: str) -> Draft:
        self.agent(who, space_id, agent_id, "admin")
        found = self.store.get_draft(agent_id)
        if found is None:  # pragma: no cover (created with its agent)
            raise NotFound(f"agent {agent_id} has no draft", code="draft_not_found")
        return found.value

    def save_draft(self, who: Principal, space_id: str, agent_id: str,
                   config: Mapping[str, Any], revision: int | None = None) -> Draft:
        self.agent(who, space_id, agent_id, "admin")
        stored = validate_draft(config, space_id=space_id, agent_id=agent_id, rules=self.rules)
        found = self.store.get_draft(agent_id)
        if found is None:  # pragma: no cover
            raise NotFound(f"agent {agent_id} has no draft", code="draft_not_found")
        current = found.value
        if revision is not None and revision != current.revision:
            raise Conflict(f"the draft is at revision {current.revision}, not {revision}; "
                           "reload it and save again", code="draft_changed",
                           details={"revision": current.revision})
        draft = current.model_copy(update={"revision": current.revision + 1, "config": stored,
                                           "updated_by": who.user_id, "updated_at": now()})
        try:
            self.store.save_draft(draft, found.version)
        except WriteConflict:
            raise Conflict("the draft was saved by someone else meanwhile; reload it",
                           code="draft_changed") from None
        return draft

    def publish(self, who: Principal, space_id: str, agent_id: str,
                revision: int | None = None) -> tuple[AgentVersion, bool]:
        """Freeze the draft as the next version; ``created`` is False when the draft is
        unchanged since the latest version (which is returned)."""

        def attempt() -> tuple[AgentVersion, bool]:
            self.agent(who, space_id, agent_id, "admin")
            agent = self.store.get_agent(space_id, agent_id)
            draft = self.store.get_draft(agent_id)
            assert agent is not None and draft is not None
            if revision is not None and revision != draft.value.revision:
                raise Conflict(f"the draft is at revision {draft.value.revision}, not "
                               f"{revision}", code="draft_changed",
                               details={"revision": draft.value.revision})
            latest = agent.value.latest_version
            if latest:
                previous = self.store.get_version(agent_id, latest)
                if previous is not None and \
                        config_hash(_config(previous)) == config_hash(draft.value.config):
                    return previous, False
            snapshot, digest = freeze(draft.value.config, space_id=space_id,
                                      agent_id=agent_id, version=latest + 1)
            version = AgentVersion(space_id=space_id, agent_id=agent_id, version=latest + 1,
                                   content_hash=digest, snapshot=snapshot,
                                   legacy=bool(snapshot.get("legacy")),
                                   draft_revision=draft.value.revision,
                                   published_by=who.user_id, published_at=now())
            self.store.publish(agent, version)
            return version, True

        return retry_conflicts(attempt)

    def versions(self, who: Principal, space_id: str, agent_id: str) -> list[AgentVersion]:
        self.agent(who, space_id, agent_id)
        return self.store.versions(agent_id)

    def version(self, who: Principal, space_id: str, agent_id: str,
                version: int) -> AgentVersion:
        self.agent(who, space_id, agent_id)
        found = self.store.get_version(agent_id, version)
        if found is None:
            raise NotFound(f"agent {agent_id} has no version {version}",
                           code="version_not_found")
        return found


def _config(version: AgentVersion) -> dict[str, Any]:
    data = dict(version.snapshot)
    for name in PLATFORM_FIELDS:
        data.pop(name, None)
    return data
