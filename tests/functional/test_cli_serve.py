"""`agentloom serve …` is the platform's HTTP API entry, reached through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentloom.cli import main


def test_serve_openapi_prints_the_committed_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "openapi"]) == 0
    printed = json.loads(capsys.readouterr().out)
    committed = json.loads((Path(__file__).parents[2] / "docs" / "openapi.json").read_text())
    assert printed == committed


def test_serve_bootstrap_uses_the_cli_home(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "state"
    assert main(["--home", str(home), "serve", "bootstrap", "--user", "alice",
                 "--space", "Team"]) == 0
    out = capsys.readouterr().out
    assert "agl_" in out, "a bearer token is printed once"
    assert (home / "agentloom.sqlite3").exists()
