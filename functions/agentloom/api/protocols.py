"""What the protocol facades share (``agui``, ``langgraph``): answering a stopped run's
interrupt with the protocol's payload, and reading a run's event log up to a cursor.

An interrupt's answer (AG-UI ``resume[].payload``, LangGraph ``command.resume``) is one
of ``{"verdict": <a verdict of the unknown operation>, "note": "…"}`` (``resolve``),
``{"resume": true}`` (``resume``) — or a cancel (``cancel``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from agentloom.platform.errors import Invalid, PlatformError, field_errors
from agentloom.platform.identity import Principal
from agentloom.platform.views import EventItem

if TYPE_CHECKING:
    from agentloom.platform.sessions import SessionService

VERDICTS = ("ran", "did_not_run", "run_again", "send_again", "treat_as_failed")


M = TypeVar("M", bound=BaseModel)


def parse_body(model: type[M], body: bytes | str | None) -> M:
    """A request body as ``model`` (400 ``malformed_json``, 422 naming the fields)."""
    try:
        return model.model_validate_json(body or b"{}")
    except ValidationError as err:
        if any(e["type"] in ("json_invalid", "json_type") for e in err.errors()):
            raise Invalid("the request body is not valid JSON", code="malformed_json") \
                from None
        raise field_errors([dict(e) for e in err.errors()]) from None


def answer_interrupt(svc: SessionService, who: Principal, session_id: str, run_id: str,
                     payload: Any, *, cancelled: bool = False,
                     field: str = "resume[0].payload") -> None:
    """Move a stopped run on as the protocol's answer says (PlatformError if it cannot:
    404 not this thread's run, 409 not stopped that way, 422 a verdict that does not
    apply)."""
    if cancelled:
        svc.cancel(who, session_id, run_id, "cancelled from a protocol client")
        return
    answer = payload if isinstance(payload, dict) else {}
    if answer.get("resume") is True:
        svc.resume(who, session_id, run_id)
        return
    verdict, note = answer.get("verdict"), answer.get("note", "")
    if verdict not in VERDICTS or not isinstance(note, str):
        raise Invalid(f"{field}: {{\"verdict\": one of the interrupt's verdicts, \"note\": "
                      "text}} or {\"resume\": true}", code="invalid_field",
                      details={"fields": [{"field": field, "message": "a verdict or resume"}]})
    svc.resolve(who, session_id, run_id, verdict, note=note[:2000])


def guarded(chunks: Iterator[bytes], error: Callable[[PlatformError], bytes]) -> Iterator[bytes]:
    """A streamed answer that ends with the protocol's error frame if the platform refuses
    mid-stream (e.g. the session deleted meanwhile) — its status line is long gone."""
    try:
        yield from chunks
    except PlatformError as err:
        yield error(err)


def events_until(svc: SessionService, who: Principal, session_id: str, run_id: str,
                 last: int) -> Iterator[EventItem]:
    """The run's events up to seq ``last``."""
    after = 0
    while after < last:
        page = svc.events(who, session_id, run_id, after=after)
        items = [i for i in page.items if i.seq <= last]
        if not items:
            return
        yield from items
        after = items[-1].seq


def last_seq(svc: SessionService, who: Principal, session_id: str, run_id: str) -> int:
    """The seq of the run's newest event (0: none yet)."""
    after = 0
    while True:
        page = svc.events(who, session_id, run_id, after=after)
        if not page.items:
            return after
        after = page.items[-1].seq
