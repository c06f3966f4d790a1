"""Embedded OTLP export: the spans of a run reach a real OTLP/HTTP endpoint on
127.0.0.1 (protobuf over HTTP, as the collector receives it)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from support.engine import SideEffects, build_engine

from agentloom.local.runs import drive
from agentloom.observability import Observer, configure_from_env, otlp_provider

from .conftest import QUESTION, snapshot, usage_script


class Collector(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Collector.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        return None


async def test_spans_reach_an_otlp_http_endpoint() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        provider = otlp_provider(f"http://127.0.0.1:{server.server_port}/v1/traces")
        snap = snapshot()
        obs = Observer.for_run(run_id="run_0190ab12cd34a1b2c3d4",
                               session_id="ses_0190ab12cd34a1b2c3d4",
                               space_id="spc_0190ab12cd34a1b2c3d4", snapshot=snap,
                               tracer_provider=provider)
        engine = build_engine(script=usage_script(), tools=SideEffects().tools(),
                              snapshot=snap, emit=obs.emit)
        with obs:
            await engine.start(QUESTION, run_id="run_0190ab12cd34a1b2c3d4")
            await drive(engine, observer=obs)
        assert provider.force_flush(5_000)  # type: ignore[attr-defined]
        provider.shutdown()  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()
    names = []
    for path, body in Collector.received:
        assert path == "/v1/traces"
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                names += [span.name for span in scope.spans]
    assert "invoke_agent Memo counter" in names
    assert names.count("chat gpt-test") == 6


def test_nothing_is_configured_without_an_endpoint(monkeypatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert configure_from_env() is False
