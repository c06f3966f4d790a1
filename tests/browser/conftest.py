"""The console's browser tests: Debian's Chromium (``/usr/bin/chromium``, installed by
``bin/test`` as root) driven by Playwright's sync API — no browser download — against a
real ``ApiServer`` on 127.0.0.1 over an embedded platform in a temporary home.

Fixtures: ``console`` — the server with users (alice owns space "Team", bob is a
member, carol an admin), a published agent ``Helper``, a scripted model and
``login_link(user)``; ``page`` — a fresh browser context and page; ``signed_in(page,
user)`` — the page signed in through a one-time login link. ``shot(page, name)`` saves a
full-page screenshot under ``.artifacts/console/`` (``$AGENTLOOM_ARTIFACTS``): the
artifacts CI keeps.

The model answers ``Answer to: <question>`` (the last user message starting ``Q ``),
reviews say complete; ``Q slow`` / ``Q hang`` wait for ``model.open()`` (a run that stays
active; a call to kill in flight); a test adds its own behaviour with
``model.script(prefix, reply)``, ``reply(request, model)`` returning a ModelResponse.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentloom.api.app import build_app
from agentloom.api.client import Client
from agentloom.api.console_login import ConsoleLogins, login_link
from agentloom.api.server import ApiServer
from agentloom.local.capabilities import embedded_capabilities
from agentloom.local.embedded import EmbeddedPlatform
from agentloom.platform.identity import Principal
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.snapshot import AgentSnapshot
from agentloom_runtime.testing import FunctionModel, ScriptedModel

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("AGENTLOOM_ARTIFACTS") or ROOT / ".artifacts") / "console"
USAGE = {"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280}
ALICE = Principal("alice", "token")
AGENT_CONFIG: dict[str, Any] = {"prompt": "You answer questions.",
                                "model": {"model": "test-model"}}
# Chromium as the machine's probe starts it: no background connections (the network is
# closed), a throwaway profile per launch (Playwright's)
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--disable-dev-shm-usage"]

Reply = Callable[[ModelRequest, "Model"], ModelResponse]

playwright_sync = pytest.importorskip("playwright.sync_api")
if shutil.which("chromium") is None and not Path(CHROMIUM).exists():
    pytest.skip("chromium is not installed (bin/test installs it as root: apt-get install "
                "chromium)", allow_module_level=True)


def question_of(request: ModelRequest) -> str:
    for message in reversed(list(request.messages)):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str) \
                and content.startswith("Q "):
            return content
    return ""


@dataclass
class Model:
    """The scripted model of every run the server drives."""

    opened: bool = False
    requests: list[ModelRequest] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    scripts: dict[str, Reply] = field(default_factory=dict)

    def script(self, prefix: str, reply: Reply) -> None:
        self.scripts[prefix] = reply

    async def reply(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if request.purpose == "verification":
            return dataclasses.replace(ScriptedModel.verdict("complete"), usage=USAGE)
        if request.purpose == "compaction":
            return ModelResponse(content="Summary.", usage=USAGE)
        question = question_of(request)
        self.started.append(question)
        if question.startswith(("Q slow", "Q hang")):
            while not self.opened:  # noqa: ASYNC110 (set from the test's thread)
                await asyncio.sleep(0.01)
        for prefix, scripted in self.scripts.items():
            if question.startswith(prefix):
                return scripted(request, self)
        return ModelResponse(content=f"Answer to: {question}", usage=USAGE)

    def factory(self, snapshot: AgentSnapshot) -> FunctionModel:
        return FunctionModel(self.reply)

    def open(self) -> None:
        self.opened = True


@dataclass
class Console:
    platform: EmbeddedPlatform
    server: ApiServer
    model: Model
    space_id: str
    agent_id: str
    tokens: dict[str, str]
    clients: list[Client] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    def client(self, user: str) -> Client:
        """An API client as ``user``, closed when the test ends."""
        made = Client(self.url, self.tokens[user])
        self.clients.append(made)
        return made

    def login_link(self, user: str) -> str:
        return login_link(self.platform.tokens, self.url, user)


@pytest.fixture
def model() -> Iterator[Model]:
    m = Model()
    yield m
    m.open()


@pytest.fixture
def console(tmp_path: Path, model: Model) -> Iterator[Console]:
    home = tmp_path / "home"
    platform = EmbeddedPlatform.open(home, model_factory=model.factory,
                                     capabilities=embedded_capabilities(home),
                                     allow_loopback_discovery=True)
    app = build_app(platform.admin, platform.sessions, platform.tokens)
    server = ApiServer(app, platform.sessions, logins=ConsoleLogins(platform.tokens)).start()
    space = platform.admin.create_space(ALICE, "Team")
    platform.admin.set_member(ALICE, space.space_id, "bob", "member")
    platform.admin.set_member(ALICE, space.space_id, "carol", "admin")
    agent, _ = platform.admin.create_agent(ALICE, space.space_id, "Helper", AGENT_CONFIG)
    platform.admin.publish(ALICE, space.space_id, agent.agent_id)
    tokens = {user: platform.tokens.issue(user)[1] for user in ("alice", "bob", "carol")}
    try:
        made = Console(platform, server, model, space.space_id, agent.agent_id, tokens)
        yield made
    finally:
        model.open()
        for client in made.clients:
            client.close()
        server.close()
        platform.close()


@pytest.fixture
def browser() -> Iterator[Any]:
    # One Playwright per test, stopped at its end: the sync API runs its event loop in
    # this thread while it lives, and an xdist worker runs asyncio tests after this one
    # (a session-wide Playwright broke them: "another loop is running").
    with playwright_sync.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).exists()
                                     else shutil.which("chromium"), args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(15_000)
    made = context.new_page()
    errors: list[str] = []
    made.on("pageerror", lambda err: errors.append(str(err)))
    made.console_errors = errors
    yield made
    context.close()
    assert not errors, f"the page threw: {errors}"


def signed_in(page: Any, console: Console, user: str = "alice") -> Any:
    """``page`` signed in as ``user`` through a one-time login link, on the spaces page."""
    page.goto(console.login_link(user))
    playwright_sync.expect(page.get_by_text(f"Signed in as {user}")).to_be_visible()
    return page


# What every page must hold to (run on each page a test photographs): each form control
# has a label, each button and link a name; status never a colour alone is the badges'
# own (a word beside the symbol); ids are unique (labels point at one control).
ACCESSIBILITY = """() => {
  const problems = [];
  const named = (el) => (el.getAttribute('aria-label') || el.textContent || el.title || '').trim();
  for (const el of document.querySelectorAll('input, select, textarea')) {
    if (el.type === 'hidden') continue;
    if (!(el.labels && el.labels.length) && !el.getAttribute('aria-label')
        && !el.getAttribute('aria-labelledby'))
      problems.push('unlabelled ' + el.outerHTML.slice(0, 80));
  }
  for (const el of document.querySelectorAll('button, a[href]')) {
    if (!named(el) && !el.querySelector('img[alt]:not([alt=""])'))
      problems.push('unnamed ' + el.outerHTML.slice(0, 80));
  }
  const ids = [...document.querySelectorAll('[id]')].map((el) => el.id);
  for (const id of new Set(ids.filter((id, i) => ids.indexOf(id) !== i)))
    problems.push('duplicate id ' + id);
  for (const el of document.querySelectorAll('.badge')) {
    if (!el.textContent.replace(/[^A-Za-z0-9]/g, '')) problems.push('a badge without a word');
  }
  if (document.querySelectorAll('h1').length !== 1) problems.push('not one h1');
  return problems;
}"""


def check_accessible(page: Any) -> None:
    problems = page.evaluate(ACCESSIBILITY)
    assert not problems, f"accessibility problems on {page.url}: {problems}"


def shot(page: Any, name: str) -> Path:
    """Checks the page's accessibility basics, then saves a full-page screenshot."""
    check_accessible(page)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
