"""The log lines and EMF metrics of a whole observed run: ids on every line, never the
run's texts or a provider key; EMF as CloudWatch reads it."""

from __future__ import annotations

import json
import logging

import pytest
from support.engine import SideEffects, build_engine

from agentloom.local.runs import drive
from agentloom.observability import Observer
from agentloom_runtime.testing import ScriptedModel

from .conftest import ANSWER, PROVIDER_KEY, QUESTION, snapshot, usage_script

RUN, SES, SPC = "run_0190ab12cd34a1b2c3d4", "ses_0190ab12cd34a1b2c3d4", "spc_0190ab12cd34a1b2c3d4"
SECRETS = (QUESTION, ANSWER, PROVIDER_KEY, "Zanzibar", "ops@example.com", "one two")


async def observed_run(host, script=None) -> None:
    snap = snapshot()
    obs = Observer.for_run(run_id=RUN, session_id=SES, space_id=SPC, snapshot=snap,
                           host=host, generation=2 if host == "lambda" else None,
                           stage="test")
    script = script or usage_script()
    # the key reaches the run only as text the model and the tools see
    engine = build_engine(script=script, tools=SideEffects().tools(), snapshot=snap,
                          emit=obs.emit)
    with obs:
        await engine.start(f"{QUESTION} (key {PROVIDER_KEY})", run_id=RUN)
        await drive(engine, observer=obs)


def lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


async def test_lambda_lines_are_json_with_ids_and_no_content(capsys, caplog) -> None:
    from agentloom.observability._logs import _lambda_logger

    _lambda_logger()  # created once per process: set its level after it exists
    package = logging.getLogger("agentloom")  # Powertools' logger for service agentloom
    level = package.level
    package.setLevel(logging.DEBUG)
    try:
        await observed_run("lambda")
    finally:
        package.setLevel(level)
    out = capsys.readouterr().out
    assert "observability failed" not in out + caplog.text
    logs = [line for line in lines(out) if "_aws" not in line]
    assert {line["message"] for line in logs} >= {"run.started", "step", "run.finished"}
    for line in logs:
        assert (line["run_id"], line["session_id"], line["space_id"], line["generation"]) \
            == (RUN, SES, SPC, 2), line
    assert all("step" in line for line in logs if line["message"] == "step")
    tools = [line["tool"] for line in logs if line["message"] == "tool.completed"]
    assert tools == ["update_plan", "count_words", "send_mail", "update_plan"]
    for secret in SECRETS:
        assert secret not in out


async def test_embedded_lines_carry_ids_and_no_content(caplog) -> None:
    with caplog.at_level(logging.DEBUG, logger="agentloom"):
        await observed_run("embedded")
    text = caplog.text
    run_lines = [r for r in caplog.records if r.name == "agentloom.run"]
    assert len(run_lines) > 10
    for record in run_lines:
        message = record.getMessage()
        assert f"run_id={RUN}" in message and f"session_id={SES}" in message \
            and f"space_id={SPC}" in message
    assert any("step=" in r.getMessage() for r in run_lines)
    for secret in SECRETS:
        assert secret not in text


async def test_emf_metrics(capsys) -> None:
    failing = [ScriptedModel.call("no_such_tool", {}, id="c1"), *usage_script()]
    await observed_run("lambda", failing)
    (emf,) = [line for line in lines(capsys.readouterr().out) if "_aws" in line]
    (directive,) = emf["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "AgentLoom"
    assert [sorted(d) for d in directive["Dimensions"]] == [["service", "stage"]]
    assert emf["stage"] == "test"
    units = {m["Name"]: m["Unit"] for m in directive["Metrics"]}
    assert units == {"Steps": "Count", "StepDuration": "Milliseconds",
                     "ModelInputTokens": "Count", "ModelOutputTokens": "Count",
                     "Cost": "None", "ToolFailures": "Count"}
    assert sum(emf["ModelInputTokens"]) == 1560 and sum(emf["ModelOutputTokens"]) == 156
    assert sum(emf["ToolFailures"]) == 1
    assert len(emf["Steps"]) == len(emf["StepDuration"]) > 5
    assert pytest.approx(sum(emf["Cost"])) == (1560 * 2 + 156 * 8) / 1e6
    # ids are metadata (properties), never dimensions
    assert emf["run_id"] == RUN and all(RUN not in d for d in directive["Dimensions"])


async def test_blocked_on_unknown_outcome_counts(capsys) -> None:
    from support.engine import Crash

    from agentloom_runtime.checkpoint import InMemoryCheckpointStore

    snap, store = snapshot(), InMemoryCheckpointStore()
    crashed = build_engine(store=store, script=[Crash("killed mid-call")], snapshot=snap)
    with pytest.raises(Crash):
        await crashed.start(QUESTION, run_id=RUN)
        await crashed.step()
    obs = Observer.for_run(run_id=RUN, session_id=SES, space_id=SPC, snapshot=snap,
                           host="lambda", generation=1, stage="test")
    resumed = build_engine(store=store, snapshot=snap, run_id=RUN, emit=obs.emit)
    with obs:
        await resumed.begin_execution()
        result = await drive(resumed, observer=obs)
    assert (result.status, resumed.way_out()) == ("blocked", "resolve")
    (emf,) = [line for line in lines(capsys.readouterr().out) if "_aws" in line]
    assert sum(emf["BlockedRuns"]) == 1 and sum(emf["UnknownOutcomes"]) == 1
