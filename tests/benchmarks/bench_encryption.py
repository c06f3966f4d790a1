"""Encryption cost (issue 10): KMS calls per 100-step run, per-commit overhead on SQLite,
bytes and DynamoDB write units with and without the codec.

Run: .venv/bin/python tests/benchmarks/bench_encryption.py   (prints figures; asserts none)

- KMS calls (moto in-process, counted on the boto3 client with an event hook): a
  100-step run (49 model+tool cycles, the answer, the review), a second run of the
  same session in the same process, then a cold process reading both runs whole;
- SQLite per-commit time, plaintext vs encrypted (LocalKeyring), for a commit shaped
  like a model+tool cycle's (a ~900 B head and two ~400 B entries), with
  ``synchronous=FULL`` (the default: fsync per commit) and ``NORMAL``; the codec's own
  seal+open time per such commit;
- the 100-step run on SQLite, plaintext vs encrypted (wall time, engine included);
- stored bytes per head and DynamoDB write units per cycle, plaintext vs encrypted.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: support, functional

import boto3
from functional.test_encryption_at_rest import SCOPE, hundred_step_run
from moto import mock_aws
from support.engine import records

from agentloom.crypto import EnvelopeCodec, LocalKeyring, fixed_scope
from agentloom.crypto.kms_keyring import KmsKeyring
from agentloom.stores.dynamodb_checkpoints import DynamoDbCheckpointStore, create_table
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.checkpoint import BaseCheckpointStore, Commit, LogEntry
from agentloom_runtime.checkpoint.store import ItemId, _seal_row, dumps

HEAD = {"format": 2, "status": "running", "phase": "model", "plan": "x" * 700,
        "counters": {"calls": 12, "tokens": 34_567}}
ENTRY = {"kind": "tool_result", "call_id": "call_42", "content": "y" * 330}


async def kms_calls() -> None:
    with mock_aws():
        kms = boto3.client("kms")
        dynamodb = boto3.client("dynamodb")
        create_table(dynamodb, "bench")
        key = kms.create_key()["KeyMetadata"]["Arn"]
        calls: Counter[str] = Counter()
        kms.meta.events.register("before-call.kms",
                                 lambda model, **_: calls.update([model.name]))

        def store() -> DynamoDbCheckpointStore:
            codec = EnvelopeCodec(KmsKeyring(key, client=kms), scope=fixed_scope(**SCOPE))
            return DynamoDbCheckpointStore("bench", client=dynamodb, codec=codec)

        warm = store()
        steps = await hundred_step_run(warm, "run-a")
        first = dict(calls)
        await hundred_step_run(warm, "run-b")
        second = dict(calls)
        cold = store()
        rows = sum(len(records(cold, run)) for run in ("run-a", "run-b"))
        print(f"KMS calls: a {steps}-step run {first}; + a second run of the session in "
              f"the same process {second}; + a cold process reading both ({rows} records) "
              f"{dict(calls)}")


def commit_ms(store: BaseCheckpointStore, commits: int) -> float:
    store.commit(Commit("warmup", 0, HEAD))
    times = []
    for n in range(commits):
        start = time.perf_counter()
        store.commit(Commit("run", n, HEAD, [LogEntry("s", 2 * n + 1, ENTRY),
                                             LogEntry("s", 2 * n + 2, ENTRY)]))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def sqlite_commits(tmp: Path) -> None:
    """Plaintext and encrypted stores alternate, 5 rounds of 200 commits each; the
    median of the rounds' medians (fsync time varies more than the codec costs)."""
    keyring = LocalKeyring(tmp / "bench.key")
    syncs: tuple[Literal["FULL", "NORMAL"], ...] = ("FULL", "NORMAL")
    for sync in syncs:
        rounds: dict[bool, list[float]] = {False: [], True: []}
        for n in range(5):
            for encrypted in (False, True):
                codec = EnvelopeCodec(keyring, scope=fixed_scope(**SCOPE)) if encrypted \
                    else None
                path = tmp / f"commits-{sync}-{encrypted}-{n}.db"
                with SqliteCheckpointStore(path, synchronous=sync, codec=codec) as store:
                    rounds[encrypted].append(commit_ms(store, 200))
        plain, sealed = (statistics.median(rounds[e]) for e in (False, True))
        print(f"SQLite commit (head ~900 B + 2 entries ~400 B), synchronous={sync}: "
              f"plaintext {plain:.3f} ms, encrypted {sealed:.3f} ms ({sealed - plain:+.3f} ms)")
    codec = EnvelopeCodec(keyring, scope=fixed_scope(**SCOPE))
    with SqliteCheckpointStore(tmp / "codec.db", codec=codec) as store:
        store.commit(Commit("run", 0, HEAD))
        texts = [dumps(HEAD), dumps(ENTRY), dumps(ENTRY)]
        items = [ItemId.head("run", 1), ItemId.log("run", "s", 1), ItemId.log("run", "s", 2)]
        repeat, start = 2_000, time.perf_counter()
        for _ in range(repeat):
            sealer = store._sealer("run")
            for item, text in zip(items, texts, strict=True):
                store._open_row(item, _seal_row(sealer, item, text))
        per = (time.perf_counter() - start) / repeat * 1e6
    print(f"codec alone: seal + open of one such commit (3 values) {per:.0f} µs")


async def sqlite_run(tmp: Path) -> None:
    keyring = LocalKeyring(tmp / "bench.key")
    for encrypted in (False, True):
        codec = EnvelopeCodec(keyring, scope=fixed_scope(**SCOPE)) if encrypted else None
        with SqliteCheckpointStore(tmp / f"run-{encrypted}.db", codec=codec) as store:
            start = time.perf_counter()
            steps = await hundred_step_run(store)
            seconds = time.perf_counter() - start
            head = store._get_head("run-100")
            assert head is not None
            print(f"{steps}-step run on SQLite, {'encrypted' if encrypted else 'plaintext'}:"
                  f" {seconds * 1000:.0f} ms; stored head {len(head[1].encode())} B; "
                  f"rows+heads written {store.bytes_written:,} B")


async def dynamodb_units() -> None:
    with mock_aws():
        kms, dynamodb = boto3.client("kms"), boto3.client("dynamodb")
        key = kms.create_key()["KeyMetadata"]["Arn"]
        for encrypted in (False, True):
            table = f"units-{encrypted}"
            create_table(dynamodb, table)
            codec: Any = EnvelopeCodec(KmsKeyring(key, client=kms),
                                       scope=fixed_scope(**SCOPE)) if encrypted else None
            store = DynamoDbCheckpointStore(table, client=dynamodb, codec=codec)
            await hundred_step_run(store)
            print(f"DynamoDB, 100-step run {'encrypted' if encrypted else 'plaintext'}: "
                  f"{store.write_units} WCU ({store.write_units / 49:.1f} per cycle, over "
                  f"49 cycles + answer + review), {store.items_written} items, "
                  f"{store.bytes_written:,} B")


async def main() -> None:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB",
                 "AWS_ENDPOINT_URL_KMS"):
        os.environ.pop(name, None)
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                      AWS_DEFAULT_REGION="us-east-1")
    print("Encryption cost (issue 10)")
    await kms_calls()
    with tempfile.TemporaryDirectory() as name:
        sqlite_commits(Path(name))
        await sqlite_run(Path(name))
    await dynamodb_units()


if __name__ == "__main__":
    asyncio.run(main())
