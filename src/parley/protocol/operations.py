"""The abstract A2A operations every binding and version maps onto."""

from __future__ import annotations

import enum


class Operation(str, enum.Enum):
    """One A2A operation, independent of method names and versions."""

    SEND = "send"
    STREAM = "stream"
    GET = "get"
    LIST = "list"
    CANCEL = "cancel"
    SUBSCRIBE = "subscribe"
    PUSH_SET = "push_set"
    PUSH_GET = "push_get"
    PUSH_LIST = "push_list"
    PUSH_DELETE = "push_delete"
    EXTENDED_CARD = "extended_card"
    CARD = "card"  # the public card as an operation: A2A 0.3 HTTP+JSON `GET /v1/card`
    TRACE = "trace"  # Parley's extension: the delegation tree of a task (`GET .../tasks/{id}/trace`)
    PUSH_LOG = "push_log"  # Parley's extension: a task's push deliveries (`GET .../tasks/{id}/pushLog`)

    @property
    def streams(self) -> bool:
        """True when the answer is an SSE stream."""
        return self in (Operation.STREAM, Operation.SUBSCRIBE)
