"""``TriggerService``: an event starts one run, once.

Per event: a new session for the trigger's service identity with the configured agent
version (``SessionService.create_session``: the identity must be a member of the space,
the version published), then ``ask`` with the question built from the event's detail and
``Idempotency-Key`` = the event key. The whole start is wrapped in Powertools
idempotency on the DynamoDB persistence layer, keyed on the event key (source + event
id or SQS message id): a redelivered event returns the first run and starts nothing.
What the idempotency record keeps is the small result (run and session ids), never the
event.

Failures: a *permanent* one (unknown trigger, version not published, the identity not a
member, an invalid event) is logged with its stable code; a direct invocation then
answers ``{"status": "failed", "code"}`` without raising (a retry cannot help, so there
is no retry loop); an SQS message is reported failed (``batchItemFailures``) and reaches
the dead-letter queue after the queue's receive count. A *transient* one (a throttled
store, the launcher unavailable, the same event in progress elsewhere) raises for a
direct invocation (Lambda's async retries) and fails the SQS item (redelivered later).
One bad message never fails the others of its batch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agentloom.platform.domain import Run, Session
from agentloom.platform.errors import PlatformError, Unavailable
from agentloom.platform.identity import Principal
from agentloom.triggers.config import TriggerConfig, TriggerSpec
from agentloom.triggers.events import TriggerError, TriggerEvent, direct_event, sqs_event

if TYPE_CHECKING:  # Powertools loads when the service is built
    from aws_lambda_powertools.utilities.idempotency.persistence.base import (
        BasePersistenceLayer,
    )

log = logging.getLogger(__name__)
IDEMPOTENCY_S = 24 * 3600  # as long as the platform's own Idempotency-Key


class Asker(Protocol):
    """The part of ``SessionService`` a trigger uses."""

    def create_session(self, who: Principal, space_id: str, agent_id: str,
                       version: int | None = None, title: str = "") -> Session: ...

    def ask(self, who: Principal, session_id: str, question: str,
            idempotency_key: str | None = None) -> tuple[Run, bool]: ...


@dataclass(frozen=True)
class Started:
    trigger: str
    run_id: str
    session_id: str

    def to_dict(self) -> dict[str, str]:
        return {"status": "started", "trigger": self.trigger, "run_id": self.run_id,
                "session_id": self.session_id}


class TriggerService:
    def __init__(self, config: TriggerConfig, sessions: Asker,
                 persistence: BasePersistenceLayer, *,
                 expires_after_s: int = IDEMPOTENCY_S) -> None:
        from aws_lambda_powertools.utilities.idempotency import (
            IdempotencyConfig,
            idempotent_function,
        )

        self.config = config
        self.sessions = sessions
        self._idempotency = IdempotencyConfig(event_key_jmespath="key",
                                              expires_after_seconds=expires_after_s)
        self._once = idempotent_function(data_keyword_argument="event",
                                         persistence_store=persistence,
                                         config=self._idempotency)(self._start)

    # -- entry points --------------------------------------------------------------------

    def handle(self, event: Mapping[str, Any], context: Any = None) -> dict[str, Any]:
        """A Lambda event of any of the three shapes."""
        if context is not None:
            self._idempotency.register_lambda_context(context)
        if isinstance(event.get("Records"), list):
            return self._batch(dict(event), context)
        try:
            return self.start(direct_event(event))
        except TriggerError as err:
            self._failed(err, event_id=str(event.get("id", ""))[:200])
            if err.permanent:
                return {"status": "failed", "code": err.code}
            raise

    def start(self, event: TriggerEvent) -> dict[str, Any]:
        """Start the event's run once (the first run's ids on a redelivery)."""
        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyAlreadyInProgressError,
        )

        name = event.trigger or self.config.sqs_trigger
        spec = self.config.triggers.get(name or "")
        if name is None or spec is None:
            raise TriggerError(f"unknown trigger {str(name)[:64]!r}: AGENTLOOM_TRIGGERS "
                               "defines " + (", ".join(sorted(self.config.triggers)) or
                                             "none"), code="trigger_unknown")
        payload = {"key": event.key, "trigger": name, "detail": event.detail}
        try:
            result: dict[str, Any] = self._once(event=payload)
        except IdempotencyAlreadyInProgressError:
            raise TriggerError("this event is being started by another invocation",
                               code="event_in_progress", permanent=False) from None
        log.info("trigger started a run", extra={"trigger": name, "event": event.key,
                                                 "run_id": result.get("run_id")})
        return result

    # -- the start itself (inside the idempotency record) --------------------------------

    def _start(self, event: dict[str, Any]) -> dict[str, Any]:
        name: str = event["trigger"]
        spec: TriggerSpec = self.config.triggers[name]
        who = Principal(spec.user_id, "token")  # a service identity, not a person
        try:
            session = self.sessions.create_session(who, spec.space_id, spec.agent_id,
                                                   spec.version, title=f"trigger {name}")
            run, _ = self.sessions.ask(who, session.session_id, spec.ask(event["detail"]),
                                       idempotency_key=f"trigger:{event['key']}"[:200])
        except Unavailable as err:
            raise TriggerError(err.message, code=err.code, permanent=False) from None
        except PlatformError as err:
            raise TriggerError(f"trigger {name}: {err.message}", code=err.code,
                               details={"trigger": name}) from None
        return Started(name, run.run_id, session.session_id).to_dict()

    # -- SQS -----------------------------------------------------------------------------

    def _batch(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        from aws_lambda_powertools.utilities.batch import (
            BatchProcessor,
            EventType,
            process_partial_response,
        )

        def record_handler(record: Any) -> dict[str, Any]:
            raw = record.raw_event
            try:
                return self.start(sqs_event(raw))
            except TriggerError as err:
                self._failed(err, event_id=str(raw.get("messageId", ""))[:200])
                raise

        # an all-failed batch is reported item by item too (not raised as one error)
        processor = BatchProcessor(event_type=EventType.SQS,
                                   raise_on_entire_batch_failure=False)
        return dict(process_partial_response(event=event, record_handler=record_handler,
                                             processor=processor, context=context))

    @staticmethod
    def _failed(err: TriggerError, *, event_id: str) -> None:
        log.warning("trigger failed: %s (%s)", err.code, err.message,
                    extra={"code": err.code, "event_id": event_id,
                           "permanent": err.permanent})
