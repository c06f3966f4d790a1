"""Encryption at rest after real engine runs (issue 10, "Must show: Encryption").

A representative run — a task, tool calls with arguments, their results (one of them
60 KB, so it is spilled to a blob), a final answer and its review — on the embedded
default (SQLite with a ``LocalKeyring``) and on AWS (DynamoDB with a ``KmsKeyring``, both
on moto). Then:

- a scan of every stored row (every SQLite table and the raw database and WAL files;
  a DynamoDB Scan) finds none of the run's texts in plaintext;
- a ciphertext copied to another item's key with the backend's own tools (SQL UPDATE;
  PutItem) fails to decrypt with a ``PersistenceError``, as does a tampered one;
- the same run read with another keyring fails with a ``ConfigError`` naming both;
- KMS calls per 100-step run: one GenerateDataKey, no Decrypt; a cold process reading
  the whole run: one Decrypt (counted on the boto3 client with an event hook).
"""

from __future__ import annotations

import base64
import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from support.engine import SideEffects, build_engine, make_snapshot, records

from agentloom.crypto import EnvelopeCodec, LocalKeyring, fixed_scope
from agentloom.crypto.kms_keyring import KmsKeyring
from agentloom.stores.dynamodb_checkpoints import DynamoDbCheckpointStore, create_table
from agentloom.stores.sqlite_checkpoints import SqliteCheckpointStore
from agentloom_runtime.checkpoint import BaseCheckpointStore
from agentloom_runtime.engine import read_run
from agentloom_runtime.errors import ConfigError, PersistenceError
from agentloom_runtime.testing import ScriptedModel
from agentloom_runtime.tool_contracts import ToolContext, ToolDefinition

TASK = "Summarise the memo about Project Nightingale for the board"
SHOUT_ARG = "quokka narwhal axolotl"
SHOUT_RESULT = SHOUT_ARG.upper()
MAIL_TO = "treasurer-7319@example.org"
PAGE = "".join(f"confidential page line {i:05d}\n" for i in range(2_000))  # ~62 KB
ANSWER = "Nightingale is over budget by 12 percent; the treasurer was told."
NEEDLES = [TASK, "Nightingale", SHOUT_ARG, SHOUT_RESULT, MAIL_TO, "treasurer-7319",
           "confidential page line", ANSWER, "over budget"]
SCOPE = {"space": "space-acme", "session": "session-42"}
TABLE = "agentloom-encrypted"


async def shout(context: ToolContext, arguments: dict[str, Any]) -> Any:
    return {"shouted": arguments["text"].upper()}


async def fetch(context: ToolContext, arguments: dict[str, Any]) -> Any:
    return PAGE


TEXT = {"type": "object", "properties": {"text": {"type": "string"}},
        "required": ["text"], "additionalProperties": False}
TOOLS = [ToolDefinition(name="shout", description="upper-case a text", parameters=TEXT,
                        handler=shout, implementation_id="shout/v1", read_only=True),
         ToolDefinition(name="fetch_memo", description="the memo",
                        parameters={"type": "object", "additionalProperties": False},
                        handler=fetch, implementation_id="fetch-memo/v1", read_only=True)]


async def representative_run(store: BaseCheckpointStore, run_id: str = "run-1") -> int:
    """The run; returns the number of steps it took."""
    script = [ScriptedModel.call("fetch_memo", {}, id="c1"),
              ScriptedModel.call("shout", {"text": SHOUT_ARG}, id="c2"),
              ScriptedModel.call("send_mail", {"to": MAIL_TO}, id="c3"),
              ScriptedModel.answer(ANSWER), ScriptedModel.verdict("complete", "done")]
    return await run_script(store, script, run_id)


async def hundred_step_run(store: BaseCheckpointStore, run_id: str = "run-100") -> int:
    """49 model+tool cycles, the answer and its review: 100 steps."""
    script = [ScriptedModel.call("shout", {"text": f"{SHOUT_ARG} {n}"}) for n in range(49)]
    return await run_script(store, [*script, ScriptedModel.answer(ANSWER),
                                    ScriptedModel.verdict("complete", "done")], run_id)


