"""Run metrics: one small sink port, two adapters.

``EmfMetrics`` (Lambda) writes CloudWatch Embedded Metric Format through Powertools
Metrics: namespace ``AgentLoom`` (``POWERTOOLS_METRICS_NAMESPACE``), one dimension set
``{service, stage}`` — low cardinality on purpose: a run, session or space id as a
dimension would make a metric per run. The ids travel as EMF metadata instead (plain
properties of the log line, searchable in Logs Insights, never dimensions).
``LogMetrics`` (embedded) adds the same numbers up and logs them once per run at
debug level; nothing is exported.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Literal, Protocol

Unit = Literal["Count", "Milliseconds", "None"]
METRICS: dict[str, Unit] = {
    "Steps": "Count", "ModelInputTokens": "Count", "ModelOutputTokens": "Count",
    "Cost": "None", "ToolFailures": "Count", "UnknownOutcomes": "Count",
    "BlockedRuns": "Count", "StepDuration": "Milliseconds",
}
NAMESPACE = "AgentLoom"
log = logging.getLogger("agentloom.metrics")


class MetricsSink(Protocol):
    def add(self, name: str, value: float) -> None: ...

    def flush(self) -> None:
        """Write what was added (a no-op when nothing was)."""
        ...


class LogMetrics:
    """Embedded mode: totals logged at debug level on flush."""

    def __init__(self, metadata: Mapping[str, Any]) -> None:
        self.metadata = dict(metadata)
        self.totals: dict[str, float] = defaultdict(float)

    def add(self, name: str, value: float) -> None:
        self.totals[name] += value

    def flush(self) -> None:
        if self.totals:
            log.debug("metrics %s", dict(self.totals), extra={"metrics": dict(self.totals),
                                                              **self.metadata})
            self.totals.clear()


class EmfMetrics:
    """Lambda: Powertools Metrics (EMF on stdout, which CloudWatch turns into metrics)."""

    def __init__(self, *, stage: str, metadata: Mapping[str, Any],
                 namespace: str | None = None) -> None:
        from aws_lambda_powertools import Metrics  # lazily: the step's cold import

        # Powertools keeps metric state per process, shared by every instance: start
        # clean (an observer that never flushed left its state behind)
        self._metrics = Metrics(namespace=namespace or NAMESPACE, service=os.environ.get(
            "POWERTOOLS_SERVICE_NAME", "agentloom"))
        self._metrics.clear_metrics()
        self._stage = stage
        self._metadata = dict(metadata)
        self._added = False

    def add(self, name: str, value: float) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        self._metrics.add_metric(name=name, unit=MetricUnit(METRICS[name]), value=value)
        self._added = True

    def flush(self) -> None:
        if not self._added:
            return  # Powertools warns on an empty flush
        self._metrics.add_dimension(name="stage", value=self._stage)
        for key, value in self._metadata.items():
            self._metrics.add_metadata(key=key, value=value)
        self._metrics.flush_metrics()
        self._added = False
