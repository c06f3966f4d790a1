"""The console's Model connections and Members pages in Chromium, in one walk (each test
launches a browser): alice discovers the models of a scripted OpenAI-compatible provider
on 127.0.0.1, sees each model's window and its source (provider; the platform default
with its warning; an embeddings model not selectable), saves two connections with a key
that is never shown again, meets a stale revision (409) and a field-named 422 while
editing, enters a manual window; then invites a member, changes the role, removes them,
and is refused removing the space's last owner; a member reads the members, manages
nothing and gets the API's 403 on the connections. What the pages saved is read back
through the API."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from agentloom_runtime.testing import OpenAICompatibleServer

from .conftest import Console, shot, signed_in

KEY = "sk-console-conn-0123456789abcdef"
MODELS: list[dict[str, Any]] = [
    {"id": "llama-3-70b", "object": "model", "owned_by": "local", "context_length": 131_072,
     "max_completion_tokens": 8_192},
    {"id": "tiny-chat", "object": "model", "owned_by": "local"},
    {"id": "text-embedding-3-small", "object": "model", "owned_by": "local"},
]


def _discover_and_create(page: Any, base_url: str, name: str, model_id: str) -> Any:
    """Fills the new-connection form, discovers, picks ``model_id``: its window panel."""
    new = page.locator("section").filter(
        has=page.get_by_role("heading", name="New model connection"))
    new.get_by_label("Provider", exact=True).select_option("openai_compatible")
    new.get_by_label("Base URL").fill(base_url)
    new.get_by_label("API key").fill(KEY)
    new.get_by_role("button", name="Discover models").click()
    expect(new.get_by_text("3 listed, 2 selectable")).to_be_visible()
    expect(new.get_by_role("radio", name=re.compile("^text-embedding-3-small"))).to_be_disabled()
    new.get_by_role("radio", name=re.compile(f"^{model_id}")).check()
    expect(new.get_by_label("Model id")).to_have_value(model_id)
    new.get_by_label("Name", exact=True).fill(name)
    return new


def test_connections_with_discovery_and_members(console: Console, page: Any) -> None:
    client = console.client("alice")
    space = console.space_id
    with OpenAICompatibleServer(models=MODELS) as provider:
        signed_in(page, console, "alice")
        page.goto(f"{console.url}/#/s/{space}/connections")
        expect(page.get_by_text("No model connections yet")).to_be_visible()

        new = _discover_and_create(page, provider.base_url, "Tiny", "tiny-chat")
        panel = new.locator(".window-panel")
        expect(panel).to_contain_text("Context window: 32,768 tokens")
        expect(panel.locator(".source").first).to_have_text("⚠ platform default")
        expect(panel.locator(".notice-warn").filter(has_text="platform_default_window")) \
            .to_contain_text("not the model's official limit")
        shot(page, "connection-discovery")
        new.get_by_role("button", name="Create connection").click()
        tiny = page.locator("tbody tr").filter(has_text="Tiny")
        expect(tiny).to_contain_text("32,768 ⚠ platform default")
        expect(tiny.locator(".warning-line").first).to_contain_text("platform fallback")

        new = _discover_and_create(page, provider.base_url, "Local llama", "llama-3-70b")
        expect(new.locator(".window-panel")).to_contain_text("Context window: 131,072 tokens")
        expect(new.locator(".window-panel .source").first).to_have_text("✓ provider")
        new.get_by_role("button", name="Create connection").click()
        llama = page.locator("tbody tr").filter(has_text="Local llama")
        expect(llama).to_contain_text("131,072 ✓ provider")
        expect(llama).to_contain_text("stored (write-only)")
        # the key is in no page text and no control, and no API answer carries it
        assert KEY not in page.content()
        assert not page.evaluate("(k) => [...document.querySelectorAll('input')]"
                                 ".some((i) => i.value.includes(k))", KEY)
        listed = client.request("GET", f"/spaces/{space}/models/connections")
        assert KEY not in listed.text
        saved = {c["name"]: c for c in listed.json()["items"]}
        cid = saved["Local llama"]["connection_id"]
        assert saved["Local llama"]["has_key"] is True
        assert saved["Local llama"]["spec"]["budget_sources"]["context_window"] == "provider"
        assert saved["Local llama"]["spec"]["provider_max_output_tokens"] == 8_192
        assert console.platform.admin.connection_key(space, cid) == KEY
        shot(page, "connections")

        # an edit over a stale revision: 409, said in the form
        page.get_by_role("button", name="Edit Local llama").click()
        spec = {k: v for k, v in saved["Local llama"]["spec"].items() if k != "api_key_ref"}
        client.request("PUT", f"/spaces/{space}/models/connections/{cid}",
                       json={"spec": spec, "revision": 1, "name": "Local llama"})
        edit = page.locator("form").filter(has_text="Save changes")
        edit.get_by_role("button", name="Save changes").click()
        expect(edit.get_by_role("alert")).to_contain_text("connection_changed")
        # reloaded: a manual output above the provider's maximum is named under its field
        edit.get_by_role("button", name="Reload the connection").click()
        expect(edit).to_have_count(0)  # the page drawn again from the API
        page.get_by_role("button", name="Edit Local llama").click()
        edit = page.locator("form").filter(has_text="Save changes")
        output = edit.get_by_label("Max output tokens (manual)")
        output.fill("9000")
        edit.get_by_role("button", name="Save changes").click()
        expect(output).to_have_attribute("aria-invalid", "true")
        error = page.locator(f"#{output.get_attribute('id')}-error")
        expect(error).to_contain_text("spec.max_output_tokens")
        expect(error).to_contain_text("8,192")
        output.fill("")
        edit.get_by_label("Context window (manual)").fill("65536")
        edit.get_by_role("button", name="Save changes").click()
        expect(llama).to_contain_text("65,536 ✎ manual entry")
        expect(llama).to_contain_text("stored (write-only)")
    after = client.request("GET", f"/spaces/{space}/models/connections/{cid}").json()
    assert after["revision"] == 3 and after["spec"]["context_window"] == 65_536
    assert console.platform.admin.connection_key(space, cid) == KEY  # kept: same endpoint

    page.get_by_role("link", name="Members").click()
    expect(page.get_by_role("heading", name="Members")).to_be_visible()
    expect(page.locator("tbody tr").filter(has_text="(you)")).to_contain_text("alice")
    invite = page.locator("form").filter(has_text="Invite")
    invite.get_by_label("User id").fill("bob")
    invite.get_by_role("button", name="Invite").click()
    expect(invite.get_by_label("User id")).to_have_attribute("aria-invalid", "true")
    invite.get_by_label("User id").fill("dave")
    invite.get_by_label("Role").select_option("member")
    invite.get_by_role("button", name="Invite").click()
    dave = page.locator("tbody tr").filter(has_text="dave")
    expect(dave).to_contain_text("member")
    page.get_by_label("Role of dave", exact=True).select_option("admin")
    page.get_by_role("button", name="Change the role of dave").click()
    expect(dave.locator(".badge")).to_have_text("• admin")
    assert {m.user_id: m.role for m in client.members(space)}["dave"] == "admin"
    page.get_by_role("button", name="Remove dave").click()
    expect(page.get_by_role("button", name="Yes, remove dave")).to_be_focused()
    page.keyboard.press("Enter")
    expect(dave).to_have_count(0)
    assert "dave" not in {m.user_id for m in client.members(space)}
    # the space's only owner cannot leave it: the API's refusal, shown
    page.get_by_role("button", name="Remove alice").click()
    page.get_by_role("button", name="Yes, remove alice").click()
    expect(page.get_by_role("alert")).to_contain_text("last_owner")
    expect(page.get_by_role("alert")).to_contain_text("at least one owner")
    shot(page, "members")

    # a member reads the members and manages nothing; the connections are 403 to them
    signed_in(page, console, "bob")
    page.goto(f"{console.url}/#/s/{space}/members")
    expect(page.locator("tbody tr").filter(has_text="(you)")).to_contain_text("bob")
    expect(page.get_by_role("button", name="Change role")).to_have_count(0)
    expect(page.get_by_role("button", name="Invite")).to_have_count(0)
    expect(page.get_by_role("link", name="Model connections")).to_have_count(0)
    page.goto(f"{console.url}/#/s/{space}/connections")
    expect(page.get_by_role("alert")).to_contain_text("role_required")
