"""The trusted hook packages of an agent: its ``hooks:`` bindings run code from the
folders or zip files its ``hook_packages:`` lists (docs/hooks.md). ``hook_registry``
loads them; the run host hands the registry to every engine it builds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agentloom_runtime.errors import ConfigError

if TYPE_CHECKING:
    from agentloom_runtime.hooks import HookRegistry
    from agentloom_runtime.snapshot import AgentSnapshot

HookLoader = Callable[["AgentSnapshot"], "HookRegistry | None"]


def hook_registry(snapshot: AgentSnapshot) -> HookRegistry | None:
    """The trusted handlers of the agent's hook bindings, loaded from its hook packages
    (None when the agent binds no hooks and lists no packages)."""
    if not snapshot.hooks and not snapshot.hook_packages:
        return None
    from agentloom_runtime.hooks import HookRegistry, load_hook_package

    bound = sorted({f"{b.hook_id}@{b.version}" for b in snapshot.hooks})
    if not snapshot.hook_packages:
        raise ConfigError(f"the agent binds hooks ({', '.join(bound)}) but lists no "
                          "hook_packages that provide them; add `hook_packages: [PATH]` "
                          "(a folder or zip file with a hooks.yaml) to the agent file")
    registry = HookRegistry()
    for path in snapshot.hook_packages:
        if not Path(path).exists():
            raise ConfigError(f"hook package {path} does not exist (hook_packages in the "
                              "agent file; a relative path is relative to that file)")
        load_hook_package(path, registry)
    missing = [f"{b.hook_id}@{b.version}" for b in snapshot.hooks
               if (b.hook_id, b.version) not in registry]
    if missing:
        provided = sorted(f"{d.hook_id}@{d.version}" for d in registry)
        raise ConfigError(f"no hook package provides {', '.join(sorted(set(missing)))}; "
                          f"the packages provide: {', '.join(provided) or 'nothing'}")
    return registry
