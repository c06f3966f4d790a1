"""A small typed client of the HTTP API (over httpx), for scripts, tests and the CLI.

    client = Client("http://127.0.0.1:8765", token)
    space = client.create_space("Team")
    agent = client.create_agent(space.space_id, "Helper", {"model": {"model": "gpt-4o-mini"}})
    client.publish(space.space_id, agent.agent_id)
    session = client.create_session(space.space_id, agent.agent_id)
    run = client.ask(session.session_id, "What changed?", idempotency_key="q-1")
    for event in client.follow(session.session_id, run.run_id):   # long-polls
        print(event.type, event.data)
    print(client.run(session.session_id, run.run_id).answer)

Every error response raises ``ApiError`` with the status, the stable ``code`` and the
message. The client sends no cookies, follows no redirects and ignores proxy settings
from the environment (``trust_env=False``); pass ``transport`` to test it with
``httpx.MockTransport``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from agentloom.api.models import (
    AgentOut,
    AskOut,
    DiscoverOut,
    InputOut,
    ModelConnectionOut,
    PublishOut,
    SessionOut,
    SpaceOut,
)
from agentloom.platform.domain import (
    AgentVersion,
    Draft,
    Member,
    Role,
    Run,
    RunIndex,
    Session,
    Space,
)
from agentloom.platform.views import EventItem, EventPage, MessagePage, RunView
from agentloom_runtime.errors import AgentLoomError

M = TypeVar("M", bound=BaseModel)
PREFIX = "/api/v1"


class ApiError(AgentLoomError):
    """An error response, as the server sent it: the HTTP ``status``, the stable
    ``code``, the ``message`` and ``details`` (``agentloom.platform.errors`` draws the
    tree it sits in)."""

    code = "api_error"

    def __init__(self, status: int, code: str, message: str,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)
        self.status, self.code = status, code

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


class Client:
    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/") + PREFIX, headers=headers,
                                  timeout=timeout, follow_redirects=False, trust_env=False,
                                  transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ------------------------------------------------------------------------

    def request(self, method: str, path: str, *, json: Any = None,
                params: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                timeout: float | None = None) -> httpx.Response:
        response = self._http.request(method, path, json=json, params=params, headers=headers,
                                      timeout=timeout if timeout is not None
                                      else httpx.USE_CLIENT_DEFAULT)
        if response.status_code >= 400:
            try:
                error = response.json()["error"]
                raise ApiError(response.status_code, str(error["code"]),
                               str(error["message"]), error.get("details"))
            except (ValueError, KeyError, TypeError):
                raise ApiError(response.status_code, "http_error",
                               response.text[:200]) from None
        return response

    def _get(self, model: type[M], path: str, **params: Any) -> M:
        clean = {k: v for k, v in params.items() if v is not None}
        return model.model_validate(self.request("GET", path, params=clean or None).json())

    def _send(self, model: type[M], method: str, path: str, body: Any = None, *,
              headers: dict[str, str] | None = None) -> M:
        response = self.request(method, path, json=body if body is not None else {},
                                headers=headers)
        return model.model_validate(response.json())

    def _items(self, model: type[M], path: str, **params: Any) -> list[M]:
        clean = {k: v for k, v in params.items() if v is not None}
        data = self.request("GET", path, params=clean or None).json()
        return [model.model_validate(item) for item in data["items"]]

    # -- spaces and members --------------------------------------------------------------

    def create_space(self, name: str) -> Space:
        return self._send(SpaceOut, "POST", "/spaces", {"name": name}).space

    def spaces(self) -> list[SpaceOut]:
        return self._items(SpaceOut, "/spaces")

    def space(self, space_id: str) -> SpaceOut:
        return self._get(SpaceOut, f"/spaces/{space_id}")

    def members(self, space_id: str) -> list[Member]:
        return self._items(Member, f"/spaces/{space_id}/members")

    def set_member(self, space_id: str, user_id: str, role: Role) -> Member:
        return self._send(Member, "PUT", f"/spaces/{space_id}/members/{user_id}",
                          {"role": role})

    def remove_member(self, space_id: str, user_id: str) -> None:
        self.request("DELETE", f"/spaces/{space_id}/members/{user_id}")

    # -- agents --------------------------------------------------------------------------

    def create_agent(self, space_id: str, name: str, config: dict[str, Any]) -> AgentOut:
        return self._send(AgentOut, "POST", f"/spaces/{space_id}/agents",
                          {"name": name, "config": config})

    def draft(self, space_id: str, agent_id: str) -> Draft:
        return self._get(Draft, f"/spaces/{space_id}/agents/{agent_id}/draft")

    def save_draft(self, space_id: str, agent_id: str, config: dict[str, Any],
                   revision: int | None = None) -> Draft:
        return self._send(Draft, "PUT", f"/spaces/{space_id}/agents/{agent_id}/draft",
                          {"config": config, "revision": revision})

    def publish(self, space_id: str, agent_id: str,
                revision: int | None = None) -> PublishOut:
        return self._send(PublishOut, "POST", f"/spaces/{space_id}/agents/{agent_id}/publish",
                          {"revision": revision})

    def versions(self, space_id: str, agent_id: str) -> list[AgentVersion]:
        return self._items(AgentVersion, f"/spaces/{space_id}/agents/{agent_id}/versions")

    # -- model connections (admins; the key is sent, never returned) -----------------------

    def create_model_connection(self, space_id: str, name: str, spec: dict[str, Any],
                                api_key: str | None = None) -> ModelConnectionOut:
        return _connection(self.request("POST", f"/spaces/{space_id}/models/connections",
                                        json={"name": name, "spec": spec,
                                              "api_key": api_key}))

    def model_connections(self, space_id: str) -> list[ModelConnectionOut]:
        data = self.request("GET", f"/spaces/{space_id}/models/connections").json()
        return [ModelConnectionOut.model_validate(item, context=STORED)
                for item in data["items"]]

    def model_connection(self, space_id: str, connection_id: str) -> ModelConnectionOut:
        return _connection(self.request(
            "GET", f"/spaces/{space_id}/models/connections/{connection_id}"))

    def update_model_connection(self, space_id: str, connection_id: str,
                                spec: dict[str, Any], *, name: str | None = None,
                                api_key: str | None = None,
                                revision: int | None = None) -> ModelConnectionOut:
        """``api_key`` None or empty keeps the stored key (same provider and base URL)."""
        return _connection(self.request(
            "PUT", f"/spaces/{space_id}/models/connections/{connection_id}",
            json={"spec": spec, "name": name, "api_key": api_key, "revision": revision}))

    def discover_models(self, space_id: str, provider: str, base_url: str, *,
                        api_key: str | None = None,
                        resource_id: str | None = None) -> DiscoverOut:
        return self._send(DiscoverOut, "POST", f"/spaces/{space_id}/models/discover",
                          {"provider": provider, "base_url": base_url, "api_key": api_key,
                           "resource_id": resource_id})

    # -- sessions and runs ---------------------------------------------------------------

    def create_session(self, space_id: str, agent_id: str, version: int | None = None,
                       title: str = "") -> Session:
        return self._send(Session, "POST", f"/spaces/{space_id}/sessions",
                          {"agent_id": agent_id, "version": version, "title": title})

    def sessions(self, space_id: str) -> list[SessionOut]:
        """Your sessions in the space (session content is its creator's only)."""
        return self._items(SessionOut, f"/spaces/{space_id}/sessions")

    def session(self, session_id: str) -> SessionOut:
        return self._get(SessionOut, f"/sessions/{session_id}")

    def delete_session(self, session_id: str) -> None:
        """Delete the session, its runs and its sandbox resources (409 run_active while a
        run holds it); a retry finishes an interrupted delete."""
        self.request("DELETE", f"/sessions/{session_id}")

    def ask(self, session_id: str, question: str, *,
            idempotency_key: str | None = None) -> Run:
        return self.ask_full(session_id, question, idempotency_key=idempotency_key).run

    def ask_full(self, session_id: str, question: str, *,
                 idempotency_key: str | None = None) -> AskOut:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._send(AskOut, "POST", f"/sessions/{session_id}/runs",
                          {"question": question}, headers=headers)

    def runs(self, session_id: str) -> list[Run]:
        return self._items(Run, f"/sessions/{session_id}/runs")

    def run(self, session_id: str, run_id: str) -> RunView:
        return self._get(RunView, f"/sessions/{session_id}/runs/{run_id}")

    def resume(self, session_id: str, run_id: str, *, retry_unknown_models: bool = False,
               confirm_hooks: bool = False, raise_tokens: int | None = None,
               raise_cost: float | None = None, note: str = "") -> RunView:
        """``raise_tokens`` / ``raise_cost``: the run's new max_tokens / max_cost (space
        admins and owners only)."""
        body: dict[str, Any] = {"retry_unknown_models": retry_unknown_models,
                                "confirm_hooks": confirm_hooks}
        raised = _raise(raise_tokens, raise_cost, note)
        if raised:
            body["raise_budget"] = raised
        return self._send(RunView, "POST", f"/sessions/{session_id}/runs/{run_id}/resume",
                          body)

    def resolve(self, session_id: str, run_id: str, verdict: str, *, note: str = "",
                output: str | None = None, exit_code: int | None = None,
                drive_on: bool = True) -> RunView:
        return self._send(RunView, "POST", f"/sessions/{session_id}/runs/{run_id}/resolve",
                          {"verdict": verdict, "note": note, "output": output,
                           "exit_code": exit_code, "drive_on": drive_on})

    def supplement(self, session_id: str, run_id: str, text: str) -> int:
        return self._send(InputOut, "POST", f"/sessions/{session_id}/runs/{run_id}/inputs",
                          {"text": text}).queued

    def cancel(self, session_id: str, run_id: str, reason: str = "") -> RunView:
        return self._send(RunView, "POST", f"/sessions/{session_id}/runs/{run_id}/cancel",
                          {"reason": reason})

    def replay(self, session_id: str, run_id: str, *, version: int | None = None,
               draft: bool = False) -> dict[str, Any]:
        """Replay a stopped run from its recording (``version``/``draft``: evaluate that
        configuration against it); the API's report (docs/api.md#replay-a-run)."""
        body: dict[str, Any] = {"version": version} if version is not None else {}
        if draft:
            body["draft"] = True
        report: dict[str, Any] = self.request(
            "POST", f"/sessions/{session_id}/runs/{run_id}/replay", json=body).json()
        return report

    def messages(self, session_id: str, *, after: int = 0, limit: int = 100,
                 instance: str | None = None) -> MessagePage:
        return self._get(MessagePage, f"/sessions/{session_id}/messages", after=after,
                         limit=limit, instance=instance)

    def events(self, session_id: str, run_id: str, *, after: int = 0,
               wait: float = 0) -> EventPage:
        response = self.request("GET", f"/sessions/{session_id}/runs/{run_id}/events",
                                params={"after": after, "wait": wait}, timeout=wait + 30)
        return EventPage.model_validate(response.json())

    def follow(self, session_id: str, run_id: str, *, after: int = 0,
               wait: float = 20) -> Iterator[EventItem]:
        """Every event of the run from ``after`` on, long-polling until it stopped."""
        while True:
            page = self.events(session_id, run_id, after=after, wait=wait)
            yield from page.items
            after = page.next_after
            if page.done:
                return

    # -- operators -----------------------------------------------------------------------

    def space_runs(self, space_id: str, status: str | None = None) -> list[RunIndex]:
        return self._items(RunIndex, f"/spaces/{space_id}/runs", status=status)

    def operator_cancel(self, space_id: str, run_id: str, reason: str = "") -> RunView:
        return self._send(RunView, "POST", f"/spaces/{space_id}/runs/{run_id}/cancel",
                          {"reason": reason})

    def operator_resume(self, space_id: str, run_id: str, *, raise_tokens: int | None = None,
                        raise_cost: float | None = None, note: str = "") -> RunView:
        raised = _raise(raise_tokens, raise_cost, note)
        return self._send(RunView, "POST", f"/spaces/{space_id}/runs/{run_id}/resume",
                          {"raise_budget": raised} if raised else {})


STORED = {"stored": True}  # a connection as saved: no re-check against today's catalogue


def _connection(response: httpx.Response) -> ModelConnectionOut:
    return ModelConnectionOut.model_validate(response.json(), context=STORED)


def _raise(tokens: int | None, cost: float | None, note: str) -> dict[str, Any] | None:
    if tokens is None and cost is None:
        return None
    return {"max_tokens": tokens, "max_cost": cost, "note": note}
