"""An agent's push deliveries of the last hour by outcome, for its dashboard page: every attempt the delivery log
recorded (delivered, retried after a failed attempt, dead-lettered, the webhook disabled by 410 Gone), per minute,
from the task store (replicas sharing a PostgreSQL store see the cluster's attempts), drawn like the tasks chart."""

from __future__ import annotations

from dataclasses import dataclass, field

from parley.tasks.store import TaskStore
from parley.web.charts import BUCKET_SECONDS, MINUTES, WINDOW_SECONDS

MAX_ATTEMPTS = 2000  # read at most this many of the last hour's attempts (the chart says when it stopped there)
OUTCOMES = ["delivered", "retry", "dead", "disabled"]  # DeliveryAttempt.outcome, in the order bars stack
LABELS = {"delivered": "delivered", "retry": "failed, retried", "dead": "dead-lettered", "disabled": "disabled (410 Gone)"}


@dataclass(slots=True)
class PushStats:
    """One agent's push attempts in the last hour: per-minute counts by outcome (oldest minute first), totals."""

    minutes: list[dict[str, int]] = field(default_factory=lambda: [{} for _ in range(MINUTES)])
    outcomes: dict[str, int] = field(default_factory=dict)
    truncated: bool = False

    @property
    def attempts(self) -> int:
        return sum(self.outcomes.values())


async def push_stats(store: TaskStore, agent_id: str, now: float) -> PushStats:
    """The delivery attempts for `agent_id`'s tasks in the hour before `now`, counted (newest MAX_ATTEMPTS)."""
    stats = PushStats()
    start = now - WINDOW_SECONDS
    attempts = await store.recent_attempts(agent_id, start, MAX_ATTEMPTS + 1)
    if len(attempts) > MAX_ATTEMPTS:
        stats.truncated = True
        attempts = attempts[:MAX_ATTEMPTS]
    last = len(stats.minutes) - 1
    for a in attempts:
        outcome = a.outcome if a.outcome in LABELS else "retry"  # an outcome this release does not know: a failure
        bucket = stats.minutes[min(max(0, int((a.at - start) // BUCKET_SECONDS)), last)]
        bucket[outcome] = bucket.get(outcome, 0) + 1
        stats.outcomes[outcome] = stats.outcomes.get(outcome, 0) + 1
    return stats


__all__ = ["LABELS", "MAX_ATTEMPTS", "OUTCOMES", "PushStats", "push_stats"]