async def run_script(store: BaseCheckpointStore, script: list[Any], run_id: str) -> int:
    model = ScriptedModel(script)
    engine = build_engine(store=store, model=model, tools=[*TOOLS, *SideEffects().tools()],
                          snapshot=make_snapshot(limits={"max_model_calls": 100}))
    await engine.start(TASK, run_id=run_id)
    steps = 0
    while True:
        steps += 1
        if (await engine.step()).next == "done":
            break
    model.assert_consumed()
    outcome = engine.outcome()
    assert outcome is not None and outcome.answer == ANSWER
    await engine.close()
    return steps


def plaintext_found(values: Iterator[bytes]) -> list[str]:
    return sorted({needle for value in values for needle in NEEDLES
                   if needle.encode() in value})


def assert_reads_back(store: BaseCheckpointStore, run_id: str = "run-1") -> None:
    summary = read_run(store, run_id)
    assert summary is not None and summary.status == "completed"
    texts = repr(records(store, run_id))
    assert SHOUT_RESULT in texts and MAIL_TO in texts and ANSWER in texts


# -- SQLite + LocalKeyring -------------------------------------------------------------


def sqlite_values(path: Path) -> Iterator[bytes]:
    """Every value of every row of every table, and the raw file bytes."""
    conn = sqlite3.connect(path)
    try:
        tables = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert set(tables) >= {"heads", "log", "blobs"}
        for table in tables:
            for row in conn.execute(f"SELECT * FROM {table}"):
                for value in row:
                    yield value if isinstance(value, bytes) else str(value).encode()
    finally:
        conn.close()
    for file in (path, path.with_name(path.name + "-wal")):
        if file.exists():
            yield file.read_bytes()


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    return tmp_path / "keys" / "agentloom.key"


def local_store(tmp_path: Path, key_file: Path) -> SqliteCheckpointStore:
    key_file.parent.mkdir(exist_ok=True)
    codec = EnvelopeCodec(LocalKeyring(key_file), scope=fixed_scope(**SCOPE))
    return SqliteCheckpointStore(tmp_path / "agentloom.db", codec=codec)


async def test_encryption_at_rest_sqlite(tmp_path: Path, key_file: Path) -> None:
    store = local_store(tmp_path, key_file)
    assert await representative_run(store) == 8
    assert_reads_back(store)
    assert plaintext_found(sqlite_values(store.path)) == []
    store.close()
    # the check can fail: the same run in a plaintext store shows every needle
    plain = SqliteCheckpointStore(tmp_path / "plain.db")
    await representative_run(plain)
    assert plaintext_found(sqlite_values(plain.path)) == sorted(NEEDLES)
    plain.close()


async def test_sqlite_ciphertext_moved_or_tampered_fails_to_decrypt(
        tmp_path: Path, key_file: Path) -> None:
    store = local_store(tmp_path, key_file)
    await representative_run(store, "run-1")
    await representative_run(store, "run-2")
    conn = sqlite3.connect(store.path)
    with conn:  # run-2's head replaced by run-1's; src:main#2 of run-1 by its #1
        conn.execute("UPDATE heads SET body = (SELECT body FROM heads WHERE run_id = 'run-1')"
                     " WHERE run_id = 'run-2'")
        conn.execute("UPDATE log SET body = (SELECT body FROM log WHERE run_id = 'run-1' "
                     "AND stream = 'src:main' AND seq = 1) WHERE run_id = 'run-1' AND "
                     "stream = 'src:main' AND seq = 2")
    conn.close()
    with pytest.raises(PersistenceError, match=r"the head .* failed authentication"):
        read_run(store, "run-2")
    with pytest.raises(PersistenceError, match=r"entry src:main#2 failed authentication"):
        store.read("run-1", "src:main")
    assert len(store.read("run-1", "src:main", limit=1)) == 1  # its neighbour still reads
    conn = sqlite3.connect(store.path)
    with conn:  # one character of a stored envelope changed, in place
        (body,) = conn.execute("SELECT body FROM log WHERE run_id = 'run-1' AND "
                               "stream = 'src:main' AND seq = 3").fetchone()
        raw = bytearray(base64.b64decode(body))
        raw[40] ^= 0x04
        conn.execute("UPDATE log SET body = ? WHERE run_id = 'run-1' AND stream = "
                     "'src:main' AND seq = 3", (base64.b64encode(raw).decode(),))
    conn.close()
    with pytest.raises(PersistenceError, match=r"entry src:main#3 failed authentication"):
        store.read("run-1", "src:main", after=2)
    store.close()


