"""Configure OpenTelemetry tracing from the standard ``OTEL_*`` environment variables.

For processes wakeful starts itself (the CLI: `run`, `chat`, `worker`, `serve`). A library
user configures their own `TracerProvider` and wakeful's spans go to it; this never replaces a
provider that is already set. The invariant: with none of the variables set, nothing is
imported and nothing changes.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("wakeful.tracing")

_TRIGGERS = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)


def configure_from_env() -> bool:
    """Set a global SDK `TracerProvider` when an ``OTEL_*`` exporter variable asks for one
    (``OTEL_TRACES_EXPORTER``: ``otlp`` (the default), ``console`` or ``none``; the OTLP/HTTP
    exporter reads ``OTEL_EXPORTER_OTLP_*``, the resource ``OTEL_SERVICE_NAME`` and
    ``OTEL_RESOURCE_ATTRIBUTES``). Returns whether it did; without the SDK installed it logs
    one warning and returns False."""
    if not any(os.environ.get(name) for name in _TRIGGERS):
        return False
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() in {"1", "true"}:
        return False
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    names = [n for n in names if n and n != "none"]
    if not names:
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )
    except ImportError:
        log.warning(
            "OTEL_* variables are set but the OpenTelemetry SDK is not installed "
            "(pip install 'wakeful[otel]'); no traces are exported"
        )
        return False
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return False  # the host configured one already
    provider = TracerProvider(resource=Resource.create())
    for name in names:
        exporter: SpanExporter
        if name == "console":
            exporter = ConsoleSpanExporter()
        elif name == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            except ImportError:
                log.warning(
                    "OTEL_TRACES_EXPORTER=otlp needs opentelemetry-exporter-otlp-proto-http"
                )
                continue
            exporter = OTLPSpanExporter()
        else:
            log.warning("unknown OTEL_TRACES_EXPORTER %r ignored (otlp, console or none)", name)
            continue
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return True
