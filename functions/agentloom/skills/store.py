"""Skill storage: a few item primitives per backend (``SkillItems``) under one base,
``SkillStore``, that holds every rule — content addressing, chunking, encryption,
idempotent import.

Items (partition key, sort key) → bytes, every value sealed by the envelope codec
(document ``skills:{space}``: one data key per space, key scope ``{"space", "resource":
"skills"}``; the AAD binds each value to its item, so a ciphertext moved to another
skill, file, chunk or space fails to open)::

    skill#{space}#{hash}   file#{path}#{n}   chunk n of a file (≤ CHUNK bytes)
    skill#{space}#{hash}   manifest          the SkillManifest, written last
    skills#{space}         name#{name}       the SkillRecord (name → hash imported last)
    skillkeys#{space}      {record name}     the codec's key records

A version (everything under ``skill#{space}#{hash}``) is written once and never
changed: file chunks first, the manifest after them with put-if-absent, so a manifest
that exists names complete content, and a concurrent import of the same content is a
no-op. Deleting a name removes only its catalogue entry: versions stay, because a
published agent version pinned them (``name@sha256:…``) and its runs must keep working.
Hashes and names are plaintext keys (indexes); file bytes, manifests and records are
ciphertext.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from agentloom.crypto import EnvelopeCodec
from agentloom.crypto.contracts import Keyring
from agentloom_runtime.checkpoint.store import ItemId

from .archive import SkillTree
from .manifest import SkillManifest, SkillRecord, SkillSource, manifest_of

CHUNK = 192 * 1024  # sealed (+48 bytes) it stays far below DynamoDB's 400 KB item


class SkillItems(Protocol):
    """The backend primitives. ``put(..., if_absent=True)`` returns False (and writes
    nothing) when the item exists; ``query`` gives ``(sort key, value)`` in key order."""

    def get(self, pk: str, sk: str) -> bytes | None: ...

    def put(self, pk: str, sk: str, value: bytes, *, if_absent: bool = False) -> bool: ...

    def delete(self, pk: str, sk: str) -> None: ...

    def query(self, pk: str, prefix: str) -> list[tuple[str, bytes]]: ...


class MemorySkillItems:
    """The in-memory reference backend (tests, a throwaway embedded platform)."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], bytes] = {}
        self._lock = threading.Lock()

    def get(self, pk: str, sk: str) -> bytes | None:
        return self._items.get((pk, sk))

    def put(self, pk: str, sk: str, value: bytes, *, if_absent: bool = False) -> bool:
        with self._lock:
            if if_absent and (pk, sk) in self._items:
                return False
            self._items[(pk, sk)] = bytes(value)
            return True

    def delete(self, pk: str, sk: str) -> None:
        with self._lock:
            self._items.pop((pk, sk), None)

    def query(self, pk: str, prefix: str) -> list[tuple[str, bytes]]:
        with self._lock:
            found = [(sk, v) for (p, sk), v in self._items.items()
                     if p == pk and sk.startswith(prefix)]
        return sorted(found)


class _Slots:
    """The codec's KeySlots on the items (``skillkeys#{space}``)."""

    def __init__(self, items: SkillItems) -> None:
        self.items = items

    def get(self, run_id: str, name: str) -> bytes | None:
        return self.items.get(f"skillkeys#{_space_of(run_id)}", name)

    def put(self, run_id: str, name: str, data: bytes) -> None:
        self.items.put(f"skillkeys#{_space_of(run_id)}", name, data, if_absent=True)


def _document(space_id: str) -> str:
    return f"skills:{space_id}"


def _space_of(document: str) -> str:
    return document.split(":", 1)[1]


def _version_pk(space_id: str, content_hash: str) -> str:
    return f"skill#{space_id}#{content_hash}"


