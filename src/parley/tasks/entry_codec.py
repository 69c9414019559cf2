"""Log entries as bytes: how stores and shared buses write an :class:`Entry` and read it back.

An entry is stored as its kind (`task`, `message`, `status`, `artifact`) and its event in
A2A 1.0 JSON; the kind picks the decoder. One module, so that SQLite, PostgreSQL and the
Redis and PostgreSQL buses agree byte for byte.
"""

from __future__ import annotations

import msgspec

from parley.protocol import models as m
from parley.tasks.log import Entry, EntryKind

KINDS: dict[str, type] = {
    "task": m.Task,
    "message": m.Message,
    "status": m.TaskStatusUpdateEvent,
    "artifact": m.TaskArtifactUpdateEvent,
}
_enc = msgspec.json.Encoder()
_decoders = {k: msgspec.json.Decoder(t) for k, t in KINDS.items()}


def encode_event(entry: Entry) -> bytes:
    """The event of `entry` as JSON (its kind is stored beside it)."""
    return _enc.encode(entry.event)


def decode_entry(seq: int, kind: str, payload: bytes | str) -> Entry:
    """The entry stored as (seq, kind, payload)."""
    return Entry(seq, _decoders[kind].decode(payload))


class _Wire(msgspec.Struct, array_like=True):
    seq: int
    kind: str
    event: msgspec.Raw


_wire_list_dec = msgspec.json.Decoder(list[_Wire])


def encode_entries(entries: list[Entry]) -> bytes:
    """A batch of entries as one JSON array of [seq, kind, event] (a bus message, a row of the SQLite log),
    encoded in one call."""
    return _enc.encode([(e.seq, e.kind, e.event) for e in entries])


def encode_stored(entries: list[tuple[int, str, bytes]]) -> bytes:
    """What :func:`encode_entries` makes, from entries stored as (seq, kind, payload): the events' JSON is
    kept as it is, not decoded."""
    return _enc.encode([(seq, kind, msgspec.Raw(payload)) for seq, kind, payload in entries])


def decode_entries(data: bytes | str) -> list[Entry]:
    """The batch :func:`encode_entries` made."""
    return [decode_entry(w.seq, w.kind, w.event) for w in _wire_list_dec.decode(data)]


__all__ = ["KINDS", "EntryKind", "decode_entries", "decode_entry", "encode_entries", "encode_event", "encode_stored"]
