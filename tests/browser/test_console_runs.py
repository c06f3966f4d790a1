"""Sessions and the live run view in the browser: create a session and ask, follow the
run live to completion (a tool call's arguments and result, each model step's usage, the
answer); a run whose model call is killed in flight, resumed and resolved from the page;
a running run cancelled from the page (and cancelled on the server); a dropped event
stream the page reconnects from its cursor."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import httpx
from playwright.sync_api import expect

from agentloom_runtime.contracts import ModelRequest, ModelResponse, ToolCall

from .conftest import USAGE, Console, Model, shot, signed_in


def wait_for(check: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if found := check():
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def plan(status: str) -> str:
    return json.dumps({"steps": [{"id": "1", "title": "Read the notes", "status": status}]})


def planning(request: ModelRequest, model: Model) -> ModelResponse:
    """Plan (a tool call), finish the plan (another), then answer."""
    done = sum(1 for m in request.messages if m.get("role") == "tool")
    if done == 0:
        return ModelResponse(content=None, tool_calls=(
            ToolCall("call_1", "update_plan", plan("in_progress")),), usage=USAGE)
    if done == 1:
        return ModelResponse(content=None, tool_calls=(
            ToolCall("call_2", "update_plan", plan("completed")),), usage=USAGE)
    return ModelResponse(content="The notes say hello.", usage=USAGE)


def api(console: Console, path: str) -> Any:
    res = httpx.get(f"{console.url}/api/v1{path}",
                    headers={"Authorization": f"Bearer {console.tokens['alice']}"})
    res.raise_for_status()
    return res.json()


def open_session(page: Any, console: Console) -> str:
    signed_in(page, console)
    page.get_by_role("link", name="Team").click()
    expect(page.get_by_role("heading", name="Sessions", exact=True)).to_be_visible()
    expect(page.locator("#nav a[aria-current=page]")).to_have_text("Sessions")
    page.get_by_label("Agent").select_option(label="Helper (v1)")
    page.get_by_label("Title").fill("Notes")
    page.get_by_role("button", name="New session").click()
    expect(page).to_have_url(re.compile(r"/sessions/ses_[0-9a-f]+$"))
    return str(page.url).rsplit("/", 1)[1]


def ask(page: Any, question: str) -> str:
    page.get_by_label("Question").fill(question)
    page.get_by_role("button", name="Ask").click()
    expect(page).to_have_url(re.compile(r"/runs/run_[0-9a-f]+$"))
    return str(page.url).rsplit("/", 1)[1]


def status(page: Any) -> Any:
    return page.locator("#run-status")


def test_ask_and_follow_a_run_live(console: Console, page: Any) -> None:
    console.model.script("Q notes", planning)
    session = open_session(page, console)
    shot(page, "session-empty")
    run = ask(page, "Q notes: what do they say?")
    expect(status(page)).to_contain_text("completed")
    expect(page.locator(".connection")).to_contain_text(re.compile("live|ended"))
    answer = page.get_by_role("region", name="Answer").or_(page.locator(".answer"))
    expect(answer).to_contain_text("The notes say hello.")
    tools = page.locator(".timeline li.tool")
    expect(tools).to_have_count(2)
    expect(tools.first).to_contain_text("update_plan")
    expect(tools.first).to_contain_text('"status": "in_progress"')  # its arguments
    expect(tools.first).to_contain_text('"open": true')              # its result
    expect(page.locator(".plan")).to_contain_text("Read the notes")
    expect(page.locator(".plan")).to_contain_text("completed")
    steps = page.locator(".timeline li.step")
    expect(steps).to_have_count(4)  # three action steps and the review
    expect(steps.first).to_contain_text("1,200 in · 80 out")
    expect(page.locator("#run-total-tokens")).to_contain_text("5,120")
    assert api(console, f"/sessions/{session}/runs/{run}")["usage"]["total_tokens"] == 5120
    shot(page, "run-live")
    page.get_by_role("link", name="← Back to the session").click()
    expect(page.locator(".messages")).to_contain_text("The notes say hello.")
    expect(page.get_by_role("table", name="Runs of this session")).to_contain_text("completed")
    shot(page, "session")
    page.locator("#nav").get_by_role("link", name="Sessions").click()
    expect(page.get_by_role("table", name="Your sessions in this space")).to_contain_text("Notes")
    shot(page, "sessions")


def test_a_blocked_run_is_resumed_and_resolved_from_the_page(console: Console,
                                                             page: Any) -> None:
    session = open_session(page, console)
    run = ask(page, "Q hang please")
    wait_for(lambda: "Q hang please" in console.model.started, "the model call")
    expect(status(page)).to_contain_text("running")
    console.platform.launcher.stop(run)  # the worker dies mid-call
    expect(status(page)).to_contain_text("interrupted", timeout=20_000)
    page.get_by_role("button", name="Resume").click()
    expect(status(page)).to_contain_text("blocked", timeout=20_000)
    expect(page.get_by_text("Way out: resolve.", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Send again")).to_be_visible()
    expect(page.get_by_role("button", name="Treat as failed")).to_be_visible()
    expect(page.get_by_role("button", name="Did not run")).to_have_count(0)
    expect(page.locator(".next")).to_contain_text("/resolve")
    shot(page, "run-blocked")
    console.model.open()
    page.get_by_label("Note").fill("the provider is back")
    page.get_by_role("button", name="Send again").click()
    expect(status(page)).to_contain_text("completed", timeout=20_000)
    expect(page.locator(".answer")).to_contain_text("Answer to: Q hang please")
    expect(page.locator(".timeline")).to_contain_text("verdict send_again by alice")
    view = api(console, f"/sessions/{session}/runs/{run}")
    assert view["status"] == "completed"


def test_cancel_a_running_run_from_the_page(console: Console, page: Any) -> None:
    """Also the reconnect: the server ends each event stream after 0.3 s (its
    ``stream_limit``), so the page reconnects from its cursor again and again while the
    run waits; every event shows once, in order."""
    session = open_session(page, console)
    streams: list[str] = []
    page.on("request", lambda r: streams.append(r.url) if "/events" in r.url else None)
    console.server.stream_limit = 0.3
    run = ask(page, "Q slow one")
    wait_for(lambda: "Q slow one" in console.model.started, "the model call")
    page.get_by_label("Supplement").fill("Also mention the date.")
    page.get_by_role("button", name="Send supplement").click()
    expect(page.locator(".sr-status")).to_contain_text("Supplement queued")
    for _ in range(100):  # Playwright delivers request events while it is called
        if len(streams) >= 3:
            break
        page.wait_for_timeout(100)
    assert len(streams) >= 3 and \
        all(re.search(r"after=[1-9]", url) for url in streams[1:]), streams
    seqs = [int(s) for s in page.locator(".timeline li[data-seq]").evaluate_all(
        "items => items.map(i => i.dataset.seq)")]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    page.get_by_role("button", name="Cancel run").click()
    expect(status(page)).to_contain_text("cancelled")
    wait_for(lambda: api(console, f"/sessions/{session}/runs/{run}")["status"] == "cancelled",
             "the server's cancelled")
    expect(page.get_by_role("button", name="Cancel run")).to_be_disabled()
    page.get_by_role("link", name="← Back to the session").click()
    page.get_by_label("Question").fill("Q next")
    page.get_by_role("button", name="Ask").click()  # the session is free again
    expect(status(page)).to_contain_text("completed")
