"""The built-in hook points (docs/hooks.md#points-and-what-each-may-change) and their payloads.

Contract v2 declares each payload's required fields and refuses unknown top-level
fields; ``usage`` and ``annotations`` stay optional. Contract v1 (manifests without
``point_contract_version``) has the same writable scopes, results and rules, but no
required fields and accepts unknown top-level fields.

Payloads the engine passes (required in v2 marked *):

- model.chat.before: messages*, tools*, purpose*, instance*, options*, extra_messages.
  Writable: ``extra_messages`` (append only; role user; at most 8, 16,000 chars each) and
  ``options`` (temperature / top_p may change, max_output_tokens only decrease, other
  keys unchanged).
- model.chat.after: purpose*, instance*, content*, tool_calls*, reasoning_content, usage,
  annotations. Writable: ``content`` (an answer without tool calls stays a non-empty
  text), ``annotations``.
- model.embedding.before: purpose*, texts*, instance, model, resource_id.
  Writable: ``texts`` (same count).  model.embedding.after: purpose*, vectors*, texts,
  instance, model, resource_id, usage, annotations. Read-only.
- tool.before: call_id*, name*, arguments*, instance*, request_id, uncertain.
  Writable: ``arguments``; Reject.  tool.after: call_id*, name*, instance*, status*,
  value*, request_id, arguments, evidence_arguments, raw_value, has_raw_value,
  error_code, annotations. Writable: ``value``, ``annotations``.
- context.prepare.before: instance*, messages*, tools, extra_messages (append only; role
  user with a ``source`` label). context.prepare.after: instance*, messages*, tools,
  counters, estimated_tokens. Read-only.
- context.compact.before: instance*, messages*, counters, reason. Observe or Reject.
  context.compact.after: instance*, messages*, summary*, metrics. Writable: ``summary``,
  only when the policy declared one (not null).
- run.before: run_id*, instance*, task*, mode.  subagent.before: instance*,
  parent_instance*, subagent_id*, task*, run_id. Observe or Reject.
  run.after / subagent.after: the same identities, status*, result, error, annotations.
  Writable: ``annotations`` only.
- operation.error: operation_id*, kind*, instance*, error*, stage.
  operation.finally: operation_id*, kind*, instance*, status*, error, stage. Read-only;
  every hook failure becomes a diagnostic.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from ._point import HookPoint, PointRule, Stage
from .results import Continue, PatchInput, PatchOutput, Reject

MAX_EXTRA_MESSAGES = 8
MAX_EXTRA_CHARS = 16_000
SAMPLING_KEYS = frozenset({"temperature", "top_p", "max_output_tokens"})

_STR: dict[str, Any] = {"type": "string"}
_OBJ: dict[str, Any] = {"type": "object"}
_BOOL: dict[str, Any] = {"type": "boolean"}
_NULLABLE_STR: dict[str, Any] = {"type": ["string", "null"]}
_MESSAGES = {"type": "array", "items": {"type": "object", "required": ["role"],
                                        "properties": {"role": _STR}}}
_TOOLS = {"type": "array", "items": _OBJ}
_ANNOTATIONS = {"type": "object", "maxProperties": 64}
_USAGE = {"type": ["object", "null"]}
_ERROR = {"type": "object", "required": ["type", "message"],
          "properties": {"type": _STR, "code": _NULLABLE_STR, "message": _STR}}


def _material(labelled: bool) -> dict[str, Any]:
    item = {"type": "object", "additionalProperties": False,
            "required": ["role", "content", *(["source"] if labelled else [])],
            "properties": {"role": {"const": "user"},
                           "content": {"type": "string", "maxLength": MAX_EXTRA_CHARS},
                           "source": {"type": "string", "minLength": 1, "maxLength": 200}}}
    return {"type": "array", "maxItems": MAX_EXTRA_MESSAGES, "items": item}


_OPTIONS = {"type": "object", "properties": {
    "temperature": {"type": "number", "minimum": 0, "maximum": 2},
    "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    "max_output_tokens": {"type": "integer", "minimum": 1}}}
_TOOL_CALLS = {"type": "array", "items": {
    "type": "object", "required": ["id", "function"],
    "properties": {"id": _STR, "type": _STR, "function": {
        "type": "object", "required": ["name", "arguments"],
        "properties": {"name": _STR, "arguments": _STR}}}}}
_RUN_STATUS = {"enum": ["running", "completed", "blocked", "failed", "cancelled"]}
_SUBAGENT = {"instance": _STR, "parent_instance": _STR, "subagent_id": _STR, "task": _STR,
             "run_id": _STR}
_TOOL_ID = {"call_id": _STR, "request_id": _STR, "name": _STR, "instance": _STR}


# ---------------------------------------------------------------- delta rules


def _append_only(before: Mapping[str, Any], after: Mapping[str, Any]) -> str | None:
    old = list(before.get("extra_messages") or [])
    new = list(after.get("extra_messages") or [])
    if new[:len(old)] != old:
        return "extra_messages may only be appended to"
    return None


def _sampling_budget(before: Mapping[str, Any], after: Mapping[str, Any]) -> str | None:
    old = dict(before.get("options") or {})
    new = dict(after.get("options") or {})
    missing = object()
    changed = {k for k in (old.keys() | new.keys()) - SAMPLING_KEYS
               if old.get(k, missing) != new.get(k, missing)}
    if changed:
        return f"options {sorted(changed)} are not adjustable (only {sorted(SAMPLING_KEYS)})"
    limit = old.get("max_output_tokens")
    value = new.get("max_output_tokens")
    if limit is None and value is not None:
        return "max_output_tokens may only decrease; the request did not set one"
    if limit is not None and (value is None or value > limit):
        return f"max_output_tokens may only decrease (at most {limit})"
    return None


def _answer_kept(before: Mapping[str, Any], after: Mapping[str, Any]) -> str | None:
    content = after.get("content")
    if not after.get("tool_calls") and not (isinstance(content, str) and content.strip()):
        return "an answer without tool calls must keep a non-empty content"
    return None


def _same_count(before: Mapping[str, Any], after: Mapping[str, Any]) -> str | None:
    if len(before.get("texts") or []) != len(after.get("texts") or []):
        return "texts must keep their count and order"
    return None


def _declared_summary(before: Mapping[str, Any], after: Mapping[str, Any]) -> str | None:
    if before.get("summary") is None and after.get("summary") is not None:
        return "the compaction policy declared no summary field to rewrite"
    return None


APPEND_ONLY = PointRule("append-user-material/v1", _append_only)
SAMPLING_BUDGET = PointRule("sampling-within-budget/v1", _sampling_budget)
ANSWER_KEPT = PointRule("answer-or-calls/v1", _answer_kept)
SAME_COUNT = PointRule("same-text-count/v1", _same_count)
DECLARED_SUMMARY = PointRule("declared-summary/v1", _declared_summary)


# ---------------------------------------------------------------- points

_P = tuple[str, dict[str, Any], list[str], frozenset[str], frozenset[type],
           tuple[PointRule, ...]]
_OBSERVE = frozenset({Continue})
_REJECT = frozenset({Continue, Reject})
_PATCH_IN = frozenset({Continue, PatchInput})
_PATCH_OUT = frozenset({Continue, PatchOutput})
_NONE: frozenset[str] = frozenset()


def _specs() -> list[_P]:
    return [
        ("model.chat.before",
         {"messages": _MESSAGES, "tools": _TOOLS, "purpose": _STR, "instance": _STR,
          "options": _OPTIONS, "extra_messages": _material(False)},
         ["messages", "tools", "purpose", "instance", "options"],
         frozenset({"extra_messages", "options"}), _PATCH_IN, (APPEND_ONLY, SAMPLING_BUDGET)),
        ("model.chat.after",
         {"purpose": _STR, "instance": _STR, "content": _NULLABLE_STR,
          "tool_calls": _TOOL_CALLS, "reasoning_content": _NULLABLE_STR, "usage": _USAGE,
          "annotations": _ANNOTATIONS},
         ["purpose", "instance", "content", "tool_calls"],
         frozenset({"content", "annotations"}), _PATCH_OUT, (ANSWER_KEPT,)),
        ("model.embedding.before",
         {"purpose": _STR, "texts": {"type": "array", "items": _STR}, "instance": _STR,
          "model": _STR, "resource_id": _STR},
         ["purpose", "texts"], frozenset({"texts"}), _PATCH_IN, (SAME_COUNT,)),
        ("model.embedding.after",
         {"purpose": _STR, "vectors": {"type": "array", "items": {
             "type": "array", "items": {"type": "number"}}},
          "texts": {"type": "array", "items": _STR}, "instance": _STR, "model": _STR,
          "resource_id": _STR, "usage": _USAGE, "annotations": _ANNOTATIONS},
         ["purpose", "vectors"], _NONE, _OBSERVE, ()),
        ("tool.before", {**_TOOL_ID, "arguments": _OBJ, "uncertain": _BOOL},
         ["call_id", "name", "arguments", "instance"],
         frozenset({"arguments"}), frozenset({Continue, PatchInput, Reject}), ()),
        ("tool.after",
         {**_TOOL_ID, "arguments": _OBJ, "status": {
             "enum": ["ok", "error", "rejected", "unknown"]}, "value": {},
          "evidence_arguments": _OBJ, "raw_value": {}, "has_raw_value": _BOOL,
          "error_code": _NULLABLE_STR, "annotations": _ANNOTATIONS},
         ["call_id", "name", "instance", "status", "value"],
         frozenset({"value", "annotations"}), _PATCH_OUT, ()),
        ("context.prepare.before",
         {"instance": _STR, "messages": _MESSAGES, "tools": _TOOLS,
          "extra_messages": _material(True)},
         ["instance", "messages"], frozenset({"extra_messages"}), _PATCH_IN, (APPEND_ONLY,)),
        ("context.prepare.after",
         {"instance": _STR, "messages": _MESSAGES, "tools": _TOOLS, "counters": _OBJ,
          "estimated_tokens": {"type": "integer"}},
         ["instance", "messages"], _NONE, _OBSERVE, ()),
        ("context.compact.before",
         {"instance": _STR, "messages": _MESSAGES, "counters": _OBJ, "reason": _STR},
         ["instance", "messages"], _NONE, _REJECT, ()),
        ("context.compact.after",
         {"instance": _STR, "messages": _MESSAGES, "summary": _NULLABLE_STR, "metrics": _OBJ},
         ["instance", "messages", "summary"], frozenset({"summary"}), _PATCH_OUT,
         (DECLARED_SUMMARY,)),
        ("run.before", {"run_id": _STR, "instance": _STR, "task": _STR, "mode": _STR},
         ["run_id", "instance", "task"], _NONE, _REJECT, ()),
        ("run.after",
         {"run_id": _STR, "instance": _STR, "task": _STR, "status": _RUN_STATUS,
          "result": _NULLABLE_STR, "error": {"type": ["object", "null"]},
          "annotations": _ANNOTATIONS},
         ["run_id", "instance", "status"], frozenset({"annotations"}), _PATCH_OUT, ()),
        ("subagent.before", dict(_SUBAGENT),
         ["instance", "parent_instance", "subagent_id", "task"], _NONE, _REJECT, ()),
        ("subagent.after",
         {**_SUBAGENT, "status": _RUN_STATUS, "result": _NULLABLE_STR,
          "error": {"type": ["object", "null"]}, "annotations": _ANNOTATIONS},
         ["instance", "parent_instance", "subagent_id", "status"],
         frozenset({"annotations"}), _PATCH_OUT, ()),
        ("operation.error",
         {"operation_id": _STR, "kind": _STR, "instance": _STR, "stage": _STR,
          "error": _ERROR},
         ["operation_id", "kind", "instance", "error"], _NONE, _OBSERVE, ()),
        ("operation.finally",
         {"operation_id": _STR, "kind": _STR, "instance": _STR, "stage": _STR,
          "status": _STR, "error": {"anyOf": [_ERROR, {"type": "null"}]}},
         ["operation_id", "kind", "instance", "status"], _NONE, _OBSERVE, ()),
    ]


def _schema(properties: dict[str, Any], required: list[str], version: int) -> dict[str, Any]:
    if version == 1:
        return {"type": "object", "properties": properties}
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


def _default_purposes(name: str) -> frozenset[str] | None:
    if name.startswith("model.chat."):
        return frozenset({"action"})
    if name.startswith("model.embedding."):
        return frozenset({"document", "query"})
    return None


@functools.cache
def builtin_points(version: int) -> tuple[HookPoint, ...]:
    """Built once per process: points are immutable and checking schemas is slow."""
    points = []
    for name, properties, required, writable, results, rules in _specs():
        stage: Stage = name.rsplit(".", 1)[1]  # type: ignore[assignment]
        points.append(HookPoint(
            name=name, stage=stage, schema=_schema(properties, required, version),
            writable=writable, results=results, rules=rules,
            default_purposes=_default_purposes(name), tool_scoped=name.startswith("tool.")))
    return tuple(points)


BUILTIN_POINT_NAMES = tuple(spec[0] for spec in _specs())
