"""Who calls: a ``Principal`` from API Gateway's JWT claims (AWS) or a bearer token
(embedded mode, ``agentloom serve``).

- **JWT** (``JwtClaims``): API Gateway's JWT authorizer has verified the token; the
  Lambda reads ``requestContext.authorizer.jwt.claims.sub``. Trusted only behind that
  authorizer — ``serve`` never reads claims from a request.
- **Bearer tokens** (``BearerTokens``): ``agl_`` + 43 random URL-safe characters (256
  bits), created by a service call (``issue``: the bootstrap and token commands). Only
  the sha256 of the secret is stored; a lookup hashes the presented secret, so a
  database copy grants nothing. A token lives for good unless it is issued with a
  lifetime (``ttl_seconds`` > 0) or revoked by its owner's id (``revoke``; ``tokens``
  lists a user's tokens without their secrets).

User ids are opaque strings of 1–128 printable characters without ``#``, ``/`` or
whitespace (``#`` separates store keys).
"""

from __future__ import annotations

import math
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agentloom.platform.domain import Token, new_id, now
from agentloom.platform.errors import Invalid, NotFound, Unauthorized
from agentloom.platform.store import PlatformStore, secret_hash

USER_ID = re.compile(r"[!-~]{1,128}")  # printable ASCII, no space
TOKEN_PREFIX = "agl_"


@dataclass(frozen=True)
class Principal:
    user_id: str
    via: Literal["jwt", "token"]


def check_user_id(user_id: str) -> str:
    if not USER_ID.fullmatch(user_id) or "#" in user_id or "/" in user_id:
        raise Invalid("a user id is 1-128 printable ASCII characters without '#', '/' "
                      "or spaces", code="invalid_user_id")
    return user_id


class Authenticator(Protocol):
    def authenticate(self, headers: Mapping[str, str],
                     request_context: Mapping[str, Any]) -> Principal:
        """The caller, or ``Unauthorized``. ``headers`` have lower-case names."""
        ...


class JwtClaims:
    """The subject of a JWT that API Gateway's authorizer verified."""

    def __init__(self, claim: str = "sub") -> None:
        self.claim = claim

    def authenticate(self, headers: Mapping[str, str],
                     request_context: Mapping[str, Any]) -> Principal:
        claims = ((request_context.get("authorizer") or {}).get("jwt") or {}).get("claims")
        subject = claims.get(self.claim) if isinstance(claims, Mapping) else None
        if not isinstance(subject, str) or not subject:
            raise Unauthorized("no verified identity in the request", code="no_identity")
        try:
            return Principal(check_user_id(subject), "jwt")
        except Invalid:
            raise Unauthorized("the identity's subject is not usable",
                               code="invalid_identity") from None


class BearerTokens:
    """Bearer tokens hashed at rest (embedded mode)."""

    def __init__(self, store: PlatformStore) -> None:
        self.store = store

    def issue(self, user_id: str, *, label: str = "",
              ttl_seconds: float | None = None) -> tuple[Token, str]:
        """A new token for ``user_id``: the record and the secret (shown once); without
        ``ttl_seconds`` it does not expire."""
        check_user_id(user_id)
        if ttl_seconds is not None and not (math.isfinite(ttl_seconds) and ttl_seconds > 0):
            raise Invalid(f"a token's lifetime must be a positive number of seconds, not "
                          f"{ttl_seconds:g} (none: a token that does not expire)",
                          code="invalid_field", details={"fields": [
                              {"field": "ttl_seconds", "message": "must be > 0"}]})
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        created = now()
        token = Token(token_id=new_id("tok"), user_id=user_id, label=label[:200],
                      secret_sha256=secret_hash(secret), created_at=created,
                      expires_at=None if ttl_seconds is None else created + ttl_seconds)
        self.store.tokens.create(token)
        return token, secret

    def tokens(self, user_id: str) -> list[Token]:
        """The user's tokens (their records: ids, labels, lifetimes; never a secret)."""
        return sorted(self.store.tokens.of_user(check_user_id(user_id)), key=lambda t: t.created_at)

    def revoke(self, user_id: str, token_id: str) -> Token:
        """Revoke the user's token ``token_id`` (again: a no-op); it is refused from now."""
        if not self.store.tokens.revoke(check_user_id(user_id), token_id):
            raise NotFound(f"{user_id} has no token {token_id!r}", code="token_not_found")
        return next(t for t in self.store.tokens.of_user(user_id) if t.token_id == token_id)

    def authenticate(self, headers: Mapping[str, str],
                     request_context: Mapping[str, Any]) -> Principal:
        value = headers.get("authorization", "")
        scheme, _, secret = value.partition(" ")
        if not value:
            raise Unauthorized("no bearer token: send 'Authorization: Bearer <token>'",
                               code="no_token")
        secret = secret.strip()
        if scheme.lower() != "bearer" or not secret.startswith(TOKEN_PREFIX) \
                or len(secret) > 200:
            raise Unauthorized("the token is not valid", code="invalid_token")
        token = self.store.tokens.by_secret(secret)
        if token is None or token.revoked or (token.expires_at is not None
                                              and token.expires_at <= now()):
            raise Unauthorized("the token is not valid", code="invalid_token")
        return Principal(token.user_id, "token")
