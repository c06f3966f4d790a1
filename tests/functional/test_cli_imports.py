"""``import agentloom.cli`` loads only what parsing needs: the app, the engine and its
pydantic models, the hook machinery, the HTTP gateway and the test servers are imported
by the command that uses them (``agentloom --help`` stays fast). Checked on
``sys.modules`` in a fresh interpreter, never on wall time."""

from __future__ import annotations

import json
import subprocess
import sys

NOT_AT_IMPORT = ("httpx", "pydantic", "agentloom_runtime.snapshot",
                 "agentloom_runtime.engine", "agentloom_runtime.model",
                 "agentloom_runtime.hooks", "agentloom_runtime.testing.openai_server",
                 "agentloom.local.app", "agentloom.local.models")


def _loaded(code: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", f"{code}\nimport json, sys\n"
                           "print(json.dumps(sorted(sys.modules)))"],
                          capture_output=True, text=True, timeout=60, check=True)
    return set(json.loads(proc.stdout.splitlines()[-1]))


def _found(loaded: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded for n in names if m == n or m.startswith(n + "."))


def test_importing_the_cli_loads_no_engine_models_or_http_client() -> None:
    assert _found(_loaded("import agentloom.cli"), NOT_AT_IMPORT) == []


def test_the_parser_alone_loads_none_of_them() -> None:
    loaded = _loaded("from agentloom.cli import _parser\n"
                     "_parser.parser().parse_args(['show', 'abc'])\n"
                     "_parser.remote_parser().parse_args(['show', 's', 'r'])")
    assert _found(loaded, NOT_AT_IMPORT) == []


def test_the_model_chooser_imports_its_http_gateway_on_use() -> None:
    loaded = _loaded("from agentloom.local import models")
    assert _found(loaded, ("httpx", "agentloom_runtime.model", "yaml")) == []


FIRST_REQUEST = """
import json, os, sys
from agentloom_runtime.testing import keyed
async def first_request(self, request):
    print("LOADED " + json.dumps(sorted(sys.modules)), flush=True)
    os._exit(0)
keyed.KeyedScriptModel.invoke = first_request
from agentloom.cli import main
sys.exit(main(sys.argv[1:]))
"""
# What ``agentloom run`` of an agent binding no hooks, MCP tools, skills or knowledge
# bases has not imported when it first asks the model.
UNBOUND = ("agentloom_runtime.hooks", "mcp", "mcp_types", "agentloom.mcp",
           "agentloom.knowledge", "agentloom.skills")


def test_a_run_reaches_its_first_model_request_without_what_it_does_not_bind(tmp_path):
    from pathlib import Path

    agent = Path(__file__).resolve().parents[2] / "docs" / "examples" / "hello" / "agent.yaml"
    proc = subprocess.run([sys.executable, "-c", FIRST_REQUEST, "--home", str(tmp_path),
                           "run", "--agent", str(agent), "hi"],
                          capture_output=True, text=True, timeout=120, check=False)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("LOADED ")), None)
    assert line is not None, proc.stdout[-1000:] + proc.stderr[-2000:]
    assert _found(set(json.loads(line.removeprefix("LOADED "))), UNBOUND) == []
