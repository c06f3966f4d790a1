"""Lambda "trigger": EventBridge rule / Scheduler inputs and SQS batches → runs.

Wired once per container from the environment (docs/deploy.md, "Contract"): the trigger
configuration (``AGENTLOOM_TRIGGERS``, ``AGENTLOOM_SQS_TRIGGER``), the Powertools
idempotency table (``AGENTLOOM_IDEMPOTENCY_TABLE``) and the platform's SessionService on
DynamoDB with the Step Functions launcher (``agentloom.aws.platform``). A bad
configuration raises ``ConfigError`` naming the variable at the first invocation.
``configure`` replaces the wiring (tests, other deployments).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from agentloom.cold_start import cold_start

if TYPE_CHECKING:  # imported by the wiring, with the collector paused
    from agentloom.triggers import TriggerService

_service: TriggerService | None = None


@cold_start
def _wire() -> TriggerService:
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    from agentloom.aws.config import AwsConfig
    from agentloom.aws.platform import AwsPlatform
    from agentloom.triggers import TriggerConfig, TriggerService

    Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", "agentloom"))  # JSON lines
    config = TriggerConfig.from_environ(os.environ)
    platform = AwsPlatform.open(AwsConfig.from_environ(os.environ))
    persistence = DynamoDBPersistenceLayer(table_name=config.idempotency_table,
                                           boto3_client=platform.clients.dynamodb)
    return TriggerService(config, platform.sessions, persistence)


def configure(service: TriggerService | None) -> None:
    global _service
    _service = service


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _service
    if _service is None:
        _service = _wire()
    return _service.handle(event, context)
