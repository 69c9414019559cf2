"""Fewer bytes for the SQLite log's rows: a moved tail deflated, a streamed token's row as what is new in it.

The SQLite store writes a streamed token's entries twice: once in the token's change-feed row (the task's tail),
then in the log row its tail becomes (sqlite_store). Both are JSON arrays of [seq, kind, event] (entry_codec),
and the events of one answer differ in a few bytes: the task, context and artifact ids repeat in each. So:

- a log row made from a tail is deflated (zlib, level 1: 64 tokens' 14 KB of JSON become about 550 bytes);
- a tail row after the tail's first is written as its seq, the length of what it shares with the first row
  after the seq, and the rest (`~seq,shared:rest`) (a token's 223 bytes become about 30).

Each form is told apart by its first byte: `[` plain JSON (every row written before schema 9 included), 0x78 a
zlib stream, `~` a row relative to the tail's first.
"""

from __future__ import annotations

import zlib

PACK_FROM = 512  # a log row shorter than this stays plain JSON (deflating it saves little)
MIN_SHARED = 16  # a tail row sharing less than this with the first stays plain


def pack_log_row(batches: list[bytes]) -> bytes:
    """Several encode_entries arrays as one log row: their JSON concatenated, deflated when it is long enough."""
    data = batches[0] if len(batches) == 1 else b"[" + b",".join(b[1:-1] for b in batches) + b"]"
    if len(data) < PACK_FROM:
        return data
    packed = zlib.compress(data, 1)
    return packed if len(packed) < len(data) else data


def unpack_log_row(data: bytes) -> bytes:
    """The JSON array a log row holds (see pack_log_row); plain rows are returned as they are."""
    return data if data[:1] == b"[" else zlib.decompress(data)


def _shared(a: bytes, b: bytes) -> int:
    """How many leading bytes `a` and `b` have in common (their XOR as one integer: its length says where they
    first differ, computed in C)."""
    n = min(len(a), len(b))
    differ = int.from_bytes(a[:n], "big") ^ int.from_bytes(b[:n], "big")
    return n - (differ.bit_length() + 7) // 8


def elide(batch: bytes, first: bytes) -> bytes:
    """`batch` (an encode_entries array: `[[seq,...`) written relative to `first`, its tail's first row:
    `~seq,shared:rest`, or `batch` itself when they share too little."""
    i, j = batch.index(b","), first.index(b",")
    shared = _shared(batch[i:], first[j:])
    if shared < MIN_SHARED:
        return batch
    return b"~" + batch[2:i] + b"," + str(shared).encode() + b":" + batch[i + shared:]


def restore(stored: bytes, first: bytes) -> bytes:
    """The batch :func:`elide` wrote as `stored`, given the same `first`."""
    return restore_rows([stored], first)[1]


def restore_rows(stored: list[bytes], first: bytes) -> list[bytes]:
    """A tail's batches whole: `first`, then each of `stored` (written by :func:`elide` against `first`, or plain)
    as it was. A moved tail's 64 rows in one call: `first`'s part after the seq is found once, a third less work
    than a pass per row."""
    body = first[first.index(b","):]
    out = [first]
    for row in stored:
        if row[:1] != b"~":
            out.append(row)
            continue
        seq, rest = row[1:].split(b",", 1)
        shared, tail = rest.split(b":", 1)
        out.append(b"[[" + seq + body[:int(shared)] + tail)
    return out


__all__ = ["elide", "pack_log_row", "restore", "restore_rows", "unpack_log_row"]
