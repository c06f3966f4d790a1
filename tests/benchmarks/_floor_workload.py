"""The workload ``bench_floor.py`` and its peers (``_floor_peers.py``) share: the history
loaded first, and each step's tool arguments and result.

The step texts are seeded pseudo-random letters and spaces, not a repeated character: a
store that compresses (AgentLoom's SQLite heads do) must not be flattered by text that
deflates to nothing. They deflate to about 60 %, a little less than English prose.
"""

from __future__ import annotations

import random
import string

TEXT = 400  # characters of each step's tool arguments and of its result
_ALPHABET = string.ascii_lowercase + " " * 5


def history(n: int) -> list[dict[str, str]]:
    out = []
    for i in range(n // 2):
        out.append({"role": "user", "content": f"question {i}: " + "lorem ipsum " * 20})
        out.append({"role": "assistant", "content": f"answer {i}: " + "dolor sit amet " * 20})
    return out


def text(seed: int) -> str:
    return "".join(random.Random(seed).choices(_ALPHABET, k=TEXT))


_POOL = [text(seed) for seed in range(64)]  # made once: not inside the measured steps


def argument(n: int) -> str:
    """The ``n``-th call's argument text."""
    return (f"{n} " + _POOL[n % len(_POOL)])[:TEXT]


RESULT = text(-1)
