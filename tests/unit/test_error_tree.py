"""One error tree with a single root: every error class of ``agentloom_runtime`` and
``agentloom`` derives from ``AgentLoomError`` and is drawn in a tree — the runtime's
(``agentloom_runtime/errors.py``), the platform's (``agentloom/platform/errors.py``) or
its own module's docstring. Read from the source (no imports): a new class anywhere is
checked."""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (ROOT / "runtime" / "agentloom_runtime", ROOT / "functions" / "agentloom")
RUNTIME_TREE = ROOT / "runtime" / "agentloom_runtime" / "errors.py"
PLATFORM_TREE = ROOT / "functions" / "agentloom" / "platform" / "errors.py"
TESTING = ROOT / "runtime" / "agentloom_runtime" / "testing"
BUILTIN_ERRORS = {name for name, value in vars(builtins).items()
                  if isinstance(value, type) and issubclass(value, BaseException)}


@dataclass(frozen=True)
class ErrorClass:
    name: str
    bases: tuple[str, ...]
    path: Path


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _classes() -> dict[str, list[ErrorClass]]:
    found: dict[str, list[ErrorClass]] = {}
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    bases = tuple(_base_name(b) for b in node.bases)
                    found.setdefault(node.name, []).append(ErrorClass(node.name, bases, path))
    return found


def _is_exception_name(name: str, ours: dict[str, list[ErrorClass]]) -> bool:
    """A base we do not define is an exception when Python's or a library's name says so."""
    return name in BUILTIN_ERRORS or (name not in ours and name.endswith(("Error",
                                                                          "Exception")))


def error_classes() -> list[ErrorClass]:
    ours = _classes()
    errors: dict[tuple[str, Path], ErrorClass] = {}
    changed = True
    while changed:  # a fixpoint over the bases: subclasses of subclasses, any depth
        changed = False
        for items in ours.values():
            for cls in items:
                key = (cls.name, cls.path)
                if key in errors:
                    continue
                if any(_is_exception_name(b, ours) or any(n == b for n, _ in errors)
                       for b in cls.bases):
                    errors[key] = cls
                    changed = True
    return sorted(errors.values(), key=lambda c: (str(c.path), c.name))


def ancestors(cls: ErrorClass, by_name: dict[str, list[ErrorClass]]) -> set[str]:
    seen: set[str] = set()
    todo = list(cls.bases)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for parent in by_name.get(name, ()):
            todo.extend(parent.bases)
    return seen


def test_the_scan_finds_the_trees_of_both_packages() -> None:
    names = {c.name for c in error_classes()}
    assert {"AgentLoomError", "ConfigError", "PlatformError", "ApiError", "HookTimeout",
            "McpToolFailure", "ScriptExhausted"} <= names


def test_every_error_class_derives_from_the_one_root() -> None:
    classes = error_classes()
    by_name: dict[str, list[ErrorClass]] = {}
    for cls in classes:
        by_name.setdefault(cls.name, []).append(cls)
    outside = [f"{c.path.relative_to(ROOT)}: {c.name}" for c in classes
               if c.name != "AgentLoomError" and not c.path.is_relative_to(TESTING)
               and "AgentLoomError" not in ancestors(c, by_name)]
    assert outside == [], "error classes outside agentloom_runtime.errors.AgentLoomError"


def test_the_test_doubles_failures_are_assertions_outside_the_tree() -> None:
    """A test's own mistake (an exhausted script) must fail the test: no handler of
    ``AgentLoomError`` in the code under test may turn it into a run's error."""
    doubles = [c for c in error_classes() if c.path.is_relative_to(TESTING)]
    assert doubles and all(c.bases == ("AssertionError",) for c in doubles)


def test_every_error_class_is_drawn_in_a_tree() -> None:
    trees = _docstring(RUNTIME_TREE) + "\n" + _docstring(PLATFORM_TREE)
    undrawn = []
    for cls in error_classes():
        text = trees + "\n" + _docstring(cls.path)
        if not re.search(rf"\b{cls.name}\b", text):
            undrawn.append(f"{cls.path.relative_to(ROOT)}: {cls.name}")
    assert undrawn == [], "error classes no docstring tree names"
