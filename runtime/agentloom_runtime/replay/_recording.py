"""What a run recorded, read back for a replay: the start of the run, every model
response in call order, every tool result by call id, and the records themselves.

- Model responses: an action's is its assistant source record (``src:<instance>``, kind
  ``assistant``: the raw message, and ``call``: op id, usage, ``request_digest``); a
  summary's or a review's is its ``ops`` entry (``raw_output``, with the same
  metadata). Ordered by op id (``m<execution>-<n>``).
- Tool results: the ``tool_result`` source records, by ``(instance, call_id)``; the raw
  result of ``ops`` (``raw_result``, saved before ``tool.after`` hooks) when there is one.
- The start: the task (the first ``user`` record of ``main``), the inherited history
  (its ``history`` record), the counters and watermark the run started with (the meta
  record's ``start``; runs recorded before it was kept get them reconstructed from the
  head, which is exact only when the run made no compaction) and the labels.
- Records: every log stream but ``meta`` (the configuration, not what happened), as the
  store's JSON text of each body (``checkpoint.store.dumps``): what "byte for byte"
  compares.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentloom_runtime._json import as_text
from agentloom_runtime.checkpoint.store import BaseCheckpointStore, dumps
from agentloom_runtime.contracts import Message, ModelResponse
from agentloom_runtime.errors import ConfigError, ToolError
from agentloom_runtime.tools import RawResult

COUNTERS = ("user_turns", "baseline_user_turns", "model_steps", "baseline_model_steps")


@dataclass(frozen=True)
class RecordedCall:
    op_id: str
    purpose: str
    instance: str
    digest: str | None  # the request's digest as sent (None: recorded before it was kept)
    response: ModelResponse


@dataclass(frozen=True)
class RecordedTool:
    instance: str
    call_id: str
    request_id: str
    name: str
    status: str
    content: str  # the full result text of the source record
    raw: Mapping[str, Any] | None = None  # the RawResult saved before tool.after hooks

    def answer(self, execution: str) -> Any:
        """What the tool's handler returns (or raises) so that the engine records this
        result again: the saved raw result when there is one; else the value whose text
        is the recorded text (parsed JSON when it renders back to the same text)."""
        if self.raw is not None:
            raw = RawResult.from_dict(self.raw)
            if raw.ok:
                return raw.value
            raise _tool_error(dict(raw.error or {}))
        parsed = _parsed(self.content)
        if self.status in ("error", "unknown") and isinstance(parsed, dict) \
                and set(parsed) == {"error"} and isinstance(parsed["error"], dict):
            raise _tool_error(parsed["error"])
        if execution == "command":
            return {}  # the spec is not recorded; the recorded result is the command's
        return parsed if parsed is not None and as_text(parsed) == self.content \
            else self.content

    def command_result(self) -> dict[str, Any] | None:
        parsed = _parsed(self.content)
        return parsed if isinstance(parsed, dict) else None


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _tool_error(error: Mapping[str, Any]) -> ToolError:
    failure = ToolError(str(error.get("message", "the tool failed")))
    failure.code = str(error.get("code", "tool_failed"))
    return failure


@dataclass
class Recording:
    run_id: str
    snapshot: dict[str, Any]
    task: str
    history: list[Message]
    counters: dict[str, int]
    history_watermark: int
    labels: dict[str, str]
    start_recorded: bool
    in_flight: str | None = None  # the request id of a tool call the run stopped on
    calls: list[RecordedCall] = field(default_factory=list)
    tools: dict[tuple[str, str], RecordedTool] = field(default_factory=dict)
    records: dict[str, list[str]] = field(default_factory=dict)

    def by_request(self, request_id: str) -> RecordedTool | None:
        return next((t for t in self.tools.values() if t.request_id == request_id), None)

    @classmethod
    def read(cls, store: BaseCheckpointStore, run_id: str) -> Recording:
        head = store.load_head(run_id)
        if head is None:
            raise ConfigError(f"run {run_id} has no checkpoint", details={"code": "no_run"})
        streams = {name: [e.body for e in store.read(run_id, name)]
                   for name in sorted(head.body.get("streams", {}))}
        meta = streams.get("meta") or [{}]
        main = streams.get("src:main", [])
        task = next((str(b["message"]["content"]) for b in main if b.get("kind") == "user"),
                    "")
        history = next((list(b["messages"]) for b in main if b.get("kind") == "history"),
                       [])
        start = meta[0].get("start")
        if isinstance(start, dict):
            counters = {k: int(v) for k, v in (start.get("counters") or {}).items()}
            watermark = int(start.get("history_watermark") or 0)
        else:
            counters, watermark = _reconstructed(head.body, main, streams)
        op = head.body.get("op") or {}
        recording = cls(run_id=run_id, in_flight=op.get("request_id"),
                        snapshot=dict(meta[0].get("snapshot") or {}),
                        task=task, history=history, counters=counters,
                        history_watermark=watermark,
                        labels=dict(head.body.get("labels") or {}),
                        start_recorded=isinstance(start, dict),
                        records={name: [dumps(b) for b in bodies]
                                 for name, bodies in streams.items() if name != "meta"})
        recording._collect(streams)
        return recording

    def _collect(self, streams: Mapping[str, list[dict[str, Any]]]) -> None:
        calls: dict[str, RecordedCall] = {}
        raws: dict[str, Mapping[str, Any]] = {}
        for body in streams.get("ops", []):
            if "raw_output" in body:
                calls[body["op_id"]] = RecordedCall(
                    op_id=body["op_id"], purpose=body["purpose"], instance=body["instance"],
                    digest=body.get("request_digest"),
                    response=ModelResponse.from_dict(body["raw_output"]))
            elif "raw_result" in body:
                raws[str(body["op_id"])] = body["raw_result"]
        for name, bodies in streams.items():
            if not name.startswith("src:"):
                continue
            instance = name[len("src:"):]
            for body in bodies:
                if body.get("kind") == "assistant" and isinstance(body.get("call"), dict):
                    call = body["call"]
                    calls.setdefault(call["op_id"], RecordedCall(
                        op_id=call["op_id"], purpose="action", instance=instance,
                        digest=call.get("request_digest"),
                        response=ModelResponse.from_dict(
                            {**body["message"], "usage": call.get("usage")})))
                elif body.get("kind") == "tool_result":
                    message = body["message"]
                    tool = RecordedTool(
                        instance=instance, call_id=str(message["tool_call_id"]),
                        request_id=str(body.get("request_id", "")),
                        name=str(body.get("name", "")), status=str(body.get("status", "ok")),
                        content=str(message.get("content", "")),
                        raw=raws.get(f"t:{body.get('request_id')}"))
                    self.tools[(instance, tool.call_id)] = tool
        self.calls = sorted(calls.values(), key=lambda c: _op_order(c.op_id))


def _op_order(op_id: str) -> tuple[int, int]:
    try:
        execution, number = op_id[1:].split("-", 1)
        return int(execution), int(number)
    except ValueError:
        return 0, 0


def _reconstructed(head: Mapping[str, Any], main: list[dict[str, Any]],
                   streams: Mapping[str, Any]) -> tuple[dict[str, int], int]:
    """The start counters of a run recorded before the meta record kept them: the final
    ones less what the run added (exact when it made no compaction)."""
    frame = head.get("frames", {}).get("main", {})
    final = {k: int(frame.get("counters", {}).get(k, 0)) for k in COUNTERS}
    actions = sum(1 for b in main if b.get("kind") == "assistant")
    counters = {**final, "user_turns": max(0, final["user_turns"] - 1),
                "model_steps": max(0, final["model_steps"] - actions)}
    if "snap:main" in streams:
        counters.update(baseline_user_turns=0, baseline_model_steps=0)
    return counters, int(frame.get("history_watermark") or 0)


def records_digest(records: Mapping[str, list[str]]) -> str:
    """``sha256:<hex>`` over every record: stream, seq and stored text, streams by name."""
    sha = hashlib.sha256()
    for name in sorted(records):
        for seq, text in enumerate(records[name], start=1):
            sha.update(f"{name}\n{seq}\n{text}\n".encode("utf-8", "surrogatepass"))
    return "sha256:" + sha.hexdigest()


def stored_records(store: BaseCheckpointStore, run_id: str) -> dict[str, list[str]]:
    """Every record of a run but ``meta``, as stored text, by stream."""
    head = store.load_head(run_id)
    if head is None:
        return {}
    return {name: [dumps(e.body) for e in store.read(run_id, name)]
            for name in sorted(head.body.get("streams", {})) if name != "meta"}
