"""AdminService: spaces, members and roles, agents, drafts, publishing, versions.

Rules (``access`` for who may): any signed-in user may create a space and becomes its
owner; members read the space, its members, agents and published versions; admins
manage agents, drafts, publishing and members; only an owner grants, changes or removes
the owner role, and a space always keeps one owner. Membership changes are serialized
on the space item (``store.spaces.write_member``), so the last-owner rule holds under
concurrency. A draft saved with ``revision`` must still be at that revision (409
``draft_changed`` otherwise); publishing an unchanged draft returns the latest version
instead of a copy (``created`` false).

Model connections (admin/owner only, reads included: a connection names where a key is
sent): ``ModelConnectionSpec`` records in the space (item ``space#{space}`` /
``model#{connection}``), the key sealed by a ``SecretSealer`` and never returned; an
empty key on update reuses the stored one only under ``key_for_update`` (provider and
base URL unchanged). ``discover_models`` lists a provider's models without saving the
key (with ``resource_id``: a saved connection's key, under the same rule). A draft on a
connection (``"model": {"api_key_ref": "mdl_…"}``) takes its model section from it on
every save and publish, and runs open its key through ``run_key`` (``model_links``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from agentloom.capabilities import Capabilities
from agentloom.models import DEFAULT_BASE_URLS, ModelConnectionSpec, key_for_update
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
    ModelConnectionRecord,
    Role,
    Space,
    new_id,
    now,
)
from agentloom.platform.errors import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    Unavailable,
    field_errors,
)
from agentloom.platform.identity import Principal, check_user_id
from agentloom.platform.model_links import link_model, run_key
from agentloom.platform.store import PlatformStore, WriteConflict, retry_conflicts
from agentloom.platform.store.items import ABSENT, put
from agentloom_runtime.snapshot import ModelConnection

if TYPE_CHECKING:  # the discovery client (httpx) loads with the first discovery
    from agentloom.models import DiscoveredModel, ModelDiscovery

MAX_NAME = 200
MAX_KEY = 4_096


class SecretSealer(Protocol):
    """Seals a connection's key: an envelope bound to (space, connection id), so a sealed
    value copied to another connection or space does not open."""

    def seal(self, space_id: str, connection_id: str, secret: str) -> str: ...

    def open(self, space_id: str, connection_id: str, sealed: str) -> str: ...


@dataclass(frozen=True)
class _Endpoint:
    provider: str
    base_url: str


def _name(value: str, what: str) -> str:
    text = value.strip()
    if not text or len(text) > MAX_NAME:
        raise Invalid(f"{what}: 1-{MAX_NAME} characters", code="invalid_field",
                      details={"fields": [{"field": what, "message": "1-200 characters"}]})
    return text


class AdminService:
    def __init__(self, store: PlatformStore, rules: DraftRules | None = None, *,
                 secrets: SecretSealer | None = None,
                 discovery: ModelDiscovery | None = None,
                 capabilities: Capabilities | None = None) -> None:
        self.store = store
        self.rules = rules or DraftRules()
        self.secrets = secrets
        self.discovery = discovery
        self.capabilities = capabilities or Capabilities()

    # -- spaces and members --------------------------------------------------------------

    def create_space(self, who: Principal, name: str) -> Space:
        space = Space(space_id=new_id("spc"), name=_name(name, "name"), created_by=who.user_id,
                      created_at=now())
        self.store.spaces.create(space, Member(space_id=space.space_id, user_id=who.user_id,
                                               role="owner", added_by=who.user_id,
                                               added_at=space.created_at))
        return space

    def spaces(self, who: Principal) -> list[tuple[Space, str]]:
        out = []
        for space_id, role in self.store.spaces.of_user(who.user_id):
            found = self.store.spaces.get(space_id)
            if found is not None:
                out.append((found.value, role))
        return out

    def space(self, who: Principal, space_id: str) -> tuple[Space, Member]:
        member = member_of(self.store, who, space_id)
        found = self.store.spaces.get(space_id)
        if found is None:
            raise NotFound(f"space {space_id} not found", code="space_not_found")
        return found.value, member

    def members(self, who: Principal, space_id: str) -> list[Member]:
        member_of(self.store, who, space_id)
        return self.store.spaces.members(space_id)

    def set_member(self, who: Principal, space_id: str, user_id: str, role: Role) -> Member:
        """Add a member or change a role (admin; owner for anything touching owners)."""
        me = member_of(self.store, who, space_id, "admin")
        check_user_id(user_id)

        def change() -> Member:
            space = self._space_item(space_id)
            current = self.store.spaces.member(space_id, user_id)
            self._may_touch(me, current, role)
            if current is not None and current.role == role:
                return current
            if current is not None and current.role == "owner":
                self._keep_an_owner(space_id, user_id)
            member = Member(space_id=space_id, user_id=user_id, role=role,
                            added_by=who.user_id, added_at=now())
            self.store.spaces.write_member(space, user_id, member)
            return member

        return retry_conflicts(change)

    def remove_member(self, who: Principal, space_id: str, user_id: str) -> None:
        me = member_of(self.store, who, space_id, "admin")

        def change() -> None:
            space = self._space_item(space_id)
            current = self.store.spaces.member(space_id, user_id)
            if current is None:
                raise NotFound(f"{user_id!r} is not a member of space {space_id}",
                               code="member_not_found")
            self._may_touch(me, current, None)
            if current.role == "owner":
                self._keep_an_owner(space_id, user_id)
            self.store.spaces.write_member(space, user_id, None)

        retry_conflicts(change)

    def _space_item(self, space_id: str) -> Any:
        found = self.store.spaces.get(space_id)
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
        owners = [m for m in self.store.spaces.members(space_id) if m.role == "owner"]
        if [m.user_id for m in owners] == [leaving]:
            raise Conflict("a space keeps at least one owner: make another member owner "
                           "first", code="last_owner")

    # -- agents, drafts, versions --------------------------------------------------------

    def create_agent(self, who: Principal, space_id: str, name: str,
                     config: Mapping[str, Any]) -> tuple[Agent, Draft]:
        member_of(self.store, who, space_id, "admin")
        agent_id = new_id("agt")
        stored = self._validate(config, space_id, agent_id)
        at = now()
        agent = Agent(space_id=space_id, agent_id=agent_id, name=_name(name, "name"),
                      created_by=who.user_id, created_at=at)
        draft = Draft(space_id=space_id, agent_id=agent_id, revision=1, config=stored,
                      updated_by=who.user_id, updated_at=at)
        self.store.agents.create(agent, draft)
        return agent, draft

    def agents(self, who: Principal, space_id: str) -> list[Agent]:
        member_of(self.store, who, space_id)
        return self.store.agents.in_space(space_id)

    def agent(self, who: Principal, space_id: str, agent_id: str,
              role: Role = "member") -> Agent:
        member_of(self.store, who, space_id, role)
        check_id(agent_id, "agt", "agent")
        found = self.store.agents.get(space_id, agent_id)
        if found is None:
            raise NotFound(f"agent {agent_id} not found", code="agent_not_found")
        return found.value

    def draft(self, who: Principal, space_id: str, agent_id: str) -> Draft:
        self.agent(who, space_id, agent_id, "admin")
        found = self.store.agents.draft(agent_id)
        if found is None:  # pragma: no cover (created with its agent)
            raise NotFound(f"agent {agent_id} has no draft", code="draft_not_found")
        return found.value

    def save_draft(self, who: Principal, space_id: str, agent_id: str,
                   config: Mapping[str, Any], revision: int | None = None) -> Draft:
        self.agent(who, space_id, agent_id, "admin")
        stored = self._validate(config, space_id, agent_id)
        found = self.store.agents.draft(agent_id)
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
            self.store.agents.save_draft(draft, found.version)
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
            agent = self.store.agents.get(space_id, agent_id)
            draft = self.store.agents.draft(agent_id)
            assert agent is not None and draft is not None
            if revision is not None and revision != draft.value.revision:
                raise Conflict(f"the draft is at revision {draft.value.revision}, not "
                               f"{revision}", code="draft_changed",
                               details={"revision": draft.value.revision})
            latest = agent.value.latest_version
            # bound resources pinned first: a changed skill or schema is a new version
            config = self.capabilities.pin(space_id, draft.value.config)
            config, _ = link_model(self.store, space_id, config)  # the connection as it is
            if latest:
                previous = self.store.agents.version(agent_id, latest)
                if previous is not None and \
                        config_hash(_config(previous)) == config_hash(config):
                    return previous, False
            snapshot, digest = freeze(config, space_id=space_id,
                                      agent_id=agent_id, version=latest + 1)
            version = AgentVersion(space_id=space_id, agent_id=agent_id, version=latest + 1,
                                   content_hash=digest, snapshot=snapshot,
                                   legacy=bool(snapshot.get("legacy")),
                                   draft_revision=draft.value.revision,
                                   published_by=who.user_id, published_at=now())
            self.store.agents.publish(agent, version)
            return version, True

        return retry_conflicts(attempt)

    def _validate(self, config: Mapping[str, Any], space_id: str,
                  agent_id: str) -> dict[str, Any]:
        """A draft as stored; a model section on a connection of the space is taken from
        it (``model_links``), its reference allowed as the key reference."""
        if not isinstance(config, Mapping):
            return validate_draft(config, space_id=space_id, agent_id=agent_id,
                                  rules=self.rules)
        linked, ref = link_model(self.store, space_id, config)
        rules = self.rules if ref is None else replace(
            self.rules, key_refs=self.rules.key_refs | {ref})
        return validate_draft(linked, space_id=space_id, agent_id=agent_id, rules=rules)

    def versions(self, who: Principal, space_id: str, agent_id: str) -> list[AgentVersion]:
        self.agent(who, space_id, agent_id)
        return self.store.agents.versions(agent_id)

    def version(self, who: Principal, space_id: str, agent_id: str,
                version: int) -> AgentVersion:
        self.agent(who, space_id, agent_id)
        found = self.store.agents.version(agent_id, version)
        if found is None:
            raise NotFound(f"agent {agent_id} has no version {version}",
                           code="version_not_found")
        return found

    # -- model connections ---------------------------------------------------------------

    def create_model_connection(self, who: Principal, space_id: str, name: str,
                                spec: Mapping[str, Any],
                                api_key: str | None = None) -> ModelConnectionRecord:
        member_of(self.store, who, space_id, "admin")
        connection_id = new_id("mdl")
        key = _new_key(api_key)
        checked = _spec(spec, connection_id, has_key=key is not None)
        at = now()
        record = ModelConnectionRecord(
            space_id=space_id, connection_id=connection_id, name=_name(name, "name"),
            spec=checked, sealed_key=self._seal(space_id, connection_id, key), revision=1,
            created_by=who.user_id, created_at=at, updated_by=who.user_id, updated_at=at)
        self.store.items.transact([put(f"space#{space_id}", f"model#{connection_id}", record,
                                       ABSENT)])
        return record

    def model_connections(self, who: Principal, space_id: str) -> list[ModelConnectionRecord]:
        member_of(self.store, who, space_id, "admin")
        return self.store.items.query(f"space#{space_id}", "model#", ModelConnectionRecord)

    def model_connection(self, who: Principal, space_id: str,
                         connection_id: str) -> ModelConnectionRecord:
        return self._connection(who, space_id, connection_id)[0]

    def update_model_connection(self, who: Principal, space_id: str, connection_id: str,
                                spec: Mapping[str, Any], *, name: str | None = None,
                                api_key: str | None = None,
                                revision: int | None = None) -> ModelConnectionRecord:
        """Replace the connection's spec (and name). An empty ``api_key`` keeps the stored
        key only when provider and base URL are unchanged (``key_for_update``)."""
        current, version = self._connection(who, space_id, connection_id)
        if revision is not None and revision != current.revision:
            raise Conflict(f"the model connection is at revision {current.revision}, not "
                           f"{revision}; reload it", code="connection_changed",
                           details={"revision": current.revision})
        old = ModelConnectionSpec.model_validate(current.spec, context={"stored": True})
        decision = key_for_update(old, _endpoint(spec), api_key)
        if decision.action == "refuse":
            raise _key_invalid(decision.code or "key_reuse_refused",
                               decision.message or "the key cannot be used")
        if decision.action == "new":
            sealed = self._seal(space_id, connection_id, _new_key(api_key))
        else:
            sealed = current.sealed_key
        checked = _spec(spec, connection_id, has_key=sealed is not None)
        record = current.model_copy(update={
            "name": current.name if name is None else _name(name, "name"), "spec": checked,
            "sealed_key": sealed, "revision": current.revision + 1,
            "updated_by": who.user_id, "updated_at": now()})
        try:
            self.store.items.transact([put(f"space#{space_id}", f"model#{connection_id}",
                                           record, version)])
        except WriteConflict:
            raise Conflict("the model connection was changed by someone else meanwhile; "
                           "reload it", code="connection_changed") from None
        return record

    def discover_models(self, who: Principal, space_id: str, provider: str,
                        base_url: str, api_key: str | None = None,
                        resource_id: str | None = None) -> list[DiscoveredModel]:
        """The provider's models (``GET {base_url}/models`` through the SSRF-guarded
        client); the key is used for that request only. With ``resource_id`` and no key,
        the saved connection's key — only for its own provider and base URL."""
        member_of(self.store, who, space_id, "admin")
        base_url = base_url or DEFAULT_BASE_URLS.get(provider, "")  # empty: the provider's
        key = api_key or ""
        if resource_id is not None:
            current, _ = self._connection(who, space_id, resource_id)
            old = ModelConnectionSpec.model_validate(current.spec, context={"stored": True})
            decision = key_for_update(old, _endpoint({"provider": provider,
                                                      "base_url": base_url}), api_key)
            if decision.action == "refuse":
                raise _key_invalid(decision.code or "key_reuse_refused",
                                   decision.message or "the key cannot be used")
            if decision.action == "reuse" and current.sealed_key is not None:
                key = self._open(current)
        if self.discovery is None:
            from agentloom.models import ModelDiscovery

            self.discovery = ModelDiscovery()
        discovery = self.discovery
        return asyncio.run(discovery.discover(provider, base_url, key))

    def run_key(self, space_id: str, connection_id: str, model: ModelConnection) -> str:
        """The key a run of a version on ``connection_id`` calls its provider with
        (``model_links.run_key``; no access check: for the model gateway only)."""
        return run_key(self.store, self.secrets, space_id, connection_id, model)

    def connection_key(self, space_id: str, connection_id: str) -> str | None:
        """The stored key of a connection, for the code that calls the provider (no
        access check: never behind a route)."""
        found = self.store.items.get(f"space#{space_id}", f"model#{connection_id}",
                                     ModelConnectionRecord)
        if found is None or found.value.sealed_key is None:
            return None
        return self._open(found.value)

    def _connection(self, who: Principal, space_id: str,
                    connection_id: str) -> tuple[ModelConnectionRecord, int]:
        member_of(self.store, who, space_id, "admin")
        check_id(connection_id, "mdl", "model_connection")
        found = self.store.items.get(f"space#{space_id}", f"model#{connection_id}",
                                     ModelConnectionRecord)
        if found is None:
            raise NotFound(f"model connection {connection_id} not found",
                           code="model_connection_not_found")
        return found.value, found.version

    def _seal(self, space_id: str, connection_id: str, key: str | None) -> str | None:
        if key is None:
            return None
        if self.secrets is None:
            raise Unavailable("this deployment has no secret sealer: provider keys cannot "
                              "be stored", code="secrets_unavailable")
        return self.secrets.seal(space_id, connection_id, key)

    def _open(self, record: ModelConnectionRecord) -> str:
        if self.secrets is None or record.sealed_key is None:
            raise Unavailable("this deployment has no secret sealer: provider keys cannot "
                              "be read", code="secrets_unavailable")
        return self.secrets.open(record.space_id, record.connection_id, record.sealed_key)


