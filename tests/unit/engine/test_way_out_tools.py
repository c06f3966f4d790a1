"""Ways out of a side-effecting tool call of unknown outcome (issue 9): the process died
after ``tool.started`` was committed, so the mail may or may not have been sent. The run
blocks; the operator sees exactly what is unknown and records a verdict; the run goes
on with that verdict as the tool's result."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from support.engine import Crash, CrashingStore, SideEffects, build_engine, drive

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.contracts import ModelRequest, Verdict
from agentloom_runtime.engine import read_run
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.testing import FunctionModel, ScriptedModel

RUN = "r"
TO = "ops@example.com"


class CrashAfterToolStarted(CrashingStore):
    """The process dies right after the commit that announces a side-effecting call."""

    def commit(self, commit: Any) -> int:
        version = super().commit(commit)
        op = commit.head.get("op")
        if op and op["kind"] == "tool" and op["phase"] == "started":
            raise Crash("died after tool.started")
        return version


def mailer(request: ModelRequest) -> Any:
    """Mails once; answers with what the last tool message said."""
    if request.purpose == "verification":
        return ScriptedModel.verdict("complete")
    tool = [m for m in request.messages if m.get("role") == "tool"]
    if not tool:
        return ScriptedModel.call("send_mail", {"to": TO}, id="m1")
    return ScriptedModel.answer("done: " + str(tool[-1]["content"])[:200])


async def blocked_on_mail(store: InMemoryCheckpointStore, effects: SideEffects):
    """A run whose send_mail call is of unknown outcome, and a resumed engine on it."""
    started = time.time()
    engine = build_engine(store=CrashAfterToolStarted(store), model=FunctionModel(mailer),
                          tools=effects.tools())
    with pytest.raises(Crash):
        await engine.start("mail ops", run_id=RUN)
        await drive(engine)
    assert effects.calls == [], "the crash came before the handler ran"
    resumed = build_engine(store=store, model=FunctionModel(mailer), tools=effects.tools(),
                           run_id=RUN)
    await resumed.begin_execution()
    result = await drive(resumed)
    assert (result.status, result.error_code) == ("blocked", "tool_outcome_unknown")
    return resumed, started


def tool_messages(request: ModelRequest) -> list[dict[str, Any]]:
    return [dict(m) for m in request.messages if m.get("role") == "tool"]


async def test_unknown_tool_outcome_blocks_and_shows_what_is_unknown() -> None:
    store, effects = InMemoryCheckpointStore(), SideEffects()
    resumed, started = await blocked_on_mail(store, effects)
    unknown = resumed.unknown()
    assert unknown is not None
    assert (unknown.kind, unknown.tool, unknown.instance) == ("tool", "send_mail", "main")
    assert unknown.operation_id and unknown.request_id
    assert json.loads(unknown.arguments or "") == {"to": TO}
    assert started - 1 <= unknown.started_at <= time.time()
    assert set(unknown.verdicts) == {"ran", "did_not_run", "run_again"}
    assert resumed.way_out() == "resolve"
    summary = read_run(store, RUN)
    assert summary is not None and (summary.status, summary.way_out) == ("blocked", "resolve")
    # a second resume without a verdict blocks again, and still never runs the tool
    again = build_engine(store=store, model=FunctionModel(mailer), tools=effects.tools(),
                         run_id=RUN)
    await again.begin_execution()
    assert (await drive(again)).error_code == "tool_outcome_unknown"
    assert effects.calls == []


async def test_verdict_ran_with_output_is_the_tool_result_and_the_tool_does_not_run() -> None:
    store, effects = InMemoryCheckpointStore(), SideEffects()
    await blocked_on_mail(store, effects)
    model = FunctionModel(mailer)
    engine = build_engine(store=store, model=model, tools=effects.tools(), run_id=RUN)
    await engine.resolve(Verdict("ran", by="alice", note="the mail log shows it",
                                 output="queued as 4711"))
    assert engine.status == "running" and engine.unknown() is None
    assert (await drive(engine)).status == "completed"
    assert effects.calls == [], "the operator said it ran: never run again"
    action = next(r for r in model.requests if r.purpose == "action")
    [result] = tool_messages(action)
    account = json.loads(result["content"])
    assert account["resolved_by_operator"] is True and account["verdict"] == "ran"
    assert account["output"] == "queued as 4711" and account["by"] == "alice"
    assert "the mail log shows it" in account["note"]
    records = [e.body for e in store.read(RUN, "src:main") if e.body["kind"] == "tool_result"]
    assert [r["status"] for r in records] == ["ok"]


async def test_verdict_did_not_run_tells_the_model_it_failed() -> None:
    store, effects = InMemoryCheckpointStore(), SideEffects()
    await blocked_on_mail(store, effects)
    model = FunctionModel(mailer)
    engine = build_engine(store=store, model=model, tools=effects.tools(), run_id=RUN)
    await engine.resolve(Verdict("did_not_run", by="bob"))
    assert (await drive(engine)).status == "completed"
    assert effects.calls == []
    action = next(r for r in model.requests if r.purpose == "action")
    [result] = tool_messages(action)
    assert "operator_did_not_run" in result["content"]
    assert "did not run" in result["content"]
    records = [e.body for e in store.read(RUN, "src:main") if e.body["kind"] == "tool_result"]
    assert [r["status"] for r in records] == ["error"]


async def test_verdict_run_again_runs_exactly_once_more_and_is_logged() -> None:
    store, effects = InMemoryCheckpointStore(), SideEffects()
    await blocked_on_mail(store, effects)
    engine = build_engine(store=store, model=FunctionModel(mailer), tools=effects.tools(),
                          run_id=RUN)
    before = time.time()
    await engine.resolve(Verdict("run_again", by="carol", note="the server shows nothing"))
    assert (await drive(engine)).status == "completed"
    assert effects.calls == [TO], "run again: exactly once, as asked"
    [verdict] = [e.body for e in store.read(RUN, "verdicts")]
    assert (verdict["verdict"], verdict["by"], verdict["kind"]) == ("run_again", "carol", "tool")
    assert verdict["note"] == "the server shows nothing"
    assert before - 1 <= verdict["at"] <= time.time()
    assert verdict["operation_id"] and verdict["request_id"]


@pytest.mark.parametrize("kind", ["ran", "did_not_run", "run_again"])
async def test_every_tool_verdict_is_a_durable_record_of_who_when_what(kind: str) -> None:
    store, effects = InMemoryCheckpointStore(), SideEffects()
    resumed, _ = await blocked_on_mail(store, effects)
    operation = resumed.unknown()
    assert operation is not None
    engine = build_engine(store=store, model=FunctionModel(mailer), tools=effects.tools(),
                          run_id=RUN)
    await engine.resolve(Verdict(kind, by="dora", note=f"said {kind}"))  # type: ignore[arg-type]
    [verdict] = [e.body for e in store.read(RUN, "verdicts")]
    assert {k: verdict[k] for k in ("verdict", "by", "note", "operation_id", "request_id")} == {
        "verdict": kind, "by": "dora", "note": f"said {kind}",
        "operation_id": operation.operation_id, "request_id": operation.request_id}
    assert isinstance(verdict["at"], float)
    assert (await drive(engine)).status == "completed"
    assert len(effects.calls) == (1 if kind == "run_again" else 0)


@pytest.mark.parametrize("kind", ["send_again", "treat_as_failed"])
async def test_a_verdict_that_does_not_apply_is_a_config_error(kind: str) -> None:
    store, effects = InMemoryCheckpointStore(), SideEffects()
    await blocked_on_mail(store, effects)
    engine = build_engine(store=store, model=FunctionModel(mailer), tools=effects.tools(),
                          run_id=RUN)
    version = engine.version
    with pytest.raises(ConfigError, match="does not apply") as err:
        await engine.resolve(Verdict(kind, by="erin"))  # type: ignore[arg-type]
    assert err.value.details["code"] == "verdict_not_applicable"
    saved = store.load_head(RUN)
    assert saved is not None and saved.version == version, "nothing was recorded"
    assert store.read(RUN, "verdicts") == []
    assert engine.unknown() is not None, "still blocked, still resolvable"


async def test_a_verdict_needs_the_operators_name() -> None:
    store, effects = InMemoryCheckpointStore(), SideEffects()
    await blocked_on_mail(store, effects)
    engine = build_engine(store=store, model=FunctionModel(mailer), tools=effects.tools(),
                          run_id=RUN)
    with pytest.raises(ConfigError, match="operator"):
        await engine.resolve(Verdict("ran", by="  "))
    assert store.read(RUN, "verdicts") == []


async def test_resolving_a_run_that_is_not_blocked_is_a_config_error() -> None:
    store, effects = InMemoryCheckpointStore(), SideEffects()
    engine = build_engine(store=store, model=FunctionModel(mailer), tools=effects.tools())
    run_id = await engine.start("mail ops")
    with pytest.raises(ConfigError, match="nothing to resolve") as err:
        await engine.resolve(Verdict("ran", by="frank"))  # running
    assert err.value.details["code"] == "nothing_to_resolve"
    assert (await drive(engine)).status == "completed"
    with pytest.raises(ConfigError, match="nothing to resolve"):
        await engine.resolve(Verdict("ran", by="frank"))  # completed
    assert store.read(run_id, "verdicts") == []


async def test_a_resolved_run_cannot_be_resolved_twice() -> None:
    store, effects = InMemoryCheckpointStore(), SideEffects()
    await blocked_on_mail(store, effects)
    engine = build_engine(store=store, model=FunctionModel(mailer), tools=effects.tools(),
                          run_id=RUN)
    await engine.resolve(Verdict("did_not_run", by="gina"))
    with pytest.raises(ConfigError, match="nothing to resolve"):
        await engine.resolve(Verdict("ran", by="gina"))
    assert len(store.read(RUN, "verdicts")) == 1


async def test_operator_text_that_is_not_valid_unicode_is_recorded() -> None:
    """A verdict typed in a non-UTF-8 terminal reaches Python with lone surrogates
    (surrogateescape argv); it is recorded with U+FFFD instead of failing the save."""
    store, effects = InMemoryCheckpointStore(), SideEffects()
    await blocked_on_mail(store, effects)
    engine = build_engine(store=store, model=FunctionModel(mailer), tools=effects.tools(),
                          run_id=RUN)
    await engine.resolve(Verdict("ran", by="j\udcf6rg", note="sent \udcff",
                                 output="id \udce9"))
    [verdict] = [e.body for e in store.read(RUN, "verdicts")]
    assert (verdict["by"], verdict["note"], verdict["output"]) == (
        "j\ufffdrg", "sent \ufffd", "id \ufffd")
    assert (await drive(engine)).status == "completed"


async def test_a_verdicts_exit_code_must_be_an_exit_status_or_a_signal() -> None:
    """Issue 17: `exit_code=99999999999999999999` is refused (ConfigError
    ``invalid_exit_code``) and nothing is recorded; -9 (killed by SIGKILL) is accepted."""
    from agentloom_runtime.contracts import exit_code_problem

    assert exit_code_problem(99999999999999999999) is not None
    assert exit_code_problem(256) is not None and exit_code_problem(-65) is not None
    assert exit_code_problem(True) is not None  # a bool is no exit code
    assert [exit_code_problem(c) for c in (None, 0, 255, -1, -64)] == [None] * 5
    store, effects = InMemoryCheckpointStore(), SideEffects()
    await blocked_on_mail(store, effects)
    engine = build_engine(store=store, model=FunctionModel(mailer), tools=effects.tools(),
                          run_id=RUN)
    with pytest.raises(ConfigError, match=r"an exit status 0\.\.255") as refused:
        await engine.resolve(Verdict("ran", by="ops", exit_code=99999999999999999999))
    assert refused.value.details == {"code": "invalid_exit_code"}
    assert store.read(RUN, "verdicts") == [] and engine.status == "blocked"
    await engine.resolve(Verdict("ran", by="ops", exit_code=-9))  # killed by SIGKILL
    assert [e.body["exit_code"] for e in store.read(RUN, "verdicts")] == [-9]
