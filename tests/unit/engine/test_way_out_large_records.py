"""A large record never wedges a run under the snapshot's budget policy (issue 17): the
completion review quotes a capped copy of a 1 MB answer, and the model view carries a
capped copy of oversized tool-call arguments and answers, while the source records keep
every value whole. Where a block is unavoidable, its way out is one that moves the run
on (a new question), not a resume that stops the same way."""

from __future__ import annotations

import json
from typing import Any

from support.engine import Crash, CrashWhen, build_engine, drive, make_snapshot, records
from unit.engine.test_no_wedge_sizes import big_text, model_for, tools

from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.completion import EvidenceReviewPolicy
from agentloom_runtime.contracts import CompletionInput, ModelRequest, ModelResponse
from agentloom_runtime.testing import FunctionModel, ScriptedModel

MB = 1_000_000
BUDGETED: dict[str, Any] = {"snapshot": make_snapshot(), "compaction": "default"}
"""The snapshot's own budget policy on the platform's fallback figures: 32,768 / 4,096 /
1,024, an effective input budget of 27,648 (UTF-8 bytes)."""


def sizes(model: FunctionModel, purpose: str) -> list[int]:
    return [len(json.dumps(list(r.messages)).encode()) for r in model.requests
            if r.purpose == purpose]


async def test_a_1mb_answer_is_reviewed_on_a_capped_copy_and_the_run_completes() -> None:
    """Before: the answer was saved, then the review quoting all of it was over the input
    budget: blocked ``budget_exceeded`` on every resume, "next: resume"."""
    text = big_text(MB)
    store, model = InMemoryCheckpointStore(), model_for("answer", text)
    engine = build_engine(store=store, model=model, **BUDGETED)
    run_id = await engine.start("write a very long answer")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("completed", None), engine.error
    outcome = engine.outcome()
    assert outcome is not None and outcome.answer == text, "the answer is kept whole"
    [review] = [r for r in model.requests if r.purpose == "verification"]
    quoted = json.loads(review.messages[1]["content"])["candidate_answer"]
    assert text.startswith(quoted.split("…[cut:")[0]) and "…[cut:" in quoted
    assert f"of {len(text):,} characters" in quoted
    assert max(sizes(model, "verification")) <= 27_648
    [answer] = records(store, run_id, "assistant")
    assert answer["message"]["content"] == text


def continuing(text: str) -> FunctionModel:
    """A long answer the review sends back once, then a short one."""
    def reply(request: ModelRequest) -> ModelResponse:
        if request.purpose == "verification":
            again = "too long" not in str(request.messages)
            return ScriptedModel.verdict("continue" if again else "complete", "too long")
        if request.purpose == "compaction":
            return ModelResponse(content="The agent wrote a very long answer.")
        if any("too long" in str(m.get("content")) for m in request.messages):
            return ScriptedModel.answer("short")
        return ScriptedModel.answer(text)
    return FunctionModel(reply)


async def test_a_1mb_answer_sent_back_by_the_review_stays_capped_in_the_view() -> None:
    """After ``continue`` the view carries the answer: a capped copy (which the next
    preparation then summarises), never the megabyte."""
    text = big_text(MB)
    model = continuing(text)
    engine = build_engine(model=model, **BUDGETED)
    await engine.start("write a very long answer")
    assert (await drive(engine)).status == "completed", engine.error
    material = "".join(r.messages[1]["content"] for r in model.requests
                       if r.purpose == "compaction")
    assert "…[cut:" in material and len(material) < 40_000
    assert all(len(str(m.get("content"))) <= 24_000 for r in model.requests
               for m in r.messages)
    assert max(sizes(model, "action")) <= 27_648


class Verbose(EvidenceReviewPolicy):
    """A review whose request never fits the input budget, however small its input."""

    module_id = "verbose-review/v1"

    def build_request(self, data: CompletionInput) -> ModelRequest:
        request = super().build_request(data)
        padding = {"role": "user", "content": "context " * 5_000}
        return ModelRequest(messages=[*request.messages, padding], purpose="verification",
                            instance=data.instance)


async def test_a_review_that_cannot_fit_blocks_with_a_new_question_as_its_way_out() -> None:
    """Before: blocked ``budget_exceeded`` with way out ``resume``, which blocked again."""
    model = model_for("answer", "ok")
    engine = build_engine(model=model, completion_policy=Verbose(), **BUDGETED)
    await engine.start("a question")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("blocked", "budget_exceeded")
    assert [r.purpose for r in model.requests] == ["action"], "no review was sent"
    assert engine.error is not None and engine.error["type"] == "ContextOverBudget"
    assert "completion review" in engine.error["message"]
    assert engine.way_out() == "new_question"


async def test_megabytes_of_tool_call_arguments_are_capped_in_the_view() -> None:
    """Before: the call's 5 MB of arguments went back to the model with every request,
    over the input budget: blocked ``budget_exceeded``, and every resume the same."""
    text = big_text(5 * MB)
    received: list[str] = []
    store, model = InMemoryCheckpointStore(), model_for("arguments", text)
    engine = build_engine(store=store, model=model, tools=tools(received, text), **BUDGETED)
    run_id = await engine.start("store a large note")
    result = await drive(engine)
    assert (result.status, result.error_code) == ("completed", None), engine.error
    assert received == [text], "the tool got the whole arguments"
    [call] = records(store, run_id, "assistant")[0]["message"]["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"text": text}, "kept whole"
    second = [r for r in model.requests if r.purpose == "action"][1]
    [shown] = [m for m in second.messages if m.get("tool_calls")]
    arguments = shown["tool_calls"][0]["function"]["arguments"]
    assert len(arguments) <= 24_000
    note = json.loads(arguments)["text"]  # still JSON, the same shape
    assert text.startswith(note.split("…[cut:")[0]) and "source record main#" in note
    assert max(sizes(model, "action")) <= 27_648


async def test_a_resumed_run_restores_the_same_capped_view() -> None:
    """The capped copy is what the view entry holds: a run resumed after the tool call
    sees the view a run without the crash sees (the model is asked the same)."""
    text = big_text(2 * MB)
    inner = InMemoryCheckpointStore()
    engine = build_engine(store=CrashWhen(inner, lambda head: not head["frames"]["main"][
        "pending"] and head["frames"]["main"]["iterations"] == 1),
        model=model_for("arguments", text), tools=tools([], text), **BUDGETED)
    run_id = await engine.start("store a large note")
    try:
        await drive(engine)
        raise AssertionError("the run did not crash")
    except Crash:
        pass
    model = model_for("arguments", text)
    resumed = build_engine(store=inner, model=model, tools=tools([], text), run_id=run_id,
                           **BUDGETED)
    await resumed.begin_execution()
    assert (await drive(resumed)).status == "completed", resumed.error
    live = model_for("arguments", text)
    reference = build_engine(model=live, tools=tools([], text), **BUDGETED)
    await reference.start("store a large note")
    await drive(reference)
    assert model.requests[0].messages[2:] == live.requests[1].messages[2:]