async def test_sqlite_run_read_with_another_keyring_fails_clearly(
        tmp_path: Path, key_file: Path, fake_aws: None) -> None:
    store = local_store(tmp_path, key_file)
    await representative_run(store)
    store.close()
    other_key = tmp_path / "keys" / "other.key"
    wrong = SqliteCheckpointStore(tmp_path / "agentloom.db", codec=EnvelopeCodec(
        LocalKeyring(other_key), scope=fixed_scope(**SCOPE)))
    with pytest.raises(ConfigError, match="wrapped under another key file") as info:
        read_run(wrong, "run-1")
    assert info.value.details["wrapped_by"] != info.value.details["keyring"]
    wrong.close()
    with mock_aws():
        kms = boto3.client("kms", region_name="us-east-1")
        keyring = KmsKeyring(kms.create_key()["KeyMetadata"]["Arn"], client=kms)
        kms_store = SqliteCheckpointStore(tmp_path / "agentloom.db", codec=EnvelopeCodec(
            keyring, scope=fixed_scope(**SCOPE)))
        with pytest.raises(ConfigError, match=r"wrapped by keyring local:.*this store's "
                                              r"keyring is kms:"):
            read_run(kms_store, "run-1")
        kms_store.close()
    again = local_store(tmp_path, key_file)  # the right key file still reads it all
    assert_reads_back(again)
    again.close()


# -- DynamoDB + KMS (moto) -------------------------------------------------------------


@pytest.fixture
def fake_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_KMS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))


