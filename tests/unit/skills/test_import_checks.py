"""Import checks: the frontmatter and every hostile-archive check, each a typed error
naming the file (``details.path``) and the check (``details.reason``)."""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path

import pytest
from unit.skills.builders import SCRIPT, hello_zip, skill_md, zip_of

from agentloom.platform.errors import PlatformError
from agentloom.skills import SkillLimits, tree_from_directory, tree_from_zip
from agentloom.skills.archive import DEFAULT_LIMITS
from agentloom.skills.errors import (
    SkillArchiveInvalid,
    SkillFileRefused,
    SkillFormatError,
    SkillTooLarge,
)


def refused(data: bytes, kind: type[PlatformError], reason: str,
            limits: SkillLimits = DEFAULT_LIMITS) -> PlatformError:
    with pytest.raises(kind) as caught:
        tree_from_zip(data, limits)
    assert caught.value.details["reason"] == reason, caught.value.details
    return caught.value


def test_a_skill_folder_zip_gives_the_tree() -> None:
    tree = tree_from_zip(hello_zip())
    assert tree.meta.name == "hello" and tree.meta.description == "Says hello."
    assert [f.path for f in tree.files] == ["SKILL.md", "references/guide.md",
                                            "scripts/x.py"]
    assert tree.body.startswith("# Hello")
    root = tree_from_zip(hello_zip(folder=""))  # SKILL.md at the root: no directory
    assert root.meta.name == "hello"


def test_optional_fields_are_kept_and_unknown_ones_refused() -> None:
    extra = ("license: MIT\ncompatibility: needs python3\nmetadata:\n  author: ada\n"
             "allowed-tools: Bash(git:*) Read\n")
    tree = tree_from_zip(zip_of({"hello/SKILL.md": skill_md(extra=extra)}))
    assert (tree.meta.license, tree.meta.compatibility) == ("MIT", "needs python3")
    assert tree.meta.metadata == {"author": "ada"}
    assert tree.meta.allowed_tools == "Bash(git:*) Read"
    err = refused(zip_of({"hello/SKILL.md": skill_md(extra="model: gpt\n")}),
                  SkillFormatError, "unknown_field")
    assert "'model'" in err.message


@pytest.mark.parametrize(("text", "reason"), [
    ("no frontmatter\n", "frontmatter_missing"),
    ("---\nname: hello\n", "frontmatter_unclosed"),
    ("---\nname: [\n---\n", "yaml"),
    ("---\n- a\n---\n", "yaml"),
    ("---\nname: hello\n---\n", "field"),  # no description
    ("---\nname: hello\ndescription: \"   \"\n---\n", "field"),  # only whitespace
    ("---\nname: hello\ndescription: \"\\t\\n\"\n---\n", "field"),
    ("---\nname: Hello\ndescription: x\n---\n", "name"),
    ("---\nname: he--llo\ndescription: x\n---\n", "name"),
    ("---\nname: other\ndescription: x\n---\n", "name_mismatch"),
    ("---\nname: hello\ndescription: " + "x" * 1025 + "\n---\n", "field"),
    ("---\nname: hello\ndescription: x\ncompatibility: " + "y" * 501 + "\n---\n", "field"),
])
def test_bad_frontmatter_is_refused(text: str, reason: str) -> None:
    err = refused(zip_of({"hello/SKILL.md": text}), SkillFormatError, reason)
    assert err.code == "skill_format" and err.status == 422


def test_skill_md_not_utf8_is_refused() -> None:
    refused(zip_of({"hello/SKILL.md": b"---\nname: hello\xff\n---\n"}), SkillFormatError,
            "encoding")


@pytest.mark.parametrize(("files", "reason"), [
    ({"hello/scripts/x.py": SCRIPT}, "skill_md_missing"),
    ({"hello/SKILL.md": skill_md(), "hello/sub/SKILL.md": skill_md()}, "skill_md_multiple"),
    ({"a/b/SKILL.md": skill_md()}, "skill_md_depth"),
])
def test_exactly_one_skill_md(files: dict[str, bytes | str], reason: str) -> None:
    refused(zip_of(files), SkillFormatError, reason)


@pytest.mark.parametrize(("name", "reason"), [
    ("hello/../../etc/passwd", "traversal"),
    ("/etc/passwd", "absolute_path"),
    ("C:/windows/x", "absolute_path"),
    ("hello\\..\\x", "path_characters"),
    ("hello/-rf", "path_characters"),
    ("hello/sp ace", "path_characters"),
    ("hello/" + "a/" * 7 + "x", "path_depth"),
    ("hello/" + ("a" * 100 + "/") * 2 + "a" * 50, "path_length"),  # 252 inside
])
def test_bad_paths_are_refused_by_name(name: str, reason: str) -> None:
    err = refused(zip_of({"hello/SKILL.md": skill_md(), name: "x"}), SkillFileRefused,
                  reason)
    assert err.details["path"] == name and err.code == "skill_file_refused"


