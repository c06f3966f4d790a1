"""Platform store figures: the messages page and DynamoDB write units per cycle.

Run: .venv/bin/python tests/benchmarks/bench_platform.py   (prints figures; asserts none)

- **messages page latency**: ``store.streams.records(session, after=N, limit=100)`` —
  the store read behind ``GET /api/v1/sessions/{id}/messages?after=N&limit=100`` (the
  route adds the access check and reads/decrypts the referenced messages from the run's
  logs; neither is measured here) — with 10,000 session records in the stream, at
  after = 0, 5,000 and 9,900, all instances and ``instance=main``; on SQLite (a real
  file) and on DynamoDB (moto in-process, so the figure is moto's Python, not AWS's
  latency). SQLite's records are appended through the store; moto's are seeded with
  BatchWriteItem as the same items (``fill_moto``: moto deep-copies its tables on every
  TransactWriteItems, so 200 appends take minutes there).
- **DynamoDB write units per model+tool cycle, session records included**: a run driven
  the way ``LocalRunLauncher`` drives it — ``Engine.step()`` on a DynamoDB checkpoint
  store whose companion (``SessionCommits``) writes the session records, cursors and
  usage in each commit's TransactWriteItems, with the engine's events going to
  ``RunTracker.event`` — on a DynamoDB platform store; both stores on one moto table.
  For comparison, the earlier path: no companion, ``RunTracker.sync`` after each step
  (its own transaction; a crash in between left the records to a later catch-up). With
  the companion, its items are counted by the checkpoint adapter (they are in its
  transaction). The session and the run are created with
  ``store.sessions.create`` / ``store.runs.start`` (what ``SessionService.ask`` writes),
  not through the service. Units are the adapters' counters (ceil(KB) per item, twice in
  a transaction), averaged over 10 cycles after 2 warm-up cycles.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.engine import SideEffects, make_snapshot

from agentloom.platform.domain import Run, Session, SessionRecord, StreamHead, new_id, now
from agentloom.platform.store import PlatformStore
from agentloom.platform.store.items import Versioned
from agentloom_runtime.context import NoCompaction
from agentloom_runtime.contracts import ModelRequest, ModelResponse
from agentloom_runtime.engine import create_engine
from agentloom_runtime.testing import ScriptedModel

RECORDS = 10_000
PAGE = 100
BATCH = 49  # records per append: 2 items each + the head ≤ 100 TransactWriteItems actions
TABLE = "bench-platform"


def aws_env() -> None:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        os.environ.pop(name, None)
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    os.environ["AWS_ACCESS_KEY_ID"] = "testing"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"


def new_session(store: PlatformStore) -> Session:
    session = Session(session_id=new_id("ses"), space_id="spc_bench", agent_id="agt_bench",
                      version=1, user_id="alice", created_at=now())
    store.sessions.create(session)
    return session


def record(n: int) -> SessionRecord:
    """9 of 10 records on ``main``, 1 of 10 on a child."""
    return SessionRecord(seq=n, run_id="run_bench", instance="main" if n % 10 else "sub-1",
                         kind="assistant" if n % 2 else "user", entry_key=f"src:{n}",
                         src=n, at=now())


def fill(store: PlatformStore, session_id: str, count: int) -> None:
    """``count`` records appended in batches the way the tracker appends them (head CAS +
    two items per record)."""
    seq = 0
    while seq < count:
        head = store.streams.head(session_id)
        assert head is not None
        batch = [record(n) for n in range(seq + 1, min(seq + BATCH, count) + 1)]
        seq = batch[-1].seq
        store.streams.append(head, StreamHead(session_id=session_id, seq=seq), batch)


def fill_moto(client: Any, session_id: str, count: int) -> None:
    """The same items, written with BatchWriteItem: moto deep-copies every table on each
    TransactWriteItems, so 200 transactions over a growing table take minutes there.
    Items as the adapter writes them (``pk``, ``sk``, ``version``, ``body``)."""
    from agentloom.platform.store.items import dumps, seq_key

    items = []
    for n in range(1, count + 1):
        body = {"S": dumps(record(n))}
        sk = {"S": seq_key("rec", n)}
        for pk in (f"session#{session_id}", f"session#{session_id}#i#{record(n).instance}"):
            items.append({"pk": {"S": pk}, "sk": sk, "version": {"N": "1"}, "body": body})
    for start in range(0, len(items), 25):
        client.batch_write_item(RequestItems={TABLE: [
            {"PutRequest": {"Item": item}} for item in items[start:start + 25]]})


def page_latency(store: PlatformStore, session_id: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for after in (0, 5_000, RECORDS - PAGE):
        for instance in (None, "main"):
            timings = []
            for _ in range(20):
                start = time.perf_counter()
                page = store.streams.records(session_id, after=after, limit=PAGE, instance=instance)
                timings.append(time.perf_counter() - start)
            assert page and page[0].seq > after
            out[f"after={after} instance={instance or 'all'}"] = \
                statistics.median(timings) * 1000
    return out


def sqlite_pages() -> tuple[dict[str, float], float]:
    from agentloom.platform.store import SqliteItemStore

    with tempfile.TemporaryDirectory() as tmp:
        store = PlatformStore(SqliteItemStore(Path(tmp) / "agentloom.sqlite3"))
        session = new_session(store)
        start = time.perf_counter()
        fill(store, session.session_id, RECORDS)
        filled = time.perf_counter() - start
        try:
            return page_latency(store, session.session_id), filled
        finally:
            store.close()


def dynamodb_pages() -> tuple[dict[str, float], float]:
    aws_env()
    import boto3
    from moto import mock_aws

    from agentloom.platform.store.dynamodb import DynamoDbItemStore, create_table

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        store = PlatformStore(DynamoDbItemStore(TABLE, client=client))
        session = new_session(store)
        start = time.perf_counter()
        fill_moto(client, session.session_id, RECORDS)
        filled = time.perf_counter() - start
        return page_latency(store, session.session_id), filled


class CountingModel:
    """Every action calls count_words (with usage, as a provider reports it)."""

    module_id = "bench-model/v1"

    def __init__(self) -> None:
        self.n = 0

    def checkpoint_config(self) -> dict[str, Any]:
        return {}

    async def invoke(self, request: ModelRequest) -> ModelResponse:
        self.n += 1
        response = ScriptedModel.call("count_words", {"text": f"a b c {self.n}"},
                                      id=f"c{self.n}")
        return dataclasses.replace(response, usage={"prompt_tokens": 100 + self.n,
                                                    "completion_tokens": 12})

    async def aclose(self) -> None:
        return None


async def units_per_cycle(warmup: int = 2, measured: int = 10, *,
                          atomic: bool = True) -> dict[str, float]:
    aws_env()
    import boto3
    from moto import mock_aws

    from agentloom.platform.store.dynamodb import DynamoDbItemStore
    from agentloom.platform.store.dynamodb import create_table as create_platform_table
    from agentloom.platform.store.session_commits import SessionCommits
    from agentloom.platform.tracker import RunTracker
    from agentloom.stores.dynamodb_checkpoints import DynamoDbCheckpointStore

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_platform_table(client, TABLE)  # one table: RUN#… checkpoints, lowercase platform
        items = DynamoDbItemStore(TABLE, client=client)
        platform = PlatformStore(items)
        commits = SessionCommits(platform) if atomic else None
        checkpoints = DynamoDbCheckpointStore(TABLE, client=client, companion=commits)
        tracker = RunTracker(platform, checkpoints, commits=commits)
        session = new_session(platform)
        current = platform.sessions.get(session.session_id)
        assert current is not None
        run = Run(run_id=new_id("run"), session_id=session.session_id,
                  space_id=session.space_id, agent_id=session.agent_id, version=1,
                  user_id="alice", created_at=now(), updated_at=now())
        platform.runs.start(current, run)
        snapshot = make_snapshot(model={"model": "m", "context_window": 10_000_000,
                                        "max_output_tokens": 4096},
                                 limits={"max_model_calls": 10_000, "max_iterations": 10_000})
        engine = create_engine(
            snapshot, save=checkpoints, model_gateway=CountingModel(),
            tools=SideEffects().tools(), compaction_policy=NoCompaction(),
            emit=lambda topic, data: tracker.event(run.run_id, topic, data))
        await engine.start("benchmark", run_id=run.run_id)
        tracker.started(session.session_id, run.run_id)

        async def cycle() -> None:
            for _ in range(2):  # the model step, then the tool step
                await engine.step()
                if not atomic:
                    tracker.sync(session.session_id, runs=[run.run_id])

        for _ in range(warmup):
            await cycle()
        before = (checkpoints.write_units, checkpoints.items_written,
                  items.write_units, items.items_written)
        records_before = _stream_seq(platform, session.session_id)
        events_before = len(platform.events.read(run.run_id, limit=10_000))
        for _ in range(measured):
            await cycle()
        records = _stream_seq(platform, session.session_id) - records_before
        events = len(platform.events.read(run.run_id, limit=10_000)) - events_before
        cp_units = (checkpoints.write_units - before[0]) / measured
        pf_units = (items.write_units - before[2]) / measured
        return {"checkpoint units": cp_units,
                "checkpoint items": (checkpoints.items_written - before[1]) / measured,
                "platform units": pf_units,
                "platform items": (items.items_written - before[3]) / measured,
                "session records": records / measured, "events": events / measured,
                "total units": cp_units + pf_units}


def _stream_seq(store: PlatformStore, session_id: str) -> int:
    head: Versioned[StreamHead] | None = store.streams.head(session_id)
    return 0 if head is None else head.value.seq


def main() -> None:
    print(f"messages page (limit={PAGE}) at {RECORDS:,} session records, median of 20:")
    for name, measure in (("SQLite file", sqlite_pages),
                          ("DynamoDB (moto in-process)", dynamodb_pages)):
        pages, filled = measure()
        print(f"  {name}: filled in {filled:.1f} s")
        for case, ms in pages.items():
            print(f"    {case:<28} {ms:7.2f} ms", flush=True)
    atomic = asyncio.run(units_per_cycle())
    synced = asyncio.run(units_per_cycle(atomic=False))
    print("DynamoDB write units per model+tool cycle (moto, one table, 10 cycles):")
    print(f"  {'':<18} {'in the commit':>14} {'sync after':>11}")
    for name, value in atomic.items():
        print(f"  {name:<18} {value:14.1f} {synced[name]:11.1f}")


if __name__ == "__main__":
    main()
