"""The console's operator pages in Chromium against a real server: Runs (cost per run and
a total, cancel from the page, 403 for a member), Skills (a zip imported through a file
input), MCP (a resource added, its tools discovered from a real MCP server on
127.0.0.1; the API's refusal shown under the URL field) and knowledge (a base, an
uploaded document with its indexing state, a search with citations)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from functional.mcp.servers import Running, serve
from playwright.sync_api import expect
from unit.knowledge.builders import hashing_server
from unit.skills.builders import skill_md, zip_of

from agentloom.api.app import build_app
from agentloom.api.client import Client
from agentloom.api.console_login import ConsoleLogins
from agentloom.api.server import ApiServer
from agentloom.local.capabilities import embedded_capabilities
from agentloom.local.embedded import EmbeddedPlatform

from .conftest import AGENT_CONFIG, ALICE, Console, Model, shot, signed_in

PRICED = {**AGENT_CONFIG, "model": {"model": "test-model", "input_price_per_million": 2.5,
                                    "output_price_per_million": 10}}


def _wait_status(client: Client, session_id: str, run_id: str, *wanted: str) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status = client.run(session_id, run_id).status
        if status in wanted:
            return status
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never reached {wanted}")


def test_operators_see_cost_per_run_and_cancel_a_run(console: Console, page: Any) -> None:
    agent, _ = console.platform.admin.create_agent(ALICE, console.space_id, "Priced", PRICED)
    console.platform.admin.publish(ALICE, console.space_id, agent.agent_id)
    bob = console.client("bob")
    session = bob.create_session(console.space_id, agent.agent_id)
    done = bob.ask(session.session_id, "Q one")
    _wait_status(bob, session.session_id, done.run_id, "completed")
    other = bob.create_session(console.space_id, agent.agent_id)
    slow = bob.ask(other.session_id, "Q slow")
    _wait_status(bob, other.session_id, slow.run_id, "running")

    signed_in(page, console, "carol")
    page.goto(f"{console.url}/#/s/{console.space_id}/runs")
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(2)
    # 1280 prompt tokens at 2.5/M + 80 completion at 10/M per call (answer + review)
    per_call = 1200 * 2.5 / 1e6 + 80 * 10 / 1e6
    done_row = rows.filter(has_text=done.run_id)
    expect(done_row).to_contain_text("completed")
    expect(done_row.locator(".cost")).to_have_text(f"{2 * per_call:.5f} USD")
    expect(page.locator("[data-total=cost]")).not_to_have_text("—")
    slow_row = rows.filter(has_text=slow.run_id)
    expect(slow_row).to_contain_text("running")
    page.get_by_role("button", name=f"Cancel run {slow.run_id}").click()
    expect(slow_row).to_contain_text("cancelled")  # the page refreshed itself
    assert bob.run(other.session_id, slow.run_id).status == "cancelled"
    shot(page, "operators")
    page.get_by_label("Status").select_option("completed")
    expect(page.locator("tbody tr")).to_have_count(1)
    expect(page.locator("caption")).to_have_text("Runs: completed")

    bob_page = page.context.browser.new_context().new_page()
    try:
        signed_in(bob_page, console, "bob")
        bob_page.goto(f"{console.url}/#/s/{console.space_id}/runs")
        expect(bob_page.get_by_role("alert")).to_contain_text("role_required")
        expect(bob_page.locator("#nav")).to_contain_text("Knowledge")
        expect(bob_page.get_by_role("link", name="Runs")).to_have_count(0)
    finally:
        bob_page.context.close()


def test_skills_import_a_zip_list_detail_and_delete(console: Console, page: Any,
                                                    tmp_path: Path) -> None:
    archive = tmp_path / "greeter.zip"
    archive.write_bytes(zip_of({"greeter/SKILL.md": skill_md("greeter", "Greets people."),
                                "greeter/references/guide.md": "# Guide\n"}))
    broken = tmp_path / "broken.zip"
    broken.write_bytes(zip_of({"broken/SKILL.md": "no front matter"}))
    signed_in(page, console, "carol")
    page.goto(f"{console.url}/#/s/{console.space_id}/skills")
    expect(page.get_by_text("No skills yet.")).to_be_visible()
    page.get_by_label("Skill zip").set_input_files(str(broken))
    page.get_by_role("button", name="Import zip").click()
    expect(page.get_by_role("alert")).to_contain_text("skill_format")
    page.get_by_label("Skill zip").set_input_files(str(archive))
    page.get_by_role("button", name="Import zip").click()
    expect(page.locator("#banner")).to_contain_text("Imported skill greeter.")
    row = page.locator("tbody tr").filter(has_text="greeter")
    expect(row).to_contain_text("Greets people.")
    expect(row).to_contain_text("2 (")
    shot(page, "skills")
    page.get_by_role("link", name="greeter").click()
    expect(page.get_by_role("heading", name="Skill greeter")).to_be_visible()
    expect(page.locator("table")).to_contain_text("references/guide.md")
    page.get_by_role("button", name="Delete skill").click()
    page.get_by_role("button", name="Yes, delete greeter").click()
    expect(page.get_by_text("No skills yet.")).to_be_visible()

    bob_page = page.context.browser.new_context().new_page()
    try:  # a member reads skills, without the import form
        signed_in(bob_page, console, "bob")
        bob_page.goto(f"{console.url}/#/s/{console.space_id}/skills")
        expect(bob_page.locator("h1")).to_have_text("Skills")
        expect(bob_page.get_by_label("Skill zip")).to_have_count(0)
    finally:
        bob_page.context.close()


def test_operators_resume_a_blocked_run_raising_its_budget(console: Console,
                                                          page: Any) -> None:
    tight = {**PRICED, "limits": {"max_tokens": 1000}}
    agent, _ = console.platform.admin.create_agent(ALICE, console.space_id, "Tight", tight)
    console.platform.admin.publish(ALICE, console.space_id, agent.agent_id)
    bob = console.client("bob")
    session = bob.create_session(console.space_id, agent.agent_id)
    run = bob.ask(session.session_id, "Q budget")
    _wait_status(bob, session.session_id, run.run_id, "blocked")

    signed_in(page, console, "carol")
    page.goto(f"{console.url}/#/s/{console.space_id}/runs?status=blocked")
    row = page.locator("tbody tr").filter(has_text=run.run_id)
    expect(row).to_contain_text("budget_exceeded")
    row.get_by_text("Resume…").click()
    row.get_by_label("Raise max tokens to").fill("500")  # not above the budget: 422
    row.get_by_role("button", name=f"Resume run {run.run_id}").click()
    expect(row.get_by_label("Raise max tokens to")).to_have_attribute("aria-invalid", "true")
    expect(row.locator(".field-error").first).to_contain_text("raise_budget.max_tokens")
    row.get_by_label("Raise max tokens to").fill("2000000")
    row.get_by_label("Note").fill("from the console")
    row.get_by_role("button", name=f"Resume run {run.run_id}").click()
    expect(page.locator("#banner")).to_contain_text("resumed")
    assert _wait_status(bob, session.session_id, run.run_id, "completed") == "completed"


@pytest.fixture
def loopback(tmp_path: Path, model: Model) -> Iterator[Console]:
    """The console's server with MCP servers and embeddings endpoints on 127.0.0.1
    allowed (``serve --allow-loopback-tools``): alice owns "Team", carol is an admin."""
    home = tmp_path / "loopback-home"
    platform = EmbeddedPlatform.open(home, model_factory=model.factory,
                                     capabilities=embedded_capabilities(
                                         home, allow_loopback=True),
                                     allow_loopback_discovery=True)
    server = ApiServer(build_app(platform.admin, platform.sessions, platform.tokens),
                       platform.sessions, logins=ConsoleLogins(platform.tokens)).start()
    space = platform.admin.create_space(ALICE, "Team")
    platform.admin.set_member(ALICE, space.space_id, "carol", "admin")
    try:
        yield Console(platform, server, model, space.space_id, "",
                      {"carol": platform.tokens.issue("carol")[1]})
    finally:
        server.close()
        platform.close()


@pytest.fixture
def mcp_server() -> Iterator[Running]:
    with serve("http") as running:
        yield running


def _add_resource(page: Any, name: str, url: str) -> None:
    expect(page.locator("h1")).to_have_text("MCP resources")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("URL").fill(url)
    page.get_by_label("Credential", exact=True).select_option("bearer")
    page.get_by_label("Credential value").fill("s3cret-token")
    page.get_by_role("button", name="Add resource").click()


def test_mcp_add_discover_edit_delete(loopback: Console, page: Any,
                                      mcp_server: Running) -> None:
    signed_in(page, loopback, "carol")
    page.goto(f"{loopback.url}/#/s/{loopback.space_id}/mcp")
    expect(page.get_by_text("No MCP resources yet.")).to_be_visible()
    page.get_by_label("URL").fill("ftp://nowhere")
    page.get_by_label("Name", exact=True).fill("Bad")
    page.get_by_role("button", name="Add resource").click()
    expect(page.get_by_role("alert")).to_be_visible()  # the API's 422, in the form
    page.goto(f"{loopback.url}/#/s/{loopback.space_id}/mcp")
    _add_resource(page, "Tools", mcp_server.url)
    row = page.locator("tbody tr").filter(has_text="Tools")
    expect(row).to_contain_text("bearer, stored")
    expect(page.locator("body")).not_to_contain_text("s3cret-token")
    page.get_by_role("button", name="Discover tools of Tools").click()
    tools = page.locator("section").filter(has_text="Tools of Tools")
    expect(tools).to_contain_text("lookup")
    expect(tools).to_contain_text("add")
    tools.get_by_text("Schema of add").click()
    expect(tools.locator("pre").filter(has_text='"a"').first).to_be_visible()
    shot(page, "mcp")
    page.get_by_role("button", name="Edit Tools").click()
    edit = page.locator("form").filter(has_text="Save changes")
    edit.get_by_label("Name", exact=True).fill("Tools 2")
    page.get_by_role("button", name="Save changes").click()
    expect(page.locator("tbody tr").filter(has_text="Tools 2")).to_contain_text("2 ·")
    page.get_by_role("button", name="Delete Tools 2").click()
    expect(page.get_by_text("No MCP resources yet.")).to_be_visible()


def test_mcp_loopback_refused_where_the_host_does_not_allow_it(
        console: Console, page: Any, mcp_server: Running) -> None:
    signed_in(page, console, "carol")
    page.goto(f"{console.url}/#/s/{console.space_id}/mcp")
    _add_resource(page, "Local", mcp_server.url)
    page.get_by_role("button", name="Discover tools of Local").click()
    expect(page.get_by_role("alert")).to_contain_text("mcp_address_refused")
    expect(page.get_by_role("alert")).to_contain_text("loopback address")
    shot(page, "mcp-refused")


def test_knowledge_base_upload_indexing_state_and_search(loopback: Console, page: Any,
                                                         tmp_path: Path) -> None:
    with hashing_server() as served:
        loopback.platform.admin.create_model_connection(
            ALICE, loopback.space_id, "Embeddings", {"provider": "openai_compatible",
                                                      "base_url": served.url, "model_id": "m"})
        doc = tmp_path / "refunds.md"
        doc.write_text("# Refunds\n\nRefunds are approved by Mariana in Braga.\n\n"
                       "# Hours\n\nOpen nine to five.\n")
        empty = tmp_path / "empty.txt"
        empty.write_text("   \n")
        signed_in(page, loopback, "carol")
        page.goto(f"{loopback.url}/#/s/{loopback.space_id}/knowledge")
        expect(page.get_by_text("No knowledge bases yet.")).to_be_visible()
        page.get_by_label("Name", exact=True).fill("Policies")
        page.get_by_label("Document model").fill("m")
        page.get_by_label("Chunk size").fill("200")
        page.get_by_label("Chunk overlap").fill("0")
        page.get_by_role("button", name="Create knowledge base").click()
        expect(page.get_by_role("heading", name="Knowledge base Policies")).to_be_visible()
        page.get_by_label("Document", exact=True).set_input_files(str(empty))
        page.get_by_role("button", name="Upload and index").click()
        failed = page.locator("tbody tr").filter(has_text="empty.txt")
        expect(failed).to_contain_text("error")
        expect(failed).to_contain_text("document_empty")
        page.get_by_label("Document", exact=True).set_input_files(str(doc))
        page.get_by_role("button", name="Upload and index").click()
        row = page.locator("tbody tr").filter(has_text="refunds.md")
        expect(row).to_contain_text("indexed 2 chunks")
        expect(row).to_contain_text("markdown")
        expect(page.locator("#banner")).to_contain_text("2 chunks embedded")
        page.get_by_role("searchbox", name="Search").fill("Refunds are approved by Mariana")
        page.get_by_role("button", name="Search", exact=True).click()
        hit = page.locator(".hits li").first
        expect(hit).to_contain_text("refunds.md › Refunds")
        expect(hit).to_contain_text("Mariana")
        expect(hit).to_contain_text("Cite as:")
        shot(page, "knowledge")
        page.get_by_role("button", name="Re-index all").click()
        expect(page.locator("#banner")).to_contain_text("2 chunks embedded")
        page.get_by_role("button", name="Delete document refunds.md").click()
        expect(page.get_by_text("No documents yet.")).to_be_visible()
        page.get_by_role("button", name="Delete knowledge base").click()
        page.get_by_role("button", name="Yes, delete Policies").click()
        expect(page.get_by_text("No knowledge bases yet.")).to_be_visible()
