"""What a handler's first invocation (import + ``_wire()``) does not import: the modules
only a later request needs load with that request (docs/deploy.md "Cold start"). Checked
on ``sys.modules`` in a fresh interpreter from the source tree, never on time; the built
bundle is checked the same way by tests/infra/test_bundle_imports.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.lambda_bundle import AWS_ENV, HANDLERS

ROOT = Path(__file__).resolve().parents[3]
WIRE = """
import importlib, json, sys
importlib.import_module({module!r})._wire()
print(json.dumps(sorted(sys.modules)))
"""
# Never on a cold start: model discovery's pinned HTTP transport, the knowledge indexing and parsing
# code, the skill archive readers and service, the MCP SDK, the embedded SQLite store,
# the YAML parser, the MCP server facade (its routes load only their two documents).
NO_FUNCTION = ("agentloom.models._transport",
               "agentloom.knowledge.service", "agentloom.knowledge.capability",
               "agentloom.knowledge.parsing", "agentloom.skills.archive",
               "agentloom.skills.service", "agentloom.skills.git", "agentloom.mcp", "mcp",
               "agentloom.platform.store.sqlite", "yaml",
               "agentloom.api.mcp_server.protocol", "agentloom.api.mcp_server.tools")
# The api and trigger never call a model: no HTTP client.
NOT_API_OR_TRIGGER = ("httpx",)


def _loaded(function: str, tmp_path: Path) -> set[str]:
    env = {**AWS_ENV, "HOME": str(tmp_path), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": f"{ROOT / 'runtime'}:{ROOT / 'functions'}"}
    done = subprocess.run([sys.executable, "-c", WIRE.format(module=HANDLERS[function])],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _found(loaded: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded for n in names if m == n or m.startswith(n + "."))


@pytest.mark.parametrize("function", sorted(HANDLERS))
def test_wiring_a_handler_leaves_what_later_requests_need_unimported(function, tmp_path):
    loaded = _loaded(function, tmp_path)
    assert "agentloom.platform.store" in loaded  # the wiring ran
    unwanted = NO_FUNCTION + (() if function == "step" else NOT_API_OR_TRIGGER)
    assert _found(loaded, unwanted) == []
