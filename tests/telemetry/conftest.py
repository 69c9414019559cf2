"""Fixtures of the telemetry tests: in-memory OpenTelemetry providers, one set per test module.

Parley keeps the tracer and meter it was configured with (it does not depend on the
set-once global providers), so each module configures its own TracerProvider (with an
InMemorySpanExporter behind a SimpleSpanProcessor: a span is exported as it ends) and
MeterProvider (with an InMemoryMetricReader), and turns telemetry off again at the end.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
for extra in (HERE, HERE.parent, HERE.parent / "runtime", ROOT):  # otelkit, support, fake_llm, examples
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

from support import require

require("opentelemetry.sdk", "otel")  # skips every telemetry test without it (fails under CI=true)

from otelkit import Otel

from parley.telemetry import setup


@pytest.fixture(scope="module")
def otel() -> Iterator[Otel]:
    """Telemetry on, reporting to in-memory providers, for the whole module."""
    kit = Otel.configure()
    try:
        yield kit
    finally:
        kit.close()


@pytest.fixture
def spans(otel: Otel) -> Otel:
    """The module's telemetry, with no span recorded yet by this test."""
    otel.exporter.clear()
    return otel


@pytest.fixture(autouse=True)
def _no_leftover_log_context() -> Iterator[None]:
    yield
    setup.enable_log_context(False)
