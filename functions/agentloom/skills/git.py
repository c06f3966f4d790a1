"""Import a skill from a Git repository + revision + path.

The importer shells out to ``git`` in a throwaway bare repository: ``fetch --depth 1``
of the one revision (branch, tag or commit id), then ``git archive --format=zip
<commit>:<path>`` — no checkout ever touches the disk, and the archive goes through the
same checks as an upload (``archive.tree_from_zip``: links, special files, sizes…).

URL schemes: production accepts ``https://`` only, without credentials in the URL —
``ssh`` would use the host's keys and agent, ``git://`` and ``http://`` are
unauthenticated and unencrypted, ``file://``/local paths would read the server's own
disk, and ``ext::`` runs commands. ``allow_local=True`` (tests, a single-machine
``agentloom serve`` importing from its own disk by the operator's choice) adds
``file://`` and absolute local paths. Git runs with no terminal prompt
(``GIT_TERMINAL_PROMPT=0``), no askpass, no system or global config, a scrubbed
environment, ``protocol.allow=never`` except the allowed schemes, no redirects to
other protocols, a time limit and an output cap. Not checked here: which hosts an
``https`` URL reaches (git resolves the name itself) — restrict the importer's egress
in the deployment if internal Git hosts must stay unreachable.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from urllib.parse import urlsplit

from .archive import DEFAULT_LIMITS, SkillLimits, SkillTree, check_path, tree_from_zip
from .errors import SkillSourceFailed, SkillTooLarge
from .manifest import SkillSource

REVISION = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}$")
MAX_URL = 2_000


@dataclass(frozen=True)
class GitPolicy:
    allow_local: bool = False
    timeout_s: float = 60.0
    git: str = "git"


DEFAULT_GIT = GitPolicy()


def _check_url(url: str, policy: GitPolicy) -> str:
    if not isinstance(url, str) or not url or len(url) > MAX_URL or any(
            c.isspace() or ord(c) < 32 for c in url):
        raise SkillSourceFailed("url must be 1-2000 characters without spaces",
                                reason="url")
    if policy.allow_local and (url.startswith("file:///") or url.startswith("/")):
        return url
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        allowed = "https://, file:// and absolute paths" if policy.allow_local \
            else "https://"
        raise SkillSourceFailed(f"the Git URL scheme {parts.scheme or url[:20]!r} is not "
                                f"accepted; use {allowed}", reason="url_scheme")
    if parts.username or parts.password:
        raise SkillSourceFailed("credentials in the Git URL are refused; only public "
                                "repositories can be imported", reason="url_credentials")
    return url


def _env(home: str) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C",
            "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false",
            "SSH_ASKPASS": "/bin/false", "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_PROTOCOL_FROM_USER": "0"}


class _Git:
    def __init__(self, policy: GitPolicy, folder: str) -> None:
        self.policy = policy
        self.repo = os.path.join(folder, "repo.git")
        self.env = _env(folder)
        allow = ["-c", "protocol.allow=never", "-c", "protocol.https.allow=always"]
        if policy.allow_local:
            allow += ["-c", "protocol.file.allow=always"]
        self.base = [policy.git, *allow, "-c", "http.followRedirects=false",
                     "-c", "core.hooksPath=/dev/null"]

    def run(self, *args: str, cap: int = 64 * 1024, what: str) -> bytes:
        try:
            proc = subprocess.run([*self.base, "--git-dir", self.repo, *args],
                                  env=self.env, capture_output=True, stdin=subprocess.DEVNULL,
                                  timeout=self.policy.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise SkillSourceFailed(f"git {what} took longer than "
                                    f"{self.policy.timeout_s:g} s", reason="timeout") from None
        except OSError as exc:
            raise SkillSourceFailed(f"git cannot run here: {exc.strerror}",
                                    reason="git_missing") from None
        if proc.returncode != 0:
            raise SkillSourceFailed(f"git {what} failed: {_last_line(proc.stderr)}",
                                    reason=what.replace(" ", "_"))
        if len(proc.stdout) > cap:
            raise SkillTooLarge(f"git {what} gave more than {cap} bytes",
                                reason="archive_size")
        return proc.stdout


def _last_line(stderr: bytes) -> str:
    lines = [ln for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    return (lines[-1] if lines else "no message")[:300]


def tree_from_git(url: str, revision: str, path: str, *, policy: GitPolicy = DEFAULT_GIT,
                  limits: SkillLimits = DEFAULT_LIMITS) -> tuple[SkillTree, SkillSource]:
    url = _check_url(url, policy)
    if not isinstance(revision, str) or not REVISION.match(revision) or ".." in revision:
        raise SkillSourceFailed("revision must be a branch, tag or commit id "
                                "([A-Za-z0-9._/-], not starting with '-' or '.')",
                                reason="revision")
    clean = path.strip("/") if isinstance(path, str) else ""
    if clean in ("", "."):
        clean = ""
    else:
        check_path(clean, limits)
    with tempfile.TemporaryDirectory(prefix="agentloom-skill-git-") as folder:
        git = _Git(policy, folder)
        git.run("init", "--quiet", "--bare", what="init")
        git.run("fetch", "--quiet", "--no-tags", "--depth", "1", "--", url, revision,
                what="fetch")
        commit = git.run("rev-parse", "--verify", "FETCH_HEAD^{commit}",
                         what="rev-parse").decode().strip()
        treeish = f"{commit}:{clean}" if clean else commit
        data = git.run("archive", "--format=zip", treeish, what="archive",
                       cap=limits.max_archive_bytes)
    tree = tree_from_zip(data, limits)
    directory = clean.rsplit("/", 1)[-1] if clean else None
    if directory is not None and directory != tree.meta.name:
        from .errors import SkillFormatError

        raise SkillFormatError(f"SKILL.md: name {tree.meta.name!r} must equal the skill's "
                               f"directory name {directory!r}", reason="name_mismatch")
    source = SkillSource(kind="git", url=url, revision=revision, commit=commit,
                         path=clean or None)
    return tree, source
