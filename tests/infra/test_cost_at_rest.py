"""The stage's cost at rest, summed from the synthesized template with the price table of
``support.at_rest`` (its date and region there): a dev stage stays within $60 a month, and
docs/deploy.md quotes the same figures. The prod figure is checked on the prod variant
(tests/infra/test_checks.py)."""

from __future__ import annotations

import pytest
from support.at_rest import ENDPOINT_LINE, documented_totals, monthly, total

DEV_BUDGET = 60.00  # $ / month, issue 18


def test_dev_stage_costs_at_most_60_dollars_a_month_at_rest(synthesized):
    lines = monthly(synthesized.template)
    assert total(lines) <= DEV_BUDGET, lines
    assert lines["NAT gateway"][0] == 1
    assert lines[ENDPOINT_LINE][0] == 3  # ecr.api, ecr.dkr, logs in one AZ


def test_docs_quote_the_dev_figure(synthesized):
    assert total(monthly(synthesized.template)) == documented_totals()["dev"]


def test_an_unpriced_resource_type_is_refused():
    with pytest.raises(KeyError, match="AWS::RDS::DBInstance is not priced"):
        monthly({"Resources": {"Db": {"Type": "AWS::RDS::DBInstance"}}})
