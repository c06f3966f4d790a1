"""The one botocore session of a container, with a data loader for a cold start.

botocore's own loader answers "is this a service?" by listing every folder of its data
directory (~420 services, two listings per client: the service model and its endpoint
rules; ~25 ms of stat calls on the first client) and parses its JSON into
``OrderedDict`` (the 1.2 MB ``endpoints.json`` alone: ~18 ms, ~6 ms into plain dicts,
which keep insertion order too). ``ColdStartLoader`` asks only about the service a
client is made for (its own folder: ``list_api_versions``) and parses into dicts; what it
loads, from where, and every other answer are botocore's. Listing all services (an
unknown name's error message, ``get_available_services``) still scans, on demand.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import Any, overload

import botocore.loaders
import botocore.session
from botocore.exceptions import DataNotFoundError


class PlainJsonFileLoader(botocore.loaders.JSONFileLoader):
    """botocore's JSON file loader, parsing into ``dict`` instead of ``OrderedDict``."""

    def _load_file(self, full_path: str, open_method: Any) -> Any:
        if not os.path.isfile(full_path):
            return None
        with open_method(full_path, "rb") as fp:
            return json.loads(fp.read().decode("utf-8"))


class _Services(Sequence[str]):
    """The services with a ``type_name`` model: membership probes the one service's
    folder; anything else (iterating, its length) lists them all once."""

    def __init__(self, loader: ColdStartLoader, type_name: str) -> None:
        self._loader = loader
        self._type_name = type_name
        self._all: list[str] | None = None

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or not name or os.sep in name or name.startswith("."):
            return False
        try:
            return bool(self._loader.list_api_versions(name, self._type_name))
        except DataNotFoundError:
            return False

    def _listed(self) -> list[str]:
        if self._all is None:
            self._all = self._loader.scan_services(self._type_name)
        return self._all

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._listed()[index]

    def __len__(self) -> int:
        return len(self._listed())

    def __iter__(self) -> Iterator[str]:
        return iter(self._listed())


class ColdStartLoader(botocore.loaders.Loader):
    FILE_LOADER_CLASS = PlainJsonFileLoader

    def list_available_services(self, type_name: str) -> Sequence[str]:  # type: ignore[override]
        return _Services(self, type_name)

    def scan_services(self, type_name: str) -> list[str]:
        listed: list[str] = super().list_available_services(type_name)
        return listed


def cold_start_session() -> Any:
    """A botocore session whose data loader is a ``ColdStartLoader`` on the search path
    botocore's would have (``AWS_DATA_PATH`` first, then ``~/.aws/models``, then its own
    data)."""
    session = botocore.session.get_session()
    data_path = session.get_config_variable("data_path")
    paths = ([os.path.expanduser(os.path.expandvars(p)) for p in data_path.split(os.pathsep)]
             if data_path else None)
    session.register_component("data_loader", ColdStartLoader(extra_search_paths=paths))
    return session
