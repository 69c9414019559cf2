"""Task, context and artifact ids (`parley.agents.base.new_id`): UUIDv7 names that never repeat."""

from __future__ import annotations

import os
import random
import uuid

import pytest

from parley.agents.base import new_id


def test_ids_are_uuid_v7_in_time_order() -> None:
    """RFC 9562 section 5.7: version 7, variant 10, a millisecond timestamp first, so later ids sort later."""
    first = new_id()
    ids = [new_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    for text in (first, *ids[::997]):
        u = uuid.UUID(text)
        assert (u.version, u.variant) == (7, uuid.RFC_4122)
        assert str(u) == text
    stamps = [uuid.UUID(i).int >> 80 for i in (first, *ids)]
    assert stamps == sorted(stamps)


def test_an_agent_seeding_random_does_not_repeat_ids() -> None:
    """Ids come from Parley's own generator: code that seeds the `random` module gets the same random
    numbers again, never the same ids."""
    random.seed(1234)
    one = [new_id() for _ in range(50)]
    random.seed(1234)
    two = [new_id() for _ in range(50)]
    assert not set(one) & set(two)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    """A worker forked from a started server draws other ids than the server does after the fork."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write its next ids and leave at once
        os.close(read)
        os.write(write, "\n".join(new_id() for _ in range(200)).encode())
        os._exit(0)
    os.close(write)
    parent = {new_id() for _ in range(200)}
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    child = set(b"".join(chunks).decode().split("\n"))
    assert len(child) == 200
    # Same millisecond, same generator state: without a reseed the random bits would be equal.
    assert not {i.split("-", 2)[2] for i in child} & {i.split("-", 2)[2] for i in parent}
