"""Signing in to the console on ``serve``: a one-time login link (the code leaves the
address bar at once; a second use is refused with the way to a new link), a pasted
token, a wrong token named as such, sign-out revoking the console token; the console's
files served with a CSP of this origin only."""

from __future__ import annotations

import re
from typing import Any

import httpx
from playwright.sync_api import expect

from .conftest import Console, shot, signed_in


def test_login_link_signs_in_once_and_leaves_no_code_in_the_url(console: Console,
                                                                page: Any) -> None:
    link = console.login_link("alice")
    signed_in_page = page
    signed_in_page.goto(link)
    expect(page.get_by_text("Signed in as alice")).to_be_visible()
    assert "login=" not in page.url and page.url.endswith("#/spaces")
    expect(page.get_by_role("link", name="Team")).to_be_visible()
    stored = page.evaluate("() => JSON.stringify(Object.assign({}, localStorage))")
    assert stored == "{}"  # the token is the tab's (sessionStorage), not the browser's
    shot(page, "spaces")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in to AgentLoom")).to_be_visible()
    page.goto(link)  # the same link again
    expect(page.get_by_role("alert").or_(page.get_by_role("status"))).to_contain_text(
        "used already or has expired")
    shot(page, "sign-in")


def test_a_pasted_token_signs_in_and_a_wrong_one_is_named(console: Console,
                                                          page: Any) -> None:
    page.goto(console.url + "/")
    page.get_by_label("Bearer token").fill("agl_not-a-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("the token is not valid")
    page.get_by_label("Bearer token").fill(console.tokens["bob"])
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Signed in as bob")).to_be_visible()


def test_sign_out_revokes_the_console_token(console: Console, page: Any) -> None:
    signed_in(page, console, "carol")
    token = page.evaluate(
        "() => JSON.parse(sessionStorage.getItem('agentloom.console.auth')).token")
    me = httpx.get(f"{console.url}/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json()["user_id"] == "carol"
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in to AgentLoom")).to_be_visible()
    gone = httpx.get(f"{console.url}/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    assert gone.status_code == 401


def test_new_space_from_the_spaces_page(console: Console, page: Any) -> None:
    signed_in(page, console, "bob")
    page.get_by_label("Name").fill("   ")  # the API's 422, placed under the field
    page.get_by_role("button", name="Create space").click()
    expect(page.get_by_role("alert")).to_contain_text("1-200 characters")
    expect(page.get_by_label("Name")).to_have_attribute("aria-invalid", "true")
    page.get_by_label("Name").fill("Research")
    page.get_by_role("button", name="Create space").click()
    expect(page).to_have_url(re.compile(r"#/s/spc_[0-9a-f]+/sessions$"))
    expect(page.locator("#nav .space-name")).to_have_text("Research")


def test_console_files_carry_a_same_origin_csp(console: Console) -> None:
    for path in ("/", "/main.js", "/app.css", "/config.json"):
        res = httpx.get(console.url + path)
        assert res.status_code == 200, path
        csp = res.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert res.headers["x-content-type-options"] == "nosniff"
    assert httpx.get(console.url + "/config.json").json() == {"api": "",
                                                              "auth": {"kind": "token"}}
    for hostile in ("/../pyproject.toml", "/%2e%2e/agentloom/api/serve.py", "/api.js/x",
                    "/pages/../../api/serve.py"):
        res = httpx.get(console.url + hostile)  # (httpx folds the dots: /api/… is the API's)
        assert res.status_code in (401, 404) and "import" not in res.text, hostile
    assert httpx.get(console.url + "/api/v1/health").json()["status"] == "ok"
    reused = httpx.post(console.url + "/console/session", json={"code": "agl_nothing"})
    assert reused.status_code == 401 and reused.json()["error"]["code"] == "login_link_invalid"


def test_keyboard_reaches_the_page_with_a_visible_focus(console: Console, page: Any) -> None:
    """A page's heading takes focus when it opens (screen readers announce it); Tab goes
    on to its first control, with a visible outline; the skip link moves focus into the
    page without changing the route."""
    signed_in(page, console, "alice")
    expect(page.get_by_role("heading", name="Spaces", level=1)).to_be_focused()
    page.keyboard.press("Tab")
    focused = page.evaluate("() => [document.getElementById('main').contains("
                            "document.activeElement), getComputedStyle("
                            "document.activeElement).outlineStyle]")
    assert focused[0] and focused[1] not in ("", "none"), focused
    page.locator(".skip").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Spaces", level=1)).to_be_focused()
    assert page.url.endswith("#/spaces")
