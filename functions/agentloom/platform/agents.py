"""Drafts and published versions: the rules, in one place.

- A draft is an agent's configuration: every ``AgentSnapshot`` field except those the
  platform sets (``format``, ``space_id``, ``agent_id``, ``version``, ``legacy``). It is
  validated as the snapshot it will become; an error names the field
  (``config.context_policy.target_ratio``).
- A new or saved draft gets the default ``context_policy`` (docs/contract.md#thresholds: 0.8 / 0.6 /
  null / null / 4) written out, like every other default, so a later change of defaults
  never changes a saved draft. Only versions marked ``legacy`` keep the character policy
  (``context_policy`` null): a draft can never be legacy.
- The server decides what a draft may reach on the host: ``api_key_ref`` names one of
  the environment variables the server allows (the key is the server's: an agent must
  not name any variable it likes and send it to a URL it chooses), and hook packages
  (trusted Python) must lie under a folder the server operator allows.
- Publishing freezes the whole snapshot and hashes it (``domain.content_hash``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentloom.platform.domain import content_hash
from agentloom.platform.errors import Invalid, field_errors
from agentloom_runtime.snapshot import AgentSnapshot

PLATFORM_FIELDS = ("format", "space_id", "agent_id", "version", "legacy")
DEFAULT_KEY_REFS = frozenset({"OPENAI_API_KEY", "DEEPSEEK_API_KEY"})


@dataclass(frozen=True)
class DraftRules:
    """What this server lets a draft name on the host."""

    key_refs: frozenset[str] = DEFAULT_KEY_REFS
    hook_roots: tuple[Path, ...] = field(default_factory=tuple)


def _invalid(name: str, message: str) -> Invalid:
    return field_errors([{"loc": ("config", name), "msg": message}])


def validate_draft(config: Any, *, space_id: str, agent_id: str,
                   rules: DraftRules) -> dict[str, Any]:
    """The draft as it is stored: validated, with defaults written out."""
    if not isinstance(config, Mapping):
        raise field_errors([{"loc": ("config",), "msg": "expected an object"}])
    fixed = [k for k in PLATFORM_FIELDS if k in config]
    if fixed:
        raise field_errors([{"loc": ("config", k), "msg": "set by the platform; leave it out"}
                            for k in fixed])
    try:
        snapshot = AgentSnapshot.model_validate({**config, "space_id": space_id,
                                                 "agent_id": agent_id, "version": 1})
    except ValidationError as err:
        raise field_errors([dict(e) for e in err.errors()], prefix="config") from None
    _check_host_reach(snapshot, rules)
    data = snapshot.model_dump(mode="json")
    for name in PLATFORM_FIELDS:
        data.pop(name, None)
    return data


def _check_host_reach(snapshot: AgentSnapshot, rules: DraftRules) -> None:
    ref = snapshot.model.api_key_ref
    if ref is not None and ref not in rules.key_refs:
        allowed = ", ".join(sorted(rules.key_refs)) or "none"
        raise field_errors([{"loc": ("config", "model", "api_key_ref"),
                             "msg": f"{ref!r} is not a key this server provides (allowed: "
                                    f"{allowed})"}])
    for index, package in enumerate(snapshot.hook_packages):
        path = Path(package)
        if not rules.hook_roots:
            raise _invalid("hook_packages", "this server accepts no hook packages (the "
                           "operator allows folders with `serve --hook-root DIR`)")
        real = Path(os.path.realpath(path))
        if not path.is_absolute() or not any(real.is_relative_to(Path(os.path.realpath(root)))
                                             for root in rules.hook_roots):
            raise field_errors([{"loc": ("config", "hook_packages", index),
                                 "msg": "must be an absolute path under an allowed hook "
                                        "root"}])
        if not real.exists():
            raise field_errors([{"loc": ("config", "hook_packages", index),
                                 "msg": "does not exist"}])


def freeze(config: Mapping[str, Any], *, space_id: str, agent_id: str,
           version: int) -> tuple[dict[str, Any], str]:
    """The published snapshot of a draft (as JSON) and its content hash."""
    snapshot = AgentSnapshot.model_validate({**config, "space_id": space_id,
                                             "agent_id": agent_id, "version": version})
    data = snapshot.model_dump(mode="json")
    return data, content_hash(data)


def config_hash(config: Mapping[str, Any]) -> str:
    """Identity of a draft's content (a publish of an unchanged draft is no new version)."""
    return content_hash(dict(config))


def snapshot_of(data: Mapping[str, Any]) -> AgentSnapshot:
    return AgentSnapshot.model_validate(dict(data))