class SkillStore:
    def __init__(self, items: SkillItems, keyring: Keyring) -> None:
        self.items = items
        self._codec = EnvelopeCodec(keyring, scope=lambda document: {
            "space": _space_of(document), "resource": "skills"})
        self._slots = _Slots(items)

    # -- sealing -------------------------------------------------------------------------

    def _seal(self, space_id: str, name: str, data: bytes) -> bytes:
        item = ItemId.blob(_document(space_id), name)
        return self._codec.sealer(item.run_id, self._slots).seal(item, data)

    def _open(self, space_id: str, name: str, envelope: bytes) -> bytes:
        return self._codec.open(ItemId.blob(_document(space_id), name), envelope,
                                self._slots)

    def _put(self, space_id: str, pk: str, sk: str, data: bytes, *,
             if_absent: bool = False) -> bool:
        return self.items.put(pk, sk, self._seal(space_id, f"{pk}/{sk}", data),
                              if_absent=if_absent)

    def _get(self, space_id: str, pk: str, sk: str) -> bytes | None:
        raw = self.items.get(pk, sk)
        return None if raw is None else self._open(space_id, f"{pk}/{sk}", raw)

    # -- versions ------------------------------------------------------------------------

    def save_version(self, space_id: str, tree: SkillTree) -> SkillManifest:
        """Store the tree as an immutable version (a no-op when it exists)."""
        manifest = manifest_of(tree)
        pk = _version_pk(space_id, manifest.content_hash)
        if self.items.get(pk, "manifest") is not None:
            return manifest
        for file in tree.files:
            chunks = [file.data[i:i + CHUNK] for i in range(0, len(file.data), CHUNK)] or [b""]
            for n, chunk in enumerate(chunks):
                self._put(space_id, pk, f"file#{file.path}#{n:04d}", chunk)
        self._put(space_id, pk, "manifest", manifest.model_dump_json().encode(),
                  if_absent=True)
        return manifest

    def manifest(self, space_id: str, content_hash: str) -> SkillManifest | None:
        raw = self._get(space_id, _version_pk(space_id, content_hash), "manifest")
        return None if raw is None else SkillManifest.model_validate_json(raw)

    def read_file(self, space_id: str, manifest: SkillManifest, path: str) -> bytes:
        """A file of a stored version; ``KeyError`` when the manifest has no such file."""
        entry = manifest.file(path)
        if entry is None:
            raise KeyError(path)
        pk = _version_pk(space_id, manifest.content_hash)
        parts = self.items.query(pk, f"file#{path}#")
        data = b"".join(self._open(space_id, f"{pk}/{sk}", raw) for sk, raw in parts)
        if len(data) != entry.size:
            from agentloom_runtime.errors import PersistenceError

            raise PersistenceError(f"skill {manifest.meta.name}: {path} is incomplete in "
                                   "the store", details={"content_hash":
                                                         manifest.content_hash})
        return data

    # -- the catalogue ------------------------------------------------------------------

    def import_tree(self, space_id: str, tree: SkillTree, source: SkillSource, *,
                    user_id: str) -> tuple[SkillRecord, bool]:
        """(the catalogue entry, created). Importing the content the name already has
        changes nothing (``created`` False); other content becomes the name's version."""
        current = self.get(space_id, tree.meta.name)
        manifest = self.save_version(space_id, tree)
        if current is not None and current.content_hash == manifest.content_hash:
            return current, False
        record = SkillRecord(space_id=space_id, name=tree.meta.name,
                             content_hash=manifest.content_hash,
                             description=tree.meta.description,
                             imported_at=round(time.time(), 3), imported_by=user_id,
                             source=source, file_count=len(manifest.files),
                             total_bytes=manifest.total_bytes)
        self._put(space_id, f"skills#{space_id}", f"name#{record.name}",
                  record.model_dump_json().encode())
        return record, True

    def get(self, space_id: str, name: str) -> SkillRecord | None:
        raw = self._get(space_id, f"skills#{space_id}", f"name#{name}")
        return None if raw is None else SkillRecord.model_validate_json(raw)

    def list(self, space_id: str) -> list[SkillRecord]:
        pk = f"skills#{space_id}"
        return [SkillRecord.model_validate_json(self._open(space_id, f"{pk}/{sk}", raw))
                for sk, raw in self.items.query(pk, "name#")]

    def delete(self, space_id: str, name: str) -> bool:
        """Remove the name from the space's catalogue (its versions stay, see above)."""
        if self.items.get(f"skills#{space_id}", f"name#{name}") is None:
            return False
        self.items.delete(f"skills#{space_id}", f"name#{name}")
        return True
