"""The delivery log of a task's push notifications, as the API, `parley push log` and the dashboard show it.

Errors are shown as recorded, except any part that quotes a request header: an HTTP library refusing a
header value says which value (`Illegal header value b'...'`), and the value was a webhook's secret (a
token or credentials registered before such values were refused; parley.push.secrets). That part is
replaced by "(redacted)" here, so the log never shows a secret whatever an older attempt recorded.
"""

from __future__ import annotations

import re
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
            "attempt": a.attempt, "at": a.at, "status": a.status, "error": shown_error(a.error),
            "durationSeconds": round(a.duration, 4), "outcome": a.outcome, "nextAt": a.next_at})
    return {"taskId": task_id, "notifications": [{
        "eventId": event_id(n.task_id, n.seq), "configId": n.config_id, "seq": n.seq, "kind": n.kind,
        "state": n.state, "attempts": n.attempts, "nextAt": n.next_at if n.state == "pending" else None,
        "lastStatus": n.last_status, "lastError": shown_error(n.last_error), "createdAt": n.created_at, "doneAt": n.done_at,
        "tries": tries.get(n.id, [])} for n in notifications]}


_QUOTED_HEADER = re.compile(r"(header (?:value|name|field))\b.*", re.IGNORECASE | re.DOTALL)


def shown_error(error: str | None) -> str | None:
    """A recorded delivery error as it may be shown: what follows "header value/name/field" is redacted."""
    if not error:
        return error
    return _QUOTED_HEADER.sub(r"\1 (redacted)", error)


__all__ = ["push_log_json", "shown_error"]
