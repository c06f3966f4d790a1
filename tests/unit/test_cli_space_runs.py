"""The operators' listing of a space's runs (``runs --space``, issue 17) as a table: who,
status, tokens and cost from the run index; an entry indexed before the index carried
usage still loads and shows ``?`` rather than zero."""

from __future__ import annotations

from agentloom.cli import _output
from agentloom.platform.domain import RunIndex, Usage

ENTRY = {"run_id": "run_1", "session_id": "ses_1", "space_id": "spc_1", "user_id": "bob",
         "agent_id": "agt_1", "version": 2, "status": "blocked", "updated_at": 0.0,
         "error_code": "budget_exceeded"}


def test_a_space_run_row_shows_tokens_and_cost_and_unknown_usage_as_such() -> None:
    old = RunIndex.model_validate(ENTRY)  # stored before the index carried usage
    assert old.usage is None
    new = RunIndex.model_validate({**ENTRY, "run_id": "run_2", "usage": Usage(
        calls=3, input_tokens=1_200, output_tokens=34, total_tokens=1_234,
        cost=0.0025).model_dump()})
    header, first, second = _output.space_run_rows(
        [old.model_dump(mode="json"), new.model_dump(mode="json")])
    assert header.split()[:7] == ["RUN", "USER", "AGENT", "STATUS", "CALLS", "TOKENS",
                                  "COST"]
    assert first.split()[:8] == ["run_1", "bob", "agt_1", "v2", "blocked", "?", "?", "?"]
    assert second.split()[:8] == ["run_2", "bob", "agt_1", "v2", "blocked", "3", "1,234",
                                  "0.0025"]
    assert first.split()[-1] == "budget_exceeded"
    assert _output.space_run_rows([]) == ["no runs"]


def test_usage_sums_the_cost_of_priced_calls_only() -> None:
    usage = Usage().add("action", {"prompt_tokens": 10, "completion_tokens": 5})
    assert usage.cost is None, "no call had a cost: not zero"
    usage = usage.add("action", {"prompt_tokens": 10, "completion_tokens": 5}, 0.00002)
    usage = usage.add("verification", {"prompt_tokens": 4, "completion_tokens": 1}, 1e-6)
    assert (usage.calls, usage.total_tokens) == (3, 35)
    assert usage.cost == 0.000021
    assert usage.add("action", None, True).cost == 0.000021  # not a number: no cost
