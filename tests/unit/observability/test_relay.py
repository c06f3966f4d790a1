"""The step Lambda's shape: one warm engine, one observer per invocation (Relay)."""

from __future__ import annotations

import json

from support.engine import SideEffects, build_engine

from agentloom.observability import Relay

from .conftest import QUESTION, Spans, attrs, snapshot, usage_script

RUN = "run_0190ab12cd34a1b2c3d4"


async def test_each_invocation_is_its_own_invoke_agent_span_with_its_generation(
        spans: Spans, capsys) -> None:
    snap = snapshot()
    forwarded: list[str] = []
    relay = Relay(lambda topic, data: forwarded.append(topic))
    engine = build_engine(script=usage_script(), tools=SideEffects().tools(), snapshot=snap,
                          emit=relay.emit)
    relay.watch(engine)
    assert Relay.of(engine) is relay
    await engine.start(QUESTION, run_id=RUN)  # the API started it: no observer yet
    invocations = 0
    while True:
        invocations += 1
        generation = 1 if invocations <= 3 else 2  # a rollover after three steps
        with relay.step(engine, run_id=RUN, session_id="ses_0190ab12cd34a1b2c3d4",
                        space_id="spc_0190ab12cd34a1b2c3d4", snapshot=snap, host="lambda",
                        generation=generation, tracer_provider=spans.provider) as scope:
            result = scope.finished(await engine.step())
        if result.next == "done":
            break
    agents = spans.named("invoke_agent")
    assert len(agents) == invocations == len(spans.named("agentloom.step"))
    assert [attrs(a)["agentloom.execution.generation"] for a in agents] == \
        [1, 1, 1] + [2] * (invocations - 3)
    assert forwarded[0] == "run.started" and "run.finished" in forwarded
    out = capsys.readouterr().out
    emf = [json.loads(line) for line in out.splitlines() if '"_aws"' in line]
    assert len(emf) == invocations, "one EMF line per invocation"
    assert sum(sum(e.get("ModelInputTokens", [])) for e in emf) == engine.usage().input_tokens
