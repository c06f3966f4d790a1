"""The command lines the CLI prints for a person to type next (``agentloom.cli._commands``):
the program as it was invoked, ``--home`` / ``--api`` whenever they were given, the
session before the run against a deployment, and the engine's own texts reworded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentloom.cli._commands import PROG_ENV, Way, program

# what the engine writes into a blocked run's error (agentloom_runtime.engine._resolve)
ENGINE_TEXT = ("no response was saved; send it again (it may be billed twice): "
               "`agentloom resolve r1 --send-again`, or `agentloom resolve r1 "
               "--treat-as-failed`")


def test_the_program_is_the_one_bin_agentloom_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROG_ENV, "bin/agentloom")
    assert program("/venv/bin/agentloom") == "bin/agentloom"


def test_without_the_variable_a_script_off_path_is_named_by_its_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROG_ENV, raising=False)
    script = tmp_path / "my venv" / "bin" / "agentloom"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert program(str(script)) == f"'{script}'"  # quoted: the path has a space
    monkeypatch.setenv("PATH", str(script.parent) + os.pathsep + "/nonexistent")
    assert program(str(script)) == "agentloom"  # on PATH: its name is enough
    assert program("/usr/lib/python3/site-packages/agentloom/cli/__main__.py") == "agentloom"


def test_home_and_api_are_named_whenever_they_were_given() -> None:
    assert Way().resume("r1") == "agentloom resume r1"
    assert Way("bin/agentloom", home="my home").resume("r1") == \
        "bin/agentloom --home 'my home' resume r1"
    remote = Way("bin/agentloom", api="http://127.0.0.1:8765")
    assert remote.resume("r1", "ses_1") == \
        "bin/agentloom --api http://127.0.0.1:8765 resume ses_1 r1"


def test_way_out_commands_of_each_mode() -> None:
    local = Way("bin/agentloom", home="h")
    assert local.next_commands("r1", "confirm_hooks") == [
        "bin/agentloom --home h resume r1 --confirm-hooks"]
    assert local.next_commands("r1", "new_question") == [
        'bin/agentloom --home h run --agent AGENT.yaml "a new question"']
    remote = Way("agentloom", api="http://h:1")
    assert remote.next_commands("r1", "new_question", session="s1") == [
        'agentloom --api http://h:1 ask s1 "a new question"']
    found = remote.next_commands("r1", "resolve", code="model_outcome_unknown", session="s1")
    assert found[1] == "agentloom --api http://h:1 resolve s1 r1 --send-again | " \
                       "--treat-as-failed"
    assert remote.next_commands("r1", None, session="s1") == []


def test_the_engines_texts_name_the_program_home_and_session() -> None:
    assert Way("bin/agentloom", home="h").reword(ENGINE_TEXT).endswith(
        "`bin/agentloom --home h resolve r1 --send-again`, or `bin/agentloom --home h "
        "resolve r1 --treat-as-failed`")
    remote = Way("bin/agentloom", api="http://h:1").reword(ENGINE_TEXT, session="s1")
    assert "`bin/agentloom --api http://h:1 resolve s1 r1 --send-again`" in remote
    # a text already carrying the prefix is left as it is
    done = Way(home="h").reword("Next: `agentloom --home h resume r1`")
    assert done == "Next: `agentloom --home h resume r1`"
    assert Way().reword("ask in a new session (`agentloom run --session NEW ...`)") == \
        "ask in a new session (`agentloom run --session NEW ...`)"
