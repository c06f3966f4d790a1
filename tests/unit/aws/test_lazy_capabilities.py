"""The AWS capability set builds each kind on first use: a run whose snapshot binds no
skills, MCP tools or knowledge bases never imports their modules (a cold step does not
load the MCP SDK), a publish or a bound run builds it, ``Capabilities.find`` returns it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from support.engine import make_snapshot

from agentloom.capabilities import Capabilities, CapabilityBase, LazyCapability, RunScope

SCOPE = RunScope(space_id="spc", agent_id="a", version=1, session_id="s", run_id="r")


class Counted(CapabilityBase):
    kind = "counted"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def pin(self, space_id: str, config: Any) -> dict[str, Any]:
        self.calls.append("pin")
        return dict(config)

    def tools(self, snapshot: Any, scope: RunScope) -> list[Any]:
        self.calls.append("tools")
        return []


def test_a_lazy_capability_is_built_only_for_a_snapshot_that_binds_it() -> None:
    built: list[Counted] = []

    def build() -> Counted:
        built.append(Counted())
        return built[-1]

    lazy = LazyCapability("counted", build, lambda snapshot: bool(snapshot.skills))
    caps = Capabilities.of([lazy])
    plain = make_snapshot()
    assert caps.tools(plain, SCOPE) == [] and caps.services(plain, SCOPE) == {}
    assert caps.credentials(plain, SCOPE) == [] and built == []
    caps.pin("spc", {"x": 1})  # a publish builds it
    assert len(built) == 1 and built[0].calls == ["pin"]
    assert caps.find(Counted) is built[0] and len(built) == 1  # built once


def test_find_builds_the_lazy_capability_of_that_kind() -> None:
    lazy = LazyCapability("counted", Counted, lambda snapshot: False)
    found = Capabilities.of([lazy]).find(Counted)
    assert isinstance(found, Counted) and lazy.built() is found
    assert Capabilities.of([]).find(Counted) is None


ROOT = Path(__file__).resolve().parents[3]
COLD = """
import sys
from agentloom.aws.capabilities import aws_capabilities
from agentloom.platform.store import PlatformStore
from agentloom.platform.store.memory import InMemoryItemStore
from agentloom.capabilities import RunScope
sys.path.insert(0, {tests!r})
from support.engine import make_snapshot
store = PlatformStore(InMemoryItemStore())
caps = aws_capabilities(table="t", dynamodb=object(), store=store, keyring=object())
scope = RunScope("spc", "a", 1, "s", "r")
assert caps.tools(make_snapshot(), scope) == [] and caps.credentials(make_snapshot(), scope) == []
heavy = {{"mcp", "mcp_types", "jsonschema", "yaml"}}
print(sorted({{m.split(".")[0] for m in sys.modules}} & heavy),
      sorted(m for m in sys.modules if m.startswith(("agentloom.mcp", "agentloom.skills",
                                                      "agentloom.knowledge"))))
"""


def test_a_run_without_bound_capabilities_imports_none_of_them() -> None:
    env = {"PYTHONPATH": f"{ROOT / 'runtime'}:{ROOT / 'functions'}"}
    done = subprocess.run([sys.executable, "-c", COLD.format(tests=str(ROOT / "tests"))],
                          capture_output=True, text=True, env=env, check=False, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[]", "[]"]


EMBEDDED = """
import sys
from pathlib import Path
from agentloom.local.capabilities import embedded_capabilities
from agentloom.capabilities import RunScope
sys.path.insert(0, {tests!r})
from support.engine import make_snapshot
caps = embedded_capabilities(Path({home!r}))
scope = RunScope("spc", "a", 1, "s", "r")
assert caps.tools(make_snapshot(), scope) == [] and caps.services(make_snapshot(), scope) == {{}}
print(sorted({{m.split(".")[0] for m in sys.modules}} & {{"mcp", "mcp_types", "yaml"}}),
      sorted(m for m in sys.modules if m.startswith(("agentloom.mcp", "agentloom.skills",
                                                      "agentloom.knowledge"))))
"""


def test_the_embedded_set_builds_no_capability_a_run_does_not_bind(tmp_path) -> None:
    env = {"PYTHONPATH": f"{ROOT / 'runtime'}:{ROOT / 'functions'}"}
    code = EMBEDDED.format(tests=str(ROOT / "tests"), home=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, check=False, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[]", "[]"]
