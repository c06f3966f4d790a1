"""What ``import agentloom_runtime.engine`` leaves unimported (issue 18: a Lambda's cold
start and the CLI pay for every module the engine pulls in). Pinned on ``sys.modules`` in
a fresh interpreter, never on time: the snapshot models (pydantic) and the handoff policy
load when ``create_engine`` assembles an engine, the hook runtime (YAML), workspaces and
the HTTP gateway when a run uses them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
IMPORT = "import json, sys; import agentloom_runtime.engine; print(json.dumps(sorted(sys.modules)))"
NOT_AT_IMPORT = ("pydantic", "pydantic_core", "agentloom_runtime.snapshot", "yaml",
                 "agentloom_runtime.hooks", "agentloom_runtime.workspace",
                 "agentloom_runtime.model", "httpx",
                 "agentloom_runtime.context.budget", "agentloom_runtime.context.character")


def _loaded(code: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT / "runtime"), "PATH": "/usr/bin:/bin"},
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _found(loaded: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded for n in names if m == n or m.startswith(n + "."))


def test_importing_the_engine_leaves_pydantic_and_the_snapshot_models_unimported():
    loaded = _loaded(IMPORT)
    assert "agentloom_runtime.engine.engine" in loaded  # the import ran
    assert _found(loaded, NOT_AT_IMPORT) == []


def test_assembling_an_engine_loads_the_snapshot_models_it_validates_with():
    loaded = _loaded(
        "import json, sys\n"
        "from agentloom_runtime.engine import create_engine\n"
        "engine = create_engine({'agent_id': 'a', 'model': {'model': 'm'}})\n"
        "print(json.dumps(sorted(sys.modules)))")
    assert {"pydantic", "agentloom_runtime.snapshot"} <= loaded
