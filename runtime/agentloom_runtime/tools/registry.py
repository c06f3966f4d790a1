"""The tool catalog (docs/contract.md#tools): trusted definitions, checked once at registration and
frozen when a ``ToolRuntime`` is assembled. ``catalog()`` is what a checkpoint binds: a
resumed run must find the same names with the same fingerprints (``check_catalog``).

Checking a parameters schema against the JSON Schema meta-schema costs far more than
validating arguments, and every run registers the same few schemas again. Checked
schemas and their compiled validators are kept per process, keyed by the schema's
content digest (``_json.digest``): a fresh catalog of known tools checks nothing twice.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from agentloom_runtime._json import digest
from agentloom_runtime.errors import ConfigError, ResumeMismatch, ToolNotFound
from agentloom_runtime.tool_contracts import ToolDefinition

if TYPE_CHECKING:  # jsonschema loads with the first tool registered, not with the engine
    from jsonschema import Draft202012Validator

NAME_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # used with fullmatch: "$" allows "\n"
_MESSAGE_LIMIT = 150  # per schema error; a runtime message lists up to five
_CHECKED_LIMIT = 4_096  # distinct schemas kept per process, then the cache starts over
# schema digest -> validator of a schema that passed check_schema. A validator holds
# the schema it was built from: a private copy nobody mutates.
_CHECKED: dict[str, Draft202012Validator] = {}


def checked_validator(schema: dict[str, Any]) -> Draft202012Validator:
    """A validator for ``schema`` after checking it against the meta-schema once per
    process and content (``SchemaError`` when invalid; never cached)."""
    key = digest(schema)
    validator = _CHECKED.get(key)
    if validator is None:
        from jsonschema import Draft202012Validator

        Draft202012Validator.check_schema(schema)
        validator = Draft202012Validator(copy.deepcopy(schema))
        if len(_CHECKED) >= _CHECKED_LIMIT:
            _CHECKED.clear()
        _CHECKED[key] = validator
    return validator


class ToolRegistry:
    def __init__(self, definitions: Iterable[ToolDefinition] = ()) -> None:
        self._tools: dict[str, ToolDefinition] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        self._frozen = False
        for definition in definitions:
            self.register(definition)

    def register(self, definition: ToolDefinition) -> ToolDefinition:
        """Add a tool; returns the stored definition (its schema is a private copy, so
        later edits to the caller's dict cannot change a frozen catalog)."""
        if self._frozen:
            raise ConfigError("the tool catalog is frozen: register tools before the "
                              "ToolRuntime is assembled")
        name = definition.name
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise ConfigError(f"tool name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
        if name in self._tools:
            raise ConfigError(f"tool {name!r} is already registered")
        if any(d.tool_id == definition.tool_id for d in self._tools.values()):
            raise ConfigError(f"tool_id {definition.tool_id!r} is already registered")
        validator = _check_definition(definition)
        stored = dataclasses.replace(definition,
                                     parameters=copy.deepcopy(definition.parameters))
        self._validators[name] = validator
        self._tools[name] = stored
        return stored

    def resolve(self, name: str) -> ToolDefinition:
        try:
            return self._tools[name]
        except (KeyError, TypeError):
            raise ToolNotFound(f"no tool named {str(name)[:80]!r}",
                               details={"name": str(name)[:80]}) from None

    def definitions(self) -> tuple[ToolDefinition, ...]:
        """In registration order (the order the model sees)."""
        return tuple(self._tools.values())

    def validate(self, name: str, arguments: Any) -> list[str]:
        """Schema violations of ``arguments`` as ``"$.path: message"``, sorted by path;
        empty when valid."""
        validator = self._validators[self.resolve(name).name]
        found = sorted(validator.iter_errors(arguments), key=lambda e: (e.json_path, e.message))
        return [f"{e.json_path}: {_clip_middle(e.message, _MESSAGE_LIMIT)}" for e in found]

    def freeze(self) -> None:
        self._frozen = True

    @property
    def frozen(self) -> bool:
        return self._frozen

    def catalog(self) -> dict[str, str]:
        """``{name: fingerprint}`` for the checkpoint's tool binding."""
        return {name: d.fingerprint() for name, d in self._tools.items()}

    def check_catalog(self, saved: Mapping[str, str]) -> None:
        """Raise ``ResumeMismatch`` unless ``saved`` (a checkpoint's ``catalog()``) equals
        the current catalog; the message names the missing, added and changed tools."""
        current = self.catalog()
        if dict(saved) == current:
            return
        differences = {
            "missing": sorted(saved.keys() - current.keys()),
            "added": sorted(current.keys() - saved.keys()),
            "changed": sorted(n for n in saved.keys() & current.keys()
                              if saved[n] != current[n])}
        listed = "; ".join(f"{kind}: {_names(names)}"
                           for kind, names in differences.items() if names)
        raise ResumeMismatch(
            f"the tool catalog differs from the one the run was started with ({listed})",
            details=differences)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[ToolDefinition]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)


def _names(names: list[str], shown: int = 10) -> str:
    text = ", ".join(names[:shown])
    return text + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _check_definition(definition: ToolDefinition) -> Draft202012Validator:
    """Check a definition; returns the validator of its parameters."""
    name = definition.name
    params = definition.parameters
    if not isinstance(params, dict) or params.get("type") != "object":
        raise ConfigError(f"tool {name!r}: parameters must be a JSON Schema of type object")
    try:
        definition.fingerprint()
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"tool {name!r}: the definition is not JSON data: {exc}") from None
    from jsonschema.exceptions import SchemaError

    try:
        validator = checked_validator(params)
    except SchemaError as exc:
        raise ConfigError(f"tool {name!r}: invalid parameters schema: "
                          f"{_clip(exc.message, _MESSAGE_LIMIT)}") from None
    if not callable(definition.handler):
        raise ConfigError(f"tool {name!r}: handler must be an async callable")
    if not definition.implementation_id:
        raise ConfigError(f"tool {name!r}: implementation_id is required (bump it when "
                          "behaviour changes; resumes compare it)")
    if not definition.timeout > 0:
        raise ConfigError(f"tool {name!r}: timeout must be positive")
    declared = params.get("properties", {})
    unknown = [f for f in definition.evidence_fields if f not in declared]
    if unknown:
        raise ConfigError(f"tool {name!r}: evidence_fields {unknown} are not declared "
                          "parameters")
    return validator


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip_middle(text: str, limit: int) -> str:
    # jsonschema messages start with the offending value's repr and end with the rule
    # ("'xxx…' is not of type 'integer'"): keep both ends.
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head):]
