"""Observability of runs: structured logs, GenAI-named traces and EMF metrics behind one
facade (``Observer``) that the embedded worker, the CLI and the step Lambda use alike.

Design: everything is derived from the engine's typed events
(``agentloom_runtime.events``) and from ``Engine.usage()`` around each step — the
engine knows nothing of logging backends, tracers or metrics. What leaves the process is
allow-listed (``observer.safe_fields``): ids, names, statuses and numbers, never message text, tool
arguments or output, or keys. Backends: Powertools Logger / EMF Metrics and the ADOT
layer's X-Ray export in Lambda; stdlib logging, a debug metrics line and optional OTLP
export (``tracing.configure_from_env``) on one machine.
"""

from agentloom.observability._traces import configure_from_env, otlp_provider
from agentloom.observability.observer import Observed, Observer, Relay, StepScope

__all__ = ["Observed", "Observer", "Relay", "StepScope", "configure_from_env", "otlp_provider"]
