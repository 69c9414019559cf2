"""The SQLite store's tail files (parley.tasks.tail_file): a streamed token's commit is a record appended to
`<db>-tail.<n>`, not a database page (issue 25: disk bytes per token). What a user would notice if they were wrong:
a crash loses or invents tokens, a disk error corrupts a task, or the files grow without bound. Each test reads
the task back as a client would (A2A 1.0 section 3.1.3 GetTask; 3.1.6 SubscribeToTask replays the log)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from test_store_contract import advance, chunk, crash_copy, new_task, put

from parley.protocol import models as m
from parley.tasks import tail_file
from parley.tasks.sqlite_store import SqliteTaskStore
from parley.tasks.tail_file import TailFile, TailRecord

S = m.TaskState


def segments(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + "-tail.*"))


async def streaming(path: Path, tokens: int) -> tuple[SqliteTaskStore, object, list]:
    """A store with task t1 working and `tokens` streamed tokens in its tail; the task and its log as read."""
    store = SqliteTaskStore(path, wal_checkpoint_seconds=3600.0)
    await put(store, new_task(state=S.WORKING))
    for i in range(tokens):
        await advance(store, "t1", chunk(i))
    assert store._tails, "the tokens must be in a tail"
    return store, await store.get("t1"), await store.events_after("t1", 0)


@pytest.mark.parametrize("damage", ["cut", "garbled"])
async def test_a_torn_last_record_is_cut_off_and_every_whole_one_recovered(tmp_path: Path, damage: str) -> None:
    """A crash in the middle of a write leaves half a record at the end of the newest segment (cut), or a
    record whose last bytes never reached the disk whole (garbled: its CRC-32 no longer matches): the next open
    keeps every token before it (each was acknowledged) and nothing of the damaged one."""
    path = tmp_path / "t.db"
    store, _, _ = await streaming(path, 6)
    try:
        before_last = await store.get("t1")  # the task as it was before the token that will be torn
        log_before_last = await store.events_after("t1", 0)
        await advance(store, "t1", chunk(6))
        crashed = crash_copy(path, tmp_path / "crashed")
    finally:
        await store.close()
    newest = segments(crashed)[-1]
    data = newest.read_bytes()
    if damage == "cut":
        newest.write_bytes(data[:-3])  # the last record's final bytes never reached the file
    else:
        newest.write_bytes(data[:-1] + bytes([data[-1] ^ 0x20]))  # a byte of its text changed: still msgpack
    again = SqliteTaskStore(crashed)
    try:
        assert await again.get("t1") == before_last
        assert await again.events_after("t1", 0) == log_before_last
        await advance(again, "t1", chunk(6))  # the stream goes on from there
        assert [e.seq for e in await again.events_after("t1", 0)][-1] == log_before_last[-1].seq + 1
    finally:
        await again.close()


async def test_a_record_that_does_not_follow_on_from_its_task_is_passed_over(tmp_path: Path) -> None:
    """Records of a group write whose SQLite transaction never committed (the process died between writing the
    records and the COMMIT) do not follow on from their task's row: recovery leaves them out, and the task reads
    as committed; a record the log already holds (its tail moved) is not applied twice."""
    path = tmp_path / "t.db"
    store, live, log = await streaming(path, 5)
    try:
        crashed = crash_copy(path, tmp_path / "crashed")
    finally:
        await store.close()
    orphan = TailFile(str(crashed))
    orphan._open(int(segments(crashed)[-1].name.rsplit(".", 1)[1]))  # append to the newest segment, as the dead writer
    orphan._size = segments(crashed)[-1].stat().st_size
    assert live is not None
    entries = list(orphan.recover())[-1].entries
    orphan.stage(TailRecord("t1", live.seq + 3, live.seq + 4, 9999.0, entries))  # skips two seqs: never committed
    orphan.stage(TailRecord("t1", 1, 2, 9999.0, entries))  # behind the task row: already in the log
    orphan.write()
    orphan.close()
    again = SqliteTaskStore(crashed)
    try:
        assert await again.get("t1") == live
        assert await again.events_after("t1", 0) == log
    finally:
        await again.close()


@pytest.mark.parametrize("cut", [True, False], ids=["cut-off", "left-in-the-file"])
async def test_a_failed_write_fails_its_commits_and_leaves_the_task_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut: bool) -> None:
    """The disk refuses the tail file's write (ENOSPC) after part of it was written: the token's commit fails,
    nothing of it is in the task, and the next token is written where it belongs; after a restart the task reads
    the same. The part written is cut off again, or, when even that fails, left behind and the next write goes to
    a new segment (recovery reads the damaged one up to those bytes)."""
    path = tmp_path / "t.db"
    store, live, log = await streaming(path, 3)
    try:
        sizes = [f.stat().st_size for f in segments(path)]
        if not cut:
            def refused(fd: int, length: int) -> None:
                raise OSError(errno.EIO, "Input/output error")

            monkeypatch.setattr(tail_file.os, "ftruncate", refused)
        real_write = os.write
        calls = 0

        def full_disk(fd: int, data: bytes) -> int:
            nonlocal calls
            calls += 1
            if calls == 1:
                real_write(fd, bytes(data)[:5])  # part of it reached the file before the disk filled
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_write(fd, data)

        monkeypatch.setattr(tail_file.os, "write", full_disk)
        with pytest.raises(OSError, match="No space left"):
            await advance(store, "t1", chunk(3))
        monkeypatch.undo()  # the disk works again
        if cut:
            assert [f.stat().st_size for f in segments(path)] == sizes  # the half record was cut off again
        else:
            assert segments(path)[-1].stat().st_size == sizes[-1] + 5  # left behind
        assert await store.get("t1") == live and await store.events_after("t1", 0) == log
        await advance(store, "t1", chunk(3))  # the disk has room again: the same token is written
        assert len(segments(path)) == len(sizes) + (0 if cut else 1)
        written = await store.get("t1")
        assert written is not None and written.seq == live.seq + 1  # type: ignore[union-attr]
        crashed = crash_copy(path, tmp_path / "crashed")
    finally:
        await store.close()
    again = SqliteTaskStore(crashed)
    try:
        assert await again.get("t1") == written
    finally:
        await again.close()


async def test_full_segments_move_paused_tails_and_are_deleted_once_a_checkpoint_synced_the_moves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One task streams without pause while another waits (a tool call) with a token in its tail. Each time a
    segment fills, tails that began two segments back move into their logs, and those segments are deleted by
    the next checkpoint round (which syncs the WAL first): the files stay a few however long the paused tail
    waits, the paused task reads the same, and the dashboard's feed still has its change."""
    monkeypatch.setattr(tail_file, "SEGMENT_BYTES", 2048)
    path = tmp_path / "t.db"
    store = SqliteTaskStore(path, wal_checkpoint_seconds=3600.0)  # checkpoint rounds run by hand below
    try:
        await put(store, new_task("busy", state=S.WORKING))
        await put(store, new_task("paused", state=S.WORKING))
        await advance(store, "paused", chunk(0, task_id="paused"))
        await advance(store, "paused", chunk(1, task_id="paused"))
        assert "paused" in store._tails
        paused, paused_log = await store.get("paused"), await store.events_after("paused", 0)
        paused_change = [c for c in await store.changes_after(0) if c.task_id == "paused"][-1]
        checkpointer = store._checkpointer
        assert checkpointer is not None
        db = checkpointer.connect()
        most = 0
        try:
            for i in range(400):
                await advance(store, "busy", chunk(i, task_id="busy"))
                if i % 50 == 49:
                    checkpointer.round(db)
                most = max(most, len(segments(path)))
        finally:
            db.close()
        assert store._tail_file.active > 4, "the test must fill several segments"
        assert most <= 4  # the two kept, the one retired until the next round, and a new one
        assert "paused" not in store._tails  # moved into its log
        assert await store.get("paused") == paused and await store.events_after("paused", 0) == paused_log
        assert paused_change in await store.changes_after(0)  # a feed row now, at the position it had
        busy = await store.events_after("busy", 0)
        assert [e.seq for e in busy] == list(range(1, busy[-1].seq + 1))  # every token, in order
    finally:
        await store.close()
    assert not segments(path)  # closed with every tail moved: no tail file left


