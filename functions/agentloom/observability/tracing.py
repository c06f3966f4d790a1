"""Where the spans go.

The observer writes through the OpenTelemetry *API* only (a core dependency: without an
SDK every span is a no-op and costs next to nothing).

- Embedded (``agentloom serve``, the CLI): set the standard
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) and
  install the ``otel`` extra; ``configure_from_env`` then installs an SDK tracer
  provider with a batching OTLP/HTTP exporter (the exporter reads the other standard
  ``OTEL_*`` variables: headers, timeout; ``OTEL_SERVICE_NAME`` names the service).
- Lambda: the AWS Distro for OpenTelemetry layer configures the global provider and
  exports to X-Ray (docs/operations.md, "Reading traces and logs"); this module does
  nothing there.
"""

from __future__ import annotations

import os
import threading

from opentelemetry import trace

from agentloom_runtime.errors import ConfigError

_ENV = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_lock = threading.Lock()
_configured = False


def otlp_provider(endpoint: str | None = None) -> trace.TracerProvider:
    """An SDK tracer provider exporting over OTLP/HTTP in batches (not made global).
    ``endpoint``: the full traces URL; else the exporter reads the ``OTEL_*`` env."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as err:
        raise ConfigError("OTLP trace export needs the otel extra: pip install "
                          "'agentloom[otel]' (or unset OTEL_EXPORTER_OTLP_ENDPOINT)",
                          details={"missing": err.name}) from None
    service = os.environ.get("OTEL_SERVICE_NAME", "agentloom")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider


def configure_from_env() -> bool:
    """Install the OTLP provider globally when an OTLP endpoint is configured and no
    provider is yet (once per process). True when this call installed it."""
    global _configured
    with _lock:
        if _configured or not any(os.environ.get(name) for name in _ENV):
            return False
        _configured = True
        if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            return False  # the application configured its own provider: keep it
        trace.set_tracer_provider(otlp_provider())
        return True
