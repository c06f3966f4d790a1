"""A hook point: the payload schema, writable top-level fields, allowed results and
delta rules of one point, and how a result is applied (``HookPoint.apply``).

A patch replaces top-level fields. It is refused (``HookContractError``) when the result
type is not allowed at the point, when a field is outside the writable scope, when the
patched payload fails the point's JSON schema, or when a delta rule (e.g. "append only",
"keep the count") fails. Every application is validated again.

Point contracts are host code. A checkpoint records only their digests; a saved schema
is never installed as executable rules. The built-in points are in ``_builtin_points``,
the registry a manager binds against in ``points``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ._readonly import thaw
from .errors import HookConfigError, HookContractError
from .results import Continue, PatchInput, PatchOutput, Reject

Stage = Literal["before", "after", "error", "finally"]
RuleCheck = Callable[[Mapping[str, Any], Mapping[str, Any]], "str | None"]
_STAGE_RESULTS: dict[str, frozenset[type]] = {
    "before": frozenset({Continue, PatchInput, Reject}),
    "after": frozenset({Continue, PatchOutput}),
    "error": frozenset({Continue}),
    "finally": frozenset({Continue}),
}


@dataclass(frozen=True)
class PointRule:
    """A delta rule: ``check(before, after)`` returns a violation text or None.
    ``rule_id`` is versioned and goes into the point digest."""

    rule_id: str
    check: RuleCheck


@dataclass(frozen=True)
class HookPoint:
    name: str
    stage: Stage
    schema: Mapping[str, Any]
    writable: frozenset[str] = frozenset()
    results: frozenset[type] = frozenset({Continue})
    rules: tuple[PointRule, ...] = ()
    default_purposes: frozenset[str] | None = None
    tool_scoped: bool = False  # bindings may match on tool names
    _validator: Any = field(init=False, repr=False, compare=False)
    _patch_validator: Any = field(init=False, repr=False, compare=False)
    _entry_validator: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name.endswith("." + self.stage):
            raise HookConfigError(f"point {self.name}: the name must end with .{self.stage}")
        bad = {t.__name__ for t in self.results} - {
            t.__name__ for t in _STAGE_RESULTS[self.stage]}
        if bad:
            raise HookConfigError(f"point {self.name}: {sorted(bad)} not allowed at the "
                                  f"{self.stage} stage")
        if self.writable and not self.results & {PatchInput, PatchOutput}:
            raise HookConfigError(f"point {self.name}: writable fields without a patch result")
        try:
            Draft202012Validator.check_schema(dict(self.schema))
        except SchemaError as exc:
            raise HookConfigError(f"point {self.name}: invalid schema: {exc.message}") from None
        object.__setattr__(self, "_validator", Draft202012Validator(dict(self.schema)))
        object.__setattr__(self, "_patch_validator", _patch_validator(self))
        object.__setattr__(self, "_entry_validator", _entry_validator(self))

    @property
    def diagnostic_only(self) -> bool:
        """error / finally: every hook failure becomes a diagnostic; the original error
        and the action's outcome are never replaced."""
        return self.stage in ("error", "finally")

    def digest(self) -> str:
        data = {
            "name": self.name, "stage": self.stage, "schema": self.schema,
            "writable": sorted(self.writable), "results": sorted(t.__name__ for t in self.results),
            "rules": [r.rule_id for r in self.rules], "tool_scoped": self.tool_scoped,
            "default_purposes": sorted(self.default_purposes)
            if self.default_purposes is not None else None,
        }
        raw = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
        return "sha256:" + hashlib.sha256(raw.encode()).hexdigest()

    def validate(self, payload: Mapping[str, Any], *, deep: bool = True) -> None:
        """Check a host-built payload. ``deep=False`` checks the top level (required and
        unknown fields, each field's type) and writable fields in full: what hooks see
        and may build on, at a cost independent of the history length."""
        validator = self._validator if deep or self._entry_validator is None \
            else self._entry_validator
        error = _first_error(validator, payload)
        if error is not None:
            raise HookContractError(f"payload at {self.name} is invalid: {error}",
                                    details={"point": self.name})

    def apply(self, payload: dict[str, Any], result: object, *, hook_id: str,
              observation: bool = False) -> dict[str, Any]:
        """The payload after ``result`` (the same object when nothing changes)."""
        details = {"point": self.name, "hook_id": hook_id}
        kind = type(result)
        if kind not in (Continue, PatchInput, PatchOutput, Reject):
            raise HookContractError(
                f"hook {hook_id} at {self.name} returned {kind.__name__}, not a HookResult",
                details=details)
        if kind not in self.results:
            raise HookContractError(f"hook {hook_id}: {kind.__name__} is not allowed at "
                                    f"{self.name}", details=details)
        if observation and kind is not Continue:
            raise HookContractError(f"observation hook {hook_id} at {self.name} may only "
                                    f"return Continue", details=details)
        if not isinstance(result, PatchInput | PatchOutput):
            return payload
        return self._patched(payload, result.fields, details)

    def _patched(self, payload: dict[str, Any], fields: Mapping[str, Any],
                 details: dict[str, str]) -> dict[str, Any]:
        hook_id = details["hook_id"]
        if not isinstance(fields, Mapping) or not all(isinstance(k, str) for k in fields):
            raise HookContractError(f"hook {hook_id}: patch fields must be a mapping of "
                                    f"top-level field names", details=details)
        outside = sorted(set(fields) - self.writable)
        if outside:
            raise HookContractError(
                f"hook {hook_id} at {self.name} may not write {outside}; writable: "
                f"{sorted(self.writable) or 'nothing'}", details={**details, "fields": outside})
        new = {**payload, **{k: thaw(v) for k, v in fields.items()}}  # detached, plain data
        if self._patch_validator is not None:  # the rest was valid and is unchanged
            error = _first_error(self._patch_validator, {k: new[k] for k in fields})
        else:
            error = _first_error(self._validator, new)
        if error is not None:
            raise HookContractError(f"hook {hook_id} at {self.name} produced an invalid "
                                    f"payload: {error}", details=details)
        for rule in self.rules:
            problem = rule.check(payload, new)
            if problem is not None:
                raise HookContractError(f"hook {hook_id} at {self.name}: {problem}",
                                        details={**details, "rule": rule.rule_id})
        return new


