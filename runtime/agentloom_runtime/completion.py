"""``evidence-review/v1``: the default completion policy (docs/contract.md#completion-review).

The same model reviews a candidate answer against the plan, the latest evidence and
recent messages and returns complete / continue / blocked. It is a review, not a proof.
A plan with pending or in-progress steps turns ``complete`` into ``continue``.
"""

from __future__ import annotations

import json
from typing import Any

from ._json import as_text
from .contracts import (
    JSON,
    CompletionDecision,
    CompletionInput,
    Message,
    ModelCall,
    ModelRequest,
)
from .planning import plan_is_open

EVIDENCE_ITEMS = 12
RECENT_MESSAGES = 8
_EXCERPT = 1_500

_SYSTEM = (
    "You review whether an agent's candidate answer completes its task. Judge only from "
    "the task, the plan, the evidence of tool results and the recent messages given. "
    'Reply with one JSON object: {"decision": "complete" | "continue" | "blocked", '
    '"reason": "...", "next_action": "..."}. Use "continue" when more work is needed and '
    'say what in next_action; use "blocked" only when the task cannot be completed.')


def _excerpt(value: Any) -> str:
    text = as_text(value)
    return text if len(text) <= _EXCERPT else text[:_EXCERPT] + " …[cut]"


def _message_line(msg: Message) -> str:
    body = msg.get("content") or ""
    if msg.get("tool_calls"):
        names = ", ".join(c["function"]["name"] for c in msg["tool_calls"])
        body = f"{body} [calls: {names}]"
    return f"{msg.get('role')}: {_excerpt(body)}"


def parse_decision(text: str | None) -> CompletionDecision | None:
    if not text:
        return None
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(text[start:end + 1])
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("decision") not in (
            "complete", "continue", "blocked"):
        return None
    return CompletionDecision(decision=data["decision"], reason=str(data.get("reason", "")),
                              next_action=str(data.get("next_action", "")))


class EvidenceReviewPolicy:
    module_id = "evidence-review/v1"

    def checkpoint_config(self) -> JSON:
        return {"evidence_items": EVIDENCE_ITEMS, "recent_messages": RECENT_MESSAGES}

    def build_request(self, data: CompletionInput) -> ModelRequest:
        evidence = [dict(e) for e in data.evidence[-EVIDENCE_ITEMS:]]
        recent = [_message_line(m) for m in data.messages[-RECENT_MESSAGES:]
                  if m.get("role") != "system"]
        body = {
            "task": data.task,
            "plan": [dict(s) for s in data.plan],
            "evidence": evidence,
            "recent_messages": recent,
            "candidate_answer": data.candidate,
        }
        return ModelRequest(
            messages=[{"role": "system", "content": _SYSTEM},
                      {"role": "user", "content": json.dumps(body, ensure_ascii=False)}],
            purpose="verification", instance=data.instance)

    async def review(self, data: CompletionInput, call: ModelCall) -> CompletionDecision:
        response = await call(self.build_request(data))
        decision = parse_decision(response.content) or CompletionDecision(
            "continue", reason="the review could not be read",
            next_action="Check the work against the task and answer again.")
        if decision.decision == "complete" and plan_is_open(data.plan):
            return CompletionDecision(
                "continue", reason="the plan still has pending or in-progress steps",
                next_action="Finish or cancel the open plan steps, then answer.")
        return decision
