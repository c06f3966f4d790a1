"""The modules an engine is assembled from, and their checkpoint bindings.

Every injectable module declares a versioned ``module_id`` and ``checkpoint_config()``.
The bindings (plus limits, the frozen tool catalog and the workspace identity) are saved
when a run starts; attaching to a run with different bindings raises ``ResumeMismatch``
naming what changed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from agentloom_runtime.contracts import JSON, Module
from agentloom_runtime.errors import ConfigError, ResumeMismatch


@dataclass(frozen=True)
class ExecutionLimits:
    max_model_calls: int = 96  # per execution or resume, shared by every purpose/instance
    max_iterations: int = 64  # action model calls per instance
    max_children: int = 8  # delegations per run

    def to_dict(self) -> JSON:
        return {"max_model_calls": self.max_model_calls,
                "max_iterations": self.max_iterations, "max_children": self.max_children}


def module_binding(module: Any) -> JSON:
    module_id = getattr(module, "module_id", "")
    if not isinstance(module_id, str) or "/" not in module_id:
        raise ConfigError(f"{type(module).__name__} needs a versioned module_id such as "
                          f"'name/v1' (got {module_id!r})")
    config = module.checkpoint_config() if hasattr(module, "checkpoint_config") else {}
    try:
        json.dumps(config, sort_keys=True)
    except (TypeError, ValueError):
        raise ConfigError(f"{module_id}: checkpoint_config() must be JSON data") from None
    return {"module_id": module_id, "config": config}


def bindings_hash(bindings: JSON) -> str:
    raw = json.dumps(bindings, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(raw).hexdigest()


def compare_bindings(saved: JSON, current: JSON) -> None:
    """Raise ResumeMismatch listing every binding that differs."""
    changed = sorted(k for k in set(saved) | set(current) if saved.get(k) != current.get(k))
    if not changed:
        return
    lines = []
    for key in changed:
        before, after = saved.get(key), current.get(key)
        if isinstance(before, dict) and isinstance(after, dict):
            diff = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            lines.append(f"{key} ({', '.join(map(str, diff[:8]))})")
        else:
            lines.append(key)
    raise ResumeMismatch(
        "the run was started with different modules or configuration: "
        + "; ".join(lines) + ". Resume with the original version or start a new run.",
        details={"changed": changed})


@dataclass(frozen=True)
class RuntimeModules:
    model: Module
    compaction: Module | None
    completion: Module
    strategy: Module
    context: Module
    hooks: Module | None
    limits: ExecutionLimits

    def bindings(self) -> JSON:
        data: JSON = {
            "model": module_binding(self.model),
            "completion": module_binding(self.completion),
            "strategy": module_binding(self.strategy),
            "context": module_binding(self.context),
            "limits": self.limits.to_dict(),
        }
        data["compaction"] = module_binding(self.compaction) if self.compaction else None
        data["hooks"] = module_binding(self.hooks) if self.hooks else None
        return data

    def close_order(self) -> list[Any]:
        """Seed 002 §4: strategy, completion, context, compaction, model, hooks; once each."""
        seen: set[int] = set()
        order = []
        for obj in (self.strategy, self.completion, self.context, self.compaction,
                    self.model, self.hooks):
            if obj is not None and id(obj) not in seen:
                seen.add(id(obj))
                order.append(obj)
        return order
