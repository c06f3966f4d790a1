"""Spaces, their members and a user's spaces (items ``space#{space}`` ``space`` and
``member#{user}``, ``user#{user}`` ``space#{space}``; layout in ``items``)."""

from __future__ import annotations

import json

from agentloom.platform.domain import Member, Space

from .items import ABSENT, ItemStore, Versioned, delete, put


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
