"""Shared builders of the observability tests: an SDK tracer provider with an in-memory
exporter, a priced snapshot, a script whose responses carry provider usage, and an
observed engine driven by the production driver."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.engine import PLAN_DONE, PLAN_OPEN, make_snapshot

from agentloom_runtime.contracts import ModelResponse
from agentloom_runtime.testing import ScriptedModel

QUESTION = "Count the words of the quarterly memo for Zanzibar"
ANSWER = "Counted 3 words and mailed ops about Zanzibar."
PROVIDER_KEY = "sk-live-TOPSECRET-4242424242"


class Spans:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name.startswith(prefix)]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.fixture
def spans() -> Spans:
    return Spans()


def snapshot(**overrides: Any):
    return make_snapshot(name="Memo counter", version=3, model={
        "model": "gpt-test", "input_price_per_million": 2.0,
        "output_price_per_million": 8.0}, **overrides)


def used(response: ModelResponse, given: int, produced: int) -> ModelResponse:
    return dataclasses.replace(response, usage={"prompt_tokens": given,
                                                "completion_tokens": produced})


def usage_script() -> list[ModelResponse]:
    """The representative run (plan, a read-only tool, a side effect, the answer, its
    completion review), each response with its own provider usage."""
    return [
        used(ScriptedModel.call("update_plan", PLAN_OPEN, id="c1"), 100, 10),
        used(ScriptedModel.call("count_words", {"text": "one two Zanzibar"}, id="c2"),
             200, 20),
        used(ScriptedModel.call("send_mail", {"to": "ops@example.com"}, id="c3"), 300, 30),
        used(ScriptedModel.call("update_plan", PLAN_DONE, id="c4"), 400, 40),
        used(ScriptedModel.answer(ANSWER), 500, 50),
        used(ScriptedModel.verdict("complete", "the memo was counted"), 60, 6),
    ]
