"""AgentLoom's CDK app as a library: ``build_app`` adds the stage's stack and cdk-nag.

Constructs per concern (data_stores, network, workspace, sandbox, functions,
state_machine, http_api, triggers, alarms), wired and granted in ``stack``; deploy-time
choices in ``config``; the Docker-free Lambda bundle in ``bundling`` (its bytecode in
``bytecode``). This package imports nothing of ``agentloom``: it names handlers by
string and the code by path.
"""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from agentloom_infra.config import ConfigError, StageConfig
from agentloom_infra.stack import AgentLoomStack

__all__ = ["AgentLoomStack", "ConfigError", "StageConfig", "build_app"]


def build_app(app: cdk.App, *, env: cdk.Environment | None = None) -> AgentLoomStack:
    """Add ``AgentLoom-<stage>`` to ``app`` with AwsSolutions checks; returns the stack."""
    config = StageConfig.from_context(app.node)
    stack = AgentLoomStack(app, f"AgentLoom-{config.stage}", config=config, env=env,
                           description=f"AgentLoom ({config.stage})")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stack
