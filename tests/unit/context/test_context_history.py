"""Session history: projection, reusable views, the A → B → C → resume A → D scenario."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from unit.context.context_fixtures import assistant_calls, record, tool

from agentloom_runtime.context import protocol_violations
from agentloom_runtime.context.history import (
    SessionView,
    build_run_history,
    can_save_view,
    choose_view,
    make_view,
    project_history,
    run_status_record,
    session_counters,
)


def texts(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m.get("content")) for m in messages]


def unknown(message: dict[str, Any]) -> bool:
    if message["role"] != "tool" or not message["content"].startswith("{"):
        return False
    return bool(json.loads(message["content"])["status"] == "unknown")


# ---------------------------------------------------------------- projection


def test_call_ids_are_rewritten_and_sources_untouched() -> None:
    records = [record(1, "r", "user", {"role": "user", "content": "q"}),
               record(2, "r", "assistant", assistant_calls("call_x", "call_y")),
               record(3, "r", "tool_result", tool("call_y", "Y")),
               record(4, "r", "tool_result", tool("call_x", "X")),
               record(5, "r", "assistant", {"role": "assistant", "content": "done"})]
    before = copy.deepcopy(records)
    out = project_history(records)
    assert records == before
    assert [c["id"] for c in out[1]["tool_calls"]] == ["h2_0", "h2_1"]
    assert [(m["tool_call_id"], m["content"]) for m in out[2:4]] == [("h2_1", "Y"), ("h2_0", "X")]
    assert [m["_session_seq"] for m in out] == [1, 2, 3, 4, 5]
    assert project_history(records) == out  # deterministic
    assert protocol_violations(out, allow_pending_tail=False) == []


def test_calls_without_results_get_unknown_placeholders() -> None:
    records = [record(1, "r", "assistant", assistant_calls("a", "b")),
               record(2, "r", "tool_result", tool("a")),
               record(3, "r", "user", {"role": "user", "content": "next"}),
               record(4, "r", "assistant", assistant_calls("c"))]  # history ends open
    out = project_history(records)
    assert [m["role"] for m in out] == ["assistant", "tool", "tool", "user", "assistant", "tool"]
    assert unknown(out[2]) and out[2]["tool_call_id"] == "h1_1"
    assert unknown(out[5]) and out[5]["tool_call_id"] == "h4_0"
    note = json.loads(out[2]["content"])["note"]
    assert "Do not assume it succeeded" in note
    assert protocol_violations(out, allow_pending_tail=False) == []


def test_duplicate_call_ids_are_kept_apart() -> None:
    records = [record(1, "r", "assistant", assistant_calls("same", "same")),
               record(2, "r", "tool_result", tool("same", "first"))]
    out = project_history(records)
    assert [(m.get("tool_call_id"), unknown(m)) for m in out[1:]] == [
        ("h1_0", False), ("h1_1", True)]
    assert protocol_violations(out, allow_pending_tail=False) == []


def test_a_late_result_is_kept_as_labelled_material() -> None:
    records = [record(1, "A", "assistant", assistant_calls("a")),
               record(2, "B", "user", {"role": "user", "content": "B asks"}),
               record(3, "A", "tool_result", tool("a", "late value"), name="fetch")]
    out = project_history(records)
    assert [m["role"] for m in out] == ["assistant", "tool", "user", "user", "user"]
    assert unknown(out[1])
    assert out[3]["content"].startswith("[Platform note: the messages that follow "
                                        "continue run A")
    assert out[4]["content"].startswith("[Historical material")
    assert "fetch" in out[4]["content"] and "late value" in out[4]["content"]
    assert "tool_call_id" not in out[4]
    assert protocol_violations(out, allow_pending_tail=False) == []


def test_children_are_excluded_and_delegation_results_included() -> None:
    records = [record(1, "r", "user", {"role": "user", "content": "q"}),
               record(2, "r", "assistant", assistant_calls("d", name="delegate_task")),
               record(3, "r", "user", {"role": "user", "content": "child task"}, "sub-1"),
               record(4, "r", "assistant", {"role": "assistant", "content": "inner"}, "sub-1"),
               record(5, "r", "tool_result", tool("d", "child result"))]
    out = project_history(records)
    assert texts(out) == ["q", "None", "child result"]  # the result the main frame got


def test_a_supplement_recorded_inside_a_group_follows_the_results() -> None:
    records = [record(1, "r", "assistant", assistant_calls("a")),
               record(2, "r", "supplement", {"role": "user", "content": "also this"}),
               record(3, "r", "tool_result", tool("a", "A"))]
    out = project_history(records)
    assert texts(out)[1:] == ["A", "also this"]
    assert protocol_violations(out) == []


def test_system_and_history_copies_are_not_projected() -> None:
    records = [record(1, "r", "system", {"role": "system", "content": "prompt"}),
               record(2, "r", "history", {"role": "user", "content": "copy"}),
               record(3, "r", "user", {"role": "user", "content": "q"}),
               record(4, "r", "terminal", None)]
    assert texts(project_history(records)) == ["q"]


# ---------------------------------------------------------------- views


def view(run: str, watermark: int, observed: list[list[int]], **extra: Any) -> SessionView:
    return SessionView(run_id=run, watermark=watermark, observed_seqs=observed,
                       messages=[{"role": "user", "content": f"view of {run}"}],
                       user_turns=0, model_steps=0, baseline_user_turns=0,
                       baseline_model_steps=0, **extra)


def test_choose_view_takes_the_highest_compliant_prefix() -> None:
    main_seqs = [1, 2, 4, 5, 7, 8]  # 3 and 6 belong to a child instance
    good_low = view("a", 2, [[1, 2]])
    good_high = view("b", 5, [[1, 2], [4, 5]])
    gap = view("c", 8, [[1, 2], [7, 8]])  # claims 8 without observing 4, 5
    phantom = view("d", 8, [[1, 8]])  # claims child seqs as main
    assert choose_view([good_low, gap, good_high, phantom], main_seqs) == good_high
    assert choose_view([gap, phantom], main_seqs) is None
    assert choose_view([], main_seqs) is None


def test_can_save_view_refusals() -> None:
    records = [record(1, "A", "user", {"role": "user", "content": "q"}),
               record(2, "A", "assistant", {"role": "assistant", "content": "a"}),
               record(3, "B", "user", {"role": "user", "content": "q2"})]
    ok = can_save_view(records[:2], run_id="A", inherited_seqs=[], pending_tools=False,
                       queued_inputs=False)
    assert ok.allowed and ok.watermark == 2 and ok.observed_seqs == [[1, 2]]
    assert not can_save_view(records[:2], run_id="A", inherited_seqs=[], pending_tools=True,
                             queued_inputs=False).allowed
    assert not can_save_view(records[:2], run_id="A", inherited_seqs=[],
                             pending_tools=False, queued_inputs=True).allowed
    partial = can_save_view(records[:2], run_id="A", inherited_seqs=[], pending_tools=False,
                            queued_inputs=False, view_seqs={1})
    assert not partial.allowed and "outside the runtime view" in (partial.reason or "")
    with_terminal = [*records[:2], record(3, "A", "terminal",
                                          {"role": "assistant", "content": "failed"})]
    check = can_save_view(with_terminal, run_id="A", inherited_seqs=[], pending_tools=False,
                          queued_inputs=False)
    assert not check.allowed and "terminal" in (check.reason or "")
    interleaved = [*records, record(4, "A", "assistant", {"role": "assistant", "content": "b"})]
    check = can_save_view(interleaved, run_id="A", inherited_seqs=[], pending_tools=False,
                          queued_inputs=False)
    assert not check.allowed and "prefix" in (check.reason or "")
    with pytest.raises(ValueError):
        make_view(check, run_id="A", messages=[], counters={})


# ---------------------------------------------------------------- A → B → C → resume A → D


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def answer(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def test_a_b_c_resume_a_d() -> None:
    # Run A asks, calls a tool, and is interrupted before the result.
    records = [record(1, "A", "system", {"role": "system", "content": "sys"}),
               record(2, "A", "user", user("Question A")),
               record(3, "A", "assistant", assistant_calls("cA", name="fetch")),
               record(4, "A", "terminal", answer("Run A stopped: interrupted"))]

    # Rule 1: B inherits A's committed history (with an unknown placeholder).
    history_b = build_run_history(records)
    assert "Question A" in texts(history_b.messages)
    assert any(unknown(m) for m in history_b.messages)
    assert history_b.counters == {"user_turns": 1, "model_steps": 1,
                                  "baseline_user_turns": 0, "baseline_model_steps": 0}
    records += [record(5, "B", "system", {"role": "system", "content": "sys"}),
                record(6, "B", "user", user("Question B")),
                record(7, "B", "assistant", answer("Answer B"))]
    # B compacted (baselines 2 / 2) and may save a view over seqs 1..7.
    check_b = can_save_view(records, run_id="B", inherited_seqs=history_b.inherited_seqs,
                            pending_tools=False, queued_inputs=False)
    assert check_b.allowed and check_b.watermark == 7
    view_b = make_view(check_b, run_id="B", counters={
        "user_turns": 2, "model_steps": 2, "baseline_user_turns": 2, "baseline_model_steps": 2},
        messages=[{"role": "user", "content": "[Handoff summary] A asked; B answered.",
                   "_summary": True, "_covers": [[1, 3]], "_seq": 9},
                  {**user("Question B"), "_session_seq": 6}, answer("Answer B")])
    assert "_summary" not in view_b.messages[0] and view_b.messages[1]["_session_seq"] == 6

    # C inherits A and B through B's view.
    history_c = build_run_history(records, [view_b])
    assert history_c.view_watermark == 7 and texts(history_c.messages)[-1] == "Answer B"
    records += [record(8, "C", "user", user("Question C")),
                record(9, "C", "assistant", assistant_calls("cC")),
                record(10, "C", "tool_result", tool("cC", "C data")),
                record(11, "C", "assistant", answer("Answer C"))]

    # Rule 2/3: A resumes from its own checkpoint; its new records land at the end.
    records += [record(12, "A", "supplement", user("Also cover Q4")),
                record(13, "A", "tool_result", tool("cA", "A's late data"), name="fetch"),
                record(14, "A", "assistant", answer("Answer A"))]
    check_a = can_save_view(records, run_id="A", inherited_seqs=[], pending_tools=False,
                            queued_inputs=False)
    assert not check_a.allowed  # A never observed B and C
    forged = view("A", 14, [[1, 4], [12, 14]])
    assert choose_view([view_b, forged], [r["seq"] for r in records]) == view_b

    # Rule 4: D sees B, C and A's new records once each, and A's old ones only via the view.
    history_d = build_run_history(records, [view_b, forged])
    seen = texts(history_d.messages)
    assert history_d.view_run_id == "B" and history_d.history_watermark == 14
    for text in ("Question B", "Question C", "Answer C", "Also cover Q4", "Answer A"):
        assert seen.count(text) == 1
    assert "Question A" not in seen  # covered by B's summary, not appended again
    late = [t for t in seen if "A's late data" in t]
    assert len(late) == 1 and late[0].startswith("[Historical material")
    assert protocol_violations(history_d.messages, allow_pending_tail=False) == []

    # Rule 5: totals from the records, baselines from the compliant view (not A's local ones).
    assert history_d.counters == {"user_turns": 3, "model_steps": 5,
                                  "baseline_user_turns": 2, "baseline_model_steps": 2}


def test_without_views_a_new_run_gets_all_main_records() -> None:
    records = [record(1, "A", "user", user("q1")), record(2, "A", "assistant", answer("a1")),
               record(3, "B", "user", user("q2"), "sub-1")]
    history = build_run_history(records)
    assert texts(history.messages) == ["q1", "a1"]
    assert history.inherited_seqs == [[1, 2]] and history.view_run_id is None


# ---------------------------------------------------------------- counters and legacy


def test_counters_count_only_questions_and_main_action_responses() -> None:
    records = [record(1, "A", "user", user("q")),
               record(2, "A", "supplement", user("more")),
               record(3, "A", "feedback", user("try again")),
               record(4, "A", "assistant", answer("x")),
               record(5, "A", "assistant", answer("inner"), "sub-1"),
               record(6, "A", "user", user("child task"), "sub-1")]
    assert session_counters(records, None) == {"user_turns": 1, "model_steps": 1,
                                               "baseline_user_turns": 0,
                                               "baseline_model_steps": 0}
    big = view("v", 1, [[1, 1]]).model_copy(update={"baseline_user_turns": 9,
                                                     "baseline_model_steps": 9})
    assert session_counters(records, big)["baseline_user_turns"] == 1  # never above totals


# ---------------------------------------------------------------- what the model saw


def test_history_projects_what_the_model_was_shown_not_the_raw_record() -> None:
    secret = "sk-live-0123456789"
    records = [record(1, "r", "user", user("q")),
               record(2, "r", "assistant", assistant_calls("raw_id"),
                      visible=assistant_calls("call_7")),  # the engine renamed the call
               record(3, "r", "tool_result", tool("call_7", "x" * 50_000),
                      visible=tool("call_7", "x" * 100 + " [capped: read_result r/main#3]")),
               record(4, "r", "assistant", answer(f"the key is {secret}"),
                      visible=answer("the key is [masked]"))]  # a model.chat.after hook
    out = project_history(records)
    assert texts(out)[-1] == "the key is [masked]"
    assert secret not in json.dumps(out)
    assert out[2]["content"].endswith("[capped: read_result r/main#3]")
    assert out[2]["tool_call_id"] == out[1]["tool_calls"][0]["id"] == "h2_0"
    assert protocol_violations(out, allow_pending_tail=False) == []
    history = build_run_history(records)
    assert secret not in json.dumps(history.messages)
    assert records[3]["message"]["content"].endswith(secret)  # the source is untouched


# ---------------------------------------------------------------- status records


def test_a_failed_run_leaves_a_status_record_the_next_run_sees() -> None:
    failed = run_status_record("A", "failed", code="model_status", message="HTTP 500")
    assert failed["kind"] == "status" and failed["message"]["role"] == "user"
    records = [record(1, "A", "user", user("Question A")),
               record(2, "A", "assistant", assistant_calls("cA")),  # never answered
               {**failed, "seq": 3}]
    out = build_run_history(records).messages
    assert [m["role"] for m in out] == ["user", "assistant", "tool", "user"]
    assert unknown(out[2])  # the open call is closed before the status note
    note = out[3]["content"]
    assert "run A ended: failed" in note and "model_status: HTTP 500" in note
    assert "not an instruction" in note and out[3]["_session_seq"] == 3
    assert protocol_violations(out, allow_pending_tail=False) == []
    abandoned = run_status_record("B", "blocked", code="tool_outcome_unknown",
                                  abandoned=True)
    assert "left unfinished when a new question was asked" in \
        abandoned["message"]["content"]
    # a status record of the run itself keeps it from saving a view over it
    check = can_save_view(records, run_id="A", inherited_seqs=[], pending_tools=False,
                          queued_inputs=False)
    assert not check.allowed and "terminal" in (check.reason or "")


def test_a_blocked_run_resumed_after_later_runs_is_noted_once_as_its_latest_status() -> None:
    """Issue 17: an older blocked run left for B, resumed (still blocked) and left for C,
    then finished: each later question sees the run's status once, as it stands — never a
    stale "ended: blocked", and never one copy per resume."""
    def note(seq: int, code: str) -> dict[str, Any]:
        return {**run_status_record("A", "blocked", code=code, abandoned=True), "seq": seq}

    records = [record(1, "A", "user", user("Question A")),
               record(2, "A", "assistant", assistant_calls("cA")),
               record(3, "A", "tool_result", tool("cA", "A data")),
               note(4, "budget_exceeded"),
               record(5, "B", "user", user("Question B")),
               record(6, "B", "assistant", answer("Answer B")),
               note(7, "tool_outcome_unknown")]  # resumed, blocked again, left for C
    seen = texts(build_run_history(records).messages)
    notes = [t for t in seen if t.startswith("[Previous run")]
    assert len(notes) == 1 and "tool_outcome_unknown" in notes[0]  # the latest, once
    assert seen.index(notes[0]) == seen.index("Question B") - 1  # next to A's records

    records += [record(8, "C", "user", user("Question C")),
                record(9, "C", "assistant", answer("Answer C")),
                record(10, "A", "assistant", answer("Answer A"))]  # resolved: finished
    out = build_run_history(records).messages
    seen = texts(out)
    assert not [t for t in seen if t.startswith("[Previous run")]  # stale: A went on
    lead = seen[seen.index("Answer A") - 1]
    assert lead.startswith("[Platform note: the messages that follow continue run A "
                           '(its question: "Question A")')
    assert seen[:3] == ["Question A", "None", "A data"] and seen.count(lead) == 1
    assert protocol_violations(out, allow_pending_tail=False) == []

    # the same through a view covering A's question and B: A's late answer is still led
    covering = view("B", 9, [[1, 9]])
    seen = texts(build_run_history(records, [covering]).messages)
    assert seen[0] == "view of B" and seen[1].startswith(
        '[Platform note: the messages that follow continue run A (its question: "Question A")')
    assert seen[2:] == ["Answer A"]
