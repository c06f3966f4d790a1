"""The ``WorkspaceStorage`` port (docs/contract.md#modules): what file tools need from a backend.

``PosixWorkspaceStore`` is the default. Another backend (``WorkspaceProvider``'s
``store_factory``) must keep the same rules: workspace-relative paths only, stable
``WorkspaceError`` codes, atomic writes under the session write lock, refusal of
mutations while a command marker is pending, and blocking I/O through ``storage_call``
so that a cancelled call waits for its I/O.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

JSONDict = dict[str, Any]


@runtime_checkable
class WorkspaceStorage(Protocol):
    async def read(self, path: str, *, start_line: int = 1, end_line: int | None = None,
                   max_lines: int = 2000, max_bytes: int = 64 * 1024) -> JSONDict: ...

    async def write(self, path: str, content: str, *,
                    expected_sha256: str | None = None) -> JSONDict: ...

    async def list(self, path: str = ".", *, recursive: bool = False,
                   max_entries: int | None = None) -> JSONDict: ...

    async def stat(self, path: str) -> JSONDict: ...

    async def glob(self, pattern: str, *, max_results: int | None = None) -> JSONDict: ...

    async def grep(self, pattern: str, *, path: str = ".", include: str | None = None,
                   regex: bool = False, case_sensitive: bool = True,
                   max_results: int | None = None) -> JSONDict: ...

    async def edit(self, path: str, old_text: str, new_text: str, *, replace_all: bool = False,
                   expected_sha256: str | None = None) -> JSONDict: ...

    async def mkdir(self, path: str, *, parents: bool = True) -> JSONDict: ...

    async def delete(self, path: str, *, expected_sha256: str | None = None) -> JSONDict: ...

    async def ensure_writable(self) -> None:
        """Raise ``sandbox_marker_present`` while a command of unknown fate may run."""
        ...
