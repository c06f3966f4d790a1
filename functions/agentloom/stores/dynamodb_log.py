"""The DynamoDB checkpoint store's LOG items: how a commit's entries become items, and
how a stream's rows are read back from them (``DynamoDbCheckpointStore``).

An entry is one item ``LOG#{stream}#{seq}`` (``stream``, ``seq``, ``body``), except:

- **packs**: when a commit's entries would exceed a transaction's 100 actions,
  consecutive entries of a stream share one item keyed by the *last* seq (``seq`` = the
  first, ``pack`` = JSON ``[[seq, body], …]``, at most ``PACK_BYTES``), so a range read
  from any seq finds the pack holding it;
- **carried rows**: a row of a stream ``view:{name}`` rides in the item of a ``src:{name}``
  row of the same commit (attributes ``vseq``, ``vbody``) when its seq is at most that
  row's and one item bills fewer write units than two. The runtime appends a view entry
  with each source record (``agentloom_runtime.context``), so a step's two small rows
  are one item (2 units in the transaction, not 4). A read of ``view:{name}`` after
  ``after`` takes its own items and the ``src:{name}`` items after ``after`` (a carried
  row's seq is at most its carrier's, so none is missed), paged until it has enough.
  A carried row's item is conditioned on its carrier's key, not its own: that no two
  commits write one seq rests on the head's compare-and-set (the journal numbers a
  commit's rows from the head it commits on), as it does for every row.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any

from agentloom_runtime.errors import ConfigError

Item = dict[str, Any]
PACK_BYTES = 128 * 1024  # row bytes packed into one LOG item (escaped <= 2x: < 400 KB)
SEQ_DIGITS = 12
MAX_SEQ = 10**SEQ_DIGITS - 1
CARRIED, CARRIER = "view:", "src:"  # a view row rides in its source record's item


def item_size(item: Item) -> int:
    """An item's size in bytes as DynamoDB computes it for the 400 KB limit and for
    capacity units: attribute names plus values (``S`` in UTF-8, ``B`` raw, ``N`` about
    one byte per two significant digits plus one). Only the types this adapter writes."""
    size = 0
    for name, value in item.items():
        ((kind, raw),) = value.items()
        size += len(name.encode())
        if kind == "S":
            size += len(raw.encode())
        elif kind == "B":
            size += len(raw)
        elif kind == "N":
            digits = raw.lstrip("-").replace(".", "").strip("0")
            size += (len(digits) + 1) // 2 + 1
        else:
            raise ValueError(f"item_size: attribute type {kind} is not written here")
    return size


def write_units(size: int, *, transactional: bool) -> int:
    """Write capacity units of one item write: 1 per KB (rounded up, at least 1), twice
    that inside TransactWriteItems."""
    units = max(1, -(-size // 1024))
    return 2 * units if transactional else units


def log_sk(stream: str, seq: int) -> str:
    escaped = stream.replace("%", "%25").replace("#", "%23")
    return f"LOG#{escaped}#{seq:0{SEQ_DIGITS}d}"


def carrier_of(stream: str) -> str | None:
    """The stream whose items may carry ``stream``'s rows (None: no other)."""
    return CARRIER + stream[len(CARRIED):] if stream.startswith(CARRIED) else None


def body_attribute(text: str, sealed: bool) -> dict[str, Any]:
    """A row's ``body`` attribute: a sealed row (base64 text) as its raw envelope bytes
    (``B``: DynamoDB counts binary at its length, a quarter less than the base64)."""
    if sealed:
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            data = None  # not an envelope (the base class refuses it on read)
        if data is not None and base64.b64encode(data).decode("ascii") == text:
            return {"B": data}
    return {"S": text}


def row_text(value: dict[str, Any]) -> str:
    """A ``body`` attribute as the base class's row text."""
    if "B" in value:
        return base64.b64encode(bytes(value["B"])).decode("ascii")
    return str(value["S"])


