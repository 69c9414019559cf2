"""Turning telemetry on: `configure_telemetry()`, the OTEL_* environment, exporters, and the active state.

    from parley.telemetry import configure_telemetry
    configure_telemetry("billing")                       # OTLP if configured, else the console

    configure_telemetry(tracer_provider=tp, meter_provider=mp)   # tests: providers of your own

Parley never relies on the *global* OpenTelemetry providers being its own: it keeps
the tracer and meter it was configured with here (the globals are set too when this
module built the providers and nobody set them before, so other instrumentation
shares them). Tests can therefore configure a fresh TracerProvider and MeterProvider
per module and switch between them, which the set-once global providers do not allow.

Configure telemetry before building the ASGI app (`Parley.asgi()`): servers are
instrumented when they are created. Everything Parley calls is a cheap no-op while
telemetry is off, and nothing here imports OpenTelemetry until it is turned on.

Environment (the OpenTelemetry conventions):

    OTEL_SDK_DISABLED=true              never turn on
    OTEL_SERVICE_NAME                   the service name (else the argument, else "parley")
    OTEL_RESOURCE_ATTRIBUTES            more resource attributes (read by the SDK)
    OTEL_TRACES_EXPORTER                otlp | console | none
    OTEL_METRICS_EXPORTER               otlp | console | none (default: otlp when traces go to OTLP, else none)
    OTEL_EXPORTER_OTLP_ENDPOINT         (or ..._TRACES_/..._METRICS_ENDPOINT) where OTLP goes; when set and the
                                        OTLP exporter package is installed, OTLP is the default exporter
    OTEL_EXPORTER_OTLP_PROTOCOL         http/protobuf (default) or grpc
    OTEL_METRIC_EXPORT_INTERVAL         milliseconds between metric exports (read by the SDK)
    OTEL_PROPAGATORS                    the propagators (default: tracecontext,baggage)
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("parley.telemetry")

EXPORTERS = ("otlp", "console", "none")
INSTRUMENTATION = "parley"


class TelemetryUnavailable(RuntimeError):
    """OpenTelemetry (or the exporter asked for) is not installed."""


@dataclass(eq=False)
class Telemetry:
    """The tracer, meter and instruments Parley reports to."""

    tracer: Any
    meter: Any
    metrics: Any  # parley.telemetry.metrics.Metrics
    tracer_provider: Any
    meter_provider: Any
    service_name: str
    exporter: str  # otlp, console, none, custom (an exporter object), injected (your providers), global
    owns_providers: bool = False

    def force_flush(self) -> None:
        """Export what is buffered (spans and metrics)."""
        for provider in (self.tracer_provider, self.meter_provider):
            flush = getattr(provider, "force_flush", None)
            if flush is not None:
                flush()


_active: Telemetry | None = None
_log_context = False


def current() -> Telemetry | None:
    """The active telemetry, or None when it is off."""
    return _active


def telemetry_enabled() -> bool:
    """Whether spans and metrics are being recorded."""
    return _active is not None


def enable_log_context(on: bool = True) -> None:
    """Track request and task fields for log records (structured logs) even without OpenTelemetry."""
    global _log_context
    _log_context = on


def otel_available() -> bool:
    """Whether the OpenTelemetry SDK can be imported (the `parley-a2a[otel]` extra)."""
    try:
        return importlib.util.find_spec("opentelemetry.sdk") is not None
    except (ImportError, ValueError):
        return False


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _first(value: str | None) -> str | None:
    head = (value or "").split(",")[0].strip().lower()
    return head or None


def env_wants_telemetry(env: Mapping[str, str] | None = None) -> bool:
    """Whether the OTEL_* environment asks for telemetry (an exporter or an OTLP endpoint is set)."""
    env = os.environ if env is None else env
    if _truthy(env.get("OTEL_SDK_DISABLED")):
        return False
    traces = _first(env.get("OTEL_TRACES_EXPORTER"))
    if traces is not None:
        return traces != "none"
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def _otlp_module(signal: str, env: Mapping[str, str]) -> Any:
    """The OTLP exporter module for `signal` (trace or metric), by OTEL_EXPORTER_OTLP_PROTOCOL, if installed."""
    protocol = (env.get(f"OTEL_EXPORTER_OTLP_{'TRACES' if signal == 'trace' else 'METRICS'}_PROTOCOL")
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip().lower()
    kinds = ["grpc", "http"] if protocol == "grpc" else ["http", "grpc"]
    for kind in kinds:
        name = f"opentelemetry.exporter.otlp.proto.{kind}.{signal}_exporter"
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def _otlp_available(env: Mapping[str, str]) -> bool:
    return _otlp_module("trace", env) is not None


def _choose_exporter(exporter: Any, env: Mapping[str, str]) -> Any:
    if exporter is not None:
        return exporter
    chosen = _first(env.get("OTEL_TRACES_EXPORTER"))
    if chosen is not None:
        return chosen
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        if _otlp_available(env):
            return "otlp"
        log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but the OTLP exporter is not installed "
                    "(pip install opentelemetry-exporter-otlp); printing spans to the console instead")
    return "console"


def _span_processor(exporter: Any, env: Mapping[str, str]) -> tuple[Any, str]:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

    if not isinstance(exporter, str):  # an exporter object: export each span as it ends
        return SimpleSpanProcessor(exporter), "custom"
    if exporter == "none":
        return None, "none"
    if exporter == "console":
        return SimpleSpanProcessor(ConsoleSpanExporter()), "console"
    if exporter == "otlp":
        module = _otlp_module("trace", env)
        if module is None:
            raise TelemetryUnavailable("the OTLP exporter is not installed: pip install opentelemetry-exporter-otlp")
        return BatchSpanProcessor(module.OTLPSpanExporter()), "otlp"
    raise ValueError(f"unknown span exporter {exporter!r}; use one of {', '.join(EXPORTERS)} or an exporter object")


def _metric_readers(metric_exporter: Any, traces: str, env: Mapping[str, str]) -> list[Any]:
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader

    chosen = metric_exporter
    if chosen is None:
        chosen = _first(env.get("OTEL_METRICS_EXPORTER")) or ("otlp" if traces == "otlp" else "none")
    if isinstance(chosen, MetricReader):
        return [chosen]
    if not isinstance(chosen, str):  # a MetricExporter
        return [PeriodicExportingMetricReader(chosen)]
    if chosen == "none":
        return []
    if chosen == "console":
        return [PeriodicExportingMetricReader(ConsoleMetricExporter())]
    if chosen == "otlp":
        module = _otlp_module("metric", env)
        if module is None:
            raise TelemetryUnavailable("the OTLP exporter is not installed: pip install opentelemetry-exporter-otlp")
        return [PeriodicExportingMetricReader(module.OTLPMetricExporter())]
    raise ValueError(f"unknown metric exporter {chosen!r}; use one of {', '.join(EXPORTERS)}, a reader or an exporter")


def _is_proxy(provider: Any) -> bool:
    """Whether a global provider is the API's placeholder (nobody configured one)."""
    return type(provider).__name__ in ("ProxyTracerProvider", "_ProxyMeterProvider", "NoOpTracerProvider",
                                       "NoOpMeterProvider")


