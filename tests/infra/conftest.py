"""The stack synthesized ONCE per test run, shared by every tests/infra module.

``synthesized`` gives the template dict and its ``assertions.Template`` (the app's own
``build_app``, cdk-nag included, so a synth here is the synth ``cdk synth`` runs); asset
bundling is skipped (context ``aws:cdk:bundling-stacks: []``). Under pytest-xdist the
first worker to need it synthesizes and leaves the template in the run's shared
temporary directory, under a file lock; the other workers read it instead of
synthesizing again (the directory is new each run, so nothing outlives the run).

``Synthesized`` (``definition(values)``: the state machine's resolved ASL;
``logical_id``; ``function_env``) and ``synthesize`` live in ``support.state_machine``,
where the serverless benchmark takes them too.
"""

from __future__ import annotations

import fcntl
import json
import os

import pytest
from support.state_machine import Synthesized, synthesize


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    from aws_cdk.assertions import Template

    if "PYTEST_XDIST_WORKER" not in os.environ:
        template = synthesize()
    else:  # the first worker synthesizes, the others wait for its template
        shared = tmp_path_factory.getbasetemp().parent / "synthesized.json"  # this run's
        with shared.with_suffix(".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if shared.exists():
                template = json.loads(shared.read_text())
            else:
                template = synthesize()
                shared.write_text(json.dumps(template))
    return Synthesized(template=template, assertions=Template.from_json(template))
