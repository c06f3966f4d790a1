"""checkpoint_config() and the resume check against a saved manifest."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from unit.hooks.hook_fixtures import DYNAMIC, dynamic, payload, scope

from agentloom_runtime.errors import ConfigError, ResumeMismatch
from agentloom_runtime.hooks import (
    Continue,
    HookBinding,
    HookDefinition,
    HookManager,
    HookPointRegistry,
    HookRegistry,
    code_fingerprint,
)


async def redact(ctx: Any, data: dict[str, Any]) -> Continue:
    return Continue()


async def redact_v2(ctx: Any, data: dict[str, Any]) -> Continue:
    assert data is not None
    return Continue()


async def audit(ctx: Any, data: dict[str, Any]) -> Continue:
    return Continue()


def registry(handler: Any = redact, **definition: Any) -> HookRegistry:
    return HookRegistry([HookDefinition("redact", "1", handler, **definition),
                         HookDefinition("audit", "3", audit, observation=True)])


BINDINGS = [HookBinding("redact", "1", "tool.before", priority=10, timeout=0.5,
                        match={"tools": ["workspace_*"]}, config={"mask": "***"}),
            HookBinding("audit", "3", "tool.after")]


def saved(mgr: HookManager) -> dict[str, Any]:
    """As it comes back from a checkpoint: JSON."""
    result: dict[str, Any] = json.loads(json.dumps(mgr.checkpoint_config()))
    return result


def test_the_manifest_records_what_decides_behaviour() -> None:
    config = HookManager(registry(), BINDINGS).checkpoint_config()
    assert HookManager.module_id == "hooks/v1"
    assert config["point_contract_version"] == 2 and config["stage_timeout"] == 10.0
    assert set(config["points"]) == {"tool.before", "tool.after"}
    first = config["bindings"][1]
    mask = hashlib.sha256(b'{"mask":"***"}').hexdigest()
    assert first == {
        "point": "tool.before", "hook_id": "redact", "version": "1",
        "code_hash": code_fingerprint(redact), "replay_safe": False, "observation": False,
        "priority": 10, "order": 0, "match": {"tools": ["workspace_*"]}, "timeout": 0.5,
        "config_hash": f"sha256:{mask}"}
    assert first["code_hash"].startswith("source-sha256:")
    assert "***" not in json.dumps(config)  # config values are hashed, not copied
    assert config["bindings"][0]["observation"] is True


def test_an_identical_setup_resumes() -> None:
    config = saved(HookManager(registry(), BINDINGS))
    HookManager(registry(), list(BINDINGS), saved_config=config)


def mismatch(config: dict[str, Any], reg: HookRegistry, bindings: list[HookBinding],
             **kwargs: Any) -> str:
    with pytest.raises(ResumeMismatch) as info:
        HookManager(reg, bindings, saved_config=config, **kwargs)
    assert isinstance(info.value, ConfigError)
    return info.value.message


def test_a_changed_source_blocks_the_resume_naming_the_hook() -> None:
    config = saved(HookManager(registry(), BINDINGS))
    text = mismatch(config, registry(redact_v2), BINDINGS)
    assert "hook redact at tool.before (order 0): code fingerprint mismatch" in text


def test_a_changed_bytecode_blocks_the_resume() -> None:
    config = saved(HookManager(registry(dynamic()), BINDINGS))
    HookManager(registry(dynamic()), BINDINGS, saved_config=config)  # recompiled: same
    changed = dynamic(DYNAMIC.replace('"zeta"', '"zeta!"'))
    assert "code fingerprint mismatch" in mismatch(config, registry(changed), BINDINGS)
    assert "'bytecode-v2:" in mismatch(config, registry(changed), BINDINGS)


def test_a_changed_artifact_hash_blocks_the_resume() -> None:
    config = saved(HookManager(registry(code_hash="sha256:aaa"), BINDINGS))
    text = mismatch(config, registry(code_hash="sha256:bbb"), BINDINGS)
    assert "saved 'artifact:sha256:aaa', current 'artifact:sha256:bbb'" in text


@pytest.mark.parametrize("bindings, expected", [
    ([*BINDINGS, HookBinding("audit", "3", "run.before")], "hook audit at run.before (order 2) "
                                                          "was added"),
    (BINDINGS[:1], "hook audit at tool.after (order 1) was removed"),
    ([HookBinding("redact", "1", "tool.before", priority=11, timeout=0.5,
                  match={"tools": ["workspace_*"]}, config={"mask": "***"}), BINDINGS[1]],
     "priority mismatch"),
    ([HookBinding("redact", "1", "tool.before", priority=10, timeout=0.5,
                  match={"tools": ["workspace_*"]}, config={"mask": "##"}), BINDINGS[1]],
     "config mismatch"),
    ([HookBinding("redact", "1", "tool.before", priority=10, timeout=0.9,
                  match={"tools": ["workspace_*"]}, config={"mask": "***"}), BINDINGS[1]],
     "timeout mismatch"),
])
def test_a_resume_cannot_change_bindings(bindings: list[HookBinding], expected: str) -> None:
    config = saved(HookManager(registry(), BINDINGS))
    assert expected in mismatch(config, registry(), bindings)


def test_replay_safe_and_observation_flags_are_bound() -> None:
    config = saved(HookManager(registry(), BINDINGS))
    assert "replay_safe mismatch" in mismatch(config, registry(replay_safe=True), BINDINGS)


def test_the_stage_budget_is_bound() -> None:
    config = saved(HookManager(registry(), BINDINGS))
    assert "stage_timeout" in mismatch(config, registry(), BINDINGS, stage_timeout=5.0)


def test_a_resume_cannot_switch_the_point_contract() -> None:
    v1 = saved(HookManager(registry(), BINDINGS, points=HookPointRegistry.builtin(1)))
    assert "point_contract_version" not in v1
    text = mismatch(v1, registry(), BINDINGS, points=HookPointRegistry.builtin(2))
    assert "point contract version: saved 1, current 2" in text
    v2 = saved(HookManager(registry(), BINDINGS))
    text = mismatch(v2, registry(), BINDINGS, points=HookPointRegistry.builtin(1))
    assert "point contract version: saved 2, current 1" in text


async def test_a_manifest_without_a_contract_version_rebuilds_v1() -> None:
    v1 = saved(HookManager(registry(), BINDINGS, points=HookPointRegistry.builtin(1)))
    mgr = HookManager(registry(), BINDINGS, saved_config=v1)
    assert mgr.points.contract_version == 1
    legacy = {**payload("tool.before"), "legacy_field": 1}  # v1 accepts unknown fields
    await mgr.run("tool.before", legacy, scope("tool.before", tool="workspace_read"))
    # ... and is checked in full: a changed binding still blocks
    assert "priority mismatch" in mismatch(v1, registry(), [
        HookBinding("redact", "1", "tool.before", priority=1, timeout=0.5,
                    match={"tools": ["workspace_*"]}, config={"mask": "***"}), BINDINGS[1]])


def test_a_saved_schema_is_never_installed() -> None:
    config = saved(HookManager(registry(), BINDINGS))
    forged = {**config, "points": {**config["points"], "tool.before": "sha256:forged"},
              "schemas": {"tool.before": {"type": "object"}}}
    text = mismatch(forged, registry(), BINDINGS)
    assert "the contract of point tool.before changed" in text
    assert "schemas" in text


def test_an_unknown_contract_version_is_refused() -> None:
    config = {**saved(HookManager(registry(), BINDINGS)), "point_contract_version": 3}
    assert "version 3" in mismatch(config, registry(), BINDINGS)


def test_a_custom_point_is_registered_by_the_host_and_bound_by_digest() -> None:
    from agentloom_runtime.hooks import HookPoint, PatchOutput

    def points(max_len: int) -> HookPointRegistry:
        reg = HookPointRegistry.builtin(2)
        reg.register(HookPoint(
            name="report.render.after", stage="after",
            schema={"type": "object", "properties": {"html": {"type": "string",
                                                              "maxLength": max_len}}},
            writable=frozenset({"html"}), results=frozenset({Continue, PatchOutput})))
        return reg

    bindings = [HookBinding("audit", "3", "report.render.after")]
    config = saved(HookManager(registry(), bindings, points=points(100)))
    HookManager(registry(), bindings, points=points(100), saved_config=config)
    text = mismatch(config, registry(), bindings, points=points(200))
    assert "the contract of point report.render.after changed" in text
