"""Code identity of a hook handler, bound into the checkpoint so a resume never runs
changed code.

- ``source-sha256:<hex>``: a function defined in a file, SHA-256 of ``inspect.getsource``;
- ``bytecode-v2:<hex>``: a function without source (``exec``, generated code): SHA-256 of
  a canonical encoding of its code object (bytecode, exception table, typed constants
  with frozensets sorted by their encoding and nested code objects recursed, names,
  argument shape, defaults) and the Python runtime tag. Nothing depends on ``hash()``,
  so the value is the same in every process whatever ``PYTHONHASHSEED`` is;
- ``artifact:<code_hash>``: an explicit hash of a published artifact (hook package). It
  wins when given, and is the only identity that covers closures, decorators, globals
  and dependencies, which a function fingerprint does not.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sys
from collections.abc import Callable
from types import CodeType, FunctionType, MethodType
from typing import Any

from .errors import HookConfigError

SOURCE = "source-sha256"
BYTECODE = "bytecode-v2"
ARTIFACT = "artifact"


def code_fingerprint(handler: Callable[..., Any], code_hash: str | None = None) -> str:
    """The identity string of ``handler`` (see the module docstring)."""
    if code_hash is not None:
        if not code_hash.strip():
            raise HookConfigError("code_hash must not be empty")
        return f"{ARTIFACT}:{code_hash}"
    func = _function_of(handler)
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):
        return bytecode_fingerprint(func)
    return f"{SOURCE}:{hashlib.sha256(source.encode()).hexdigest()}"


def identity_kind(fingerprint: str) -> str:
    return fingerprint.split(":", 1)[0]


def bytecode_fingerprint(func: FunctionType) -> str:
    data = {
        "runtime": sys.implementation.cache_tag,
        "code": _code(func.__code__),
        "defaults": _encode(func.__defaults__),
        "kwdefaults": _encode(func.__kwdefaults__ or {}),
    }
    raw = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return f"{BYTECODE}:{hashlib.sha256(raw.encode()).hexdigest()}"


def _function_of(handler: Callable[..., Any]) -> FunctionType:
    target: Any = handler
    if isinstance(target, MethodType):
        target = target.__func__
    if isinstance(target, FunctionType):
        return target
    raise HookConfigError(
        f"handler {handler!r} is not a plain function or method: pass an explicit code_hash")


def _code(co: CodeType) -> dict[str, Any]:
    return {
        "name": co.co_name,
        "bytecode": co.co_code.hex(),
        "exceptiontable": getattr(co, "co_exceptiontable", b"").hex(),
        "consts": [_encode(c) for c in co.co_consts],
        "names": list(co.co_names),
        "varnames": list(co.co_varnames),
        "freevars": list(co.co_freevars),
        "cellvars": list(co.co_cellvars),
        "argcount": co.co_argcount,
        "posonlyargcount": co.co_posonlyargcount,
        "kwonlyargcount": co.co_kwonlyargcount,
        "flags": co.co_flags,
    }


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _encode(value: Any) -> Any:
    if value is None:
        return ["none"]
    if value is Ellipsis:
        return ["ellipsis"]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", str(value)]
    if isinstance(value, float):
        return ["float", value.hex()]
    if isinstance(value, complex):
        return ["complex", value.real.hex(), value.imag.hex()]
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, bytes):
        return ["bytes", value.hex()]
    if isinstance(value, tuple):
        return ["tuple", [_encode(v) for v in value]]
    if isinstance(value, frozenset | set):
        return ["frozenset", sorted((_encode(v) for v in value), key=_canonical)]
    if isinstance(value, dict):
        return ["dict", sorted(([_encode(k), _encode(v)] for k, v in value.items()),
                               key=_canonical)]
    if isinstance(value, CodeType):
        return ["code", _code(value)]
    kind = type(value)
    return ["object", f"{kind.__module__}.{kind.__qualname__}"]
