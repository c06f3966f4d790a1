"""A run's event stream holds only topics of the typed catalogue
(``agentloom_runtime.events``), and API users are told about every one of them."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import cast

import pytest

from agentloom.platform.store import InMemoryItemStore, PlatformStore
from agentloom.platform.tracker import RunTracker
from agentloom_runtime.checkpoint import InMemoryCheckpointStore
from agentloom_runtime.errors import ConfigError
from agentloom_runtime.events import ENGINE_TOPICS, HOST_TOPICS, TOPICS, Topic

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "functions" / "agentloom"
EVENT_WRITERS = {"append", "append_writes"}  # of ``store.events``: its own primitives


def tracker() -> tuple[RunTracker, PlatformStore]:
    store = PlatformStore(InMemoryItemStore())
    return RunTracker(store, InMemoryCheckpointStore()), store


def test_a_topic_outside_the_catalogue_is_refused_and_not_recorded() -> None:
    runs, store = tracker()
    with pytest.raises(ConfigError, match=r"run\.progress"):
        runs.event("run_1", cast(Topic, "run.progress"), {"run_id": "run_1"})
    assert store.events.read("run_1") == []


def test_every_topic_of_the_catalogue_is_recorded_as_given() -> None:
    runs, store = tracker()
    for topic in sorted(TOPICS):
        runs.event("run_1", cast(Topic, topic), {"run_id": "run_1"})
    assert [e.type for e in store.events.read("run_1")] == sorted(TOPICS)


def _literal_topics(tree: ast.AST) -> set[str]:
    """Topics written as literals: ``<tracker>.event(run_id, "<topic>", ...)`` and the
    ``("<topic>", data)`` pairs handed to the store's event primitives
    (``<store>.events.append(run_id, [...])``, ``….events.append_writes``)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        if name == "event" and len(node.args) >= 2:
            topic = node.args[1]
            if isinstance(topic, ast.Constant) and isinstance(topic.value, str):
                found.add(topic.value)
        elif name in EVENT_WRITERS and isinstance(node.func.value, ast.Attribute) \
                and node.func.value.attr == "events":
            for inner in ast.walk(node):
                if isinstance(inner, ast.Tuple) and inner.elts and \
                        isinstance(inner.elts[0], ast.Constant) and \
                        isinstance(inner.elts[0].value, str):
                    found.add(inner.elts[0].value)
    return found


def test_the_platform_records_only_catalogue_topics_and_each_host_topic_somewhere() -> None:
    """Typed callers cannot pass another topic (mypy: ``RunTracker.event`` takes a
    ``Topic``); this catches literals written past the tracker, straight to the store."""
    recorded: dict[str, list[str]] = {}
    for path in sorted(FUNCTIONS.rglob("*.py")):
        for topic in _literal_topics(ast.parse(path.read_text(encoding="utf-8"))):
            recorded.setdefault(topic, []).append(str(path.relative_to(ROOT)))
    unknown = {t: where for t, where in recorded.items() if t not in TOPICS}
    assert unknown == {}, f"topics outside agentloom_runtime.events: {unknown}"
    assert HOST_TOPICS - set(recorded) == set(), "host topics nothing records"
    assert ENGINE_TOPICS & set(recorded) == set(), "the platform records engine topics"


def test_the_api_reference_names_every_topic() -> None:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"`([a-z_]+\.[a-z_]+)`", text))
    missing = sorted(TOPICS - listed)
    assert missing == [], f"docs/api.md does not list {missing}"
