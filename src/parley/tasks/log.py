"""The task event log: entries with sequence numbers, and the fold into a snapshot.

Every change to a task is an :class:`Entry` appended to its log. The snapshot
(`Task`) is a fold of the log; streams, resubscribe and history read the same
entries.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from itertools import groupby
from typing import Literal

import msgspec

from parley.protocol import models as m
from parley.protocol.codec import copy

EntryKind = Literal["task", "message", "status", "artifact"]


class Entry(msgspec.Struct):
    """One log entry: `seq` is 1-based and strictly increasing per task.

    A msgspec struct rather than a dataclass: holding only untracked values (a number, and a protocol model:
    see parley.protocol.models), it is not tracked by the garbage collector either, so a store keeping many
    tasks in memory does not make every full collection walk all of their entries.
    """

    seq: int
    event: m.Task | m.Message | m.TaskStatusUpdateEvent | m.TaskArtifactUpdateEvent

    @property
    def kind(self) -> EntryKind:
        """task (creation snapshot), message (user input), status or artifact."""
        return _KIND_OF[type(self.event)]

    @property
    def streamed(self) -> bool:
        """Whether the entry goes to stream subscribers (user input does not)."""
        return not isinstance(self.event, m.Message)


_KIND_OF: dict[type, EntryKind] = {m.Task: "task", m.Message: "message", m.TaskStatusUpdateEvent: "status",
                                   m.TaskArtifactUpdateEvent: "artifact"}  # Entry.kind by the event's own type


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds and a Z (the date and time up to the second are
    formatted once per second: every event carries a timestamp)."""
    t = time.time()
    second = int(t)
    return f"{_second_text(second)}.{int((t - second) * 1000):03d}Z"


@functools.lru_cache(maxsize=1)
def _second_text(second: int) -> str:
    """A second since the epoch as ISO 8601 UTC, without the fraction."""
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def apply(task: m.Task | None, event: Entry | m.Task | m.Message | m.TaskStatusUpdateEvent | m.TaskArtifactUpdateEvent) -> m.Task:
    """Fold one event into the snapshot (mutates and returns `task`)."""
    ev = event.event if isinstance(event, Entry) else event
    if isinstance(ev, m.Task):
        out = copy(ev)
        if out.generation is None:
            out.generation = 1
        return out
    assert task is not None, "the first entry of a log is the task"
    if type(ev) is m.TaskArtifactUpdateEvent:  # the usual (a streamed token): counted, folded into the artifacts
        task.generation = generation_of(task) + 1
        _apply_artifact(task, ev)
        return task
    if counts(ev):
        task.generation = generation_of(task) + 1
    if isinstance(ev, m.Message):
        # The agent's question (status message) precedes the user's answer in history.
        pending = task.status.message
        task.history = [*(task.history or []), *([pending] if pending is not None else []), ev]
        if pending is not None:
            task.status = m.TaskStatus(state=task.status.state, timestamp=task.status.timestamp)
    elif isinstance(ev, m.TaskStatusUpdateEvent):
        old = task.status.message
        if old is not None:
            task.history = [*(task.history or []), old]
        task.status = ev.status
    return task


def counts(event: object) -> bool:
    """Whether an event is a mutation A2A 1.1 section 3.2.7 counts in `generation`: every status and artifact
    update (one event, one generation; the creation snapshot is generation 1, user messages do not count)."""
    return type(event) is m.TaskStatusUpdateEvent or type(event) is m.TaskArtifactUpdateEvent


def generation_of(task: m.Task) -> int:
    """The task's generation (a snapshot from before generations were kept counts from 1)."""
    return task.generation or 1


def stamp(task: m.Task, events: Iterable[object]) -> None:
    """Write on each counting event the generation the task has after it, `task` being the snapshot before them
    (the engine, as it gives events their sequence numbers: stored with the entry, replayed as it was)."""
    generation = task.generation or 1  # generation_of(task)
    for ev in events:
        if type(ev) is m.TaskArtifactUpdateEvent or type(ev) is m.TaskStatusUpdateEvent:  # counts(ev)
            generation += 1
            ev.generation = generation  # type: ignore[attr-defined]


