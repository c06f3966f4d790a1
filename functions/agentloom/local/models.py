"""Which model a local run talks to: a real provider from the conventional environment
(or flags), or the clearly labelled scripted demo model.

The HTTP gateway (and its HTTP client) is imported where a real provider is chosen
(``agentloom.models.gateway.gateway_for``), and the
scripted demo model by the functions that build it: importing this module loads
neither.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentloom_runtime.contracts import ModelResponse, ToolCall
from agentloom_runtime.errors import ConfigError

from .inputs import read_text

if TYPE_CHECKING:
    from agentloom_runtime.snapshot import AgentSnapshot
    from agentloom_runtime.testing.keyed import KeyedScriptModel

PROVIDERS = {
    "openai": {"key": "OPENAI_API_KEY", "base": "https://api.openai.com/v1",
               "model": "gpt-4o-mini"},
    "deepseek": {"key": "DEEPSEEK_API_KEY", "base": "https://api.deepseek.com",
                 "model": "deepseek-chat"},
}


MAX_SCRIPT_CHARS = 1_000_000


@dataclass(frozen=True)
class ModelChoice:
    snapshot: AgentSnapshot
    gateway: Any
    banner: str


def load_demo_script(path: Path) -> KeyedScriptModel:
    import yaml

    from agentloom_runtime.testing.keyed import KeyedScriptModel

    text = read_text(str(path), what="demo script", limit=MAX_SCRIPT_CHARS, pipes=False)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"the demo script {path} is not valid YAML: {err}") from None
    items = data.get("replies") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{path}: no replies (expected `replies:` with a list)")
    return KeyedScriptModel([_reply(path, i, item) for i, item in enumerate(items)],
                            label=str(path.resolve()))


def _reply(path: Path, i: int, item: Any) -> ModelResponse:
    if isinstance(item, dict) and "answer" in item:
        return ModelResponse(content=str(item["answer"]))
    call = item.get("call") if isinstance(item, dict) else None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise ConfigError(f"{path}: reply {i + 1} needs 'answer' or 'call' (with a name)")
    return ModelResponse(tool_calls=(ToolCall(
        id=f"demo_{i}", name=call["name"],
        arguments=json.dumps(call.get("arguments", {}))),))


def choose_model(snapshot: AgentSnapshot, *, provider: str | None, model: str | None,
                 base_url: str | None, demo_script: str | None,
                 agent_path: Path) -> ModelChoice:
    if provider is None:
        provider = next((p for p, spec in PROVIDERS.items() if os.environ.get(spec["key"])),
                        "demo")
    if provider == "demo":
        path = Path(demo_script) if demo_script else agent_path.parent / "demo-script.yaml"
        if not path.exists():
            raise ConfigError("no model configured: set OPENAI_API_KEY or DEEPSEEK_API_KEY, "
                              f"or give --demo-script (looked for {path})")
        return ModelChoice(snapshot, load_demo_script(path),
                           f"[demo model] scripted replies from {path} — set OPENAI_API_KEY "
                           "or DEEPSEEK_API_KEY to use a real model")
    spec = PROVIDERS[provider]
    same = snapshot.model.dialect == provider
    connection = snapshot.model.model_copy(update={
        "dialect": provider, "api_key_ref": spec["key"],
        "base_url": base_url or (os.environ.get("OPENAI_BASE_URL") if provider == "openai"
                                 else None) or (snapshot.model.base_url if same
                                                else spec["base"]),
        "model": model or (snapshot.model.model if same else spec["model"]),
    })
    from agentloom.models.gateway import env_key, gateway_for

    env_key(spec["key"])  # refused at once when the variable is not set
    snap = snapshot.model_copy(update={"model": connection})
    return ModelChoice(snap, gateway_for(snap),
                       f"[model] {provider} {connection.model} at {connection.base_url}")


def restore_model(snapshot: AgentSnapshot, binding: dict[str, Any]) -> ModelChoice:
    """The same model the run started with (its binding is checked on attach)."""
    from agentloom_runtime.testing.keyed import KeyedScriptModel

    if binding["module_id"] == KeyedScriptModel.module_id:
        path = Path(binding["config"]["label"])
        return ModelChoice(snapshot, load_demo_script(path), f"[demo model] {path}")
    from agentloom.models.gateway import gateway_for

    return ModelChoice(snapshot, gateway_for(snapshot),
                       f"[model] {snapshot.model.dialect} {snapshot.model.model}")
