"""In-process event bus: request/response with one executor per topic, plus read-only
observation (docs/contract.md#bus).

- ``request(topic, payload)`` runs the topic's single handler on its **own task**, so a
  handler may await further requests (a delegation handler waiting for a child's tool
  calls) without blocking a shared worker. Cancelling the caller, a timeout or
  ``aclose()`` cancels the handler task and waits for its cleanup before returning.
- ``subscribe`` / ``publish`` are for observers only: payloads are deep-frozen JSON copies,
  an observer's exception is logged and never reaches the publisher, and observers never
  see request payloads, results or contexts.
- Every request emits ``request.started`` and exactly one terminal notification
  (``request.completed / failed / cancelled / timed_out``) carrying the topic, the
  correlation id and the scalar metadata the caller passed — nothing else.

The bus does not persist, retry or route across processes; a request's ``context`` may be
a trusted in-process object (a ``ToolContext``) and is never serialized.
"""

from __future__ import annotations

import asyncio
import fnmatch
import inspect
import logging
import math
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .errors import ConfigError, RunCancelled, RunError

logger = logging.getLogger(__name__)

Scalar = str | int | float | bool | None
RequestHandler = Callable[["Event"], Awaitable[Any]]
Observer = Callable[["Event"], Awaitable[None] | None]

STARTED, COMPLETED, FAILED = "request.started", "request.completed", "request.failed"
CANCELLED, TIMED_OUT = "request.cancelled", "request.timed_out"
NOTIFICATIONS = (STARTED, COMPLETED, FAILED, CANCELLED, TIMED_OUT)

_MAX_DEPTH = 64
_SCALAR_TYPES = (str, int, float, bool, type(None))


class BusTimeout(RunError):
    code = "bus_timeout"


class BusClosed(ConfigError):
    """A request or publication on a closed bus (or a topic being closed)."""

    code = "bus_closed"


@dataclass(frozen=True)
class Event:
    topic: str
    correlation_id: str
    payload: Any
    context: Any = None


def freeze_json(value: Any, path: str = "$", depth: int = 0) -> Any:
    """A deep, read-only copy of JSON data (dicts → MappingProxyType, lists → tuples);
    anything that is not JSON raises ``ConfigError``."""
    if depth > _MAX_DEPTH:
        raise ConfigError(f"{path}: nested deeper than {_MAX_DEPTH} levels")
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise ConfigError(f"{path}: {value} is not a JSON number")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigError(f"{path}: JSON object keys must be strings, got {key!r}")
            out[key] = freeze_json(item, f"{path}.{key}", depth + 1)
        return MappingProxyType(out)
    if isinstance(value, list | tuple):
        return tuple(freeze_json(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value))
    raise ConfigError(f"{path}: {type(value).__name__} is not JSON data")


def _scalars(metadata: Mapping[str, Any] | None) -> dict[str, Scalar]:
    out: dict[str, Scalar] = {}
    for key, value in (metadata or {}).items():
        finite = not isinstance(value, float) or math.isfinite(value)
        if not isinstance(key, str) or not isinstance(value, _SCALAR_TYPES) or not finite:
            raise ConfigError(f"request metadata must map strings to scalars; {key!r} does not")
        out[key] = value
    return out


async def _cancel_and_wait(tasks: Collection[asyncio.Future[Any]]) -> bool:
    """Cancel ``tasks`` and wait until all have finished their cleanup, even if our own
    task is cancelled meanwhile. Returns True when it was (the caller must re-raise)."""
    for task in tasks:
        task.cancel()
    pending = {t for t in tasks if not t.done()}
    interrupted = False
    while pending:
        try:
            _, pending = await asyncio.wait(pending)
        except asyncio.CancelledError:
            interrupted = True
            for task in pending:
                task.cancel()
    return interrupted


async def _call(handler: RequestHandler, event: Event) -> Any:
    return await handler(event)


@dataclass
class _Flight:
    topic: str
    correlation_id: str
    metadata: dict[str, Scalar]
    stop: str | None = None  # set by the caller before it cancels: CANCELLED / TIMED_OUT


