"""The hook manifest saved in the checkpoint (``HookManager.checkpoint_config``) and the
comparison a resume runs against it.

The manifest binds what decides behaviour: the point contract version (absent for the
built-in v1 contract, as old manifests were written), the digest of every bound point's
contract, and for each binding the hook version, code identity, replay_safe,
observation, priority, publication order, match, timeout and a hash of its config.
Digests only: a saved manifest is compared, never installed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, NotRequired, TypedDict

from agentloom_runtime.errors import ResumeMismatch

from .bindings import ResolvedBinding
from .points import HookPointRegistry


class BindingManifest(TypedDict):
    point: str
    hook_id: str
    version: str
    code_hash: str
    replay_safe: bool
    observation: bool
    priority: int
    order: int
    match: dict[str, list[str]]
    timeout: float
    config_hash: str


class HookManifest(TypedDict):
    point_contract_version: NotRequired[int]
    stage_timeout: float
    points: dict[str, str]
    bindings: list[BindingManifest]


def config_hash(config: Mapping[str, Any]) -> str:
    raw = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(raw.encode()).hexdigest()


def build_manifest(points: HookPointRegistry, resolved: Iterable[ResolvedBinding],
                   stage_timeout: float) -> HookManifest:
    entries: list[BindingManifest] = []
    used: dict[str, str] = {}
    for item in resolved:
        b = item.binding
        used[b.point] = item.point.digest()
        entries.append(BindingManifest(
            point=b.point, hook_id=b.hook_id, version=b.version,
            code_hash=item.definition.fingerprint, replay_safe=item.definition.replay_safe,
            observation=item.definition.observation, priority=b.priority, order=item.order,
            match=b.matcher.to_dict(), timeout=float(b.timeout),
            config_hash=config_hash(b.config)))
    entries.sort(key=lambda e: (e["point"], e["priority"], e["order"]))
    manifest = HookManifest(stage_timeout=float(stage_timeout), points=dict(sorted(used.items())),
                            bindings=entries)
    if points.contract_version != 1:
        manifest["point_contract_version"] = points.contract_version
    return manifest


_FIELD_NAMES = {"code_hash": "code fingerprint", "config_hash": "config"}


def _key(entry: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(entry.get("point")), str(entry.get("hook_id")), str(entry.get("order")))


def _label(key: tuple[str, str, str]) -> str:
    return f"hook {key[1]} at {key[0]} (order {key[2]})"


def differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """Human-readable differences, most specific first; empty when identical. ``current``
    is a ``HookManifest`` (``HookManager.checkpoint_config()``)."""
    diffs: list[str] = []
    cur = current
    if saved.get("point_contract_version") != cur.get("point_contract_version"):
        diffs.append(f"point contract version: saved {saved.get('point_contract_version', 1)},"
                     f" current {cur.get('point_contract_version', 1)}")
    saved_b = {_key(e): e for e in saved.get("bindings") or [] if isinstance(e, Mapping)}
    cur_b = {_key(e): e for e in current["bindings"]}
    for key in sorted(saved_b.keys() - cur_b.keys()):
        diffs.append(f"{_label(key)} was removed")
    for key in sorted(cur_b.keys() - saved_b.keys()):
        diffs.append(f"{_label(key)} was added")
    for key in sorted(saved_b.keys() & cur_b.keys()):
        old, new = saved_b[key], cur_b[key]
        for name in sorted(set(old) | set(new)):
            if old.get(name) != new.get(name):
                diffs.append(f"{_label(key)}: {_FIELD_NAMES.get(name, name)} mismatch "
                             f"(saved {old.get(name)!r}, current {new.get(name)!r})")
    saved_p = saved.get("points") or {}
    for name in sorted(set(saved_p) | set(current["points"])):
        if saved_p.get(name) != current["points"].get(name):
            diffs.append(f"the contract of point {name} changed")
    for name in sorted((set(saved) | set(cur)) - {"point_contract_version", "bindings", "points"}):
        if saved.get(name) != cur.get(name):
            diffs.append(f"{name}: saved {saved.get(name)!r}, current {cur.get(name)!r}")
    if not diffs and dict(saved) != dict(cur):
        diffs.append("the hook manifest differs")
    return diffs


def verify(saved: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Raise ``ResumeMismatch`` naming the differences unless ``saved`` (a checkpoint's
    manifest) equals ``current`` (``HookManager.checkpoint_config()``)."""
    diffs = differences(saved, current)
    if diffs:
        raise ResumeMismatch(
            "the run was started with different hooks: " + "; ".join(diffs[:10])
            + ". Resume with the original hook versions or start a new run.",
            details={"module": "hooks/v1", "differences": diffs})
