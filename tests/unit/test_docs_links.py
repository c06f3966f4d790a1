"""Comments and docs cite only what a reader of the repository can open.

Two rules, over the text of ``runtime/``, ``functions/``, ``infra/``, ``tests/``,
``bin/``, ``.ci/``, ``docs/``, ``README.md`` and ``pyproject.toml``:

1. **No citation of documents outside the repository** — the founding specifications
   (by name, file name or section number), the shared architecture, conventions and AWS
   notes. The behaviour they describe is written down in ``docs/contract.md``; cite its
   anchors instead (``docs/contract.md#loop-order``).
2. **Every docs path resolves.** A ``docs/…`` path named anywhere exists, and its
   ``#anchor`` is a heading or an explicit ``<a id="…">`` of that page; so does every
   relative link of a Markdown file.

For citations, only the comments and string literals of a Python file are read
(``tokenize``), so code such as ``random.Random(seed)`` is never mistaken for one; docs
paths are checked everywhere. This file is not scanned: it has to spell out the patterns
it looks for.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED_DIRS = ("runtime", "functions", "infra", "tests", "bin", ".ci", "docs")
SCANNED_FILES = ("README.md", "pyproject.toml")
SKIPPED_DIRS = frozenset({".venv", "node_modules", "cdk.out", "__pycache__", ".git",
                          ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis"})
TEXT_SUFFIXES = frozenset({".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".sh", ".cfg",
                           ".ini", ".js", ".html", ".css"})
TEXT_NAMES = frozenset({"Dockerfile"})
SELF = Path(__file__).resolve()

OUTSIDE = re.compile(
    r"\b[Ss]eeds?\s+0\d\d\b"          # a specification by number
    r"|\b[Ss]eed\s*(?:§|:)"           # by section, or "(spec: Name)"
    r"|\b[Tt]he\s+seed\b|\b[Ss]eed's\b"  # "the spec's table", "as the spec says"
    r"|\bseeds/|\b00[02]_[0-9a-f]{16}\b"   # the specification files
    r"|§"                             # section numbers of documents not in the repository
    r"|\bARCHITECTURE\b|\bNOTES-AWS\b|\bCONVENTIONS\b|/work/shared\b")
OUTSIDE_HINTS = ("seed", "Seed", "§", "ARCHITECTURE", "NOTES-AWS", "CONVENTIONS",
                 "/work/shared", "000_", "002_")  # cheap test before the regex and tokenizer
DOCS_PATH = re.compile(r"docs/[\w./-]*[\w-](?:#[\w-]+)?")  # not after [\w./-] (checked)
PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-")
MD_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
FENCE = re.compile(r"^\s*(```|~~~)")
EXTERNAL = ("http://", "https://", "mailto:")


def scanned_files(root: Path) -> Iterator[Path]:
    for name in SCANNED_FILES:
        if (root / name).is_file():
            yield root / name
    for top in SCANNED_DIRS:
        base = root / top
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            parts = path.relative_to(root).parts
            if any(p in SKIPPED_DIRS or p.endswith(".egg-info") for p in parts):
                continue
            if path.is_file() and _is_text(path, top):
                yield path


def _is_text(path: Path, top: str) -> bool:
    if path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES:
        return True
    return not path.suffix and top in ("bin", ".ci")  # scripts without a suffix


def text_spans(path: Path, text: str) -> Iterator[tuple[int, str]]:
    """(first line, text) of what may cite: a Python file's comments and strings, all of
    any other file."""
    if path.suffix != ".py":
        yield 1, text
        return
    kinds = {tokenize.COMMENT, tokenize.STRING}
    kinds.update(k for k in (getattr(tokenize, "FSTRING_MIDDLE", None),) if k is not None)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        yield 1, text
        return
    for token in tokens:
        if token.type in kinds:
            yield token.start[0], token.string


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to
    hyphens (inline code, emphasis and link targets reduced to their text)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def markdown_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


@cache
def anchors(path: Path) -> frozenset[str]:
    text = path.read_text(encoding="utf-8")
    found: set[str] = set()
    counts: dict[str, int] = {}
    for _, line in markdown_lines(text):
        found.update(EXPLICIT_ANCHOR.findall(line))
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return frozenset(found)


def _target_problem(target: Path, anchor: str, root: Path) -> str | None:
    try:
        target.resolve().relative_to(root.resolve())
    except ValueError:
        return "points outside the repository"
    if not target.exists():
        # An ADR may be named by its number alone (docs/adr/0004): one file must match.
        numbered = list(target.parent.glob(f"{target.name}-*")) if target.parent.is_dir() \
            else []
        if len(numbered) != 1:
            return "does not exist"
        target = numbered[0]
    if anchor and target.suffix == ".md" and anchor not in anchors(target.resolve()):
        return f"has no anchor #{anchor}"
    return None


def problems(root: Path) -> list[str]:
    found: list[str] = []
    for path in scanned_files(root):
        if path.resolve() == SELF:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        rel = path.relative_to(root).as_posix()
        spans = text_spans(path, text) if any(h in text for h in OUTSIDE_HINTS) else ()
        for first, span in spans:
            for match in OUTSIDE.finditer(span):
                line = first + span.count("\n", 0, match.start())
                found.append(f"{rel}:{line}: cites {match.group(0)!r}, a document outside "
                             "the repository (cite docs/contract.md)")
        found.extend(_path_problems(text, rel, root))
        if path.suffix == ".md":
            found.extend(_link_problems(path, text, rel, root))
    return found


def _path_problems(text: str, rel: str, root: Path) -> Iterator[str]:
    """Every ``docs/…`` path of the file — in code too: a path a program reads must
    exist as well."""
    if "docs/" not in text:
        return
    for match in DOCS_PATH.finditer(text):
        if match.start() and text[match.start() - 1] in PATH_CHARS:
            continue  # part of a longer path or a URL (…/docs/…)
        name, _, anchor = match.group(0).partition("#")
        problem = _target_problem(root / name, anchor, root)
        if problem:
            line = 1 + text.count("\n", 0, match.start())
            yield f"{rel}:{line}: {match.group(0)} {problem}"


def _link_problems(path: Path, text: str, rel: str, root: Path) -> Iterator[str]:
    for number, line in markdown_lines(text):
        for match in MD_LINK.finditer(line):
            link = match.group(1)
            if link.startswith(EXTERNAL):
                continue
            name, _, anchor = link.partition("#")
            target = (path.parent / name) if name else path
            problem = _target_problem(target, anchor, root)
            if problem:
                yield f"{rel}:{number}: link ({link}) {problem}"


# ---------------------------------------------------------------- the repository


def test_comments_and_docs_cite_only_what_the_repository_holds() -> None:
    assert (ROOT / "docs" / "contract.md").is_file()
    found = problems(ROOT)
    assert not found, "\n".join(found)


def test_the_scan_covers_the_code_the_tests_and_the_docs() -> None:
    rels = {p.relative_to(ROOT).as_posix() for p in scanned_files(ROOT)}
    for expected in ("README.md", "docs/contract.md", "docs/concepts.md",
                     "runtime/agentloom_runtime/engine/engine.py",
                     "functions/agentloom/cli/__init__.py", "tests/unit/test_tool_runtime.py"):
        assert expected in rels
    assert not any("/.venv/" in r or "__pycache__" in r for r in rels)


# ---------------------------------------------------------------- the checker itself


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_outside_documents_are_found_in_comments_and_strings_only(tmp_path: Path) -> None:
    write(tmp_path, "runtime/m.py", "\n".join([
        '"""The loop (seed 002 \u00a76)."""',               # line 1
        "import random",
        "rng = random.Random(seed)  # a random seed, fine",
        'options = {"seed": 7}',
        "# as the seed says",                                  # line 5
        "x = 1  # see ARCHITECTURE, NOTES-AWS.md",             # line 6
        "def f(seed: int) -> None: ...",
        "# the seeds reorder the set",
    ]) + "\n")
    write(tmp_path, "docs/a.md", "# A\n\nFacts from CONVENTIONS.md.\n")
    found = problems(tmp_path)
    assert [f.split(": cites ")[0] for f in found] == [
        "runtime/m.py:1", "runtime/m.py:1", "runtime/m.py:5", "runtime/m.py:6",
        "runtime/m.py:6", "docs/a.md:3"]


def test_docs_paths_and_anchors_must_exist(tmp_path: Path) -> None:
    write(tmp_path, "docs/a.md", "\n".join([
        "# Page",
        '<a id="loop-order"></a>',
        "## Steps: `one` at a time",
        "## Steps: `one` at a time",
        "```",
        "## not a heading",
        "```",
        "[ok](#loop-order) [ok](b.md#b) [web](https://example.com/x.md#y)",
        "[bad](#nope) [bad](missing.md) [bad](b.md#nope) [out](../../etc/passwd)",
    ]) + "\n")
    write(tmp_path, "docs/b.md", "# B\n")
    write(tmp_path, "functions/m.py", "\n".join([
        '"""See docs/a.md#steps-one-at-a-time and docs/a.md#steps-one-at-a-time-1."""',
        "# docs/a.md#loop-order, docs/b.md, docs/ (not a path), https://h/docs/x.md",
        "# docs/a.md#not-a-heading",
        "# docs/missing.md#x and docs/b.md#b.",
        "# docs/adr/0001 (one ADR numbered so) and docs/adr/0002 (none)",
    ]) + "\n")
    write(tmp_path, "docs/adr/0001-a-decision.md", "# ADR 0001\n")
    found = problems(tmp_path)
    assert found == [
        "functions/m.py:3: docs/a.md#not-a-heading has no anchor #not-a-heading",
        "functions/m.py:4: docs/missing.md#x does not exist",
        "functions/m.py:5: docs/adr/0002 does not exist",
        "docs/a.md:9: link (#nope) has no anchor #nope",
        "docs/a.md:9: link (missing.md) does not exist",
        "docs/a.md:9: link (b.md#nope) has no anchor #nope",
        "docs/a.md:9: link (../../etc/passwd) points outside the repository",
    ]


@pytest.mark.parametrize(("heading", "anchor"), [
    ("Loop order", "loop-order"),
    ("`tool_outcome_unknown`: a tool or command may have run",
     "tool_outcome_unknown-a-tool-or-command-may-have-run"),
    ("Plan, ReAct and sub-agents", "plan-react-and-sub-agents"),
    ("Run orchestration (AWS)", "run-orchestration-aws"),
    ("See [the API](api.md)", "see-the-api"),
])
def test_slug_is_githubs(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor
