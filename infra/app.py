"""The CDK app: one AgentLoom stack per stage (``cdk deploy -c stage=prod``).

Account and region come from ``CDK_DEFAULT_ACCOUNT``/``CDK_DEFAULT_REGION`` (the CDK CLI
sets them from the active AWS profile); the other choices are context values read by
``StageConfig`` (docs/deploy.md). cdk-nag AwsSolutions runs on every synth.
"""

from __future__ import annotations

import os

import aws_cdk as cdk
from agentloom_infra import build_app


def main() -> None:
    env = cdk.Environment(account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
                          region=os.environ.get("CDK_DEFAULT_REGION"))
    app = cdk.App()
    build_app(app, env=env)
    app.synth()


if __name__ == "__main__":
    main()
