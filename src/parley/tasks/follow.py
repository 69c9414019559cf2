"""Following a task's log: the stored entries after a point, then the live ones from the bus.

The follower subscribes to the bus before it reads the store, so an entry committed
in between arrives twice at most, never zero times; it drops what it has seen by
sequence number and fills any gap (a subscriber that fell behind, a bus that lost
a message) from the store, a page at a time. It stops after the entry that brings the task to a
state `until` accepts: settled for the stream of a send, terminal for a
subscription (A2A 1.0 section 3.1.6: a subscription stays open through
`input-required` until the task ends).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from parley.protocol import models as m
from parley.tasks.bus import EventBus
from parley.tasks.log import Entry
from parley.tasks.store import TaskStore

StopWhen = Callable[[m.TaskState], bool]
RECHECK_SECONDS = 5.0  # a follower that heard nothing for this long reads the store (lost publishes)
# Entries read from the store at once: a follower replaying a long log, or one that fell behind (a slow
# reader: its bus buffer overflowed), holds at most this many in memory, never the whole backlog.
PAGE = 256


async def follow_log(store: TaskStore, bus: EventBus, task_id: str, after: int, *, state: m.TaskState,
                     state_seq: int, until: StopWhen, idle: float | None = None,
                     first: Entry | None = None, committed: Callable[[], int] | None = None,
                     known: list[Entry] | None = None) -> AsyncIterator[Entry | None]:
    """Entries of `task_id` after `after` (user messages skipped), until the task reaches a state `until` accepts.

    `state` is the task's state as of entry `state_seq` (a snapshot the caller read);
    the follower does not stop before it has passed that entry. With `idle`, None is
    yielded whenever nothing happened for that many seconds (an SSE writer's cue for a
    keep-alive comment; the interval is the writer's choice). `first` (a snapshot the
    stream starts with) is yielded before anything else. `committed` (a task this process
    runs) says up to which entry its log is committed: when that is not past `after` once
    the follower has subscribed, there is nothing to read from the store, and every later
    entry comes on the bus. `known` are committed entries right after `after` that the caller
    already holds: when they are all the store could add (they end the stream, or nothing was
    committed after them), the follower starts with them instead of reading the store.
    """
    last = after
    stops = until(state)  # until(state), looked at again only when the state changes

    with bus.subscribe(task_id, after) as sub:
        if first is not None:
            yield first
        batch: list[Entry] | None
        if known and _complete(known, state, state_seq, until, committed):
            batch = list(known)
        elif committed is not None and committed() <= after:
            batch = []  # subscribed before anything after `after` was committed (and so published)
        else:
            batch = await store.events_after(task_id, after, PAGE)
        more = len(batch) == PAGE  # the store may hold more than that page: read on before listening
        while True:
            if batch is not None and len(batch) == 1 and batch[0].seq == last + 1:
                fresh = batch  # the usual: the one entry after the last one (a streamed token's chunk)
            else:
                fresh = [e for e in batch if e.seq > last] if batch is not None else None
                if fresh is None or not _continues(fresh, last):
                    # The subscription fell behind, or a gap: entries are published after they are committed,
                    # so the store has everything up to what the bus showed.
                    fresh = await store.events_after(task_id, last, PAGE)
                    more = len(fresh) == PAGE
            for entry in fresh:
                last = entry.seq
                ev = entry.event
                if type(ev) is m.TaskArtifactUpdateEvent:  # the usual: streamed, the state stays (see _track)
                    yield entry
                else:
                    if last > state_seq and isinstance(ev, _STATEFUL):
                        state, state_seq = ev.status.state, last
                        stops = until(state)
                    if not isinstance(ev, m.Message):  # entry.streamed: user input is not
                        yield entry
                if stops and last >= state_seq:  # done
                    return
            if stops and last >= state_seq:
                return
            if more:
                batch = await store.events_after(task_id, last, PAGE)
                more = len(batch) == PAGE
                continue
            batch, quiet = [], 0.0
            while batch == []:
                # Nothing from the bus: a keep-alive cue every `idle` seconds, and a look at the store (a
                # process that committed entries may have died, or lost its bus, before it published them).
                wait = RECHECK_SECONDS if idle is None else min(RECHECK_SECONDS, idle - quiet)
                batch = await sub.get(wait)
                if batch != []:
                    break
                quiet += wait
                if idle is not None and quiet >= idle:
                    yield None
                    quiet = 0.0
                batch = await store.events_after(task_id, last, PAGE)
                more = len(batch) == PAGE


_STATEFUL = (m.TaskStatusUpdateEvent, m.Task)  # the events that carry the task's state (see _track)


def _complete(known: list[Entry], state: m.TaskState, state_seq: int, until: StopWhen,
              committed: Callable[[], int] | None) -> bool:
    """Whether `known` is all the store holds that a follower needs now: nothing was committed after it (the
    rest comes on the bus), or it brings the task to a state that ends the stream."""
    if committed is not None and committed() <= known[-1].seq:
        return True
    for entry in known:
        state, state_seq = _track(entry, state, state_seq)
    return until(state) and known[-1].seq >= state_seq


def _continues(entries: list[Entry], last: int) -> bool:
    """Whether `entries` follow entry `last` without a gap."""
    return all(entry.seq == last + i for i, entry in enumerate(entries, 1))


def _track(entry: Entry, state: m.TaskState, state_seq: int) -> tuple[m.TaskState, int]:
    ev = entry.event
    if entry.seq > state_seq:
        if isinstance(ev, m.TaskStatusUpdateEvent):
            return ev.status.state, entry.seq
        if isinstance(ev, m.Task):
            return ev.status.state, entry.seq
    return state, state_seq