def _key_invalid(code: str, message: str) -> Invalid:
    return Invalid(f"api_key: {message}", code=code,
                   details={"fields": [{"field": "api_key", "message": message}]})


def _new_key(api_key: str | None) -> str | None:
    """A key given (None when empty), or 422 when it cannot be sent as a header."""
    if api_key is None or not api_key.strip():
        return None
    if not (api_key.isascii() and api_key.isprintable() and " " not in api_key
            and len(api_key) <= MAX_KEY):
        raise _key_invalid("api_key_invalid", "api_key must be printable ASCII without "
                           f"spaces, at most {MAX_KEY} characters")
    return api_key


def _endpoint(spec: Mapping[str, Any]) -> _Endpoint:
    provider, base_url = spec.get("provider"), spec.get("base_url")
    provider = provider if isinstance(provider, str) else ""
    if not isinstance(base_url, str) or not base_url:
        base_url = DEFAULT_BASE_URLS.get(provider, "")
    return _Endpoint(provider, base_url)


def _spec(spec: Mapping[str, Any], connection_id: str, *, has_key: bool) -> dict[str, Any]:
    """The spec validated (``ModelConnectionSpec``), ``api_key_ref`` set by the platform;
    422 naming each field (``spec.<field>``)."""
    if "api_key_ref" in spec:
        raise Invalid("spec.api_key_ref: set by the platform; send the key as api_key",
                      code="invalid_field", details={"fields": [{
                          "field": "spec.api_key_ref", "message": "set by the platform"}]})
    if not has_key and spec.get("provider") in DEFAULT_BASE_URLS:
        raise _key_invalid("api_key_required",
                           f"provider {spec.get('provider')} needs an api_key")
    try:
        checked = ModelConnectionSpec.model_validate(
            {**spec, "api_key_ref": connection_id if has_key else None})
    except ValidationError as exc:
        raise field_errors([dict(e) for e in exc.errors()], prefix="spec") from None
    return checked.model_dump(mode="json")


def _config(version: AgentVersion) -> dict[str, Any]:
    data = dict(version.snapshot)
    for name in PLATFORM_FIELDS:
        data.pop(name, None)
    return data
