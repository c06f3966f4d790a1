"""The modules an engine is assembled from, their checkpoint bindings, and the one
resume-verification path.

Every injectable module declares a versioned ``module_id`` and ``checkpoint_config()``.
The bindings (plus limits, the frozen tool catalog, the hook manifest and the workspace
identity) are saved when a run starts. Attaching to a run compares a hash first; when
it differs, each binding is checked by its owner — the tool registry checks its catalog,
the hook manifest checks itself, the workspace provider accepts the same volume mounted
at another path — and anything else must be equal. ``ResumeMismatch`` names what changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentloom_runtime._json import digest
from agentloom_runtime.context.policy import BarePolicy, CompactionPolicyBase
from agentloom_runtime.contracts import (
    DEFAULT_RUN_TOKENS,
    JSON,
    CompletionPolicy,
    ContextManager,
    ExecutionStrategy,
    ModelGateway,
    Module,
)
from agentloom_runtime.errors import ConfigError, ResumeMismatch
from agentloom_runtime.hook_contracts import HookManager

Verifier = Callable[[Any], None]
"""Checks a saved binding against the current module; raises ``ResumeMismatch``."""


@dataclass(frozen=True)
class ExecutionLimits:
    max_model_calls: int = 96  # per execution or resume, shared by every purpose/instance
    max_iterations: int = 64  # action model calls per instance and execution
    max_children: int = 8  # delegations per run
    max_tokens: int | None = None  # per run, all executions, purposes and instances
    max_cost: float | None = None  # per run, from the model connection's prices

    def to_dict(self) -> JSON:
        data: JSON = {"max_model_calls": self.max_model_calls,
                      "max_iterations": self.max_iterations,
                      "max_children": self.max_children}
        # Only when set: a run started without a budget keeps its bindings hash. A raised
        # budget lives in the head (``budget``), never here.
        if self.max_tokens is not None:
            data["max_tokens"] = self.max_tokens
        if self.max_cost is not None:
            data["max_cost"] = self.max_cost
        return data

    def verify_binding(self, saved: Any) -> None:
        """The saved limits must equal these, except that a run started before versions
        had a default token cap (no ``max_tokens`` saved) resumes under the default:
        its total over every execution is capped from then on."""
        current = self.to_dict()
        if isinstance(saved, dict) and "max_tokens" not in saved \
                and self.max_tokens == DEFAULT_RUN_TOKENS:
            saved = {**saved, "max_tokens": DEFAULT_RUN_TOKENS}
        if saved == current:
            return
        before = saved if isinstance(saved, dict) else {}
        diff = sorted(k for k in set(before) | set(current) if before.get(k) != current.get(k))
        raise ResumeMismatch(f"the limits differ ({', '.join(diff)})")


def module_binding(module: Module) -> JSON:
    module_id = getattr(module, "module_id", "")
    if not isinstance(module_id, str) or "/" not in module_id:
        raise ConfigError(f"{type(module).__name__} needs a versioned module_id such as "
                          f"'name/v1' (got {module_id!r})")
    config = module.checkpoint_config()
    try:
        json.dumps(config, sort_keys=True)
    except (TypeError, ValueError):
        raise ConfigError(f"{module_id}: checkpoint_config() must be JSON data") from None
    return {"module_id": module_id, "config": config}


@dataclass(frozen=True)
class RuntimeModules:
    model: ModelGateway
    compaction: CompactionPolicyBase  # a bare policy arrives wrapped (with_defaults)
    completion: CompletionPolicy
    strategy: ExecutionStrategy
    context: ContextManager
    hooks: HookManager | None
    limits: ExecutionLimits

    def bindings(self) -> JSON:
        return {
            "model": module_binding(self.model),
            "compaction": module_binding(self.compaction),
            "completion": module_binding(self.completion),
            "strategy": module_binding(self.strategy),
            "context": module_binding(self.context),
            "hooks": module_binding(self.hooks) if self.hooks is not None else None,
            "limits": self.limits.to_dict(),
        }

    def close_order(self) -> list[Any]:
        """Closing order (docs/contract.md#closing), each object once."""
        seen: set[int] = set()
        order = []
        compaction = (self.compaction.policy if isinstance(self.compaction, BarePolicy)
                      else self.compaction)  # the host's object: closed once, as itself
        for obj in (self.strategy, self.completion, self.context, compaction,
                    self.model, self.hooks):
            if obj is not None and id(obj) not in seen:
                seen.add(id(obj))
                order.append(obj)
        return order


def bindings_hash(bindings: JSON) -> str:
    return digest(bindings)


def verify_bindings(saved: JSON, current: JSON, verifiers: Mapping[str, Verifier]) -> None:
    """Raise ResumeMismatch listing every binding that differs. A key with a verifier is
    judged by it (its owner's rule); any other key must be equal."""
    problems: list[str] = []
    changed: list[str] = []
    for key in sorted(set(saved) | set(current)):
        before, after = saved.get(key), current.get(key)
        verifier = verifiers.get(key)
        if verifier is not None and before is not None and after is not None:
            try:
                verifier(before)
            except ResumeMismatch as err:
                changed.append(key)
                problems.append(f"{key}: {err.message}")
            continue
        if before == after:
            continue
        changed.append(key)
        if isinstance(before, dict) and isinstance(after, dict):
            diff = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            problems.append(f"{key} ({', '.join(map(str, diff[:8]))})")
        else:
            problems.append(key)
    if problems:
        raise ResumeMismatch(
            "the run was started with different modules or configuration: "
            + "; ".join(problems) + ". Resume with the original version or start a new run.",
            details={"changed": changed})
