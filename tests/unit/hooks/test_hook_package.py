"""Hook packages loaded from a published artifact (zip or folder / Git checkout)."""

from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from unit.hooks.hook_fixtures import payload, scope

from agentloom_runtime.errors import ResumeMismatch
from agentloom_runtime.hooks import (
    HookBinding,
    HookManager,
    HookPackageError,
    HookRegistry,
    load_hook_package,
    package_hash,
)

MANIFEST = """\
name: redaction
version: "1.4.0"
hooks:
  - id: redact-arguments
    version: 1
    entry: redaction.tool_hooks:redact
    replay_safe: true
  - id: watch
    version: "2"
    entry: redaction.tool_hooks:watch
    observation: true
"""
FILES = {
    "hooks.yaml": MANIFEST,
    "redaction/__init__.py": "",
    "redaction/util.py": "def mask(text):\n    return MARK * len(text)\n\nMARK = '*'\n",
    "redaction/tool_hooks.py": (
        "from agentloom_runtime.hooks import Continue, PatchInput\n"
        "from .util import mask\n\n"
        "async def redact(ctx, payload):\n"
        "    args = {k: mask(v) if isinstance(v, str) else v\n"
        "            for k, v in payload['arguments'].items()}\n"
        "    return PatchInput({'arguments': args})\n\n"
        "async def watch(ctx, payload):\n"
        "    return Continue()\n"),
    "README.md": "Redacts tool arguments.\n",
}


