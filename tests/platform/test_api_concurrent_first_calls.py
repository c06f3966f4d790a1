"""Concurrent first requests to a route of a new server: Powertools builds a route's
middleware stack on its first call, unguarded (Lambda serves one request at a time);
``serve`` answers on many threads, so the resolver lets one first call of a route build
it while the others wait (``ApiResolver``). Every request gets its route's answer.

The build is slowed here so that the first calls overlap whatever the machine's timing
(a fault injection on Powertools' own builder: if it is renamed, ``monkeypatch`` fails
the test rather than letting it pass untested)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest
from aws_lambda_powertools.event_handler.api_gateway import Route

from agentloom.api.app import build_app
from agentloom.local.embedded import EmbeddedPlatform
from agentloom.platform.identity import Principal

from .conftest import AGENT_CONFIG, ALICE

CALLERS = 12


class TogetherGate:
    """The platform's authenticator, then every caller waits for the others: they leave
    the gate together and reach the route's first call at once."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.together = threading.Barrier(CALLERS)

    def authenticate(self, headers: Mapping[str, str], context: Mapping[str, Any]) -> Principal:
        principal: Principal = self.real.authenticate(headers, context)
        self.together.wait()
        return principal


def agents_event(space_id: str, token: str) -> dict[str, Any]:
    path = f"/api/v1/spaces/{space_id}/agents"
    return {"version": "2.0", "rawPath": path, "routeKey": "$default", "rawQueryString": "",
            "headers": {"authorization": f"Bearer {token}"}, "isBase64Encoded": False,
            "requestContext": {"http": {"method": "GET", "path": path, "protocol": "HTTP/1.1",
                                        "sourceIp": "127.0.0.1"}, "stage": "$default"}}


def test_concurrent_first_calls_of_a_route_all_get_its_answer(
        platform: EmbeddedPlatform, monkeypatch: pytest.MonkeyPatch) -> None:
    build = Route._build_middleware_stack

    def slow_build(self: Route, *args: Any, **kwargs: Any) -> None:
        time.sleep(0.02)
        build(self, *args, **kwargs)

    monkeypatch.setattr(Route, "_build_middleware_stack", slow_build)
    space = platform.admin.create_space(ALICE, "Team")
    platform.admin.create_agent(ALICE, space.space_id, "Helper", AGENT_CONFIG)
    event = agents_event(space.space_id, platform.tokens.issue("alice")[1])
    for attempt in range(3):  # a new resolver each time: its routes unbuilt
        app = build_app(platform.admin, platform.sessions, TogetherGate(platform.tokens))
        answers: list[int] = []
        threads = [threading.Thread(target=lambda app=app, answers=answers: answers.append(
            app.resolve(event, None)["statusCode"])) for _ in range(CALLERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert answers == [200] * CALLERS, (attempt, answers)
