"""API tokens (items ``token#{sha256 of the secret}`` ``token``: the Token, looked up by
hash; ``user#{user}`` ``token#{token}``: a user's tokens; layout in ``items``)."""

from __future__ import annotations

import hashlib
import json

from agentloom.platform.domain import Token

from .items import ABSENT, ItemStore, put


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class Tokens:
    """``store.tokens``: a token is stored by the hash of its secret, never the secret."""

    def __init__(self, items: ItemStore) -> None:
        self._items = items

    def create(self, token: Token) -> None:
        self._items.transact([
            put(f"token#{token.secret_sha256}", "token", token, ABSENT),
            put(f"user#{token.user_id}", f"token#{token.token_id}",
                {"secret_sha256": token.secret_sha256}, ABSENT)])

    def by_secret(self, secret: str) -> Token | None:
        found = self._items.get(f"token#{secret_hash(secret)}", "token", Token)
        return None if found is None else found.value

    def of_user(self, user_id: str) -> list[Token]:
        refs = self._items.query_raw(f"user#{user_id}", "token#")
        found = (self._items.get(f"token#{json.loads(r.text)['secret_sha256']}", "token",
                                 Token) for r in refs)
        return [t.value for t in found if t is not None]

    def revoke(self, user_id: str, token_id: str) -> bool:
        """Mark ``user_id``'s token revoked; False when there is no such token."""
        ref = self._items.get_raw(f"user#{user_id}", f"token#{token_id}")
        if ref is None:
            return False
        pk = f"token#{json.loads(ref[1])['secret_sha256']}"
        found = self._items.get(pk, "token", Token)
        if found is None:
            return False
        self._items.transact([put(pk, "token", found.value.model_copy(
            update={"revoked": True}), found.version)])
        return True
