"""An import namespace for one hook package, served from the artifact's bytes.

Modules of a package with content hash ``h`` live under the private top-level package
``agentloom_hookpkg_<h[:16]>``: two packages never share or shadow modules, nothing of
the artifact is importable under its own names, and no file is extracted to disk. Code
inside a package imports its own modules relatively (``from . import util``); absolute
imports resolve to the installed environment as usual.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Mapping, Sequence
from types import ModuleType

_LOCK = threading.Lock()
_INSTALLED: dict[str, ArtifactImporter] = {}


class ArtifactImporter(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, prefix: str, files: Mapping[str, bytes]) -> None:
        self.prefix = prefix
        self._files = {name: data for name, data in files.items() if name.endswith(".py")}
        self._dirs = {"/".join(name.split("/")[:i]) for name in files
                      for i in range(1, name.count("/") + 1)}

    def _locate(self, fullname: str) -> tuple[str | None, bool] | None:
        """(source file or None, is_package) for a module of this namespace."""
        if fullname == self.prefix:
            return ("__init__.py" if "__init__.py" in self._files else None), True
        if not fullname.startswith(self.prefix + "."):
            return None
        rel = fullname[len(self.prefix) + 1:].replace(".", "/")
        if f"{rel}/__init__.py" in self._files:
            return f"{rel}/__init__.py", True
        if f"{rel}.py" in self._files:
            return f"{rel}.py", False
        if rel in self._dirs:
            return None, True
        return None

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        found = self._locate(fullname)
        if found is None:
            return None
        source, is_package = found
        spec = importlib.util.spec_from_loader(fullname, self, is_package=is_package)
        if spec is not None and source is not None:
            spec.origin = self._origin(source)
            spec.has_location = False
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        found = self._locate(module.__name__)
        if found is None or found[0] is None:
            return  # a folder without __init__.py: an empty package
        source = found[0]
        code = compile(self._files[source], self._origin(source), "exec", dont_inherit=True)
        exec(code, module.__dict__)

    def get_source(self, fullname: str) -> str | None:
        found = self._locate(fullname)
        if found is None or found[0] is None:
            return None
        return self._files[found[0]].decode("utf-8", errors="replace")

    def _origin(self, source: str) -> str:
        return f"<hook package {self.prefix}>/{source}"


def install(prefix: str, files: Mapping[str, bytes]) -> ArtifactImporter:
    """The importer of ``prefix`` (content-addressed, so one per distinct content)."""
    with _LOCK:
        importer = _INSTALLED.get(prefix)
        if importer is None:
            importer = ArtifactImporter(prefix, files)
            _INSTALLED[prefix] = importer
            sys.meta_path.insert(0, importer)
        return importer
