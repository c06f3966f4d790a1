"""EventBus: one executor per topic, reentrant requests, cancellation that waits for
cleanup, timeouts, and observers that can watch but never interfere."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from agentloom_runtime.bus import BusClosed, BusTimeout, Event, EventBus, freeze_json
from agentloom_runtime.errors import ConfigError, RunCancelled


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def kinds(self, correlation_id: str | None = None) -> list[str]:
        return [e.topic for e in self.events
                if correlation_id is None or e.correlation_id == correlation_id]


async def echo(event: Event) -> Any:
    return {"echo": event.payload, "context": event.context}


async def test_request_returns_the_handler_result_and_passes_context() -> None:
    bus = EventBus()
    bus.register("echo", echo)
    ctx = object()  # any trusted in-process object
    result = await bus.request("echo", {"a": 1}, context=ctx)
    assert result == {"echo": {"a": 1}, "context": ctx}
    await bus.aclose()


async def test_one_handler_per_topic_and_release() -> None:
    bus = EventBus()
    registration = bus.register("echo", echo)
    with pytest.raises(ConfigError, match="already has a handler"):
        bus.register("echo", echo)
    registration.release()
    registration.release()  # idempotent
    with pytest.raises(ConfigError, match="no handler"):
        await bus.request("echo", None)
    bus.register("echo", echo)  # free again
    assert await bus.request("echo", 1) == {"echo": 1, "context": None}
    with pytest.raises(ConfigError):
        bus.register("request.started", echo)
    await bus.aclose()


async def test_reentrant_handler_awaits_another_request() -> None:
    bus = EventBus()

    async def child(event: Event) -> int:
        await asyncio.sleep(0)
        return int(event.payload) * 2

    async def delegate(event: Event) -> list[int]:
        # A delegation handler waiting for its child's tool calls over the same bus.
        return [await bus.request("tool", n) for n in event.payload]

    bus.register("tool", child)
    bus.register("delegate", delegate)
    assert await bus.request("delegate", [1, 2, 3]) == [2, 4, 6]
    # A handler may even request its own topic again (one task per request).

    async def countdown(event: Event) -> int:
        n = int(event.payload)
        return 0 if n == 0 else 1 + int(await bus.request("countdown", n - 1))

    bus.register("countdown", countdown)
    assert await bus.request("countdown", 5) == 5
    await bus.aclose()


async def test_cancelling_the_caller_cancels_the_handler_and_waits_for_cleanup() -> None:
    bus = EventBus()
    observed = Recorder()
    bus.subscribe("request.*", observed)
    started = asyncio.Event()
    cleaned: list[str] = []

    async def slow(event: Event) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.01)  # cooperative cleanup that itself awaits
            cleaned.append("done")

    registration = bus.register("slow", slow)
    caller = asyncio.create_task(bus.request("slow", None, correlation_id="c-1"))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert cleaned == ["done"]  # cleanup finished before the caller saw CancelledError
    assert observed.kinds("c-1") == ["request.started", "request.cancelled"]
    assert registration.in_flight == 0
    await bus.aclose()


async def test_timeout_cancels_waits_and_raises() -> None:
    bus = EventBus()
    observed = Recorder()
    bus.subscribe("*", observed)
    cleaned: list[bool] = []

    async def stuck(event: Event) -> None:
        try:
            await asyncio.sleep(60)
        finally:
            cleaned.append(True)

    bus.register("stuck", stuck)
    with pytest.raises(BusTimeout) as info:
        await bus.request("stuck", None, timeout=0.02, correlation_id="t-1")
    assert info.value.code == "bus_timeout"
    assert cleaned == [True]
    assert observed.kinds("t-1") == ["request.started", "request.timed_out"]
    with pytest.raises(ConfigError, match="positive"):
        await bus.request("stuck", None, timeout=0)
    await bus.aclose()


async def test_handler_exception_propagates_and_is_notified_as_failed() -> None:
    bus = EventBus()
    observed = Recorder()
    bus.subscribe("request.*", observed)

    async def broken(event: Event) -> None:
        raise ValueError("boom")

    bus.register("broken", broken)
    with pytest.raises(ValueError, match="boom"):
        await bus.request("broken", None, correlation_id="f-1")
    assert observed.kinds("f-1") == ["request.started", "request.failed"]
    await bus.aclose()


async def test_notifications_carry_only_topic_id_and_scalar_metadata() -> None:
    bus = EventBus()
    observed = Recorder()
    bus.subscribe("request.*", observed)
    bus.register("echo", echo)
    secret_context = {"key": "sk-secret"}
    await bus.request("echo", {"path": "secret.txt"}, context=secret_context,
                      metadata={"tool": "workspace_read", "attempt": 1, "dry": False,
                                "ratio": 0.5, "note": None}, correlation_id="n-1")
    assert [e.topic for e in observed.events] == ["request.started", "request.completed"]
    for event in observed.events:
        assert event.context is None
        assert dict(event.payload) == {
            "topic": "echo", "correlation_id": "n-1",
            "metadata": {"tool": "workspace_read", "attempt": 1, "dry": False,
                         "ratio": 0.5, "note": None}}
        assert "secret" not in repr(event)
    for bad in ({"args": ["x"]}, {"obj": {"a": 1}}, {"nan": float("nan")}, {1: "x"}):
        with pytest.raises(ConfigError, match="scalars"):
            await bus.request("echo", None, metadata=bad)  # type: ignore[arg-type]
    await bus.aclose()


async def test_observers_cannot_break_or_change_requests(
        caplog: pytest.LogCaptureFixture) -> None:
    bus = EventBus()
    seen: list[Event] = []

    def raising(event: Event) -> None:
        raise RuntimeError("observer bug")

    def mutating(event: Event) -> None:
        seen.append(event)
        with pytest.raises(TypeError):
            event.payload["topic"] = "other"  # frozen

    async def async_raising(event: Event) -> None:
        raise RuntimeError("async observer bug")

    bus.subscribe("*", raising)
    bus.subscribe("request.*", mutating)
    bus.subscribe("*", async_raising)
    bus.register("echo", echo)
    with caplog.at_level(logging.ERROR, logger="agentloom_runtime.bus"):
        assert await bus.request("echo", {"x": 1}) == {"echo": {"x": 1}, "context": None}
        await asyncio.sleep(0)  # let async observers run
    assert len(seen) == 2
    assert "observer bug" in caplog.text
    assert "async observer bug" in caplog.text
    await bus.aclose()


async def test_publish_delivers_a_frozen_copy_of_json_payloads() -> None:
    bus = EventBus()
    matched, unmatched = Recorder(), Recorder()
    bus.subscribe("tool.*", matched)
    bus.subscribe("model.*", unmatched)
    payload: dict[str, Any] = {"name": "t", "items": [1, {"k": "v"}]}
    bus.publish("tool.completed", payload, correlation_id="p-1")
    payload["items"].append("later")  # the observer got a copy
    [event] = matched.events
    assert event.correlation_id == "p-1"
    assert event.payload["items"] == (1, {"k": "v"})
    with pytest.raises(TypeError):
        event.payload["items"][1]["k"] = "changed"
    assert unmatched.events == []
    for bad in ({"x": object()}, {"x": {1, 2}}, {"x": float("inf")}, b"bytes"):
        with pytest.raises(ConfigError):
            bus.publish("tool.completed", bad)
    with pytest.raises(ConfigError, match="reserved"):
        bus.publish("request.completed", {})
    await bus.aclose()


async def test_unsubscribe_stops_delivery() -> None:
    bus = EventBus()
    observed = Recorder()
    subscription = bus.subscribe("x", observed)
    bus.publish("x", 1)
    subscription.unsubscribe()
    bus.publish("x", 2)
    assert [e.payload for e in observed.events] == [1]
    await bus.aclose()


async def test_release_refused_while_in_flight_and_registration_aclose() -> None:
    bus = EventBus()
    bus.register("echo", echo)
    started = asyncio.Event()

    async def slow(event: Event) -> None:
        started.set()
        await asyncio.sleep(60)

    registration = bus.register("slow", slow)
    caller = asyncio.create_task(bus.request("slow", None))
    await started.wait()
    assert registration.in_flight == 1
    with pytest.raises(ConfigError, match="in flight"):
        registration.release()
    await registration.aclose()  # cancels only this topic's requests, then releases
    with pytest.raises(RunCancelled):
        await caller
    assert not registration.active
    assert await bus.request("echo", 1) == {"echo": 1, "context": None}  # bus still open
    await bus.aclose()


async def test_aclose_cancels_in_flight_and_refuses_later_requests() -> None:
    bus = EventBus()
    observed = Recorder()
    bus.subscribe("request.*", observed)
    started = asyncio.Event()
    cleaned: list[bool] = []

    async def slow(event: Event) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0)
            cleaned.append(True)

    bus.register("slow", slow)
    caller = asyncio.create_task(bus.request("slow", None, correlation_id="a-1"))
    await started.wait()
    await bus.aclose()
    assert cleaned == [True]
    assert observed.kinds("a-1") == ["request.started", "request.cancelled"]
    with pytest.raises(RunCancelled):
        await caller
    assert bus.closed
    with pytest.raises(BusClosed):
        await bus.request("slow", None)
    with pytest.raises(BusClosed):
        bus.publish("x", 1)
    with pytest.raises(BusClosed):
        bus.register("other", echo)
    await bus.aclose()  # idempotent


def test_freeze_json_copies_deeply() -> None:
    source = {"a": [1, 2.5, True, None, {"b": "c"}]}
    frozen = freeze_json(source)
    source["a"].append(3)
    assert frozen["a"] == (1, 2.5, True, None, {"b": "c"})
    nested: Any = 1
    for _ in range(100):
        nested = [nested]
    with pytest.raises(ConfigError, match="deeper"):
        freeze_json(nested)


async def test_aclose_from_inside_a_handler_is_refused() -> None:
    bus = EventBus()

    async def closer(event: Event) -> None:
        await bus.aclose()

    bus.register("close", closer)
    with pytest.raises(ConfigError, match="inside a handler"):
        await bus.request("close", None)
    assert not bus.closed
    await bus.aclose()


def test_async_observer_without_a_running_loop_is_skipped(
        caplog: pytest.LogCaptureFixture) -> None:
    bus = EventBus()

    async def observer(event: Event) -> None:
        raise AssertionError("never runs")

    bus.subscribe("x", observer)
    with caplog.at_level(logging.ERROR, logger="agentloom_runtime.bus"):
        bus.publish("x", 1)  # must not raise to the publisher
    assert "no running event loop" in caplog.text
