"""SessionService on the embedded platform (the local worker, SQLite, a FunctionModel):
a question runs to its answer asynchronously; one active run per session; idempotent
asks; the record stream with session seqs; usage per run; events with a cursor; cancel
stops the worker; a run interrupted by a restart resumes, blocks on the unknown model
call, and a verdict moves it on; operators list and cancel runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agentloom.local.embedded import EmbeddedPlatform
from agentloom.platform.errors import Conflict, Forbidden, Invalid, NotFound, TooLarge
from agentloom.platform.identity import Principal

from .conftest import ALICE, Model, Setup

BOB = Principal("bob", "token")
Wait = Callable[..., Any]


def _done(platform: EmbeddedPlatform, setup: Setup, run_id: str) -> Callable[[], Any]:
    def check() -> Any:
        view = platform.sessions.run(ALICE, setup.session_id, run_id)
        return view if view.status not in ("queued", "running") else None
    return check


def test_a_question_runs_to_its_answer(platform: EmbeddedPlatform, setup: Setup,
                                       wait: Wait) -> None:
    run, created = platform.sessions.ask(ALICE, setup.session_id, "Q what is 2+2?")
    assert created and run.status == "queued"
    view = wait(_done(platform, setup, run.run_id), what="the run")
    assert view.status == "completed" and view.way_out == "new_question"
    assert view.answer == "Answer to: Q what is 2+2?"
    assert view.usage.calls >= 1 and view.usage.input_tokens == 10 * view.usage.calls
    assert view.usage.by_purpose["action"]["calls"] == 1
    page = platform.sessions.messages(ALICE, setup.session_id)
    kinds = [(i.kind, i.message.get("content")) for i in page.items]
    assert ("user", "Q what is 2+2?") in kinds
    assert ("assistant", "Answer to: Q what is 2+2?") in kinds
    assert [i.seq for i in page.items] == list(range(1, len(page.items) + 1))
    assert page.next_after == page.items[-1].seq
    empty = platform.sessions.messages(ALICE, setup.session_id, after=page.next_after)
    assert empty.items == [] and empty.next_after == page.next_after
    events = wait(lambda: (page := platform.sessions.events(
        ALICE, setup.session_id, run.run_id)).done and page, what="the last event")
    types = [e.type for e in events.items]
    assert "run.started" in types and "model.usage" in types and "run.status" in types
    assert events.status == "completed"
    assert types[-1] == "run.status"
    stored = [e.model_dump_json() for e in events.items]  # no content in events
    assert not [e for e in stored if "2+2" in e]
    started = next(e for e in events.items if e.type == "run.started")
    assert started.data["task_chars"] == len("Q what is 2+2?")


def test_the_next_question_inherits_the_history(platform: EmbeddedPlatform, setup: Setup,
                                                model: Model, wait: Wait) -> None:
    first, _ = platform.sessions.ask(ALICE, setup.session_id, "Q first")
    wait(_done(platform, setup, first.run_id))
    second, _ = platform.sessions.ask(ALICE, setup.session_id, "Q second")
    wait(_done(platform, setup, second.run_id))
    action = [r for r in model.requests if r.purpose == "action"][-1]
    seen = [str(m.get("content")) for m in action.messages]
    assert "Q first" in seen and "Answer to: Q first" in seen
    page = platform.sessions.messages(ALICE, setup.session_id, limit=2)
    assert len(page.items) == 2
    rest = platform.sessions.messages(ALICE, setup.session_id, after=page.next_after)
    assert {i.run_id for i in rest.items} >= {second.run_id}
    main = platform.sessions.messages(ALICE, setup.session_id, instance="main")
    assert all(i.instance == "main" for i in main.items)


def test_one_active_run_per_session_and_idempotent_asks(platform: EmbeddedPlatform,
                                                        setup: Setup, model: Model,
                                                        wait: Wait) -> None:
    run, _ = platform.sessions.ask(ALICE, setup.session_id, "Q slow one", "key-1")
    again, created = platform.sessions.ask(ALICE, setup.session_id, "Q slow one", "key-1")
    assert not created and again.run_id == run.run_id
    with pytest.raises(Invalid) as reused:
        platform.sessions.ask(ALICE, setup.session_id, "Q another", "key-1")
    assert reused.value.code == "idempotency_key_reused"
    with pytest.raises(Conflict) as active:
        platform.sessions.ask(ALICE, setup.session_id, "Q another")
    assert active.value.code == "run_active"
    assert active.value.details["run_id"] == run.run_id
    assert run.run_id in active.value.message
    model.open()
    wait(_done(platform, setup, run.run_id))
    nxt, created = platform.sessions.ask(ALICE, setup.session_id, "Q another")
    assert created and nxt.run_id != run.run_id


def test_cancel_stops_the_worker(platform: EmbeddedPlatform, setup: Setup, model: Model,
                                 wait: Wait) -> None:
    run, _ = platform.sessions.ask(ALICE, setup.session_id, "Q slow cancel me")
    wait(lambda: "Q slow cancel me" in model.started, what="the model call")
    view = platform.sessions.cancel(ALICE, setup.session_id, run.run_id, "not needed")
    assert view.status == "cancelled" and not view.driven
    assert view.error is not None and view.error["code"] == "run_cancelled"
    with pytest.raises(Conflict) as ended:
        platform.sessions.cancel(ALICE, setup.session_id, run.run_id)
    assert ended.value.code == "run_ended"
    kinds = [i.kind for i in platform.sessions.messages(ALICE, setup.session_id).items]
    assert kinds[-1] == "status"  # the cancellation is a record of the session
    nxt, created = platform.sessions.ask(ALICE, setup.session_id, "Q after")
    assert created
    wait(_done(platform, setup, nxt.run_id))


def test_supplement_is_queued_durably(platform: EmbeddedPlatform, setup: Setup,
                                      model: Model, wait: Wait) -> None:
    run, _ = platform.sessions.ask(ALICE, setup.session_id, "Q slow with more")
    wait(lambda: platform.tracker.summary(run.run_id) is not None, what="the start")
    assert platform.sessions.supplement(ALICE, setup.session_id, run.run_id,
                                        "also this") >= 1
    model.open()
    view = wait(_done(platform, setup, run.run_id))
    assert view.status == "completed"
    texts = [str(m.get("content")) for r in model.requests for m in r.messages]
    assert any("also this" in t for t in texts)


def test_an_interrupted_run_resumes_then_a_verdict_moves_it_on(
        open_platform: Callable[[], EmbeddedPlatform], model: Model, wait: Wait) -> None:
    first = open_platform()
    space = first.admin.create_space(ALICE, "Team")
    agent, _ = first.admin.create_agent(ALICE, space.space_id, "Helper",
                                        {"prompt": "x", "model": {"model": "m"}})
    first.admin.publish(ALICE, space.space_id, agent.agent_id)
    session = first.sessions.create_session(ALICE, space.space_id, agent.agent_id)
    sid = session.session_id
    run, _ = first.sessions.ask(ALICE, sid, "Q hang here")
    wait(lambda: "Q hang here" in model.started, what="the model call")
    first.close()  # the server stops while the model call is in flight

    second = open_platform()
    assert second.sessions.recover() == 1
    view = second.sessions.run(ALICE, sid, run.run_id)
    assert view.status == "interrupted" and view.way_out == "resume"
    with pytest.raises(Conflict) as held:  # the interrupted run still holds the session
        second.sessions.ask(ALICE, sid, "Q other")
    assert held.value.details["way_out"] == "resume"
    second.sessions.resume(ALICE, sid, run.run_id)
    blocked = wait(lambda: (v := second.sessions.run(ALICE, sid, run.run_id)).status ==
                   "blocked" and v, what="the block")
    assert blocked.way_out == "resolve" and blocked.unknown is not None
    assert blocked.unknown["kind"] == "model"
    assert "send_again" in blocked.unknown["verdicts"]
    with pytest.raises(Invalid) as wrong:
        second.sessions.resolve(ALICE, sid, run.run_id, "ran")
    assert wrong.value.code == "verdict_not_applicable"
    model.open()
    second.sessions.resolve(ALICE, sid, run.run_id, "send_again", note="try again")
    done = wait(lambda: (v := second.sessions.run(ALICE, sid, run.run_id)).status ==
                "completed" and v, what="completion")
    assert done.answer == "Answer to: Q hang here"
    events = second.sessions.events(ALICE, sid, run.run_id, limit=500)
    assert "run.resolved" in [e.type for e in events.items]


def test_creator_only_and_operators(platform: EmbeddedPlatform, setup: Setup,
                                    model: Model, wait: Wait) -> None:
    platform.admin.set_member(ALICE, setup.space_id, "bob", "member")
    with pytest.raises(NotFound):
        platform.sessions.messages(BOB, setup.session_id)
    run, _ = platform.sessions.ask(ALICE, setup.session_id, "Q slow operator")
    with pytest.raises(NotFound):
        platform.sessions.run(BOB, setup.session_id, run.run_id)
    with pytest.raises(Forbidden):
        platform.sessions.space_runs(BOB, setup.space_id)
    platform.admin.set_member(ALICE, setup.space_id, "bob", "admin")
    listed = platform.sessions.space_runs(BOB, setup.space_id)
    assert [(r.run_id, r.status) for r in listed] in ([(run.run_id, "queued")],
                                                     [(run.run_id, "running")])
    view = platform.sessions.operator_cancel(BOB, setup.space_id, run.run_id)
    assert view.status == "cancelled" and view.answer is None
    assert [r.status for r in platform.sessions.space_runs(BOB, setup.space_id,
                                                           "cancelled")] == ["cancelled"]


def test_bad_questions(platform: EmbeddedPlatform, setup: Setup) -> None:
    with pytest.raises(Invalid):
        platform.sessions.ask(ALICE, setup.session_id, "   ")
    with pytest.raises(TooLarge):
        platform.sessions.ask(ALICE, setup.session_id, "x" * 100_001)
    with pytest.raises(Invalid):
        platform.sessions.messages(ALICE, setup.session_id, limit=201)
    with pytest.raises(NotFound):
        platform.sessions.messages(ALICE, "ses_000000000000aaaaaaaa")