def log_items(pk: str, rows: list[tuple[str, int, str]], room: int,
              sealed: bool = False) -> list[Item]:
    """The LOG items of ``rows``: one per entry (view rows carried where that saves a
    unit) when they fit ``room`` actions, else packs."""
    if len(rows) <= room:
        items = {(stream, seq): {"pk": {"S": pk}, "sk": {"S": log_sk(stream, seq)},
                                 "stream": {"S": stream}, "seq": {"N": str(seq)},
                                 "body": body_attribute(body, sealed)}
                 for stream, seq, body in rows}
        for (stream, seq), carrier in _pairs(list(items)):
            item, carried = items[carrier], items[(stream, seq)]
            joined = {**item, "vseq": carried["seq"], "vbody": carried["body"]}
            if write_units(item_size(joined), transactional=False) < \
                    write_units(item_size(item), transactional=False) + \
                    write_units(item_size(carried), transactional=False):
                items[carrier] = joined
                del items[(stream, seq)]
        return list(items.values())
    packs: list[list[tuple[str, int, str]]] = []
    size = 0
    for row in rows:
        length = len(row[2].encode()) + 24  # the JSON of [seq, "body"], escapes aside
        if packs and packs[-1][-1][0] == row[0] and size + length <= PACK_BYTES:
            packs[-1].append(row)
            size += length
        else:
            packs.append([row])
            size = length
    if len(packs) > room:
        raise ConfigError(f"a commit of {len(rows)} entries needs {len(packs)} items; "
                          f"{room} fit one transaction", details={"entries": len(rows)})
    return [{"pk": {"S": pk}, "sk": {"S": log_sk(pack[0][0], pack[-1][1])},
             "stream": {"S": pack[0][0]}, "seq": {"N": str(pack[0][1])},
             "pack": {"S": json.dumps([[seq, body] for _, seq, body in pack],
                                      ensure_ascii=False, separators=(",", ":"))}}
            for pack in packs]


def _pairs(keys: list[tuple[str, int]]) -> list[tuple[tuple[str, int], tuple[str, int]]]:
    """(view row, its carrier) of one commit: per name, each view row (the last first)
    with the last source row not taken yet whose seq is at least the view's."""
    out = []
    for stream in {s for s, _ in keys if carrier_of(s) is not None}:
        carrier = str(carrier_of(stream))
        free = sorted((seq for s, seq in keys if s == carrier), reverse=True)
        for view in sorted((seq for s, seq in keys if s == stream), reverse=True):
            source = next((seq for seq in free if seq >= view), None)
            if source is not None:
                free.remove(source)
                out.append(((stream, view), (carrier, source)))
    return out


def item_rows(item: Item) -> list[tuple[int, str]]:
    """(seq, body) of a LOG item's own stream: one entry, or every entry of a pack."""
    if "pack" in item:
        return [(int(seq), str(body)) for seq, body in json.loads(item["pack"]["S"])]
    return [(int(item["seq"]["N"]), row_text(item["body"]))]


def carried_rows(item: Item) -> list[tuple[int, str]]:
    """(seq, body) of the row a LOG item carries for another stream (none: [])."""
    if "vseq" not in item:
        return []
    return [(int(item["vseq"]["N"]), row_text(item["vbody"]))]


Query = Callable[[str, str, int | None], list[Item]]  # (low sk, high sk, limit) -> items


def read_rows(query: Query, stream: str, after: int,
              limit: int | None) -> list[tuple[int, str]]:
    """Rows of ``stream`` with seq > ``after``, ascending, at most ``limit``: its own
    items, and the rows its carrier stream's items carry."""
    items = query(log_sk(stream, after + 1), log_sk(stream, MAX_SEQ), limit)
    found = [(seq, body) for item in items for seq, body in item_rows(item) if seq > after]
    carrier = carrier_of(stream)
    if carrier is not None:
        found += _carried_after(query, carrier, after, limit)
        found.sort(key=lambda row: row[0])
    return found if limit is None else found[:limit]


def _carried_after(query: Query, carrier: str, after: int,
                   limit: int | None) -> list[tuple[int, str]]:
    """The rows carried by ``carrier``'s items after ``after`` (a carried seq is at most
    its carrier's), in pages, until ``limit`` of them."""
    found: list[tuple[int, str]] = []
    low, page = after + 1, None if limit is None else max(limit, 16)
    while low <= MAX_SEQ:
        items = query(log_sk(carrier, low), log_sk(carrier, MAX_SEQ), page)
        found += [row for item in items for row in carried_rows(item) if row[0] > after]
        if page is None or len(items) < page or (limit is not None and len(found) >= limit):
            return found
        low = max(seq for item in items for seq, _ in item_rows(item)) + 1
    return found
