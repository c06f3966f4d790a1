"""The command lines the CLI prints for a person to type next (``next: …``, ``continue
with `…```), formatted in one place so each works as typed.

- **The program** is named as the user invoked it: ``$AGENTLOOM_PROG`` when set (
  ``bin/agentloom`` sets it to the path it was called by, shell-quoted), else the path
  of an ``agentloom`` script that is not the one on ``PATH``, else ``agentloom``.
- **The options that pick the state** come along whenever they were given: ``--home H``
  (embedded), ``--api URL`` (a deployment; the token never: it comes from
  ``$AGENTLOOM_TOKEN`` or is typed again).
- **Way-out commands** of a stopped run come from the CLI's table in
  ``agentloom.local.operator.next_commands``; against a deployment each names the session
  before the run (``resume SESSION RUN``), and a new question is ``ask SESSION``.
- **Messages written elsewhere** (the engine's error texts, the embedded app's refusals)
  name ``agentloom …``; ``reword`` gives them this program and options before they are
  printed.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from typing import TYPE_CHECKING, NamedTuple

from agentloom.local import operator

if TYPE_CHECKING:
    from agentloom_runtime.contracts import UnknownOperation

PROG_ENV = "AGENTLOOM_PROG"
NAME = "agentloom"
_QUOTED = re.compile(r"`agentloom (?=[a-z])((?:resume|resolve|show|cancel) )?")


def program(argv0: str | None = None) -> str:
    """How the user invoked the CLI, ready to paste into a shell."""
    given = os.environ.get(PROG_ENV, "").strip()
    if given:
        return given
    path = sys.argv[0] if argv0 is None else argv0
    if os.path.basename(path) != NAME or os.sep not in path:
        return NAME  # ``python -m agentloom.cli``, or ``main()`` called by a program
    import shutil

    found = shutil.which(NAME)
    try:
        on_path = found is not None and os.path.samefile(found, path)
    except OSError:
        on_path = False
    return NAME if on_path else shlex.quote(path)


class Way(NamedTuple):
    """The prefix of every printed command: the program, then ``--home`` or ``--api``
    when the user gave them."""

    program: str = NAME
    home: str | None = None
    api: str | None = None

    @property
    def prefix(self) -> str:
        words = [self.program]
        if self.api is not None:
            words += ["--api", shlex.quote(self.api)]
        elif self.home is not None:
            words += ["--home", shlex.quote(self.home)]
        return " ".join(words)

    def command(self, *words: str) -> str:
        """``prefix`` and the words (each quoted when it needs it)."""
        return " ".join([self.prefix, *(shlex.quote(w) for w in words)])

    def run_ref(self, run_id: str, session: str | None = None) -> str:
        """How a command names a run: ``RUN``, or ``SESSION RUN`` against a deployment."""
        if self.api is None or session is None:
            return shlex.quote(run_id)
        return f"{shlex.quote(session)} {shlex.quote(run_id)}"

    def next_commands(self, run_id: str, way_out: str | None, *, code: str | None = None,
                      unknown: UnknownOperation | None = None,
                      session: str | None = None) -> list[str]:
        """The exact commands that move a stopped run on (empty while it runs)."""
        if way_out == "new_question" and self.api is not None and session is not None:
            return [f'{self.prefix} ask {shlex.quote(session)} "a new question"']
        if way_out == "change_model" and self.api is not None and session is not None:
            return [f'{self.prefix} ask {shlex.quote(session)} "the question again"   (after '
                    "fixing the model of the agent's model connection, or the agent's "
                    "model.model and publishing it: the provider has no such model, and "
                    "this run keeps the one it started with)"]
        return operator.next_commands(self.prefix, self.run_ref(run_id, session), way_out,
                                      code=code, unknown=unknown)

    def resume(self, run_id: str, session: str | None = None) -> str:
        return f"{self.prefix} resume {self.run_ref(run_id, session)}"

    def show(self, run_id: str, session: str | None = None) -> str:
        return f"{self.prefix} show {self.run_ref(run_id, session)}"

    def reword(self, text: str, *, session: str | None = None) -> str:
        """``text`` with each quoted ``agentloom …`` command given this prefix (and, for
        a deployment, the session before the run)."""
        def replace(found: re.Match[str]) -> str:
            command = found.group(1) or ""
            if command and self.api is not None and session is not None:
                command += shlex.quote(session) + " "
            return f"`{self.prefix} {command}"

        return _QUOTED.sub(replace, text)