def write_dir(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def write_zip(path: Path, files: dict[str, str], *, folder: str = "") -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(folder + name, text)
    return path


async def redact_through(package_path: Path) -> dict[str, Any]:
    registry = HookRegistry()
    load_hook_package(package_path, registry)
    mgr = HookManager(registry, [HookBinding("redact-arguments", "1", "tool.before"),
                                 HookBinding("watch", "2", "tool.before")])
    outcome = await mgr.run("tool.before", payload("tool.before"), scope("tool.before"))
    return dict(outcome.payload)


async def test_a_zip_package_is_loaded_registered_and_run(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "redaction.zip", FILES)
    package = load_hook_package(path)
    expected = package_hash({k: v.encode() for k, v in FILES.items()})
    assert package.code_hash == expected and expected.startswith("sha256:")
    assert (package.name, package.version) == ("redaction", "1.4.0")
    assert package.files == tuple(sorted(FILES))
    redact, watch = package.definitions
    assert (redact.hook_id, redact.version, redact.replay_safe) == ("redact-arguments", "1", True)
    assert (watch.hook_id, watch.observation) == ("watch", True)
    assert redact.fingerprint == watch.fingerprint == f"artifact:{expected}"
    result = await redact_through(path)
    assert result["arguments"] == {"text": "*"}


def test_modules_live_in_a_private_namespace(tmp_path: Path) -> None:
    package = load_hook_package(write_zip(tmp_path / "p.zip", FILES))
    assert "redaction" not in sys.modules and "redaction.tool_hooks" not in sys.modules
    handler = package.definitions[0].handler
    assert handler.__module__ == f"{package.namespace}.redaction.tool_hooks"
    assert package.namespace.startswith("agentloom_hookpkg_")


async def test_two_versions_of_a_package_do_not_share_modules(tmp_path: Path) -> None:
    other = {**FILES, "redaction/util.py": FILES["redaction/util.py"].replace("'*'", "'#'")}
    first = write_zip(tmp_path / "a.zip", FILES)
    second = write_zip(tmp_path / "b.zip", other)
    assert (await redact_through(first))["arguments"] == {"text": "*"}
    assert (await redact_through(second))["arguments"] == {"text": "#"}
    assert (await redact_through(first))["arguments"] == {"text": "*"}


def test_a_folder_a_wrapped_zip_and_a_git_checkout_hash_alike(tmp_path: Path) -> None:
    plain = load_hook_package(write_zip(tmp_path / "plain.zip", FILES)).code_hash
    wrapped = write_zip(tmp_path / "wrapped.zip", FILES, folder="redaction-1.4.0/")
    assert load_hook_package(wrapped).code_hash == plain
    checkout = write_dir(tmp_path / "checkout", {
        **FILES, ".git/HEAD": "ref: refs/heads/main\n",
        ".git/refs/heads/main": "0123456789abcdef0123456789abcdef01234567\n",
        "redaction/__pycache__/util.cpython-311.pyc": "junk"})
    package = load_hook_package(checkout)
    assert package.code_hash == plain
    assert package.revision == "0123456789abcdef0123456789abcdef01234567"
    assert not any(".git" in name or "__pycache__" in name for name in package.files)


def test_a_changed_byte_blocks_the_resume(tmp_path: Path) -> None:
    def manager(files: dict[str, str], name: str, saved: Any = None) -> HookManager:
        registry = HookRegistry()
        load_hook_package(write_zip(tmp_path / name, files), registry)
        return HookManager(registry, [HookBinding("redact-arguments", "1", "tool.before")],
                           saved_config=saved)

    config = json.loads(json.dumps(manager(FILES, "v1.zip").checkpoint_config()))
    manager(FILES, "same.zip", config)  # the same content resumes
    changed = {**FILES, "README.md": "Redacts tool arguments!\n"}  # even a non-code byte
    with pytest.raises(ResumeMismatch, match="hook redact-arguments at tool.before "
                                             r"\(order 0\): code fingerprint mismatch"):
        manager(changed, "v2.zip", config)


def test_a_json_manifest_is_accepted(tmp_path: Path) -> None:
    manifest = {"hooks": [{"id": "watch", "version": "2",
                           "entry": "redaction.tool_hooks:watch", "observation": True}]}
    files = {**{k: v for k, v in FILES.items() if k != "hooks.yaml"},
             "manifest.json": json.dumps(manifest)}
    package = load_hook_package(write_dir(tmp_path / "pkg", files))
    assert [d.hook_id for d in package.definitions] == ["watch"]
    assert package.name == "pkg" and package.revision is None


@pytest.mark.parametrize("files, message", [
    ({**FILES, "manifest.json": "{}"}, "exactly one of"),
    ({k: v for k, v in FILES.items() if k != "hooks.yaml"}, "exactly one of"),
    ({**FILES, "hooks.yaml": "hooks: []\n"}, "invalid"),
    ({**FILES, "hooks.yaml": "hooks:\n  - {id: x, version: '1', entry: 'no_colon'}\n"},
     "invalid"),
    ({**FILES, "hooks.yaml": "hooks:\n  - {id: x, version: '1', entry: 'gone:f'}\n"},
     "importing gone failed"),
    ({**FILES, "hooks.yaml": "hooks:\n  - {id: x, version: '1', "
                             "entry: 'redaction.util:missing'}\n"}, "has no missing"),
    ({**FILES, "hooks.yaml": "hooks:\n  - {id: x, version: '1', "
                             "entry: 'redaction.util:mask'}\n"}, "async"),
    ({**FILES, "hooks.yaml": "hooks: [unclosed\n"}, "cannot be parsed"),
])
def test_invalid_packages_are_refused(tmp_path: Path, files: dict[str, str],
                                      message: str) -> None:
    with pytest.raises(HookPackageError, match=message):
        load_hook_package(write_zip(tmp_path / "bad.zip", files))


@pytest.mark.parametrize("name", ["../evil.py", "/abs.py", "a/../../b.py", "a\\b.py"])
def test_unsafe_zip_paths_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(HookPackageError, match="unsafe path"):
        load_hook_package(write_zip(tmp_path / "bad.zip", {**FILES, name: "x = 1\n"}))


def test_links_in_a_folder_are_refused(tmp_path: Path) -> None:
    root = write_dir(tmp_path / "pkg", FILES)
    os.symlink("/etc/hostname", root / "redaction" / "host.txt")
    with pytest.raises(HookPackageError, match="link or special file"):
        load_hook_package(root)


def test_neither_a_folder_nor_a_zip(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(HookPackageError, match="neither"):
        load_hook_package(tmp_path / "x.txt")
