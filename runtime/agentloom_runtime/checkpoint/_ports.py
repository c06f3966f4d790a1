"""The ports of ``BaseCheckpointStore`` (``store``): the codec hook and the companion.

Re-exported by ``agentloom_runtime.checkpoint.store``; the rules are in its docstring.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from agentloom_runtime.errors import PersistenceError

if TYPE_CHECKING:
    from .store import BaseCheckpointStore, Commit, ItemId


class KeySlots(Protocol):
    """Where a codec keeps its key records: a run's blob space, through the backend's
    blob primitives. ``name`` has the shape of a blob key (``sha256:<64 hex>``) but is no
    content hash; ``put`` is a no-op when the name is present."""

    def get(self, run_id: str, name: str) -> bytes | None: ...

    def put(self, run_id: str, name: str, data: bytes) -> None: ...


class Sealer(Protocol):
    """Seals the values of one write (a commit or a blob) under one data key."""

    def seal(self, item: ItemId, plaintext: bytes) -> bytes: ...


class RecordCodec(Protocol):
    """The encryption hook of ``BaseCheckpointStore`` (see the module docstring)."""

    @property
    def overhead(self) -> int:
        """Bytes an envelope adds to its plaintext (it must not depend on the item)."""
        ...

    def sealer(self, run_id: str, slots: KeySlots) -> Sealer:
        """A sealer for ``run_id``; it may store the run's key record in ``slots`` first."""
        ...

    def open(self, item: ItemId, envelope: bytes, slots: KeySlots) -> bytes:
        """The plaintext; ``PersistenceError`` if the envelope fails authentication (moved,
        altered), ``ConfigError`` if this codec's keyring cannot open its data key."""
        ...


class CompanionConflict(PersistenceError):
    """A condition of a companion's writes failed: the host's data changed since
    ``prepare`` read it. Nothing was written; the store retries the commit."""

    code = "companion_conflict"


class CompanionWrites(Protocol):
    """A host's writes, joined to one commit's transaction."""

    def join(self, transaction: object) -> None:
        """Add the writes to ``transaction`` (what it is depends on the backend: see its
        adapter). Raise ``CompanionConflict`` when one of their conditions fails."""
        ...

    def committed(self) -> None:
        """The transaction committed (notify, emit); must not raise."""
        ...


class CommitCompanion(Protocol):
    """The host port of a checkpoint store (see "Companion writes")."""

    def prepare(self, store: BaseCheckpointStore, commit: Commit) -> CompanionWrites | None:
        """The host's writes for ``commit``, computed before its transaction (``store``
        may be read: entries of ``commit`` are not stored yet); None: nothing to add."""
        ...
