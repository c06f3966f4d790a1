"""Agents, their drafts and published versions (items ``space#{space}``
``agent#{agent}``, ``agent#{agent}`` ``draft`` and ``v#{version}``; layout in ``items``).

**A version's snapshot in parts.** A version's frozen snapshot (prompt, tools, hooks …)
may be far larger than an item (DynamoDB's 400 KB, and the platform store keeps items
below 64 KiB). ``publish`` writes a snapshot whose JSON exceeds ``INLINE_BYTES`` as parts
in the same transaction as the version item (put-if-absent, immutable like the
version)::

    agent#{agent}   v#{version}             AgentVersion, snapshot = {"$parts": n,
                                                                      "sha256": …}
    agent#{agent}   vpart#{version}#{i}     {"text": <i-th slice of the snapshot JSON>}

``vpart#`` does not start with ``v#``, so listing versions never sees a part. Reading
joins the parts and checks their count and digest (a missing or altered part is a
``PersistenceError``, never a wrong snapshot). One mechanism on every backend: the
memory and SQLite stores split the same way, so the conformance suite covers it. Above
``MAX_SNAPSHOT_BYTES`` a publish is refused (``Invalid``, ``snapshot_too_large``): the
parts must fit one transaction (100 actions, 4 MB on DynamoDB).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from agentloom.platform.domain import Agent, AgentVersion, Draft
from agentloom.platform.errors import Invalid
from agentloom_runtime.errors import PersistenceError

from .items import ABSENT, SEQ_DIGITS, ItemStore, Versioned, put, seq_key

INLINE_BYTES = 32 * 1024  # a snapshot up to this stays inside its version item
PART_BYTES = 48 * 1024  # a part's body, escaped JSON included, stays at most this
MAX_SNAPSHOT_BYTES = 2 * 1024 * 1024
MARKER = "$parts"


class Agents:
    """``store.agents``: an agent is created with its first draft; a draft is saved by
    compare-and-set; a version is written once, with the agent's ``latest_version``."""

    def __init__(self, items: ItemStore) -> None:
        self._items = items

    def create(self, agent: Agent, draft: Draft) -> None:
        self._items.transact([
            put(f"space#{agent.space_id}", f"agent#{agent.agent_id}", agent, ABSENT),
            put(f"agent#{agent.agent_id}", "draft", draft, ABSENT)])

    def get(self, space_id: str, agent_id: str) -> Versioned[Agent] | None:
        return self._items.get(f"space#{space_id}", f"agent#{agent_id}", Agent)

    def in_space(self, space_id: str) -> list[Agent]:
        return self._items.query(f"space#{space_id}", "agent#", Agent)

    def draft(self, agent_id: str) -> Versioned[Draft] | None:
        return self._items.get(f"agent#{agent_id}", "draft", Draft)

    def save_draft(self, draft: Draft, expect: int) -> None:
        self._items.transact([put(f"agent#{draft.agent_id}", "draft", draft, expect)])

    def publish(self, agent: Versioned[Agent], version: AgentVersion) -> None:
        """The new version (it must not exist) and the agent's ``latest_version``; a
        large snapshot in parts (module docstring), in the same transaction."""
        updated = agent.value.model_copy(update={"latest_version": version.version})
        pk, parted = f"agent#{version.agent_id}", parts_of(version.snapshot)
        stored, parts = version, []
        if parted is not None:
            stored = version.model_copy(update={"snapshot": parted[0]})
            parts = [put(pk, f"vpart#{version.version:0{SEQ_DIGITS}d}#{i:04d}",
                         {"text": piece}, ABSENT) for i, piece in enumerate(parted[1])]
        self._items.transact([
            put(f"space#{agent.value.space_id}", f"agent#{agent.value.agent_id}", updated,
                agent.version),
            put(pk, seq_key("v", version.version), stored, ABSENT), *parts])

    def version(self, agent_id: str, version: int) -> AgentVersion | None:
        found = self._items.get(f"agent#{agent_id}", seq_key("v", version), AgentVersion)
        return None if found is None else self._whole(found.value)

    def versions(self, agent_id: str) -> list[AgentVersion]:
        return [self._whole(v)
                for v in self._items.query(f"agent#{agent_id}", "v#", AgentVersion)]

    def _whole(self, version: AgentVersion) -> AgentVersion:
        """``version`` with its snapshot joined from its parts when it was stored so."""
        if MARKER not in version.snapshot:
            return version
        prefix = f"vpart#{version.version:0{SEQ_DIGITS}d}#"
        pieces = (json.loads(s.text)["text"]
                  for s in self._items.query_raw(f"agent#{version.agent_id}", prefix))
        return version.model_copy(update={"snapshot": joined(
            version.snapshot, pieces, where=f"agent {version.agent_id} v{version.version}")})


def _size(piece: str) -> int:
    return len(json.dumps({"text": piece}, ensure_ascii=False).encode())


def split(text: str, limit: int = PART_BYTES) -> list[str]:
    """``text`` cut into pieces whose part body is at most ``limit`` bytes (escapes and
    multi-byte characters counted)."""
    out, i = [], 0
    while i < len(text):
        n = min(limit, len(text) - i)
        while _size(text[i:i + n]) > limit:
            n = max(1, n // 2)
        out.append(text[i:i + n])
        i += n
    return out


def parts_of(snapshot: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]] | None:
    """``(marker, pieces)`` for a snapshot too large for its version item; None when it
    stays inline. ``Invalid`` above ``MAX_SNAPSHOT_BYTES``."""
    text = json.dumps(snapshot, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    size = len(text.encode())
    if size <= INLINE_BYTES:
        return None
    if size > MAX_SNAPSHOT_BYTES:
        raise Invalid(f"the agent version's snapshot is {size} bytes; a version holds at "
                      f"most {MAX_SNAPSHOT_BYTES} bytes (shorten the prompt or move "
                      "reference material into a knowledge base or a Skill)",
                      code="snapshot_too_large",
                      details={"bytes": size, "limit": MAX_SNAPSHOT_BYTES})
    pieces = split(text)
    return {MARKER: len(pieces), "sha256": hashlib.sha256(text.encode()).hexdigest()}, pieces


def joined(snapshot: Mapping[str, Any], pieces: Iterable[str], *, where: str
           ) -> dict[str, Any]:
    """The snapshot a marker stands for, from its parts in order."""
    found = list(pieces)
    text = "".join(found)
    if len(found) != int(snapshot[MARKER]) or \
            hashlib.sha256(text.encode()).hexdigest() != snapshot.get("sha256"):
        raise PersistenceError(f"the snapshot parts of {where} are incomplete or altered "
                               f"({len(found)} of {snapshot[MARKER]} parts)",
                               details={"code": "snapshot_parts_invalid"})
    value = json.loads(text)
    if not isinstance(value, dict):  # pragma: no cover (we wrote an object)
        raise PersistenceError(f"the snapshot of {where} is not an object")
    return value
