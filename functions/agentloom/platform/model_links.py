"""Agents on a space's model connection: the draft names it, a publish freezes it, a run
calls the provider with its stored key.

A draft uses a connection by naming it as its key reference, ``"model": {"api_key_ref":
"mdl_…"}``, with, if it likes, the run options a connection does not set
(``temperature``, ``timeout_seconds``, ``estimator``). On every save and every publish
the connection's own fields (``CONNECTION_FIELDS``: dialect, base URL, model id, the
window figures and the prices) are copied from the connection as it is then, over what
the draft says; so a publish freezes the connection (a changed connection makes a new
version, an old version keeps what it was published with) and the snapshot holds only
the reference, never the key.

At run time ``run_key`` opens the key for the gateway being built
(``agentloom.models.gateway.ConnectionModels``): the connection must still exist in the
snapshot's space and still point at the snapshot's endpoint (dialect and base URL) — a
key is entered for one endpoint, and a newer key sent to an older version's URL could
leak — else a ``ConfigError`` naming the way out (publish the agent again).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from agentloom.models import ModelConnectionSpec
from agentloom.models.gateway import PREFIX
from agentloom.platform.domain import ModelConnectionRecord
from agentloom.platform.errors import field_errors
from agentloom.platform.store import PlatformStore
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.snapshot import ModelConnection

RUN_OPTIONS = ("temperature", "timeout_seconds", "estimator")


class Opener(Protocol):
    def open(self, space_id: str, connection_id: str, sealed: str) -> str: ...


def connection_ref(value: Any) -> str | None:
    """The connection id a model section (or a key reference) names, if any."""
    ref = value.get("api_key_ref") if isinstance(value, Mapping) else value
    return ref if isinstance(ref, str) and ref.startswith(PREFIX) else None


def link_model(store: PlatformStore, space_id: str,
               config: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``config`` with its model section taken from the connection it names (and that
    connection's id), or unchanged (and None)."""
    model = config.get("model")
    ref = connection_ref(model)
    if ref is None or not isinstance(model, Mapping):
        return dict(config), None
    record = _record(store, space_id, ref)
    if record is None:
        raise field_errors([{"loc": ("config", "model", "api_key_ref"),
                             "msg": f"no model connection {ref} in this space"}])
    linked = _spec(record).to_snapshot_model().model_dump(mode="json")
    linked.update({k: model[k] for k in RUN_OPTIONS if model.get(k) is not None})
    linked["api_key_ref"] = ref
    return {**config, "model": linked}, ref


def run_key(store: PlatformStore, secrets: Opener | None, space_id: str,
            connection_id: str, model: ModelConnection) -> str:
    """The stored key of ``connection_id`` for a run whose snapshot says ``model``
    ("" for a keyless connection)."""
    record = _record(store, space_id, connection_id)
    if record is None:
        raise ConfigError(f"model connection {connection_id} no longer exists in space "
                          f"{space_id}: publish the agent again with another connection",
                          details={"code": "model_connection_not_found"})
    now = _spec(record).to_snapshot_model()
    if (now.dialect, now.base_url) != (model.dialect, model.base_url):
        raise ConfigError(f"model connection {connection_id} now points at another "
                          "endpoint than this version was published with: publish the "
                          "agent again", details={"code": "model_connection_changed"})
    if record.sealed_key is None:
        return ""
    if secrets is None:
        raise ConfigError("this deployment has no secret sealer: provider keys cannot be "
                          "read", details={"code": "secrets_unavailable"})
    return secrets.open(space_id, connection_id, record.sealed_key)


def _record(store: PlatformStore, space_id: str,
            connection_id: str) -> ModelConnectionRecord | None:
    found = store.items.get(f"space#{space_id}", f"model#{connection_id}", ModelConnectionRecord)
    return None if found is None else found.value


def _spec(record: ModelConnectionRecord) -> ModelConnectionSpec:
    return ModelConnectionSpec.model_validate(record.spec, context={"stored": True})
