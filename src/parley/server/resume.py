"""Where a resumed stream starts: the `Last-Event-ID` value, one rule for every binding.

An event id is a task's log sequence number: ASCII digits, at most 18 of them (every such number fits the
stores' 64-bit integers; "²".isdigit() is true, and int() refuses it). Anything else is a precise
InvalidRequest, never an overflow deep in a store (issue 27: gRPC once answered INTERNAL for 2^63).
"""

from __future__ import annotations

from parley.protocol.errors import InvalidRequestError

MAX_DIGITS = 18


def parse_event_id(raw: str | None, name: str = "Last-Event-ID") -> int | None:
    """The sequence number `raw` names; None when it is absent or blank; InvalidRequestError otherwise."""
    if raw is None or not raw.strip():
        return None
    raw = raw.strip()
    if not (raw.isascii() and raw.isdigit() and len(raw) <= MAX_DIGITS):
        raise InvalidRequestError(f"Invalid request: {name} {raw[:40]!r} is not an event id of this server")
    return int(raw)
