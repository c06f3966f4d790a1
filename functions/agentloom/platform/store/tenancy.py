"""Who is who: spaces, their members and a user's spaces (items ``space#{space}``
``space`` and ``member#{user}``, ``user#{user}`` ``space#{space}``), and API tokens
(items ``token#{sha256 of the secret}`` ``token``: the Token, looked up by hash;
``user#{user}`` ``token#{token}``: a user's tokens). Layout in ``items``."""

from __future__ import annotations

import hashlib
import json

from agentloom.platform.domain import Member, Space, Token

from .items import ABSENT, ItemStore, Versioned, delete, put


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

class Spaces:
    """``store.spaces``: a space is created with its owner; every membership change is
    conditioned on the space item's version, which it bumps."""

    def __init__(self, items: ItemStore) -> None:
        self._items = items

    def create(self, space: Space, owner: Member) -> None:
        pk = f"space#{space.space_id}"
        self._items.transact([put(pk, "space", space, ABSENT),
                              put(pk, f"member#{owner.user_id}", owner, ABSENT),
                              put(f"user#{owner.user_id}", f"space#{space.space_id}",
                                  {"role": owner.role}, ABSENT)])

    def get(self, space_id: str) -> Versioned[Space] | None:
        return self._items.get(f"space#{space_id}", "space", Space)

    def of_user(self, user_id: str) -> list[tuple[str, str]]:
        """``(space_id, role)`` of each space ``user_id`` belongs to."""
        return [(s.sk.removeprefix("space#"), json.loads(s.text)["role"])
                for s in self._items.query_raw(f"user#{user_id}", "space#")]

    def member(self, space_id: str, user_id: str) -> Member | None:
        found = self._items.get(f"space#{space_id}", f"member#{user_id}", Member)
        return None if found is None else found.value

    def members(self, space_id: str) -> list[Member]:
        return self._items.query(f"space#{space_id}", "member#", Member)

    def write_member(self, space: Versioned[Space], user_id: str,
                     member: Member | None) -> None:
        """Add, change (``member``) or remove (None) a membership, conditioned on the space
        item's version, which the write bumps: membership changes are serialized, so a
        rule over all members (the last owner stays) holds under concurrency."""
        sid = space.value.space_id
        pk = f"space#{sid}"
        writes = [put(pk, "space", space.value, space.version)]
        if member is None:
            writes += [delete(pk, f"member#{user_id}"),
                       delete(f"user#{user_id}", f"space#{sid}")]
        else:
            writes += [put(pk, f"member#{user_id}", member),
                       put(f"user#{user_id}", f"space#{sid}", {"role": member.role})]
        self._items.transact(writes)
