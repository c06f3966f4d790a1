"""``serve token`` as an operator uses it: a lifetime must be positive (``--ttl-days 0``
used to make a token that never expires), the user's tokens are listed without their
secrets, and a token is revoked by its id — from then on the server refuses it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agentloom.api.serve import main
from agentloom.local.embedded import EmbeddedPlatform
from agentloom.platform.errors import Invalid, Unauthorized


def serve_token(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> tuple[int, str,
                                                                                       str]:
    code = main(["token", "--home", str(home), "--user", "alice", *args])
    out, err = capsys.readouterr()
    return code, out, err


def authenticate(home: Path, secret: str) -> str:
    platform = EmbeddedPlatform.open(home)
    try:
        return platform.tokens.authenticate({"authorization": f"Bearer {secret}"}, {}).user_id
    finally:
        platform.close()


def test_a_token_lifetime_of_zero_days_is_refused_not_forever(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    for days in ("0", "-1", "nan"):
        code, out, err = serve_token(capsys, home, "--ttl-days", days)
        assert code == 2 and "agl_" not in out, (days, out)
        assert "--ttl-days must be a positive number of days" in err, err
    code, out, _ = serve_token(capsys, home, "--list")
    assert code == 0 and json.loads(out) == []  # nothing was issued
    code, out, _ = serve_token(capsys, home, "--ttl-days", "1")
    issued = json.loads(out)
    assert code == 0 and abs(issued["expires_at"] - (time.time() + 86400)) < 60
    platform = EmbeddedPlatform.open(home)
    try:
        with pytest.raises(Invalid, match="positive"):
            platform.tokens.issue("alice", ttl_seconds=0)
    finally:
        platform.close()


def test_a_token_is_revoked_by_its_id_and_then_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    assert main(["bootstrap", "--home", str(home), "--user", "alice"]) == 0
    boot = json.loads(capsys.readouterr().out)
    code, out, _ = serve_token(capsys, home, "--label", "laptop")
    laptop = json.loads(out)
    assert authenticate(home, laptop["token"]) == "alice"
    code, out, _ = serve_token(capsys, home, "--list")
    listed = json.loads(out)
    assert code == 0 and [t["token_id"] for t in listed] == [boot["token_id"],
                                                             laptop["token_id"]]
    assert [t["label"] for t in listed] == ["bootstrap", "laptop"]
    assert not any(t["revoked"] for t in listed) and "agl_" not in out
    assert "secret" not in out
    code, out, _ = serve_token(capsys, home, "--revoke", laptop["token_id"])
    assert code == 0 and json.loads(out) == {"user": "alice", "token_id": laptop["token_id"],
                                             "revoked": True}
    with pytest.raises(Unauthorized):
        authenticate(home, laptop["token"])
    assert authenticate(home, boot["token"]) == "alice"  # the other token still works
    code, out, _ = serve_token(capsys, home, "--list")
    assert [t["revoked"] for t in json.loads(out)] == [False, True]
    code, _, err = serve_token(capsys, home, "--revoke", "tok_nothing")
    assert code == 2 and "has no token 'tok_nothing'" in err
    code = main(["token", "--home", str(home), "--user", "bob", "--revoke", boot["token_id"]])
    assert code == 2  # only its owner's id reaches a token
    assert authenticate(home, boot["token"]) == "alice"
