"""``PlatformStore``: the platform's records, one repository per concern over one
``ItemStore`` (composed, not inherited)::

    store = PlatformStore(SqliteItemStore(path))      # or InMemoryItemStore(),
    store.sessions.get(session_id)                    # DynamoDbItemStore(table, client=…)
    store.runs.start(session, run, idempotency)
    store.items.transact([put(pk, sk, record, ABSENT)])  # a companion's own items

Each repository holds the typed operations of one kind of record and knows its items
(the layout is in ``items``); a transaction that spans kinds (a run's start takes the
session's lease and opens its stream cursor) belongs to the repository whose operation
it is.
"""

from __future__ import annotations

from .agents import Agents
from .items import ItemStore
from .session_teardown import SessionTeardownItems
from .sessions import Events, Runs, Sessions, Streams
from .tenancy import Spaces, Tokens


class PlatformStore:
    """Spaces, agents, sessions, runs, record streams, run events, tokens and session
    teardowns over one item store (``items``, also where companions keep their own
    records)."""

    def __init__(self, items: ItemStore) -> None:
        self.items = items
        self.spaces = Spaces(items)
        self.agents = Agents(items)
        self.sessions = Sessions(items)
        self.streams = Streams(items)
        self.runs = Runs(items, self.streams)
        self.events = Events(items)
        self.tokens = Tokens(items)
        self.teardown = SessionTeardownItems(items)

    def close(self) -> None:
        """Release the item store's resources."""
        self.items.close()
