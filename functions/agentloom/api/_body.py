"""What a request body must be before any route sees it (the gate calls ``check_body``
for every request that has one, in Lambda and in ``serve`` alike):

- declared JSON: ``Content-Type: application/json`` (any case, parameters allowed);
  anything else, or none, is 415 ``unsupported_media_type``;
- JSON (no ``NaN`` / ``Infinity``): else 400 ``malformed_json``;
- nested at most ``MAX_DEPTH`` levels: else 400 ``json_too_deep`` (a deeper document
  would exhaust the parser's recursion, and no request of this API needs it);
- numbers a field can hold: an integer of more than ``MAX_INT_DIGITS`` digits or a
  number beyond the float range is 422 naming the field (``body.exit_code``);
- an object at the top (every route's body is one): else 422 naming ``body``.

Routes then validate their fields with their models (422, each field named).
"""

from __future__ import annotations

import json
import math
from typing import Any

from agentloom.platform.errors import BadRequest, Invalid, UnsupportedMediaType

MAX_DEPTH = 64
MAX_INT_DIGITS = 100
JSON = "application/json"


class _OutOfRange:
    """A number the body holds that no field takes (found and named after parsing)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def check_body(text: str, content_type: str | None) -> None:
    """Refuse a body that is not a JSON object within the limits (see the module)."""
    media = media_type(content_type)
    if media != JSON:
        got = f"{media!r}" if media else "no Content-Type"
        raise UnsupportedMediaType(f"the request body must be JSON: send Content-Type: {JSON} "
                                   f"(got {got})")
    try:
        value = json.loads(text, parse_int=_integer, parse_float=_float,
                           parse_constant=_constant)
    except RecursionError:
        raise _too_deep() from None
    except ValueError:
        raise BadRequest("the request body is not valid JSON", code="malformed_json") from None
    if isinstance(value, dict | list):
        _walk(value)
    if not isinstance(value, dict):
        raise _invalid("body", f"a JSON object is expected, not {_kind(value)}")


def _integer(text: str) -> int | _OutOfRange:
    digits = len(text.lstrip("-"))
    return int(text) if digits <= MAX_INT_DIGITS else _OutOfRange(text)


def _float(text: str) -> float | _OutOfRange:
    value = float(text)
    return value if math.isfinite(value) else _OutOfRange(text)


def _constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def _walk(body: dict[str, Any] | list[Any]) -> None:
    """Depth first over the containers: the first level past ``MAX_DEPTH`` or the first
    number out of range is refused, naming where it is."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(body, ("body",))]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise _too_deep()
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(item, _OutOfRange):
                shown = item.text if len(item.text) <= 20 else f"{item.text[:12]}… " \
                    f"({len(item.text)} characters)"
                raise _invalid(".".join((*path, str(key))),
                               f"the number {shown} is out of range (integers of at most "
                               f"{MAX_INT_DIGITS} digits, finite numbers)")
            if isinstance(item, dict | list):
                stack.append((item, (*path, str(key))))


def _too_deep() -> BadRequest:
    return BadRequest(f"the request body nests more than {MAX_DEPTH} levels deep",
                      code="json_too_deep")


def _invalid(field: str, message: str) -> Invalid:
    return Invalid(f"{field}: {message}", code="invalid_field",
                   details={"fields": [{"field": field, "message": message}]})


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"