class Aws:
    def __init__(self) -> None:
        self.dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        self.kms = boto3.client("kms", region_name="us-east-1")
        create_table(self.dynamodb, TABLE)
        self.key_arn = self.kms.create_key(Description="agentloom")["KeyMetadata"]["Arn"]
        self.kms_calls: Counter[str] = Counter()
        self.kms.meta.events.register("before-call.kms", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.kms_calls[model.name] += 1

    def store(self, key_arn: str | None = None) -> DynamoDbCheckpointStore:
        """A store as a new process opens it: its own codec, hence a cold key cache."""
        codec = EnvelopeCodec(KmsKeyring(key_arn or self.key_arn, client=self.kms),
                              scope=fixed_scope(**SCOPE))
        return DynamoDbCheckpointStore(TABLE, client=self.dynamodb, codec=codec)

    def items(self) -> list[dict[str, Any]]:
        pages = self.dynamodb.get_paginator("scan").paginate(TableName=TABLE)
        return [item for page in pages for item in page["Items"]]


def item_values(items: list[dict[str, Any]]) -> Iterator[bytes]:
    for item in items:
        for value in item.values():
            ((kind, raw),) = value.items()
            yield raw if kind == "B" else str(raw).encode()


@pytest.fixture
def aws(fake_aws: None) -> Iterator[Aws]:
    with mock_aws():
        yield Aws()


async def test_encryption_at_rest_dynamodb_kms(aws: Aws) -> None:
    store = aws.store()
    assert await representative_run(store) == 8
    assert_reads_back(store)
    items = aws.items()
    kinds = Counter(item["sk"]["S"].split("#")[0] for item in items)
    # the run and its inbox document; blobs: the spilled page, key records
    assert kinds["HEAD"] == 2 and kinds["LOG"] > 5 and kinds["BLOB"] >= 3
    assert plaintext_found(item_values(items)) == []
    assert aws.kms_calls == {"GenerateDataKey": 1}
    cold = aws.store()
    assert_reads_back(cold)
    assert aws.kms_calls == {"GenerateDataKey": 1, "Decrypt": 1}
    # the check can fail: the same run in a plaintext table shows every needle
    create_table(aws.dynamodb, "plain")
    await representative_run(DynamoDbCheckpointStore("plain", client=aws.dynamodb))
    plain = aws.dynamodb.scan(TableName="plain")["Items"]
    assert plaintext_found(item_values(plain)) == sorted(NEEDLES)


async def test_dynamodb_ciphertext_moved_or_tampered_fails_to_decrypt(aws: Aws) -> None:
    store = aws.store()
    await representative_run(store, "run-1")
    await representative_run(store, "run-2")
    items = {(i["pk"]["S"], i["sk"]["S"]): i for i in aws.items()}
    head_1 = items["RUN#run-1", "HEAD"]
    aws.dynamodb.put_item(TableName=TABLE, Item={**head_1, "pk": {"S": "RUN#run-2"}})
    with pytest.raises(PersistenceError, match="failed authentication"):
        aws.store().load_head("run-2")
    first = items["RUN#run-1", "LOG#src:main#000000000001"]
    second = {**first, "sk": {"S": "LOG#src:main#000000000002"}, "seq": {"N": "2"}}
    aws.dynamodb.put_item(TableName=TABLE, Item=second)
    with pytest.raises(PersistenceError, match=r"entry src:main#2 failed authentication"):
        store.read("run-1", "src:main")
    blobs = [i for (pk, sk), i in items.items()
             if pk == "RUN#run-1" and sk.startswith("BLOB#") and i["data"]["B"][:3] == b"ALE"]
    assert blobs, "the spilled page is an encrypted blob"
    data = bytearray(blobs[0]["data"]["B"])
    data[-1] ^= 0x01  # the tag
    aws.dynamodb.put_item(TableName=TABLE, Item={**blobs[0], "data": {"B": bytes(data)}})
    key = blobs[0]["sk"]["S"].removeprefix("BLOB#")
    with pytest.raises(PersistenceError, match="failed authentication"):
        aws.store().get_blob("run-1", key)


async def test_dynamodb_run_read_with_another_kms_key_fails_clearly(aws: Aws) -> None:
    await representative_run(aws.store())
    other = aws.kms.create_key()["KeyMetadata"]["Arn"]
    with pytest.raises(ConfigError, match="cannot open its data key") as info:
        read_run(aws.store(other), "run-1")
    assert info.value.details["code"] in ("IncorrectKeyException", "AccessDeniedException")
    assert not any(needle in str(info.value) for needle in NEEDLES)
    # a key that does not exist (moto does not model disabled keys); the engine reports
    # a failed save as a PersistenceError, its cause the keyring's ConfigError
    with pytest.raises(PersistenceError, match="NotFoundException") as failed:
        await representative_run(aws.store("alias/missing"), "run-2")
    assert isinstance(failed.value.__cause__, ConfigError)
    assert read_run(aws.store(), "run-2") is None  # nothing was written


async def test_kms_calls_per_100_step_run_are_constant(aws: Aws) -> None:
    store = aws.store()
    assert await hundred_step_run(store) == 100
    assert aws.kms_calls == {"GenerateDataKey": 1}  # one per session key, none per step
    assert await hundred_step_run(store, "run-100b") == 100  # same session, same process
    assert aws.kms_calls == {"GenerateDataKey": 1}
    cold = aws.store()  # a new process reads both runs whole
    for run_id in ("run-100", "run-100b"):
        assert len(records(cold, run_id)) > 100
    assert aws.kms_calls == {"GenerateDataKey": 1, "Decrypt": 1}


async def test_a_container_that_opened_a_run_seals_its_scope_without_a_new_data_key(
        aws: Aws) -> None:
    """The step function's container opens a run the API function started (one Decrypt)
    and then writes what the run's scope holds — another run of the session, as the
    run's inbox is — without a GenerateDataKey: one KMS call per run per container."""
    await representative_run(aws.store(), "run-a")  # the API function's process
    assert aws.kms_calls == {"GenerateDataKey": 1}
    step = aws.store()  # the step function's container
    assert_reads_back(step, "run-a")
    assert aws.kms_calls == {"GenerateDataKey": 1, "Decrypt": 1}
    assert await representative_run(step, "run-b") == 8  # the same scope
    assert aws.kms_calls == {"GenerateDataKey": 1, "Decrypt": 1}
    assert_reads_back(aws.store(), "run-b")


# -- the embedded platform: a run on a model connection with a stored key ---------------

PROVIDER_KEY = "sk-at-rest-5b0e93d1c7"
PLATFORM_QUESTION = "Q what did the Heron committee decide"
PLATFORM_ANSWER = "The Heron committee postponed the vote"


def test_embedded_platform_run_on_a_connection_leaves_no_key_or_text(tmp_path: Path) -> None:
    """After a run on a platform connection (the provider on 127.0.0.1 requires the
    key), no row of the one SQLite file — checkpoints, platform items, session records,
    events, the sealed key — nor the raw file and its WAL holds the provider key, the
    question or the answer in plaintext."""
    import time

    from agentloom.local.app import DATABASE
    from agentloom.local.embedded import EmbeddedPlatform
    from agentloom.platform.identity import Principal
    from agentloom_runtime.testing import OpenAICompatibleServer

    alice = Principal("alice", "token")
    script = [ScriptedModel.answer(PLATFORM_ANSWER), ScriptedModel.verdict("complete")]
    with OpenAICompatibleServer(script, model="m", api_key=PROVIDER_KEY) as provider:
        platform = EmbeddedPlatform.open(tmp_path / "home")
        try:
            space = platform.admin.create_space(alice, "Team").space_id
            cid = platform.admin.create_model_connection(alice, space, "Local", {
                "provider": "openai_compatible", "base_url": provider.base_url,
                "model_id": "m"}, PROVIDER_KEY).connection_id
            agent, _ = platform.admin.create_agent(alice, space, "A", {
                "prompt": "You answer.", "model": {"api_key_ref": cid}})
            platform.admin.publish(alice, space, agent.agent_id)
            session = platform.sessions.create_session(alice, space, agent.agent_id)
            run, _ = platform.sessions.ask(alice, session.session_id, PLATFORM_QUESTION)
            deadline = time.monotonic() + 20
            while platform.sessions.run(alice, session.session_id, run.run_id).status \
                    not in ("completed", "failed", "blocked") and time.monotonic() < deadline:
                time.sleep(0.02)
            view = platform.sessions.run(alice, session.session_id, run.run_id)
            assert view.status == "completed" and view.answer == PLATFORM_ANSWER, view
            assert [r.headers.get("authorization") for r in provider.received] == \
                [f"Bearer {PROVIDER_KEY}"] * 2
            # decrypted, the run's head, records and events hold the reference, not the key
            head = platform.checkpoints.load_head(run.run_id)
            assert head is not None
            readable = repr(head.body) + repr([e.body for stream in ("src:main", "ops")
                                               for e in platform.checkpoints.read(
                                                   run.run_id, stream)])
            readable += platform.sessions.events(alice, session.session_id,
                                                 run.run_id).model_dump_json()
            assert PLATFORM_ANSWER in readable, "the check can fail: decrypted, texts show"
            assert PROVIDER_KEY not in readable
        finally:
            platform.close()
    needles = [PROVIDER_KEY, PLATFORM_QUESTION, PLATFORM_ANSWER, "Heron"]
    found = sorted({n for value in sqlite_values(tmp_path / "home" / DATABASE)
                    for n in needles if n.encode() in value})
    assert found == []
