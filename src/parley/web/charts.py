"""An agent's last hour at a glance, for its dashboard page: tasks settled per minute by final state, time to
first event and to completion (p50, p95) and errors, from the task store itself (no metrics service: a bare install has it, and
replicas sharing a PostgreSQL store see the cluster's numbers), drawn as inline SVG on the server (no script,
no CDN: the page's CSP holds)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from parley.protocol.states import TERMINAL
from parley.tasks.store import MAX_PAGE_SIZE, TaskQuery, TaskStore
from parley.web.render import state_label

WINDOW_SECONDS = 3600
BUCKET_SECONDS = 60
MINUTES = WINDOW_SECONDS // BUCKET_SECONDS
MAX_TASKS = 2000  # read at most this many of the last hour's tasks (the chart says when it stopped there)
FINAL = ["completed", "failed", "rejected", "canceled"]
ERRORS = {"failed", "rejected"}
WIDTH, HEIGHT = 600, 120  # the SVG's drawing box


@dataclass(slots=True)
class AgentStats:
    """One agent's last hour: per-minute counts by final state (oldest minute first), and the summaries."""

    minutes: list[dict[str, int]] = field(default_factory=lambda: [{} for _ in range(MINUTES)])
    settled: dict[str, int] = field(default_factory=dict)
    durations: list[float] = field(default_factory=list)  # created -> settled, seconds
    first_events: list[float] = field(default_factory=list)  # created -> first event after the Task, seconds
    # the same per minute (oldest first): time to first event by the minute of that event, time to completion
    # by the minute the task ended
    first_by_minute: list[list[float]] = field(default_factory=lambda: [[] for _ in range(MINUTES)])
    durations_by_minute: list[list[float]] = field(default_factory=lambda: [[] for _ in range(MINUTES)])
    truncated: bool = False

    @property
    def errors(self) -> int:
        return sum(n for state, n in self.settled.items() if state in ERRORS)

    def percentile(self, p: float) -> float | None:
        """The nearest-rank percentile `p` (0-100) of the times to completion; None without any."""
        return percentile(self.durations, p)

    def first_event_percentile(self, p: float) -> float | None:
        """The nearest-rank percentile `p` (0-100) of the times to first event; None without any."""
        return percentile(self.first_events, p)


def percentile(values: list[float], p: float) -> float | None:
    """The nearest-rank percentile `p` (0-100) of `values`; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


async def agent_stats(store: TaskStore, agent_id: str, now: float) -> AgentStats:
    """The tasks of `agent_id` settled in the hour before `now`, counted (newest first, MAX_TASKS at most)."""
    stats = AgentStats()
    start = now - WINDOW_SECONDS
    cursor = None
    seen = 0
    while True:
        page = await store.list(TaskQuery(agent_id=agent_id, owner=None, page_size=MAX_PAGE_SIZE, cursor=cursor,
                                          count=False))
        for rec in page.records:
            if rec.updated_at < start:
                return stats
            seen += 1
            if seen > MAX_TASKS:
                stats.truncated = True
                return stats
            if rec.first_event_at is not None and rec.created_at and rec.created_at >= start:
                first = max(0.0, rec.first_event_at - rec.created_at)
                stats.first_events.append(first)
                stats.first_by_minute[_minute(rec.first_event_at, start)].append(first)
            state = rec.task.status.state
            if state not in TERMINAL:  # running or waiting for input: not settled yet
                continue
            label = state_label(state)
            bucket = _minute(rec.updated_at, start)
            stats.minutes[bucket][label] = stats.minutes[bucket].get(label, 0) + 1
            stats.settled[label] = stats.settled.get(label, 0) + 1
            if rec.created_at:
                stats.durations.append(max(0.0, rec.updated_at - rec.created_at))
                stats.durations_by_minute[bucket].append(stats.durations[-1])
        if page.next_cursor is None:
            return stats
        cursor = page.next_cursor


def _minute(at: float, start: float) -> int:
    """The bucket (0 = the oldest minute) of a time in the window that begins at `start`."""
    return min(max(0, int((at - start) // BUCKET_SECONDS)), MINUTES - 1)


def latency_bars(by_minute: list[list[float]]) -> list[dict[str, object]]:
    """One minute's p95 (a light bar) and p50 (a dark bar in front of it) per minute with any value, in a WIDTH x
    HEIGHT box whose top is the hour's highest p95: {x, width, y50, height50, y95, height95, p50, p95, count,
    minute}."""
    shown = [(i, percentile(values, 50), percentile(values, 95), len(values))
             for i, values in enumerate(by_minute) if values]
    peak = max((p95 for _, _, p95, _ in shown), default=0.0) or 1.0  # all zero: flat bars, no division by 0
    width = WIDTH / len(by_minute)
    rects = []
    for i, p50, p95, count in shown:
        h50, h95 = HEIGHT * p50 / peak, HEIGHT * p95 / peak  # type: ignore[operator]
        rects.append({"x": round(i * width, 2), "width": round(width - 1, 2), "y50": round(HEIGHT - h50, 2),
                      "height50": round(h50, 2), "y95": round(HEIGHT - h95, 2), "height95": round(h95, 2),
                      "p50": p50, "p95": p95, "count": count, "minute": i})
    return rects


def bars(stats: AgentStats) -> list[dict[str, object]]:
    """The stacked bars of the per-minute chart of tasks by final state (see stacked_bars)."""
    return stacked_bars(stats.minutes, FINAL)


def stacked_bars(minutes: list[dict[str, int]], order: list[str]) -> list[dict[str, object]]:
    """Stacked bars, one rect per minute and kind in `order` (x, y, width, height, state, count, minute) in a
    WIDTH x HEIGHT box, the tallest minute filling it."""
    peak = max((sum(b.values()) for b in minutes), default=0)
    if peak == 0:
        return []
    width = WIDTH / len(minutes)
    rects = []
    for i, bucket in enumerate(minutes):
        y = float(HEIGHT)
        for state in order:
            count = bucket.get(state, 0)
            if not count:
                continue
            height = HEIGHT * count / peak
            y -= height
            rects.append({"x": round(i * width, 2), "y": round(y, 2), "width": round(width - 1, 2),
                          "height": round(height, 2), "state": state, "count": count, "minute": i})
    return rects


__all__ = ["FINAL", "HEIGHT", "WIDTH", "AgentStats", "agent_stats", "bars", "latency_bars", "percentile",
           "stacked_bars"]