async def test_tail_files_are_private(tmp_path: Path) -> None:
    """The tail files hold the agents' answers: created 0600, as the database is (docs/security.md)."""
    path = tmp_path / "t.db"
    store, _, _ = await streaming(path, 3)
    try:
        files = segments(path)
        assert files and all(f.stat().st_mode & 0o777 == 0o600 for f in files)
    finally:
        await store.close()


async def test_a_new_segment_that_cannot_be_opened_fails_no_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full segment, and no new file can be made (no file descriptor left, a full disk): the commits of the group
    write are acknowledged all the same, the full segment takes the next records, and the next rotation that can
    open a file does."""
    monkeypatch.setattr(tail_file, "SEGMENT_BYTES", 1024)
    path = tmp_path / "t.db"
    store = SqliteTaskStore(path, wal_checkpoint_seconds=3600.0)
    try:
        await put(store, new_task(state=S.WORKING))
        real_open = os.open

        def no_descriptor(name: str, *args: object, **kwargs: object) -> int:
            if "-tail." in str(name):
                raise OSError(errno.EMFILE, "Too many open files")
            return real_open(name, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(tail_file.os, "open", no_descriptor)
        for i in range(60):
            await advance(store, "t1", chunk(i))  # each acknowledged
        assert len(segments(path)) == 1 and segments(path)[0].stat().st_size > 1024  # it grew past its size
        monkeypatch.setattr(tail_file.os, "open", real_open)
        await advance(store, "t1", chunk(60))
        assert len(segments(path)) == 2  # a new one at the next group write
        log = await store.events_after("t1", 0)
        assert [e.seq for e in log] == list(range(1, log[-1].seq + 1)) and log[-1].seq >= 62
    finally:
        await store.close()
