"""The stack synthesized ONCE per test run, shared by every tests/infra module.

``synthesized`` gives the template dict and its ``assertions.Template`` (the app's own
``build_app``, cdk-nag included, so a synth here is the synth ``cdk synth`` runs); asset
bundling is skipped (context ``aws:cdk:bundling-stacks: []``). Under pytest-xdist the
first worker to need it synthesizes and leaves the template in the run's shared
temporary directory, under a file lock; the other workers read it instead of
synthesizing again (the directory is new each run, so nothing outlives the run).

``Synthesized.definition(values)`` resolves the state machine's ``DefinitionString``
(``Fn::Join`` of strings, ``Ref`` and ``Fn::GetAtt``; pseudo parameters such as
``AWS::Partition`` have defaults) into the ASL dict moto executes. ``values`` maps
``"LogicalId"`` (a Ref) or ``"LogicalId.Attribute"`` (a GetAtt) to the string to use; an
unmapped reference raises ``KeyError`` naming it. ``logical_id(type, **properties)``
finds the one resource of a type whose properties include the given ones, e.g.
``logical_id("AWS::Lambda::Function", Handler="agentloom.handlers.step.handler")``.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

PSEUDO = {"AWS::Partition": "aws", "AWS::Region": "us-east-1",
          "AWS::AccountId": "123456789012", "AWS::URLSuffix": "amazonaws.com",
          "AWS::StackName": "AgentLoom-test"}
CONTEXT = {"aws:cdk:bundling-stacks": [], "stage": "test"}


def resolve(node: Any, values: Mapping[str, str]) -> Any:
    """A CloudFormation value with intrinsics replaced from ``values`` (+ ``PSEUDO``)."""
    if isinstance(node, list):
        return [resolve(item, values) for item in node]
    if not isinstance(node, dict):
        return node
    if set(node) == {"Ref"}:
        name = node["Ref"]
        return values[name] if name in values else _pseudo(name)
    if set(node) == {"Fn::GetAtt"}:
        logical, attribute = node["Fn::GetAtt"]
        return values[f"{logical}.{attribute}"]
    if set(node) == {"Fn::Join"}:
        separator, parts = node["Fn::Join"]
        return separator.join(str(resolve(part, values)) for part in parts)
    return {key: resolve(value, values) for key, value in node.items()}


def _pseudo(name: str) -> str:
    if name not in PSEUDO:
        raise KeyError(f"no value for Ref {name!r}: pass it in values")
    return PSEUDO[name]


@dataclass(frozen=True)
class Synthesized:
    template: dict[str, Any]
    assertions: Any  # aws_cdk.assertions.Template

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.template["Resources"]

    def of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.resources.items() if v["Type"] == resource_type}

    def logical_id(self, resource_type: str, **properties: Any) -> str:
        found = [k for k, v in self.of_type(resource_type).items()
                 if all(v.get("Properties", {}).get(p) == want
                        for p, want in properties.items())]
        if len(found) != 1:
            raise LookupError(f"{len(found)} {resource_type} match {properties}")
        return found[0]

    def definition(self, values: Mapping[str, str]) -> dict[str, Any]:
        """The run state machine's ASL with every reference resolved."""
        (machine,) = self.of_type("AWS::StepFunctions::StateMachine").values()
        result: dict[str, Any] = json.loads(resolve(machine["Properties"]["DefinitionString"],
                                                    values))
        return result

    def function_env(self, handler: str) -> dict[str, Any]:
        lid = self.logical_id("AWS::Lambda::Function", Handler=handler)
        env: dict[str, Any] = self.resources[lid]["Properties"]["Environment"]["Variables"]
        return env


def _synthesize() -> dict[str, Any]:
    import aws_cdk as cdk
    from agentloom_infra import build_app
    from aws_cdk.assertions import Template

    # from_stack runs the app's cdk-nag checks: an unacknowledged finding raises here
    return dict(Template.from_stack(build_app(cdk.App(context=CONTEXT))).to_json())


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    from aws_cdk.assertions import Template

    if "PYTEST_XDIST_WORKER" not in os.environ:
        template = _synthesize()
    else:  # the first worker synthesizes, the others wait for its template
        shared = tmp_path_factory.getbasetemp().parent / "synthesized.json"  # this run's
        with shared.with_suffix(".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if shared.exists():
                template = json.loads(shared.read_text())
            else:
                template = _synthesize()
                shared.write_text(json.dumps(template))
    return Synthesized(template=template, assertions=Template.from_json(template))
