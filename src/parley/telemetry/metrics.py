"""The instruments Parley records (one set per configured meter).

    a2a.server.requests          counter        A2A requests answered, by method, binding, agent and status
    a2a.server.request.duration  histogram (s)  time to answer (streams: until the stream ends)
    a2a.server.task.duration     histogram (s)  a task's turn from creation (or continuation) to settled, by state
    a2a.server.active_tasks      observable up-down counter: runs in progress (engine.runs), by agent
    a2a.server.sse.subscribers   up-down counter: open SSE streams, by binding and agent
    gen_ai.client.token.usage    histogram      tokens per model call, by gen_ai.token.type (input/output)
    gen_ai.client.operation.duration histogram (s)  model call duration
    a2a.server.push.attempts     counter        webhook deliveries tried, by outcome (delivered, retry, dead,
                                                disabled) and agent
    a2a.server.push.latency      histogram (s)  from the change to its delivery (delivered notifications)
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Iterable
from typing import Any

from opentelemetry.metrics import CallbackOptions, Observation

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)


class Metrics:
    """Instruments on one meter, and the task engines whose active runs it reports."""

    def __init__(self, meter: Any) -> None:
        self.requests = meter.create_counter(
            "a2a.server.requests", unit="{request}", description="A2A requests answered")
        self.request_duration = meter.create_histogram(
            "a2a.server.request.duration", unit="s", description="Time to answer an A2A request",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self.task_duration = meter.create_histogram(
            "a2a.server.task.duration", unit="s",
            description="Time from a task's creation (or continuation) until it settles, by final state",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self.sse_subscribers = meter.create_up_down_counter(
            "a2a.server.sse.subscribers", unit="{stream}", description="Open SSE streams")
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens used by a model call",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS)
        self.operation_duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="Duration of a model call",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self.push_attempts = meter.create_counter(
            "a2a.server.push.attempts", unit="{attempt}", description="Push-notification deliveries tried, by outcome")
        self.push_latency = meter.create_histogram(
            "a2a.server.push.latency", unit="s", description="Time from a task change to its webhook's 2xx",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
        self._engines: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.active_tasks = meter.create_observable_up_down_counter(
            "a2a.server.active_tasks", callbacks=[self._observe_active], unit="{task}",
            description="Tasks whose agent is running")

    # --- the engines whose runs are counted ------------------------------------------------

    def watch(self, engine: Any) -> None:
        with self._lock:
            self._engines.add(engine)

    def unwatch(self, engine: Any) -> None:
        with self._lock:
            self._engines.discard(engine)

    def _observe_active(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            engines = list(self._engines)
        counts: Counter[str] = Counter()
        for engine in engines:
            for agent_id in engine.agents:
                counts[agent_id] += 0
            for run in _snapshot(engine.runs):
                counts[run.record.agent_id] += 1
        return [Observation(n, {"a2a.agent_id": agent_id}) for agent_id, n in counts.items()]


def _snapshot(runs: dict[str, Any]) -> list[Any]:
    """The values of a dict another thread (the event loop) may be changing."""
    for _ in range(5):
        try:
            return list(runs.values())
        except RuntimeError:  # changed size during iteration: read again
            continue
    return []
