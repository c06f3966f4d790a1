"""The CDK app: one AgentLoom stack per stage (``cdk deploy -c stage=prod``).

Run by ``infra/cdk-app`` (infra/cdk.json) on the repository's virtual environment, which
``bin/setup-infra`` makes; with the environment but without the infra extra, this says
so instead of failing on an import. Account and region come from
``CDK_DEFAULT_ACCOUNT``/``CDK_DEFAULT_REGION`` (the CDK CLI sets them from the active AWS
profile); the other choices are context values read by ``StageConfig`` (docs/deploy.md).
cdk-nag AwsSolutions runs on every synth.
"""

from __future__ import annotations

import importlib.util
import os
import sys

NEEDED = ("aws_cdk", "constructs", "cdk_nag")  # the infra extra (pyproject.toml)


def missing_modules() -> list[str]:
    return [name for name in NEEDED if importlib.util.find_spec(name) is None]


def main() -> int:
    missing = missing_modules()
    if missing:
        print(f"error: {sys.executable} lacks {', '.join(missing)} (the infra extra); "
              "run bin/setup-infra from the repository root", file=sys.stderr)
        return 1
    import aws_cdk as cdk
    from agentloom_infra import build_app

    env = cdk.Environment(account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
                          region=os.environ.get("CDK_DEFAULT_REGION"))
    app = cdk.App()
    build_app(app, env=env)
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