def fold(task: m.Task, events: Sequence[m.Task | m.Message | m.TaskStatusUpdateEvent | m.TaskArtifactUpdateEvent]
         ) -> m.Task:
    """A new snapshot: `task` with `events` applied; `task` itself is left as it was.

    `apply` only ever assigns the snapshot's own fields (never mutates a list or a
    nested object in place), so a shallow copy is enough for a committed snapshot to
    stay as it was committed while the engine goes on.
    """
    out = msgspec.structs.replace(task)
    if len(events) == 1:  # the usual (a streamed token's chunk): no run to join
        return apply(out, events[0])
    for artifact_id, group in groupby(events, key=_run_key):
        if artifact_id is None:
            for ev in group:
                out = apply(out, ev)
        else:
            run = list(group)
            if len(run) == 1:  # a chunk alone folds as itself (a chunk per loop turn: each fold has one)
                out = apply(out, run[0])
                continue
            out = apply(out, _joined(run))
            out.generation = generation_of(out) + len(run) - 1  # each chunk of the run counts
    return out


def _run_key(ev: object) -> str | None:
    """The artifact id of an appended chunk of one text part with nothing but text (a run of them on one artifact
    folds as one: see `_joined`); None for anything else."""
    if type(ev) is m.TaskArtifactUpdateEvent and ev.append and len(ev.artifact.parts) == 1:
        part = ev.artifact.parts[0]
        if part.text is not None and part.metadata is None and part.media_type is None and part.filename is None:
            return ev.artifact.artifact_id
    return None


def _joined(run: list[m.TaskArtifactUpdateEvent]) -> m.TaskArtifactUpdateEvent:
    """One chunk that folds like `run` folded one by one, its text joined once: folding k chunks onto a text of
    size S then costs S + k, not k * S (a reader of a lagging snapshot folds thousands)."""
    first = run[0].artifact
    arts = [e.artifact for e in run]
    artifact = m.Artifact(
        artifact_id=first.artifact_id, parts=[m.Part(text="".join(a.parts[0].text for a in arts))],
        name=next((a.name for a in arts if a.name), arts[-1].name),
        description=next((a.description for a in arts if a.description), arts[-1].description),
        metadata=next((a.metadata for a in arts if a.metadata), arts[-1].metadata),
        extensions=next((a.extensions for a in arts if a.extensions), arts[-1].extensions),
    )
    # lastChunk and the events' own metadata do not change a snapshot: left out
    return m.TaskArtifactUpdateEvent(task_id=run[0].task_id, context_id=run[0].context_id, artifact=artifact,
                                     append=True)


def _apply_artifact(task: m.Task, ev: m.TaskArtifactUpdateEvent) -> None:
    new = ev.artifact
    arts = list(task.artifacts or [])
    artifact_id = new.artifact_id
    for i, art in enumerate(arts):
        if art.artifact_id == artifact_id:
            if ev.append:
                merged = m.Artifact(
                    artifact_id=art.artifact_id,
                    parts=_merge_parts(art.parts, new.parts),
                    name=art.name or new.name,
                    description=art.description or new.description,
                    metadata=art.metadata or new.metadata,
                    extensions=art.extensions or new.extensions,
                )
                arts[i] = merged
            else:
                arts[i] = new
            task.artifacts = arts
            return
    arts.append(new)
    task.artifacts = arts


def _merge_parts(old: list[m.Part], new: list[m.Part]) -> list[m.Part]:
    """Appended text chunks join the last text part, so the snapshot reads as one text."""
    if old and new and old[-1].text is not None and new[0].text is not None and old[-1].metadata is None:
        joined = m.new_text_part()  # m.Part(text=..., metadata=...) without a Python __post_init__ call
        joined.text = old[-1].text + new[0].text
        joined.metadata = new[0].metadata
        return [*old[:-1], joined, *new[1:]]
    return [*old, *new]


def trim_history(task: m.Task, history_length: int | None) -> m.Task:
    """A copy-free view of `task` with at most `history_length` messages (None: all)."""
    if history_length is None or task.history is None:
        return task
    keep = task.history[-history_length:] if history_length > 0 else None
    return m.Task(
        id=task.id,
        context_id=task.context_id,
        status=task.status,
        artifacts=task.artifacts,
        history=keep or None,
        metadata=task.metadata,
        generation=task.generation,
    )
