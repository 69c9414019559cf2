"""What a webhook receives for one notification: the body in the version its client spoke, and headers.

A2A 1.0 (section 4.3.3): a `StreamResponse` (`{"statusUpdate": ...}` or `{"artifactUpdate": ...}`),
`Content-Type: application/a2a+json`. A2A 0.3: the Task as it stood after the change (what 0.3
receivers, the official SDK's included, expect), `Content-Type: application/json`.

Headers: `X-A2A-Notification-Token` (the config's token), `Authorization` (the config's
`authentication`: `<scheme> <credentials>`), `Parley-Event-Id` (`<task id>:<seq>`, the same on every
retry: de-duplicate on it) and `Parley-Event-Seq` (the entry's place in the task's log: order).
"""

from __future__ import annotations

from parley.protocol import models as m
from parley.protocol import v0_3, v1_0
from parley.protocol.codec import dumps, to_wire
from parley.tasks.log import Entry, fold

TOKEN_HEADER = "X-A2A-Notification-Token"
EVENT_ID_HEADER = "Parley-Event-Id"
EVENT_SEQ_HEADER = "Parley-Event-Seq"


def event_id(task_id: str, seq: int) -> str:
    """The id of the notification of entry `seq` of a task (the same for every retry)."""
    return f"{task_id}:{seq}"


def body_of(version: str, log: list[Entry], seq: int) -> tuple[bytes, str]:
    """(body, content type) of the notification of entry `seq`, from the task's log up to it."""
    upto = [e for e in log if e.seq <= seq]
    if not upto or upto[-1].seq != seq:
        raise LookupError(f"entry {seq} is not in the task's log")
    if version == "0.3":
        first = upto[0].event
        assert isinstance(first, m.Task)
        task = fold(first, [e.event for e in upto[1:]])
        return dumps(v0_3.task_to_v03(to_wire(task))), "application/json"
    return dumps(v1_0.encode_event(upto[-1].event)), "application/a2a+json"


def headers_of(config: m.TaskPushNotificationConfig, task_id: str, seq: int, content_type: str) -> dict[str, str]:
    """The A2A and de-duplication headers of one notification (secrets already opened)."""
    headers = {"Content-Type": content_type, EVENT_ID_HEADER: event_id(task_id, seq), EVENT_SEQ_HEADER: str(seq)}
    if config.token:
        headers[TOKEN_HEADER] = config.token
    auth = config.authentication
    if auth is not None and auth.credentials:
        headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
    return headers


__all__ = ["EVENT_ID_HEADER", "EVENT_SEQ_HEADER", "TOKEN_HEADER", "body_of", "event_id", "headers_of"]