class Registration:
    """The handle returned by ``EventBus.register``: the only way to remove a handler."""

    def __init__(self, bus: EventBus, topic: str, handler: RequestHandler) -> None:
        self._bus = bus
        self.topic = topic
        self.handler = handler
        self.tasks: set[asyncio.Task[Any]] = set()
        self.closing = False
        self.active = True

    @property
    def in_flight(self) -> int:
        return len(self.tasks)

    def release(self) -> None:
        """Remove the handler. Refused while requests are in flight; idempotent."""
        if not self.active:
            return
        if self.tasks:
            raise ConfigError(f"topic {self.topic!r} has {len(self.tasks)} request(s) in "
                              "flight; await Registration.aclose() to cancel them")
        self.active = False
        self._bus._unregister(self)

    async def aclose(self) -> None:
        """Refuse new requests for this topic, cancel those in flight, wait, release."""
        self.closing = True
        while self.tasks:
            if await _cancel_and_wait(set(self.tasks)):
                raise asyncio.CancelledError
        self.release()


class Subscription:
    def __init__(self, bus: EventBus, pattern: str, observer: Observer) -> None:
        self._bus = bus
        self.pattern = pattern
        self.observer = observer

    def unsubscribe(self) -> None:
        self._bus._subscriptions.pop(self, None)


