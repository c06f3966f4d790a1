"""The console's Agents pages in Chromium: alice creates an agent, a draft with an invalid
temperature shows the 422's message under that control, a skill bound through the picker,
v1 and v2 published, and the v1→v2 diff shows the changed prompt as −/+ lines. What the UI
saved is read back through the API."""

from __future__ import annotations

import base64
from typing import Any

from playwright.sync_api import expect
from unit.skills.builders import skill_md, zip_of

from .conftest import Console, shot, signed_in


def test_agent_create_edit_publish_and_diff(console: Console, page: Any) -> None:
    client = console.client("alice")
    archive = zip_of({"greeter/SKILL.md": skill_md("greeter", "Greets people.")})
    client.request("POST", f"/spaces/{console.space_id}/skills",
                   json={"zip_base64": base64.b64encode(archive).decode()})
    signed_in(page, console, "alice")
    page.goto(f"{console.url}/#/s/{console.space_id}/agents")
    expect(page.locator("tbody tr").filter(has_text="Helper")).to_contain_text("v1")
    page.get_by_label("Name", exact=True).fill("Writer")
    page.get_by_label("Model name").fill("test-model")
    page.get_by_label("Prompt").fill("You write haiku.")
    page.get_by_role("button", name="Create agent").click()
    expect(page.get_by_role("heading", name="Agent Writer")).to_be_visible()

    page.get_by_label("Temperature").fill("5")
    page.get_by_role("button", name="Save draft").click()
    error = page.locator("#" + page.get_by_label("Temperature").get_attribute("id") + "-error")
    expect(error).to_contain_text("config.model.temperature")
    expect(page.get_by_label("Temperature")).to_have_attribute("aria-invalid", "true")
    page.get_by_label("Temperature").fill("0.5")
    page.get_by_label("greeter — Greets people.").check()
    page.get_by_label("Workspace files (list, read, write, edit…)").check()
    page.get_by_role("button", name="Save draft").click()
    expect(page.locator("#draft-status")).to_contain_text("Saved: draft revision 2")
    shot(page, "agent-editor")
    page.get_by_role("button", name="Publish").click()
    expect(page.locator("#draft-status")).to_have_text("Published version 1")

    agent = next(a for a in client.request("GET", f"/spaces/{console.space_id}/agents")
                 .json()["items"] if a["name"] == "Writer")
    draft = client.draft(console.space_id, agent["agent_id"])
    assert draft.config["model"]["temperature"] == 0.5
    assert draft.config["prompt"] == "You write haiku."
    assert draft.config["tools"] == ["workspace"]
    assert [s.split("@")[0] for s in draft.config["skills"]] == ["greeter"]

    page.get_by_label("Prompt").fill("You write limericks.")
    page.get_by_role("button", name="Publish").click()
    expect(page.locator("#draft-status")).to_have_text("Published version 2")
    assert [v.version for v in client.versions(console.space_id, agent["agent_id"])] == [1, 2]

    page.get_by_role("link", name="Versions").click()
    expect(page.get_by_role("heading", name="Versions of Writer")).to_be_visible()
    page.get_by_label("From").select_option("1")
    page.get_by_label("To").select_option("2")
    page.get_by_role("button", name="Show diff").click()
    deleted = page.locator(".diff-del")
    added = page.locator(".diff-add")
    expect(deleted.filter(has_text="prompt")).to_have_text('−   "prompt": "You write haiku.",\n')
    expect(added.filter(has_text="prompt")).to_have_text('+   "prompt": "You write limericks.",\n')
    expect(deleted.filter(has_text="version")).to_have_text('−   "version": 1\n')
    expect(added.filter(has_text="version")).to_have_text('+   "version": 2\n')
    expect(page.locator(".diff-line").filter(has_text='"mode": "react"')).to_have_text(
        '    "mode": "react",\n')
    shot(page, "agent-diff")

    page.goto(f"{console.url}/#/s/{console.space_id}/agents")
    expect(page.locator("tbody tr").filter(has_text="Writer")).to_contain_text("v2")
    shot(page, "agents")