def configure_telemetry(
    service_name: str | None = None,
    *,
    exporter: Any = None,
    metric_exporter: Any = None,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    set_global: bool | None = None,
    env: Mapping[str, str] | None = None,
) -> Telemetry:
    """Turn spans and metrics on (again); returns the active :class:`Telemetry`.

    Args:
        service_name: `service.name` of the resource (OTEL_SERVICE_NAME wins; default "parley").
        exporter: where spans go: "otlp", "console", "none", or a SpanExporter object (exported
            synchronously as each span ends). Default: OTEL_TRACES_EXPORTER, else OTLP when an OTLP
            endpoint is configured and the exporter package is installed, else the console.
        metric_exporter: "otlp", "console", "none", a MetricReader or a MetricExporter. Default:
            OTEL_METRICS_EXPORTER, else OTLP when spans go to OTLP, else none.
        tracer_provider / meter_provider: use these providers instead of building them (tests:
            an SDK TracerProvider with an InMemorySpanExporter, a MeterProvider with an
            InMemoryMetricReader). Parley does not shut down providers it did not build.
        set_global: also make the built providers the global ones (default: True when Parley
            builds them and no global provider is set yet).
        env: the environment to read (default os.environ).

    Raises TelemetryUnavailable when the OpenTelemetry SDK (`pip install 'parley-a2a[otel]'`) or
    the OTLP exporter asked for is missing.
    """
    global _active
    env = os.environ if env is None else env
    try:
        from opentelemetry import metrics, trace
    except ImportError as exc:
        raise TelemetryUnavailable(f"OpenTelemetry is not installed: pip install 'parley-a2a[otel]' ({exc})") from None
    from parley import __version__
    from parley.telemetry.metrics import Metrics

    name = env.get("OTEL_SERVICE_NAME") or service_name or "parley"
    owns = False
    kind = "injected"
    if tracer_provider is None and meter_provider is None and exporter is None and metric_exporter is None \
            and not _is_proxy(trace.get_tracer_provider()):
        # Someone (opentelemetry-instrument, the application) configured the global providers: report there.
        tracer_provider, meter_provider, kind = trace.get_tracer_provider(), metrics.get_meter_provider(), "global"
    if tracer_provider is None or meter_provider is None:
        if not otel_available():
            raise TelemetryUnavailable("the OpenTelemetry SDK is not installed: pip install 'parley-a2a[otel]'")
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider

        resource = Resource.create({"service.name": name, "service.version": __version__})
        traces = "injected"
        if tracer_provider is None:
            processor, traces = _span_processor(_choose_exporter(exporter, env), env)
            tracer_provider = TracerProvider(resource=resource)
            if processor is not None:
                tracer_provider.add_span_processor(processor)
        if meter_provider is None:
            meter_provider = MeterProvider(resource=resource,
                                           metric_readers=_metric_readers(metric_exporter, traces, env))
        owns, kind = True, traces
        if set_global is None:
            set_global = True
    if set_global:
        if _is_proxy(trace.get_tracer_provider()):
            trace.set_tracer_provider(tracer_provider)
        if _is_proxy(metrics.get_meter_provider()):
            metrics.set_meter_provider(meter_provider)
    tracer = tracer_provider.get_tracer(INSTRUMENTATION, __version__)
    meter = meter_provider.get_meter(INSTRUMENTATION, __version__)
    _active = Telemetry(tracer=tracer, meter=meter, metrics=Metrics(meter), tracer_provider=tracer_provider,
                        meter_provider=meter_provider, service_name=name, exporter=kind, owns_providers=owns)
    return _active


def disable_telemetry() -> Telemetry | None:
    """Stop recording (servers created afterwards are not instrumented); returns what was active."""
    global _active
    previous, _active = _active, None
    return previous


def shutdown_telemetry() -> None:
    """Flush and stop: providers Parley built are shut down, injected ones only flushed."""
    tel = disable_telemetry()
    if tel is None:
        return
    for provider in (tel.tracer_provider, tel.meter_provider):
        try:
            if tel.owns_providers and hasattr(provider, "shutdown"):
                provider.shutdown()
            elif hasattr(provider, "force_flush"):
                provider.force_flush()
        except Exception:
            log.warning("telemetry: flushing %r failed", provider, exc_info=True)