_PLAIN_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties",
                             "$schema", "$id", "title", "description"})


def _patch_validator(point: HookPoint) -> Any:
    """A validator of the patched fields alone, when that is equivalent to validating
    the whole payload again: an object schema of plain per-property rules that lists
    every writable field (a patch replaces values of existing keys, it cannot remove
    one). Other schemas are validated whole after each patch."""
    schema = point.schema
    properties = schema.get("properties")
    if (set(schema) - _PLAIN_KEYWORDS or schema.get("type") != "object"
            or not isinstance(properties, Mapping) or not point.writable <= set(properties)):
        return None
    return Draft202012Validator({"type": "object", "properties": {
        name: properties[name] for name in point.writable}})


def _entry_validator(point: HookPoint) -> Any:
    schema = point.schema
    properties = schema.get("properties")
    if set(schema) - _PLAIN_KEYWORDS or not isinstance(properties, Mapping):
        return None
    shallow = {name: (rule if name in point.writable or not isinstance(rule, Mapping)
                      else {k: v for k, v in rule.items() if k == "type"})
               for name, rule in properties.items()}
    return Draft202012Validator({**schema, "properties": shallow})


def _first_error(validator: Any, payload: Mapping[str, Any]) -> str | None:
    if not isinstance(payload, Mapping):
        return "the payload is not an object"
    for error in validator.iter_errors(payload):
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        return f"{where}: {error.message[:300]}"
    return None
