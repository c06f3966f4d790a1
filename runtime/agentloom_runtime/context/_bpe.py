"""bpe-openai's Rust extension, loaded without running its package (``estimators``)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from typing import Any


def openai_bindings() -> Any:
    """bpe-openai's Rust extension alone. ``import bpe_openai`` decodes every vocabulary the
    wheel ships (cl100k, o200k and voyage3, into Python dicts: ~1.6 s of CPU and their
    memory) before any count; counting never reads them, because the extension carries its
    own tables of each encoding and the wrapper's ``encode_ordinary`` is the extension's
    ``encode`` of the text. So the extension is loaded from the package's folder without
    running the package (the same module object the package would import later)."""
    name = "bpe_openai._bindings"
    if name in sys.modules:
        return sys.modules[name]
    package = importlib.util.find_spec("bpe_openai")  # finds, does not run, the package
    folders = package.submodule_search_locations if package else None
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for folder in folders or ():
            path = os.path.join(folder, f"_bindings{suffix}")
            if os.path.exists(path):
                loader = importlib.machinery.ExtensionFileLoader(name, path)
                spec = importlib.util.spec_from_file_location(name, path, loader=loader)
                assert spec is not None
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
                sys.modules[name] = module
                return module
    raise ImportError("bpe-openai's extension (_bindings) is missing: pip install bpe-openai",
                      name=name)
