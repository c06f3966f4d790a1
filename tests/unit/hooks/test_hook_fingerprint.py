"""Code identity: source SHA-256, bytecode-v2 (stable across processes), artifact hash."""

from __future__ import annotations

import hashlib
import inspect
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from unit.hooks.hook_fixtures import DYNAMIC, dynamic

from agentloom_runtime.hooks import (
    Continue,
    HookConfigError,
    HookDefinition,
    code_fingerprint,
)


async def from_file(ctx: Any, payload: dict[str, Any]) -> Continue:
    return Continue()


async def from_file_changed(ctx: Any, payload: dict[str, Any]) -> Continue:
    payload = dict(payload)
    return Continue()


def test_a_file_function_is_identified_by_its_source() -> None:
    fingerprint = code_fingerprint(from_file)
    assert fingerprint.startswith("source-sha256:") and len(fingerprint) == 14 + 64
    assert fingerprint == code_fingerprint(from_file)
    assert fingerprint != code_fingerprint(from_file_changed)


def test_a_method_is_identified_by_its_function() -> None:
    class Hooks:
        async def handle(self, ctx: Any, payload: dict[str, Any]) -> Continue:
            return Continue()

        async def other(self, ctx: Any, payload: dict[str, Any]) -> Continue:
            payload = dict(payload)
            return Continue()

    source = inspect.getsource(Hooks.handle)
    expected = f"source-sha256:{hashlib.sha256(source.encode()).hexdigest()}"
    assert code_fingerprint(Hooks().handle) == code_fingerprint(Hooks.handle) == expected
    assert code_fingerprint(Hooks().other) != expected, "another method, another identity"


def test_a_function_without_source_gets_a_bytecode_fingerprint() -> None:
    fingerprint = code_fingerprint(dynamic())
    assert fingerprint.startswith("bytecode-v2:")
    assert fingerprint == code_fingerprint(dynamic())  # a second compilation, same identity


@pytest.mark.parametrize("old, new", [
    ('"zeta"', '"zeta2"'),          # a frozenset constant
    ('"six"', '"seven"'),           # a constant of a nested code object
    ("1.5", "1.25"),                # a float constant
    ('limit=3', 'limit=4'),         # a default
    ('("a", "b")', '("b", "a")'),   # tuple order matters
    ("return None", "return 0"),    # bytecode / constants
])
def test_the_bytecode_fingerprint_sees_changes(old: str, new: str) -> None:
    assert old in DYNAMIC
    assert code_fingerprint(dynamic(DYNAMIC.replace(old, new))) != code_fingerprint(dynamic())


SCRIPT = textwrap.dedent('''
    import sys
    from agentloom_runtime.hooks import code_fingerprint
    namespace = {}
    exec(compile(sys.stdin.read(), "<generated>", "exec"), namespace)
    handler = namespace["handler"]
    names = handler.__code__.co_consts
    sets = [c for c in names if isinstance(c, frozenset)]
    print(code_fingerprint(handler))
    print(repr(sets))
''')


def test_the_bytecode_fingerprint_is_stable_across_processes_and_hash_seeds() -> None:
    prints, reprs = set(), set()
    for seed in ("0", "1", "2", "12345", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", SCRIPT], input=DYNAMIC, env=env,
                              capture_output=True, text=True, timeout=60, check=True)
        fingerprint, sets = done.stdout.splitlines()
        prints.add(fingerprint)
        reprs.add(sets)
    assert len(reprs) > 1, "the seeds should reorder the frozenset (else the test proves nothing)"
    assert prints == {code_fingerprint(dynamic())}


def test_an_explicit_artifact_hash_wins() -> None:
    definition = HookDefinition("h", "1", from_file, code_hash="sha256:abc")
    assert definition.fingerprint == "artifact:sha256:abc"
    assert HookDefinition("h", "1", dynamic(), code_hash="x").fingerprint == "artifact:x"
    with pytest.raises(HookConfigError):
        HookDefinition("h", "1", from_file, code_hash=" ")


def test_a_callable_object_needs_an_artifact_hash() -> None:
    class Callable:
        async def __call__(self, ctx: Any, payload: dict[str, Any]) -> Continue:
            return Continue()

    with pytest.raises(HookConfigError, match="code_hash"):
        HookDefinition("h", "1", Callable())
    assert HookDefinition("h", "1", Callable(), code_hash="v1").fingerprint == "artifact:v1"


def test_handlers_must_be_async() -> None:
    def sync(ctx: Any, payload: dict[str, Any]) -> Continue:
        return Continue()

    with pytest.raises(HookConfigError, match="async"):
        HookDefinition("h", "1", sync)  # type: ignore[arg-type]
