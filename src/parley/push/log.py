"""The delivery log of a task's push notifications, as the API and `parley push log` show it."""

from __future__ import annotations

from typing import Any

from parley.push.payload import event_id
from parley.tasks.store import DeliveryAttempt, Notification


def push_log_json(task_id: str, notifications: list[Notification],
                  attempts: list[DeliveryAttempt]) -> dict[str, Any]:
    """`{"taskId", "notifications": [{eventId, configId, seq, kind, state, attempts, nextAt, lastStatus,
    lastError, createdAt, doneAt, tries: [{attempt, at, status, error, durationSeconds, outcome, nextAt}]}]}`"""
    tries: dict[int, list[dict[str, Any]]] = {}
    for a in attempts:
        tries.setdefault(a.notification_id, []).append({
            "attempt": a.attempt, "at": a.at, "status": a.status, "error": a.error,
            "durationSeconds": round(a.duration, 4), "outcome": a.outcome, "nextAt": a.next_at})
    return {"taskId": task_id, "notifications": [{
        "eventId": event_id(n.task_id, n.seq), "configId": n.config_id, "seq": n.seq, "kind": n.kind,
        "state": n.state, "attempts": n.attempts, "nextAt": n.next_at if n.state == "pending" else None,
        "lastStatus": n.last_status, "lastError": n.last_error, "createdAt": n.created_at, "doneAt": n.done_at,
        "tries": tries.get(n.id, [])} for n in notifications]}


__all__ = ["push_log_json"]
