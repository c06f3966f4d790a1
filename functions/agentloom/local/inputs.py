"""What the CLI reads from a person, checked before anything is stored: the question
(from the command line, a file or stdin, at most ``MAX_QUESTION_CHARS``), an operator's
account of a command's output, and the state directory (``--home``).

Every problem is a ``ConfigError`` with a message for a person, never a traceback.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from agentloom_runtime.errors import ConfigError

if TYPE_CHECKING:
    import sqlite3

MAX_QUESTION_CHARS = 100_000
MAX_OUTPUT_CHARS = 1_000_000
DATABASE = "agentloom.sqlite3"


def _input_error(message: str, code: str = "invalid_input") -> ConfigError:
    return ConfigError(message, details={"code": code})


def _read_stream(stream: BinaryIO, limit: int) -> bytes:
    """At most what ``limit`` characters can take in UTF-8 (4 bytes each), plus one."""
    return stream.read(4 * limit + 1)


def read_text(path: str, *, what: str, limit: int, pipes: bool = True) -> str:
    """UTF-8 text of at most ``limit`` characters from ``path`` (``-``: stdin). A regular
    file, a pipe (unless ``pipes`` is False) or stdin; a directory or a device is refused,
    and nothing unbounded (``/dev/zero``) is read past the limit."""
    if path == "-" and pipes:
        data = _read_stream(sys.stdin.buffer, limit)
        source = "stdin"
    else:
        source = path
        try:
            mode = os.stat(path).st_mode
            if stat.S_ISDIR(mode):
                raise _input_error(f"{what} {path} is a directory, not a file")
            if not (stat.S_ISREG(mode) or (pipes and stat.S_ISFIFO(mode))):
                kinds = "a regular file or a pipe" if pipes else "a regular file"
                raise _input_error(f"{what} {path} is not {kinds}")
            with open(path, "rb") as stream:
                data = _read_stream(stream, limit)
        except FileNotFoundError:
            raise _input_error(f"{what} {path} does not exist") from None
        except OSError as err:
            raise _input_error(f"cannot read {what} {path}: {err.strerror}") from None
    if len(data) > 4 * limit:
        raise too_long(what, None, limit)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise _input_error(f"{what} from {source} is not UTF-8 text (invalid byte at "
                           f"offset {err.start})") from None
    check_length(text, what=what, limit=limit)
    return text


def too_long(what: str, length: int | None, limit: int) -> ConfigError:
    size = f" has {length:,} characters;" if length is not None else " is too long;"
    return _input_error(f"the {what}{size} the limit is {limit:,}. Put large material in "
                        "a file of the workspace and ask about it instead.", "input_too_large")


def check_length(text: str, *, what: str, limit: int) -> None:
    if len(text) > limit:
        raise too_long(what, len(text), limit)


def question(positional: str | None, question_file: str | None) -> str:
    """The question, from exactly one of the argument or ``--question-file``."""
    if positional is not None and question_file is not None:
        raise _input_error("give the question either as an argument or with "
                           "--question-file, not both")
    if question_file is not None:
        what = "question from stdin" if question_file == "-" else "question file"
        text = read_text(question_file, what=what, limit=MAX_QUESTION_CHARS)
    elif positional is not None:
        text = positional
        check_length(text, what="question", limit=MAX_QUESTION_CHARS)
    else:
        raise _input_error("no question: give it as an argument, or with "
                           "--question-file PATH (- for stdin)")
    if not text.strip():
        raise _input_error("the question is empty")
    return text


# ------------------------------------------------------------------ the state directory


def _unusable(home: Path, reason: str) -> ConfigError:
    return ConfigError(f"the state directory {home} {reason} (--home / AGENTLOOM_HOME)",
                       details={"code": "state_dir_unusable"})


def check_new_home(home: Path) -> None:
    """``run`` may create the state directory: it must be a directory or be creatable,
    and writable. Nothing is created here."""
    if home.exists() and not home.is_dir():
        raise _unusable(home, "is not a directory")
    probe = home
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise _unusable(home, f"cannot be created: {probe} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        where = "is" if probe == home else f"cannot be created: {probe} is"
        raise _unusable(home, f"{where} not writable")


def check_existing_home(home: Path) -> None:
    """``resume``, ``resolve`` and ``show`` read runs: the directory must exist (it is
    never created by them) and hold the run database."""
    if not home.exists():
        raise _unusable(home, "does not exist; give the state directory the run was "
                              "started with")
    if not home.is_dir():
        raise _unusable(home, "is not a directory")
    if not (home / DATABASE).is_file():
        raise _unusable(home, f"holds no runs (no {DATABASE})")


def storage_error(home: Path, err: OSError | sqlite3.Error) -> ConfigError:
    reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
    return _unusable(home, f"cannot be used: {reason}")
