"""The tool catalog (seed 002 §9): trusted definitions, checked once at registration and
frozen when a ``ToolRuntime`` is assembled. ``catalog()`` is what a checkpoint binds: a
resumed run must find the same names with the same fingerprints."""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from agentloom_runtime.errors import ConfigError, ResumeMismatch, ToolNotFound
from agentloom_runtime.tool_contracts import ToolDefinition

NAME_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # used with fullmatch: "$" allows "\n"
_MESSAGE_LIMIT = 150  # per schema error; a runtime message lists up to five


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
        _check_definition(definition)
        stored = dataclasses.replace(definition,
                                     parameters=copy.deepcopy(definition.parameters))
        self._validators[name] = Draft202012Validator(stored.parameters)
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
        the current catalog."""
        current = self.catalog()
        if dict(saved) == current:
            return
        changed = sorted(n for n in saved.keys() & current.keys() if saved[n] != current[n])
        raise ResumeMismatch(
            "the tool catalog differs from the one the run was started with",
            details={"missing": sorted(saved.keys() - current.keys()),
                     "added": sorted(current.keys() - saved.keys()), "changed": changed})

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[ToolDefinition]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)


def _check_definition(definition: ToolDefinition) -> None:
    name = definition.name
    params = definition.parameters
    if not isinstance(params, dict) or params.get("type") != "object":
        raise ConfigError(f"tool {name!r}: parameters must be a JSON Schema of type object")
    try:
        Draft202012Validator.check_schema(params)
    except SchemaError as exc:
        raise ConfigError(f"tool {name!r}: invalid parameters schema: "
                          f"{_clip(exc.message, _MESSAGE_LIMIT)}") from None
    try:
        definition.fingerprint()
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"tool {name!r}: the definition is not JSON data: {exc}") from None
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


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip_middle(text: str, limit: int) -> str:
    # jsonschema messages start with the offending value's repr and end with the rule
    # ("'xxx…' is not of type 'integer'"): keep both ends.
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head):]
