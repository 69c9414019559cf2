"""Fewer bytes for the SQLite log's rows: a moved tail deflated, a streamed token's row as what is new in it.

The SQLite store writes a streamed token's entries twice: once in the token's change-feed row (the task's tail),
then in the log row its tail becomes (sqlite_store). Both are JSON arrays of [seq, kind, event] (entry_codec),
and the events of one answer differ in a few bytes: the task, context and artifact ids repeat in each. So:

- a log row made from a tail is deflated (zlib, level 1: 64 tokens' 14 KB of JSON become about 550 bytes);
- a tail row after the tail's first is deflated with the first as the dictionary (zlib's preset dictionary, a
  raw stream): what it repeats of the first costs a few bits, what is new in it (its text, its seq and
  generation) a few bytes: a token's ~270 bytes of JSON become about 25.

Each form is told apart by its first byte: `[` plain JSON (every row written before schema 9 included), 0x78 a
zlib stream, `=` a row deflated against the tail's first (schema 10), `~` a row schema 9 wrote relative to the
tail's first: its seq, the length of what it shares with the first after the seq, and the rest
(`~seq,shared:rest`; the generation at the end of every event since A2A 1.1 made the rest most of the row).
"""

from __future__ import annotations

import zlib

PACK_FROM = 512  # a log row shorter than this stays plain JSON (deflating it saves little)


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


def elide(batch: bytes, first: bytes) -> bytes:
    """`batch` (an encode_entries array) written relative to `first`, its tail's first row: `=` and `batch`
    deflated with `first` as the preset dictionary, or `batch` itself when that is not shorter."""
    window = max(9, min(15, (len(first) + len(batch)).bit_length()))  # the dictionary and the row fit in it
    packer = zlib.compressobj(1, zlib.DEFLATED, -window, 1, zlib.Z_DEFAULT_STRATEGY, first)
    packed = b"=" + packer.compress(batch) + packer.flush()
    return packed if len(packed) < len(batch) else batch


def restore(stored: bytes, first: bytes) -> bytes:
    """The batch :func:`elide` wrote as `stored`, given the same `first`."""
    return restore_rows([stored], first)[1]


def restore_rows(stored: list[bytes], first: bytes) -> list[bytes]:
    """A tail's batches whole: `first`, then each of `stored` (written by :func:`elide` against `first`, by schema
    9's form of it, or plain) as it was. A moved tail's 64 rows in one call."""
    body = first[first.index(b","):]
    out = [first]
    for row in stored:
        kind = row[:1]
        if kind == b"=":
            unpacker = zlib.decompressobj(-15, first)
            out.append(unpacker.decompress(row[1:]) + unpacker.flush())
        elif kind == b"~":  # schema 9: `~seq,shared:rest`
            seq, rest = row[1:].split(b",", 1)
            shared, tail = rest.split(b":", 1)
            out.append(b"[[" + seq + body[:int(shared)] + tail)
        else:
            out.append(row)
    return out


__all__ = ["elide", "pack_log_row", "restore", "restore_rows", "unpack_log_row"]