def test_path_depth_counts_inside_the_skill_folder_like_a_git_import() -> None:
    """Issue 17: a zip of the skill's folder counted that folder toward the 6-level
    depth, so a skill a Git import takes (files 6 deep inside it) was refused as a
    zip. Depth (and length) count inside the skill, with or without the folder."""
    deep = "a/b/c/d/e/six.md"  # 6 segments inside the skill: the most allowed
    for folder in ("hello/", ""):
        tree = tree_from_zip(hello_zip(folder=folder, **{deep: "deep"}))
        assert deep in [f.path for f in tree.files]
        err = refused(hello_zip(folder=folder, **{"a/b/c/d/e/f/seven.md": "x"}),
                      SkillFileRefused, "path_depth")
        assert err.details["path"] == f"{folder}a/b/c/d/e/f/seven.md"
        long = "d" * 120 + "/" + "f" * 119  # 240 characters inside the skill
        assert long in [f.path for f in tree_from_zip(
            hello_zip(folder=folder, **{long: "x"})).files]


@pytest.mark.parametrize(("mode", "reason"), [
    (stat.S_IFLNK | 0o777, "symlink"),
    (stat.S_IFIFO | 0o644, "special_file"),
    (stat.S_IFCHR | 0o644, "special_file"),
    (stat.S_IFSOCK | 0o644, "special_file"),
])
def test_links_and_special_files_are_refused(mode: int, reason: str) -> None:
    files: dict[str, bytes | str] = {"hello/SKILL.md": skill_md(), "hello/bad": "/etc/passwd"}
    err = refused(zip_of(files, modes={"hello/bad": mode}), SkillFileRefused, reason)
    assert err.details["path"] == "hello/bad"


def test_files_outside_the_skill_folder_and_duplicates_are_refused() -> None:
    refused(zip_of({"hello/SKILL.md": skill_md(), "other/x": "x"}), SkillFileRefused,
            "outside_skill")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive, pytest.warns(UserWarning):
        archive.writestr("hello/SKILL.md", skill_md())
        archive.writestr("hello/SKILL.md", skill_md())
    refused(out.getvalue(), SkillFileRefused, "duplicate")


def test_encrypted_entries_are_refused() -> None:
    data = bytearray(zip_of({"hello/SKILL.md": skill_md()}, compression=zipfile.ZIP_STORED))
    # set the "encrypted" flag bit in the local and central headers
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):
        at = data.find(sig)
        offset = at + (6 if sig == b"PK\x03\x04" else 8)
        data[offset] |= 0x1
    refused(bytes(data), SkillFileRefused, "encrypted")


def test_size_limits() -> None:
    limits = SkillLimits(max_file_bytes=100, max_total_bytes=170, max_files=3,
                         max_archive_bytes=4_000)
    big = zip_of({"hello/SKILL.md": skill_md(), "hello/assets/big.bin": "x" * 101})
    assert refused(big, SkillTooLarge, "file_size", limits).status == 413
    many = zip_of({"hello/SKILL.md": skill_md(), **{f"hello/{i}": "x" for i in range(4)}})
    refused(many, SkillTooLarge, "file_count", limits)
    total = zip_of({"hello/SKILL.md": skill_md(), "hello/a": "x" * 90, "hello/b": "y" * 90})
    refused(total, SkillTooLarge, "total_size", limits)
    refused(b"x" * 4_001, SkillTooLarge, "archive_size", limits)


def test_a_zip_bomb_is_refused_before_inflating() -> None:
    bomb = zip_of({"hello/SKILL.md": skill_md(), "hello/zeros": b"\0" * (2 * 1024 * 1024)})
    err = refused(bomb, SkillTooLarge, "compression_ratio")
    assert err.details["path"] == "hello/zeros"


def test_a_header_lying_about_the_size_is_caught_while_reading() -> None:
    data = bytearray(zip_of({"hello/SKILL.md": skill_md(), "hello/a": "x" * 500},
                            compression=zipfile.ZIP_STORED))
    central = data.find(b"PK\x01\x02", data.find(b"hello/a"))  # the entry of hello/a
    data[central + 24:central + 28] = (10).to_bytes(4, "little")  # uncompressed size
    with pytest.raises((SkillTooLarge, SkillArchiveInvalid)):
        tree_from_zip(bytes(data))


def test_not_a_zip() -> None:
    refused(b"not a zip at all", SkillArchiveInvalid, "archive")


def test_a_folder_import_refuses_links_and_hard_links(tmp_path: Path) -> None:
    folder = tmp_path / "hello"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_md())
    (folder / "scripts" / "x.py").write_text(SCRIPT)
    assert [f.path for f in tree_from_directory(folder).files] == ["SKILL.md",
                                                                  "scripts/x.py"]
    (folder / "scripts" / "link").symlink_to("/etc/passwd")
    with pytest.raises(SkillFileRefused, match="symbolic"):
        tree_from_directory(folder)
    (folder / "scripts" / "link").unlink()
    (folder / "hard").hardlink_to(folder / "scripts" / "x.py")
    with pytest.raises(SkillFileRefused, match="hard-linked"):
        tree_from_directory(folder)
