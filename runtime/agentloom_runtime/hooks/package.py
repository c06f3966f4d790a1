"""Hook packages: hooks shipped as a published artifact instead of platform code.

A package is a zip file or a folder (a Git checkout is a folder: ``.git`` is ignored)
with one manifest at its root, ``hooks.yaml`` or ``manifest.json``::

    name: redaction            # optional
    version: "1.4.0"           # optional
    hooks:
      - id: redact-arguments
        version: "1"
        entry: redaction.tool_hooks:redact   # module:function, relative to the root
        replay_safe: true                    # optional, default false
        observation: false                   # optional, default false

The package hash is SHA-256 over the sorted file names and bytes (``.git``,
``__pycache__`` and ``*.pyc`` excluded; a zip whose entries sit in one top folder is
read as that folder), so a zip of a folder and the folder hash alike. Every hook of the
package gets ``code_hash`` = that hash: changing any byte of the package blocks the
resume of runs that used it. Modules are imported from the artifact's bytes into a
private namespace (see ``_importer``). A package is trusted Python, not a sandbox.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import stat
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from ._importer import install
from .errors import HookConfigError, HookPackageError
from .registry import HookDefinition, HookRegistry

MANIFEST_NAMES = ("hooks.yaml", "manifest.json")
EXCLUDED_PARTS = frozenset({".git", "__pycache__"})
MAX_FILES = 2_000
MAX_BYTES = 32 * 1024 * 1024

_MANIFEST_SCHEMA = {
    "type": "object", "required": ["hooks"], "additionalProperties": False,
    "properties": {
        "format": {"const": 1}, "name": {"type": "string"},
        "version": {"type": ["string", "integer"]},
        "hooks": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["id", "version", "entry"],
            "additionalProperties": False,
            "properties": {
                "id": {"type": "string", "minLength": 1, "maxLength": 200},
                "version": {"type": ["string", "integer"]},
                "entry": {"type": "string",
                          "pattern": r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$"},
                "replay_safe": {"type": "boolean"}, "observation": {"type": "boolean"}}}}}}
_VALIDATOR = Draft202012Validator(_MANIFEST_SCHEMA)


@dataclass(frozen=True)
class HookPackage:
    name: str
    version: str
    code_hash: str  # "sha256:<hex>"
    namespace: str  # the private module prefix
    definitions: tuple[HookDefinition, ...]
    files: tuple[str, ...]
    revision: str | None = None  # Git commit of a checkout, when readable (not hashed)

    def register(self, registry: HookRegistry) -> None:
        for definition in self.definitions:
            registry.register(definition)


def package_hash(files: Mapping[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        data = files[name]
        digest.update(name.encode("utf-8") + b"\0" + len(data).to_bytes(8, "big"))
        digest.update(data)
    return "sha256:" + digest.hexdigest()


def load_hook_package(path: str | os.PathLike[str], registry: HookRegistry | None = None,
                      ) -> HookPackage:
    """Read, hash and import a hook package; register its hooks when ``registry`` is
    given."""
    root = Path(path)
    if root.is_dir():
        files, revision = _read_dir(root), _git_revision(root)
    elif zipfile.is_zipfile(root):
        files, revision = _unwrap(_read_zip(root)), None
    else:
        raise HookPackageError(f"{root} is neither a folder nor a zip file")
    manifest = _manifest(files)
    code_hash = package_hash(files)
    namespace = "agentloom_hookpkg_" + code_hash.split(":", 1)[1][:16]
    install(namespace, files)
    definitions = tuple(_definition(entry, namespace, code_hash) for entry in manifest["hooks"])
    package = HookPackage(
        name=str(manifest.get("name") or root.stem), version=str(manifest.get("version", "")),
        code_hash=code_hash, namespace=namespace, definitions=definitions,
        files=tuple(sorted(files)), revision=revision)
    if registry is not None:
        package.register(registry)
    return package


def _definition(entry: Mapping[str, Any], namespace: str, code_hash: str) -> HookDefinition:
    module_name, _, attr = str(entry["entry"]).partition(":")
    try:
        module = importlib.import_module(f"{namespace}.{module_name}")
    except Exception as exc:
        raise HookPackageError(f"hook {entry['id']}: importing {module_name} failed "
                               f"({type(exc).__name__}: {exc})") from exc
    handler = getattr(module, attr, None)
    if handler is None:
        raise HookPackageError(f"hook {entry['id']}: {module_name} has no {attr}")
    try:
        return HookDefinition(str(entry["id"]), str(entry["version"]), handler,
                              replay_safe=bool(entry.get("replay_safe", False)),
                              observation=bool(entry.get("observation", False)),
                              code_hash=code_hash)
    except HookConfigError as exc:
        raise HookPackageError(exc.message) from None


def _manifest(files: Mapping[str, bytes]) -> dict[str, Any]:
    present = [n for n in MANIFEST_NAMES if n in files]
    if len(present) != 1:
        raise HookPackageError(f"a hook package needs exactly one of {list(MANIFEST_NAMES)} "
                               f"at its root (found {present or 'none'})")
    raw = files[present[0]]
    try:
        data = yaml.safe_load(raw) if present[0].endswith(".yaml") else json.loads(raw)
    except (yaml.YAMLError, ValueError) as exc:
        raise HookPackageError(f"{present[0]} cannot be parsed: {exc}") from None
    errors = sorted(_VALIDATOR.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path) or "(top level)"
        raise HookPackageError(f"{present[0]} is invalid at {where}: {errors[0].message}")
    assert isinstance(data, dict)
    return data


def _clean(name: str) -> str | None:
    """The normalized relative name, or None for excluded files."""
    parts = name.split("/")
    if name.startswith("/") or "\\" in name or "\0" in name or any(
            p in ("", ".", "..") for p in parts):
        raise HookPackageError(f"unsafe path in package: {name!r}")
    if EXCLUDED_PARTS & set(parts) or name.endswith(".pyc"):
        return None
    return name


def _add(files: dict[str, bytes], name: str, data: bytes, total: int) -> int:
    if name in files:
        raise HookPackageError(f"duplicate file in package: {name}")
    if len(files) >= MAX_FILES or total + len(data) > MAX_BYTES:
        raise HookPackageError(f"package exceeds {MAX_FILES} files or {MAX_BYTES} bytes")
    files[name] = data
    return total + len(data)


def _read_zip(path: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                raise HookPackageError(f"symbolic link in package: {info.filename}")
            name = _clean(info.filename)
            if name is None:
                continue
            if info.file_size > MAX_BYTES - total:
                raise HookPackageError(f"package exceeds {MAX_BYTES} bytes")
            with archive.open(info) as handle:
                data = handle.read(MAX_BYTES - total + 1)
            total = _add(files, name, data, total)
    return files


def _unwrap(files: dict[str, bytes]) -> dict[str, bytes]:
    """A zip made of one folder is read as that folder."""
    if any(n in files for n in MANIFEST_NAMES):
        return files
    tops = {name.split("/", 1)[0] for name in files}
    if len(tops) == 1 and all("/" in n for n in files):
        cut = len(next(iter(tops))) + 1
        return {name[cut:]: data for name, data in files.items()}
    return files


def _read_dir(root: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDED_PARTS)
        for entry in [*dirnames, *filenames]:
            full = Path(dirpath, entry)
            mode = full.lstat().st_mode
            if stat.S_ISLNK(mode) or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise HookPackageError(f"{full.relative_to(root)} is a link or special file")
        for filename in filenames:
            name = _clean(Path(dirpath, filename).relative_to(root).as_posix())
            if name is not None:
                total = _add(files, name, Path(dirpath, filename).read_bytes(), total)
    return files


def _git_revision(root: Path) -> str | None:
    """The commit a checkout is at, read from ``.git`` without running git."""
    git = root / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head or None
        ref = head[5:]
        loose = git / ref
        if loose.is_file():
            return loose.read_text().strip() or None
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split(" ", 1)[0]
    except OSError:
        return None
    return None
