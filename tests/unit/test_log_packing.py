"""The SQLite log's packed rows read back byte for byte (parley.tasks.log_packing)."""

from __future__ import annotations

import json

import pytest

from parley.protocol import models as m
from parley.tasks.entry_codec import decode_entries, encode_entries
from parley.tasks.log import Entry
from parley.tasks.log_packing import elide, pack_log_row, restore, restore_rows, unpack_log_row


def token(seq: int, text: str, *, artifact: str = "answer-7d1c") -> bytes:
    """One streamed token's commit as the store encodes it."""
    event = m.TaskArtifactUpdateEvent(task_id="task-5f0e2b", context_id="ctx-91aa", append=True,
                                      artifact=m.Artifact(artifact_id=artifact, parts=[m.Part(text=text)]))
    return encode_entries([Entry(seq, event)])


FIRST = token(2, " w000")
TEXTS = [" w001", "12:3", '"', ":", ",", "~", "", "x" * 700, "é ü 漢字", "]]", "9" * 40]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("seq", [3, 10, 12345678])
def test_a_tail_row_written_relative_to_the_first_reads_back_the_same(seq: int, text: str) -> None:
    batch = token(seq, text)
    stored = elide(batch, FIRST)
    assert restore(stored, FIRST) == batch
    assert decode_entries(restore(stored, FIRST)) == decode_entries(batch)


def test_a_whole_tail_reads_back_as_written_elided_and_plain_rows_alike() -> None:
    """A tail moved into the log is read back at once (restore_rows): every batch as it was, in order, whether its
    row was elided against the first or stayed plain."""
    other = encode_entries([Entry(9, m.TaskStatusUpdateEvent(task_id="t", context_id="c",
                                                             status=m.TaskStatus(state=m.TaskState.WORKING)))])
    batches = [token(3 + i, text) for i, text in enumerate(TEXTS)] + [other]
    assert restore_rows([elide(b, FIRST) for b in batches], FIRST) == [FIRST, *batches]
    assert restore_rows([], FIRST) == [FIRST]


def test_a_tokens_row_keeps_only_what_is_new_in_it() -> None:
    """What a token repeats of its tail's first row (ids, field names, the JSON after its text) is not written again:
    the point of eliding (issue 25). A row differing in its seq and text only, as here, or also in its generation
    (A2A 1.1: every stored event carries the task's), which comes last."""
    stored = elide(token(3, " w001"), FIRST)
    assert len(stored) < 20 < len(FIRST) and b"task-5f0e2b" not in stored and b"answer-7d1c" not in stored
    assert restore(stored, FIRST) == token(3, " w001")
    first, later = (b'[[%d,"artifact",{"taskId":"01a224ae-da20-79bb-8371-8792dbe49f66","contextId":"01a224ae-da20-'
                    b'735a-9846-38692b1c7d6e","artifact":{"artifactId":"01a224ae-da21-75ba-a8df-c1514192b749","parts":'
                    b'[{"text":" t%d:1795913544145032212"}],"name":"response"},"append":true,"generation":%d}]]'
                    % (n, n, n) for n in (8, 9))
    assert len(elide(later, first)) < 40 < len(first) // 5 and restore(elide(later, first), first) == later


def test_a_row_schema_9_wrote_reads_back() -> None:
    """Schema 9 wrote a tail row as `~seq,shared:rest` (no shared end): such rows, left in the feed by a crash,
    read back whole next to rows in today's form."""
    batch = token(3, " w001")
    i, j = batch.index(b","), FIRST.index(b",")
    shared = next(k for k in range(len(FIRST) - j) if batch[i + k] != FIRST[j + k])
    old = b"~3," + str(shared).encode() + b":" + batch[i + shared:]
    assert restore(old, FIRST) == batch
    assert restore_rows([old, elide(token(4, " w002"), FIRST)], FIRST) == [FIRST, batch, token(4, " w002")]


def test_rows_sharing_little_with_the_first_stay_plain_or_shorter() -> None:
    """A row that has little in common with the first is stored plain unless deflating it makes it shorter."""
    other = encode_entries([Entry(3, m.TaskStatusUpdateEvent(task_id="t", context_id="c",
                                                             status=m.TaskStatus(state=m.TaskState.WORKING)))])
    stored = elide(other, FIRST)
    assert len(stored) <= len(other) and restore(stored, FIRST) == other
    tiny = b"[[3,1]]"
    assert elide(tiny, FIRST) == tiny and restore(tiny, FIRST) == tiny


def test_several_entries_in_one_row_read_back_the_same() -> None:
    batch = b"[" + token(3, "a")[1:-1] + b"," + token(4, "b")[1:-1] + b"]"
    assert restore(elide(batch, FIRST), FIRST) == batch


def test_a_moved_tail_is_one_deflated_row_of_every_entry_in_order() -> None:
    batches = [token(i, f" w{i:03d}") for i in range(2, 66)]
    row = pack_log_row(batches)
    plain = b"[" + b",".join(b[1:-1] for b in batches) + b"]"
    assert len(row) * 10 < len(plain)  # 64 tokens of one answer deflate to a small fraction
    assert unpack_log_row(row) == plain
    assert [e.seq for e in decode_entries(unpack_log_row(row))] == list(range(2, 66))


def test_short_and_old_rows_stay_plain_json() -> None:
    """Rows written before schema 9 (plain JSON) read as they are; a short row is not deflated."""
    one = token(2, "hi")
    assert pack_log_row([one]) == one and unpack_log_row(one) == one
    assert json.loads(unpack_log_row(pack_log_row([one, token(3, "ho")])))[1][0] == 3
