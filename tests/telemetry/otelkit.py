"""Helpers of the telemetry tests: in-memory providers and ways to read what they recorded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from parley.telemetry import Telemetry, configure_telemetry, disable_telemetry


@dataclass
class Otel:
    """Providers of one test module and what they recorded."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    telemetry: Telemetry

    @classmethod
    def configure(cls) -> Otel:
        exporter = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
        reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[reader])
        tel = configure_telemetry("parley-tests", tracer_provider=tracer_provider, meter_provider=meter_provider)
        return cls(tracer_provider, meter_provider, exporter, reader, tel)

    def close(self) -> None:
        disable_telemetry()
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()

    # --- spans -------------------------------------------------------------------------------

    def finished(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str, kind: SpanKind | None = None, **attributes: Any) -> list[ReadableSpan]:
        """Finished spans called `name` (and of `kind`) whose attributes include `attributes`
        (keys with dots are written with `__`: a2a__agent_id=...)."""
        want = {k.replace("__", "."): v for k, v in attributes.items()}
        return [s for s in self.finished()
                if s.name == name and (kind is None or s.kind is kind)
                and all((s.attributes or {}).get(k) == v for k, v in want.items())]

    def one(self, name: str, kind: SpanKind | None = None, **attributes: Any) -> ReadableSpan:
        found = self.named(name, kind, **attributes)
        assert len(found) == 1, f"expected one {name!r} span with {attributes}, got {len(found)}: " + \
            ", ".join(f"{s.name} {dict(s.attributes or {})}" for s in self.finished())
        return found[0]

    def by_id(self, span_id: int) -> ReadableSpan | None:
        return next((s for s in self.finished() if s.context.span_id == span_id), None)

    # --- metrics -----------------------------------------------------------------------------

    def points(self, name: str) -> list[Any]:
        """The data points of metric `name` right now (collected on demand)."""
        data = self.reader.get_metrics_data()
        out: list[Any] = []
        for rm in data.resource_metrics if data is not None else []:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        out.extend(metric.data.data_points)
        return out

    def value(self, name: str, **attributes: Any) -> Any:
        """The sum (counters), count (histograms) of the points of `name` matching `attributes`, or None."""
        want = {k.replace("__", "."): v for k, v in attributes.items()}
        total = None
        for point in self.points(name):
            attrs = dict(point.attributes or {})
            if all(attrs.get(k) == v for k, v in want.items()):
                got = point.value if hasattr(point, "value") else point.count
                total = got if total is None else total + got
        return total


def hex_id(value: int, width: int = 32) -> str:
    return format(value, f"0{width}x")


# --- a test app ------------------------------------------------------------------------------

AGENT_LOGGER = "parley.tests.agent"


def make_app(grpc_port: int | None = None) -> Any:
    """echo (default), ask (input-required, then answers), boom (fails), wait (until canceled), logs (logs a line)."""
    import asyncio
    import logging

    from parley.app import Parley, Settings
    from parley.tasks.memory_store import MemoryTaskStore

    app = Parley(store=MemoryTaskStore(), settings=Settings(grpc_port=grpc_port))

    @app.agent(id="echo", description="Echoes", default=True)
    async def echo(ctx):
        yield f"echo: {ctx.text}"

    @app.agent(id="ask", description="Asks for a name, then greets")
    async def ask(ctx):
        if ctx.turn == 1:
            yield ctx.ask("What is your name?")
            return
        yield f"Hello, {ctx.text}!"

    @app.agent(id="boom", description="Fails")
    async def boom(ctx):
        yield "partial"
        raise RuntimeError("kaput")

    @app.agent(id="wait", description="Works until canceled")
    async def wait(ctx):
        yield ctx.say("waiting")
        await asyncio.Event().wait()

    @app.agent(id="logs", description="Logs a line")
    async def logs(ctx):
        logging.getLogger(AGENT_LOGGER).info("working on %s", ctx.text)
        yield "logged"

    return app