class EventBus:
    def __init__(self) -> None:
        self._handlers: dict[str, Registration] = {}
        self._subscriptions: dict[Subscription, None] = {}  # an ordered set
        self._observer_tasks: set[asyncio.Future[Any]] = set()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    # -- request / response ------------------------------------------------------------

    def register(self, topic: str, handler: RequestHandler) -> Registration:
        if self._closed:
            raise BusClosed("the bus is closed")
        if not topic or topic in NOTIFICATIONS:
            raise ConfigError(f"cannot register a handler for topic {topic!r}")
        if topic in self._handlers:
            raise ConfigError(f"topic {topic!r} already has a handler; release it first")
        registration = Registration(self, topic, handler)
        self._handlers[topic] = registration
        return registration

    def _unregister(self, registration: Registration) -> None:
        if self._handlers.get(registration.topic) is registration:
            del self._handlers[registration.topic]

    # A timeout parameter rather than the caller's asyncio.timeout: the bus must tell a
    # timeout (BusTimeout, request.timed_out) from a cancellation of the caller.
    async def request(self, topic: str, payload: Any, *, context: Any = None,
                      timeout: float | None = None,  # noqa: ASYNC109
                      metadata: Mapping[str, Any] | None = None,
                      correlation_id: str | None = None) -> Any:
        """Run the topic's handler on its own task and return its result.

        The handler's exception propagates unchanged. ``BusTimeout`` after ``timeout``
        seconds, ``RunCancelled`` when the bus or the topic was closed under the request;
        in both cases, and when the caller is cancelled, the handler task is cancelled
        and its cleanup awaited first. ``metadata`` (scalars only) goes into the
        notifications; payload, result and context never do.
        """
        registration = self._handlers.get(topic)
        if self._closed or (registration is not None and registration.closing):
            raise BusClosed(f"cannot request {topic!r}: the bus or topic is closed")
        if registration is None:
            raise ConfigError(f"no handler registered for topic {topic!r}")
        if timeout is not None and not timeout > 0:
            raise ConfigError(f"timeout must be positive, got {timeout!r}")
        flight = _Flight(topic, correlation_id or uuid.uuid4().hex, _scalars(metadata))
        event = Event(topic, flight.correlation_id, payload, context)
        self._notify(STARTED, flight)
        task = asyncio.create_task(_call(registration.handler, event),
                                   name=f"bus:{topic}:{flight.correlation_id}")
        registration.tasks.add(task)
        # Registered before any waiter's callback: the terminal notification is out
        # before the caller (or aclose) resumes.
        task.add_done_callback(lambda t: self._finished(registration, flight, t))
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout)
        except asyncio.CancelledError:
            flight.stop = CANCELLED
            await _cancel_and_wait({task})
            raise
        if not done:
            flight.stop = TIMED_OUT
            if await _cancel_and_wait({task}):
                raise asyncio.CancelledError
            raise BusTimeout(f"request {topic!r} timed out after {timeout:g}s",
                             details={"topic": topic, "timeout": timeout})
        if task.cancelled():
            raise RunCancelled(f"request {topic!r} was cancelled", details={"topic": topic})
        return task.result()

    def _finished(self, registration: Registration, flight: _Flight,
                  task: asyncio.Task[Any]) -> None:
        registration.tasks.discard(task)
        # exception() also marks it retrieved: after a timeout nobody else reads it.
        failed = not task.cancelled() and task.exception() is not None
        if flight.stop is not None:
            kind = flight.stop
        else:
            kind = CANCELLED if task.cancelled() else FAILED if failed else COMPLETED
        self._notify(kind, flight)

    # -- observation -------------------------------------------------------------------

    def subscribe(self, topic_or_pattern: str, observer: Observer) -> Subscription:
        """Observe published events whose topic matches (``fnmatch``: ``request.*``, ``*``).
        A sync observer runs inline; an async one on its own task. Exceptions are logged."""
        if self._closed:
            raise BusClosed("the bus is closed")
        subscription = Subscription(self, topic_or_pattern, observer)
        self._subscriptions[subscription] = None
        return subscription

    def publish(self, topic: str, payload: Any = None, *,
                correlation_id: str | None = None) -> None:
        if self._closed:
            raise BusClosed("the bus is closed")
        if topic in NOTIFICATIONS:
            raise ConfigError(f"{topic!r} is reserved for the bus's own notifications")
        frozen = freeze_json(payload)
        self._deliver(Event(topic, correlation_id or uuid.uuid4().hex, frozen))

    def _notify(self, kind: str, flight: _Flight) -> None:
        payload = freeze_json({"topic": flight.topic, "correlation_id": flight.correlation_id,
                               "metadata": flight.metadata})
        self._deliver(Event(kind, flight.correlation_id, payload))

    def _deliver(self, event: Event) -> None:
        for subscription in list(self._subscriptions):
            if not fnmatch.fnmatchcase(event.topic, subscription.pattern):
                continue
            try:
                result = subscription.observer(event)
            except Exception:
                logger.exception("observer of %r failed", event.topic)
                continue
            if inspect.isawaitable(result):
                self._schedule_observer(result, event.topic)

    def _schedule_observer(self, awaitable: Awaitable[None], topic: str) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # published from sync code outside a loop
            logger.error("async observer of %r skipped: no running event loop", topic)
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            return
        task = asyncio.ensure_future(awaitable, loop=loop)
        self._observer_tasks.add(task)
        task.add_done_callback(self._observer_done)

    def _observer_done(self, task: asyncio.Future[Any]) -> None:
        self._observer_tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            logger.error("async observer failed", exc_info=exc)

    # -- lifecycle ---------------------------------------------------------------------

    async def aclose(self) -> None:
        """Refuse new work, cancel in-flight requests and wait for their cleanup (and
        terminal notifications), then cancel pending async observers. Idempotent."""
        current = asyncio.current_task()
        if any(current in r.tasks for r in self._handlers.values()):
            # A handler waiting for its callers to finish would wait for itself.
            raise ConfigError("EventBus.aclose() cannot be awaited from inside a handler")
        self._closed = True
        interrupted = False
        while True:
            tasks = {t for r in self._handlers.values() for t in r.tasks}
            if not tasks:
                break
            interrupted |= await _cancel_and_wait(tasks)
        interrupted |= await _cancel_and_wait(set(self._observer_tasks))
        for registration in list(self._handlers.values()):
            if not registration.tasks:
                registration.release()
        self._subscriptions.clear()
        if interrupted:
            raise asyncio.CancelledError
