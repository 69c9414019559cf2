"""Append-only files for the SQLite store's tails: a streamed token's commit as one record, not a database page.

A commit of artifact updates only (a streamed token) goes to its task's tail (sqlite_store), and the tail moves into
the task's log in SQLite at the task's next other commit. Kept in SQLite's change feed, every token rewrote the
feed's last page in the WAL and again at the checkpoint: ~1.5-2 KB of disk writes for a ~25-byte token
(bench/RESULTS.md). Here each is a record appended to `<db>-tail.<n>` (one write per group write), and a record of
a tail that moved is dead weight, dropped with its file.

Files ("segments") are numbered; a new one starts once the current one holds SEGMENT_BYTES. The store moves the
tails that began two segments back (`SqliteTaskStore._retire_tails`), and those segments are deleted once a WAL
checkpoint synced the move (`take_retired`), so a few segments exist at any time. The active segment is synced
(fdatasync) by the same checkpoint rounds that sync the WAL: the loss window on a power cut stays what
`synchronous=NORMAL` gives SQLite's own commits. A process crash loses nothing written.

A record: a 4-byte length and a 4-byte CRC-32 of the payload, little-endian, then the payload (msgpack:
task id, the seq the commit expects, its last seq, its time, its entries as the store keeps them). A crash in the
middle of a write leaves a torn record at the end of the newest segment: reading stops there and it is cut off.
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import msgspec

SEGMENT_BYTES = 8 * 1024 * 1024  # a new segment after this many bytes (about 80,000 tokens' records)
_HEADER = struct.Struct("<II")  # payload length, CRC-32 of the payload
_READ_AHEAD = 256  # payload bytes read with the header in one pread: most tokens' records are shorter
_OFFSET_BITS = 32  # a record's reference: its segment number above these bits, its offset below
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1
_encode = msgspec.msgpack.Encoder().encode
_datasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


class TailRecord(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """One commit of a tail, as written."""

    task_id: str
    expected_seq: int  # the task's seq before this commit: recovery keeps a record only where it follows on
    last_seq: int
    at: float
    entries: bytes  # as the tail keeps them: the first commit's whole, later ones elided against it


_decode = msgspec.msgpack.Decoder(TailRecord).decode


def segment_of(ref: int) -> int:
    """The segment a record reference points into."""
    return ref >> _OFFSET_BITS


class TailFile:
    """The tail segments of one SQLite database (`path` None: kept in memory, for a `:memory:` database)."""

    def __init__(self, db_path: str | None) -> None:
        self.base = db_path + "-tail." if db_path is not None else None
        self._fds: dict[int, int] = {}  # segment -> its open file (on disk)
        self._memory: dict[int, bytearray] = {}  # segment -> its bytes (in memory)
        self.active = 0  # the segment appended to (0: none yet)
        self._size = 0  # the active segment's size, the staged records not counted
        self._staged = bytearray()  # records for the next write (the group write under way)
        self._unsynced = False
        self._damaged = False  # a failed write's bytes are still at the end of the active segment
        self._lock = threading.Lock()  # the retired list and the files' fds, shared with the checkpoint thread
        self._retired: list[int] = []  # segments whose tails moved: deleted once a checkpoint synced the moves

    # --- segments on disk ------------------------------------------------------------------------

    def existing(self) -> list[int]:
        """The numbers of the segments on disk, oldest first."""
        if self.base is None:
            return sorted(self._memory)
        folder, prefix = os.path.split(self.base)
        pattern = re.compile(re.escape(prefix) + r"(\d+)")
        return sorted(int(match.group(1)) for name in os.listdir(folder or ".") if (match := pattern.fullmatch(name)))

    def _path(self, segment: int) -> str:
        assert self.base is not None
        return f"{self.base}{segment}"

    def recover(self) -> Iterator[TailRecord]:
        """Every whole record of the segments on disk, in the order written (a torn last record is cut off)."""
        for segment in self.existing():
            data = self._memory[segment] if self.base is None else Path(self._path(segment)).read_bytes()
            offset = 0
            while offset + _HEADER.size <= len(data):
                length, crc = _HEADER.unpack_from(data, offset)
                payload = bytes(data[offset + _HEADER.size:offset + _HEADER.size + length])
                if len(payload) < length or zlib.crc32(payload) != crc:
                    break
                try:
                    record = _decode(payload)
                except msgspec.DecodeError:
                    break
                yield record
                offset += _HEADER.size + length

    def start(self) -> None:
        """Delete the segments recovery read (their tails are in the log now, synced) and open a new one."""
        newest = 0
        for segment in self.existing():
            newest = segment
            self._unlink(segment)
        self._open(newest + 1)

    def _open(self, segment: int) -> None:
        if self.base is None:
            self._memory[segment] = bytearray()
        else:
            fd = os.open(self._path(segment), os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            with self._lock:
                self._fds[segment] = fd
        self.active, self._size = segment, 0

    def _unlink(self, segment: int) -> None:
        with self._lock:
            fd = self._fds.pop(segment, None)
        if fd is not None:
            os.close(fd)
        if self.base is None:
            self._memory.pop(segment, None)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(segment))

    # --- writing ---------------------------------------------------------------------------------

    def stage(self, record: TailRecord) -> int:
        """Add a record to the next write; its reference (readable at once, from the staged bytes)."""
        if self._damaged and not self._staged:  # a failed write left bytes that could not be cut off
            self._open(self.active + 1)  # recovery reads the damaged segment up to them, then this one
            self._damaged = False
        payload = _encode(record)
        ref = (self.active << _OFFSET_BITS) | (self._size + len(self._staged))
        self._staged += _HEADER.pack(len(payload), zlib.crc32(payload))
        self._staged += payload
        return ref

    def write(self) -> None:
        """Write the staged records (before the group write's commits are acknowledged). On failure nothing of them
        is left in the file, and OSError is raised."""
        if not self._staged:
            return
        data, self._staged = self._staged, bytearray()
        if self.base is None:
            self._memory[self.active] += data
        else:
            fd = self._fds[self.active]
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            except OSError:
                try:
                    os.ftruncate(fd, self._size)  # a half-written record would shift every later reference
                except OSError:
                    self._damaged = True  # recovery stops reading this segment at those bytes: start another
                raise
            self._unsynced = True
        self._size += len(data)

    def discard(self) -> None:
        """Drop the staged records (their group write failed)."""
        self._staged = bytearray()

    def full(self) -> bool:
        """Whether the active segment is past SEGMENT_BYTES (the store then starts a new one: rotate)."""
        return self._size >= SEGMENT_BYTES

    def rotate(self) -> None:
        """Append to a new segment from now on."""
        self._open(self.active + 1)

    def retire(self, segments: list[int]) -> None:
        """These segments hold no live tail's records any more (their tails moved in a transaction committed just
        now): delete them once a checkpoint synced it (take_retired)."""
        if self.base is None:
            for segment in segments:
                self._unlink(segment)
            return
        with self._lock:
            self._retired.extend(segments)

    def live(self) -> list[int]:
        """The segments kept (not retired), oldest first."""
        with self._lock:
            retired = set(self._retired)
            return sorted(s for s in (self._fds if self.base is not None else self._memory) if s not in retired)

    # --- the checkpoint thread -------------------------------------------------------------------

    def sync(self) -> None:
        """fdatasync the active segment if it was written since the last sync (a checkpoint round's, on its
        thread: the event loop never waits for the disk)."""
        if not self._unsynced:
            return
        self._unsynced = False
        with self._lock:
            fd = self._fds.get(self.active)
            if fd is not None:
                with contextlib.suppress(OSError):
                    _datasync(fd)

    def take_retired(self) -> list[int]:
        """The retired segments so far (a checkpoint round takes them before it syncs the WAL, and deletes them
        once it did: delete_retired)."""
        with self._lock:
            taken, self._retired = self._retired, []
        return taken

    def delete_retired(self, segments: list[int]) -> None:
        for segment in segments:
            self._unlink(segment)

    def give_back(self, segments: list[int]) -> None:
        """Retired segments a checkpoint round could not sync the moves of: the next round tries again."""
        with self._lock:
            self._retired[:0] = segments

    # --- reading ---------------------------------------------------------------------------------

    def read(self, ref: int) -> bytes:
        """The entries of the record `ref` points to."""
        segment, offset = ref >> _OFFSET_BITS, ref & _OFFSET_MASK
        if segment == self.active and offset >= self._size:  # staged, not written yet
            return self._parse(self._staged, offset - self._size)
        if self.base is None:
            return self._parse(self._memory[segment], offset)
        fd = self._fds[segment]
        data = os.pread(fd, _HEADER.size + _READ_AHEAD, offset)
        length, _ = _HEADER.unpack_from(data)
        if len(data) < _HEADER.size + length:
            data += os.pread(fd, _HEADER.size + length - len(data), offset + len(data))
        return self._parse(data, 0)

    @staticmethod
    def _parse(data: bytes | bytearray, offset: int) -> bytes:
        length, _ = _HEADER.unpack_from(data, offset)
        return _decode(data[offset + _HEADER.size:offset + _HEADER.size + length]).entries

    def close(self) -> None:
        """Close the files (they stay on disk: delete_all removes them once their tails moved)."""
        with self._lock:
            fds, self._fds = self._fds, {}
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)

    def delete_all(self) -> None:
        """Delete every segment (the store closed with every tail moved into the log, synced)."""
        segments = self.existing()
        self.close()
        for segment in segments:
            self._unlink(segment)


__all__ = ["SEGMENT_BYTES", "TailFile", "TailRecord", "segment_of"]
