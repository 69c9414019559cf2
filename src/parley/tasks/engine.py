"""The task engine: runs agents for tasks and keeps each task's event log.

It creates and continues tasks, drives the agent's generator as a background
asyncio task, turns its outputs into log entries (:mod:`parley.tasks.turn`),
commits them to the store with their side effects (group commit: the entries of
one event-loop turn share a transaction; a settled state is committed before
anyone hears of it), publishes committed entries on the bus, answers reads, and
cancels runs, here or, through the bus, in the process that runs them.

When this engine is the store's only writer (`sole`), a new task is written in one
pass: its agent starts at once, and the task's creation is committed together with
what the agent produced before its first wait (a fast agent's whole answer: one
transaction per send), at the latest one event-loop turn later. The sender hears of
the task only once that commit is done. Its idempotency key is checked first, here
and in the store, so a message sent again never starts its agent twice.

Several engines (processes) may share one store and bus. A running task is
leased by the engine that runs it (renewed by a heartbeat, which the sole engine of its
store does without: nobody could take its leases); an engine takes over
only tasks whose lease expired, resuming them from their checkpoint where the
agent left one, else failing them with a clear message. Every write is a
compare-and-set on the log's sequence number, so two engines never both append.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from parley.agents.base import Agent, AgentError, AgentOutput, InternalEvent, Reply, RunContext, new_id
from parley.eager import start_eagerly
from parley.flag import Flag
from parley.log_throttle import Throttled
from parley.protocol import models as m
from parley.protocol.errors import (
    InvalidParamsError,
    RateLimitedError,
    TaskGenerationMismatchError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from parley.protocol.states import SETTLED, InvalidTransition, check_transition, is_settled, is_terminal
from parley.security.skill import requested_skill
from parley.settings import LimitSettings
from parley.tasks.bus import EventBus, LocalBus
from parley.tasks.commit_retry import StoreUnreachable, retry_commit
from parley.tasks.follow import StopWhen, follow_log
from parley.tasks.log import Entry, apply, counts, fold, generation_of, now_iso, stamp, trim_history
from parley.tasks.store import (
    Commit,
    DuplicateMessage,
    Lease,
    MessageKey,
    SequenceConflict,
    StoredPushConfig,
    StoreError,
    TaskLink,
    TaskQuery,
    TaskRecord,
    TaskStore,
    encode_cursor,
    fingerprint,
    make_query,
    stores_snapshot,
    unavailable,
)
from parley.tasks.turn import TextState, Turn

log = logging.getLogger("parley.engine")

RESTART_MESSAGE = "The server stopped while this task was running; it was not resumed. Send the request again."
RESUME_MESSAGE = "Resumed from the last checkpoint after a server restart."
CHECKPOINT = "internal:checkpoint"
DELEGATION = "internal:delegation"  # {url, agent, taskId, contextId}: a child task, kept as a link for traces
CONTEXT_TASKS = 50  # earlier tasks of a context handed to a new task's agent, newest kept
# Stored bytes of a context's earlier tasks read for a new task, in multiples of limits.max_context_bytes (a task
# stores its messages, its answer and more: more is read than is handed on)
CONTEXT_READ_FACTOR = 4
LEASE_SECONDS = 30.0
COMMIT_RETRY_SECONDS = 30.0  # how long a commit is tried again while the store cannot be reached (commit_retry)
PUBLISH_WARNING_SECONDS = 10.0  # at most one "publishing failed" line this often (with a count of the others)
PACE_SECONDS = 0.002  # an agent that never awaits gets the loop back to the others this often
CHECKPOINT_MARK = "parley.checkpoint"  # stored checkpoints: {mark: 2, "agent": state, "seq": n, "text": {...}}

Observer = Callable[[str, InternalEvent], None]
Listener = Callable[[TaskRecord, list[Entry]], None]
ChildCanceler = Callable[[TaskLink, str], Awaitable[None]]  # (link, owner of the parent task)


def bind_push(push: StoredPushConfig, task_id: str) -> StoredPushConfig:
    """The push config a send registers, bound to its task (an A2A 0.3 config without an id takes the task's id:
    parley.push.configs.default_id), its secrets sealed for that row."""
    push.config.task_id = task_id
    if not push.config.id:
        push.config.id = task_id
    if push.seal is not None:  # its secrets, as sent, sealed for this row now that it has its ids (again, when
        push.config = push.seal(push.config.task_id, push.config.id)  # a retried send rebinds it to another task)
    return push


def _for_task(push: StoredPushConfig | None, task_id: str) -> list[StoredPushConfig]:
    """The push configs to store with the commit that creates or continues `task_id`."""
    return [] if push is None else [bind_push(push, task_id)]


def process_id() -> str:
    """A holder id for this process's leases: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class NotCreated(Exception):
    """A task written in one pass was not stored (its creation was refused or failed): its run stops."""


@dataclass(slots=True)
class Effects:
    """What the next commit of a run writes besides its entries."""

    message: MessageKey | None = None
    checkpoint: dict[str, Any] | None = None
    links: list[TaskLink] = field(default_factory=list)
    lease: Lease | None = None
    push_configs: list[StoredPushConfig] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.message or self.checkpoint is not None or self.links or self.lease or self.push_configs)

    def then(self, newer: Effects) -> Effects:
        """These effects followed by `newer` (for a commit that failed and is tried again with more)."""
        return Effects(message=newer.message or self.message,
                       checkpoint=newer.checkpoint if newer.checkpoint is not None else self.checkpoint,
                       links=[*self.links, *newer.links], lease=newer.lease or self.lease,
                       push_configs=[*self.push_configs, *newer.push_configs])


@dataclass(eq=False)
class Run:
    """A task whose agent runs in this process: its live record, its turn and what is not yet committed."""

    record: TaskRecord
    turn: Turn
    committed_seq: int
    settled: Flag = field(default_factory=Flag)  # Flags, not asyncio.Events: ~700 bytes less each per run
    over: Flag = field(default_factory=Flag)  # settled, or the run stopped without settling
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    aio: asyncio.Task | None = None
    done: bool = False
    cancel_requested: dict | None = None
    unflushed: list[Entry] = field(default_factory=list)
    effects: Effects = field(default_factory=Effects)
    flush_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    flush_scheduled: bool = False
    has_checkpoint: bool = False
    snapshot_at: int | None = None  # where the stored snapshot stands, once a commit of this run stored it
    lease_lost: bool = False
    paced_at: float = 0.0
    turned: bool = False  # the event loop ran a turn since the agent's last output (it waited): no pacing needed
    flush_asked_at: float = 0.0  # when the pending flush was scheduled (the loop has not turned since)
    may_reply: bool = False  # nothing visible yet from an agent that may answer with a Message: `working` waits
    created: asyncio.Future | None = None  # a task written in one pass: resolved once its creation is committed
    created_with: list[Entry] = field(default_factory=list)  # the entries of that commit
    # The run's event loop, looked up once: on Python 3.11 each lookup is a getpid() system call.
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)

    @property
    def task(self) -> m.Task:
        return self.record.task


@dataclass(slots=True)
class Submission:
    """The outcome of submitting a message: the task, its run (if it runs here), and where a stream starts."""

    record: TaskRecord
    run: Run | None
    first: Entry
    duplicate: bool = False
    # Entries after `first` committed before the sender heard of the task (a one-pass creation's): a stream
    # starts with them instead of reading them back from the store.
    committed: list[Entry] = field(default_factory=list)


class TaskEngine:
    """Runs agents for tasks and serves reads of their logs.

    Args:
        store: where tasks and logs live (shared by every engine of a deployment).
        agents: the agents this engine runs, by id.
        bus: carries committed entries to followers and cancel requests between engines.
        delegator: handed to agents as `ctx.delegator`.
        cancel_child: cancels a delegated child task (a task canceled while it waited for input).
        holder: this engine's lease holder id (default: host, pid and a random suffix).
        lease_seconds: how long a run lease lasts without a heartbeat.
        sole: no other engine uses this store, so a lease that is not this engine's belongs to a
            dead process (default: what the store says of itself, `TaskStore.exclusive`).
        observers: told of every internal event an agent yields (telemetry).
        max_history: messages a task may hold; a message that would go over it is refused (None: no limit).
    """

    def __init__(
        self,
        store: TaskStore,
        agents: Mapping[str, Agent],
        *,
        bus: EventBus | None = None,
        delegator: Any = None,
        cancel_child: ChildCanceler | None = None,
        holder: str | None = None,
        lease_seconds: float = LEASE_SECONDS,
        sole: bool | None = None,
        observers: list[Observer] | None = None,
        max_history: int | None = None,
        limits: LimitSettings | None = None,
        commit_retry_seconds: float = COMMIT_RETRY_SECONDS,
        caller: Callable[[], Any] | None = None,
    ) -> None:
        self.store = store
        self.commit_retry_seconds = commit_retry_seconds
        # The caller of the request being served (an object with `id` and `scopes`, or None), for RunContext:
        # the runtime passes parley.server.caller.current_caller (the engine knows no binding).
        self.caller = caller or (lambda: None)
        self.max_history = max_history
        self.limits = limits or LimitSettings()  # what a context's history and a list page may load
        self.agents = agents
        self.bus = bus or LocalBus()
        # A group commit's first step runs without a task only where nothing on its way needs one (asyncpg's and
        # redis-py's timeouts do: "Timeout should be used inside a task"): a store and a bus of this process.
        self._eager_flush = store.eager_commits and type(self.bus) is LocalBus
        self.delegator = delegator
        self.cancel_child = cancel_child
        self.holder = holder or process_id()
        self.lease_seconds = lease_seconds
        self.sole = store.exclusive if sole is None else sole
        self.observers: list[Observer] = observers or []
        self.listeners: list[Listener] = []  # told of every appended batch (telemetry, metrics)
        self.committed: list[Listener] = []  # told of every batch once it is committed (the push dispatcher)
        self._publish_warnings = Throttled(log, PUBLISH_WARNING_SECONDS)  # a bus down fails every commit's publish
        self._commit_warnings = Throttled(log, PUBLISH_WARNING_SECONDS)  # a database away fails every commit
        self._lease_warnings = Throttled(log, PUBLISH_WARNING_SECONDS)  # ... and every heartbeat
        self.runs: dict[str, Run] = {}
        self._creating: dict[MessageKey, Run] = {}  # one-pass tasks whose creation is not committed yet
        self._flushes: set[asyncio.Task] = set()
        self._background: set[asyncio.Task] = set()
        self._heartbeat: asyncio.Task | None = None
        self._unregister = self.bus.on_cancel(self._on_cancel_request)
        self._long_polls: dict[str, int] = {}

    def running(self, agent_id: str) -> int:
        """How many tasks of `agent_id` this process runs now (the rate limiter's `tasks_per_agent`)."""
        return sum(1 for run in self.runs.values() if not run.done and run.record.agent_id == agent_id)

    def running_of(self, agent_id: str, owner: str) -> int:
        """How many tasks of `agent_id` this process runs now for `owner` (the limiter's `tasks_per_principal`)."""
        return sum(1 for run in self.runs.values()
                   if not run.done and run.record.agent_id == agent_id and run.record.owner == owner)

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> list[str]:
        """Take over orphaned tasks and start the lease heartbeat (engines sharing a store); returns the ids of
        tasks marked failed."""
        failed = await self.recover()
        # The sole engine of its store renews no lease: no other engine can take one (recovery at the next start
        # takes every lease not its own), and renewing every running task's row every few seconds held the event
        # loop 10-15 ms per beat with 1,000 streams open on SQLite (bench/RESULTS.md).
        if self._heartbeat is None and not self.sole:
            self._heartbeat = asyncio.create_task(self._keep_leases(), name="parley-leases")
        return failed

    async def shutdown(self, grace: float = 0.0) -> None:
        """Stop every running agent, write what is still unwritten, hand the leases back.

        With `grace`, runs get that many seconds to finish first (a drain); the ones still running
        then are stopped, their tasks left to another engine (resumed from a checkpoint, or failed).
        """
        pending = [run.aio for run in self.runs.values() if run.aio is not None and not run.aio.done()]
        if grace > 0 and pending:
            await asyncio.wait(pending, timeout=grace)
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
            self._heartbeat = None
        running = list(self.runs)
        tasks = [run.aio for run in self.runs.values() if run.aio is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*list(self._flushes), *list(self._background), return_exceptions=True)
        if running:
            with contextlib.suppress(Exception):
                await self.store.release_leases(self.holder, running)
        self._unregister()

    # --- writing ---------------------------------------------------------------------------------

    def _new_lease(self) -> Lease:
        return Lease(self.holder, time.time() + self.lease_seconds)

    def _fold(self, run: Run, events: list) -> list[Entry]:
        """Give events their sequence numbers and fold them into a new snapshot (the committed one stays)."""
        rec = run.record
        seq = rec.seq
        if len(events) == 1:  # the usual: a streamed token's chunk
            ev = events[0]
            if type(ev) is m.TaskArtifactUpdateEvent or type(ev) is m.TaskStatusUpdateEvent:  # stamp(), inline
                ev.generation = (rec.task.generation or 1) + 1
            entries = [Entry(seq + 1, ev)]
        else:
            stamp(rec.task, events)
            entries = [Entry(seq + i, ev) for i, ev in enumerate(events, 1)]
        rec.task = fold(rec.task, events)
        rec.seq = seq + len(entries)
        rec.updated_at = time.time()
        run.unflushed.extend(entries)
        for listener in self.listeners:
            try:
                listener(rec, entries)
            except Exception:  # a broken listener must not break tasks
                log.exception("task listener %r failed", listener)
        return entries

    def _fold_text(self, run: Run) -> None:
        """The text yielded since the last flush becomes one chunk (and the chunk held before it, an entry)."""
        text = run.turn.take_text()
        if text:
            self._fold(run, text)

    async def _append(self, run: Run, events: list, *, now: bool = False) -> None:
        """Fold, commit and publish events: at once when they settle the task (or `now`), else soon."""
        state = run.task.status.state
        for ev in events:  # check the whole batch first: a refused event must leave no trace
            if isinstance(ev, m.TaskStatusUpdateEvent):
                check_transition(state, ev.status.state)
                state = ev.status.state
        self._fold(run, events)
        settled = is_settled(run.task.status.state)
        if settled or now:
            await self._flush(run)  # a settled state is durable before anyone hears of it
        else:
            self._flush_soon(run)
        if settled:
            run.settled.set()
            run.over.set()
            if self.runs.get(run.task.id) is run:  # a settled task takes new messages at once
                del self.runs[run.task.id]

    async def _flush(self, run: Run) -> None:
        """Commit the run's unwritten entries, snapshot and side effects in one transaction; then publish."""
        lock = run.flush_lock
        await lock.acquire()  # `async with run.flush_lock`, without the two calls more of __aenter__/__aexit__
        try:
            if run.lease_lost:
                return
            if run.turn.open and run.task.status.state not in SETTLED:  # text to write; not is_settled(...)
                self._fold_text(run)
            effects = run.effects
            has_effects = bool(effects)
            if not run.unflushed and not has_effects:
                return
            batch, run.unflushed = run.unflushed, []
            if has_effects:
                run.effects = Effects()
            rec = run.record
            state = rec.task.status.state
            settled = state in SETTLED  # is_settled(state)
            creating = run.committed_seq == 0  # a task written in one pass: this commit creates it
            commit = Commit(
                task_id=rec.task.id, expected_seq=run.committed_seq, entries=batch, snapshot=rec.task,
                updated_at=rec.updated_at, message=effects.message, checkpoint=effects.checkpoint,
                drop_checkpoint=run.has_checkpoint and is_terminal(state), links=effects.links,
                lease=None if settled else effects.lease, release_lease=settled, push_configs=effects.push_configs,
                record=rec if creating else None, snapshot_at=run.snapshot_at,
            )
            try:  # tried again while the store cannot be reached; an unknown outcome is re-checked first
                started = time.monotonic()
                try:  # commit_with_retry, its first attempt inline (a streamed token's commit: no coroutine more)
                    await self.store.commit(commit)
                except Exception as exc:
                    if not unavailable(exc):
                        raise
                    await retry_commit(self.store, commit, exc, started=started, budget=self.commit_retry_seconds,
                                       warnings=self._commit_warnings)
            except (SequenceConflict, DuplicateMessage) as refused:
                if creating:
                    raise self._not_created(run, refused) from refused
                raise
            except BaseException as exc:  # not written (a database error): keep it all for the next attempt
                run.unflushed = [*batch, *run.unflushed]
                run.effects = effects.then(run.effects)
                if creating and isinstance(exc, Exception):  # the sender hears of the error; the task never was
                    raise self._not_created(run, exc) from exc
                raise
            run.committed_seq = last_seq = batch[-1].seq if batch else commit.expected_seq  # commit.last_seq
            if stores_snapshot(commit):
                run.snapshot_at = last_seq
            if creating and run.created is not None and not run.created.done():
                run.created_with = batch
                run.created.set_result(None)
            if batch:
                for listener in self.committed:
                    try:
                        listener(rec, batch)
                    except Exception:  # a broken listener must not break tasks
                        log.exception("commit listener %r failed", listener)
                try:
                    await self.bus.publish(rec.task.id, batch)
                except Exception as exc:  # noqa: BLE001 - committed all the same: followers read the store
                    # Once per PUBLISH_WARNING_SECONDS (a bus that is down fails every commit's publish).
                    self._publish_warnings.warning(
                        "publishing task %s's events on the bus failed (%s); followers read them from the store",
                        rec.task.id, exc)
                else:
                    if self._publish_warnings.failing:
                        self._publish_warnings.recovered("publishing on the bus works again")
        finally:
            lock.release()

    def _not_created(self, run: Run, cause: Exception) -> NotCreated:
        """A one-pass task whose creation was refused or failed: it does not exist, so its run stops without
        writing again, and its sender hears `cause`."""
        run.lease_lost = True
        if run.created is not None and not run.created.done():
            run.created.set_exception(cause)
        aio = run.aio
        if aio is not None and not aio.done() and aio is not asyncio.current_task():
            aio.cancel()
        return NotCreated(run.task.id)

    def _flush_soon(self, run: Run) -> None:
        """Group commit: entries appended in the same event-loop turn share one transaction.

        The next turn looks whether anything is still unwritten: a run that settles in this turn (a fast
        agent) has written it all itself by then, and no flush task is made for it."""
        if run.flush_scheduled:
            return
        run.flush_scheduled = True
        run.flush_asked_at = time.monotonic()
        run.loop.call_soon(self._flush_if_needed, run)

    def _flush_if_needed(self, run: Run) -> None:
        run.flush_scheduled = False  # what is appended from now on needs a flush of its own
        run.turned = True  # a loop turn came, so the agent waited (the pacing of _drive need not give it one)
        if run.lease_lost:
            return
        if run.turn.open and not run.flush_lock.locked() and run.task.status.state not in SETTLED:
            self._fold_text(run)  # this turn's text is one chunk, as a flush now would make it
        if not (run.unflushed or run.effects or run.turn.open):
            return
        try:  # a store that commits without waiting (memory) needs no task for it
            if self._eager_flush:
                task = start_eagerly(run.loop, self._scheduled_flush(run))
            else:
                task = run.loop.create_task(self._scheduled_flush(run))
        except Exception:
            log.exception("writing task events failed")
            return
        if task is not None:
            self._flushes.add(task)
            task.add_done_callback(self._flush_done)

    async def _scheduled_flush(self, run: Run) -> None:
        try:
            await self._flush(run)
        except SequenceConflict:  # another process appended: it took the task over
            self._lost(run)
        except StoreUnreachable as exc:
            self._left(run, exc)
        except NotCreated:  # the sender heard why; the run was stopped
            pass

    def _lost(self, run: Run) -> None:
        """The task was taken over by another process: stop its run here, without writing again."""
        run.lease_lost = True
        aio = run.aio
        if aio is not None and not aio.done() and aio is not asyncio.current_task():
            log.warning("task %s was taken over by another process; stopping its run here", run.task.id)
            aio.cancel()

    def _left(self, run: Run, exc: StoreUnreachable) -> None:
        """The store stayed unreachable past the retry budget: stop the run here without writing again and
        without failing the task (not the agent's fault). Its lease is no longer renewed; once it expires,
        recovery (here or in another process) resumes the task from its checkpoint."""
        if not run.lease_lost:
            log.warning("%s; the run stops here and the task is left to be resumed once its lease expires", exc)
        run.lease_lost = True
        aio = run.aio
        if aio is not None and not aio.done() and aio is not asyncio.current_task():
            aio.cancel()

    def _flush_done(self, task: asyncio.Task) -> None:
        self._flushes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("writing task events failed", exc_info=task.exception())

    # --- submitting ------------------------------------------------------------------------------

    async def submit(self, agent_id: str, owner: str, req: m.SendMessageRequest,
                     push: StoredPushConfig | None = None) -> Submission:
        """Create or continue the task a message belongs to, and start its agent.

        `push`: a webhook the send registers (its inline push config), stored in the commit that
        creates or continues the task, so that it is told of every change from the first.

        A message naming a task is handled against that task (A2A 1.0 section 3.4.2),
        whatever its messageId was used for before. The same message sent again (same
        messageId and content) returns the task it went to; a different message that
        reuses a messageId is not a retry and is handled as new.
        """
        msg = req.message
        if msg.role is not m.Role.USER:
            raise InvalidParamsError("Invalid params: a message sent to an agent must have the user role")
        agent = self.agents[agent_id]
        key = MessageKey(agent_id, owner, msg.message_id, fingerprint(msg))
        if msg.task_id:
            rec = await self._visible(agent_id, owner, msg.task_id)
            if await self.store.find_message(key) == rec.task.id:
                return self._duplicate(rec)
            return await self._continue(agent, owner, req, rec, key, push)
        # A new task: its commit inserts the key if absent, so a message sent again finds its task there
        # (no lookup first: most messages are new).
        return await self._create(agent, owner, req, key, push)

    def _duplicate(self, rec: TaskRecord) -> Submission:
        run = self.runs.get(rec.task.id)
        if run is not None:
            rec = run.record
        return Submission(rec, run, Entry(rec.seq, rec.task), duplicate=True)

    def _new_record(self, agent: Agent, owner: str, req: m.SendMessageRequest) -> TaskRecord:
        """A new task for `req.message` (which it names), submitted, with the message as its history."""
        msg = req.message
        task_id = new_id()
        msg.task_id = task_id
        msg.context_id = msg.context_id or new_id()
        task = m.Task(id=task_id, context_id=msg.context_id,
                      status=m.TaskStatus(state=m.TaskState.SUBMITTED, timestamp=now_iso()),
                      history=[msg], metadata=req.metadata, generation=1)
        now = time.time()
        parent = msg.reference_task_ids[0] if msg.reference_task_ids else None  # who delegated this task, if anyone
        return TaskRecord(task=task, agent_id=agent.id, owner=owner, seq=1, created_at=now, updated_at=now,
                          parent_task_id=parent)

    async def _create(self, agent: Agent, owner: str, req: m.SendMessageRequest, key: MessageKey,
                      push: StoredPushConfig | None = None) -> Submission:
        if self.sole:
            return await self._create_in_one_pass(agent, owner, req, key, push)
        given_context = req.message.context_id is not None
        rec = self._new_record(agent, owner, req)
        msg, task = req.message, rec.task
        first = Entry(1, task)
        earlier = await self._context_history(agent.id, owner, task.context_id) if given_context else []
        try:
            await self.store.create(rec, first, key, lease=self._new_lease(), push_configs=_for_task(push, task.id))
        except DuplicateMessage as dup:  # the same message, sent twice at once: one task
            return self._duplicate(await self._visible(agent.id, owner, dup.task_id))
        run = Run(rec, Turn(task.id, task.context_id), committed_seq=1)
        self._start(run, agent, msg, first_turn=True, metadata=req.metadata, context_history=earlier)
        return Submission(rec, run, first)

    async def _create_in_one_pass(self, agent: Agent, owner: str, req: m.SendMessageRequest, key: MessageKey,
                                  push: StoredPushConfig | None) -> Submission:
        """A new task whose creation is committed with its agent's first outputs (see the module's docstring).

        Only for the store's sole writer: the idempotency key is looked up before the agent starts, and a
        second send of the same message while the first is being created waits for it, so the lookup is
        exact and the agent runs once."""
        while (other := self._creating.get(key)) is not None:
            await asyncio.wait([other.created])  # type: ignore[list-item]
        given_context = req.message.context_id is not None
        rec = self._new_record(agent, owner, req)
        msg, task = req.message, rec.task
        first = Entry(1, task)
        run = Run(rec, Turn(task.id, task.context_id), committed_seq=0, unflushed=[first])
        created = run.created = run.loop.create_future()
        self._creating[key] = run
        created.add_done_callback(lambda done: self._creation_decided(key, run, done))
        try:
            taken = await self.store.find_message(key)
            earlier = await self._context_history(agent.id, owner, task.context_id) if given_context else []
        except BaseException:
            created.cancel()  # nothing was started: whoever waits looks again
            raise
        if taken is not None:  # sent before: its task is the answer
            created.cancel()
            return self._duplicate(await self._visible(agent.id, owner, taken))
        run.effects.message = key
        run.effects.lease = self._new_lease()
        run.effects.push_configs = _for_task(push, task.id)
        self._start(run, agent, msg, first_turn=True, metadata=req.metadata, context_history=earlier)
        self._flush_soon(run)  # stored with what the agent does before its first wait, one turn later at most
        try:
            await asyncio.shield(created)
        except DuplicateMessage as dup:  # stored by another writer after all (the store was not ours alone)
            return self._duplicate(await self._visible(agent.id, owner, dup.task_id))
        return Submission(rec, run, first, committed=run.created_with[1:])

    def _creation_decided(self, key: MessageKey, run: Run, done: asyncio.Future) -> None:
        """A one-pass creation was committed, refused, failed or dropped: the key is no longer being created."""
        if self._creating.get(key) is run:
            del self._creating[key]
        if not done.cancelled():
            done.exception()  # its sender is told (or had left); not an unretrieved exception

    async def _context_history(self, agent_id: str, owner: str, context_id: str) -> list[m.Message]:
        """The conversation of earlier tasks in a context, oldest first, each answer as an agent message.

        Bounded (limits.max_context_bytes, limits.max_context_messages): the newest tasks whose stored bytes fit
        in CONTEXT_READ_FACTOR times max_context_bytes are read (a newest task larger than that alone gives no
        history), and of their messages the newest that fit in max_context_bytes are kept. One send naming a
        context must not load everything the context ever held."""
        limits = self.limits
        page = await self.store.list(TaskQuery(agent_id=agent_id, owner=owner, context_id=context_id,
                                                page_size=CONTEXT_TASKS, count=False, at_least_one=False,
                                                max_bytes=CONTEXT_READ_FACTOR * limits.max_context_bytes))
        return _newest_within(self._conversation(page.records), limits.max_context_messages,
                              limits.max_context_bytes)

    @staticmethod
    def _conversation(records: list[TaskRecord]) -> list[m.Message]:
        """The messages of earlier tasks, oldest first, each answer as an agent message."""
        messages: list[m.Message] = []
        for rec in sorted(records, key=lambda r: (r.created_at, r.task.id)):
            t = rec.task
            messages.extend(t.history or [])
            if t.status.message is not None:
                messages.append(t.status.message)
            answer = [p for art in t.artifacts or [] for p in art.parts if p.text is not None]
            if answer:
                text = "".join(p.text or "" for p in answer)
                messages.append(m.Message(message_id=f"{t.id}-answer", role=m.Role.AGENT,
                                          parts=[m.Part(text=text)], task_id=t.id, context_id=t.context_id))
        return messages

    async def _continue(self, agent: Agent, owner: str, req: m.SendMessageRequest, rec: TaskRecord,
                        key: MessageKey, push: StoredPushConfig | None = None) -> Submission:
        msg = req.message
        state = rec.task.status.state
        check_generation(rec.task, req.configuration)
        if msg.context_id and msg.context_id != rec.task.context_id:
            raise InvalidParamsError(
                f"Invalid params: message contextId {msg.context_id!r} does not match task {rec.task.id}'s "
                f"contextId {rec.task.context_id!r}"
            )
        if is_terminal(state):
            raise UnsupportedOperationError(
                f"Task {rec.task.id} is {state_name(state)}; a finished task accepts no more messages"
            )
        if not is_settled(state) or rec.task.id in self.runs:
            raise UnsupportedOperationError(
                f"Task {rec.task.id} is still {state_name(state)}; send a message when it asks for input"
            )
        # The agent's question (the status message) joins the history with the answer: both count.
        held = len(rec.task.history or []) + (1 if rec.task.status.message is not None else 0)
        if self.max_history is not None and held + 1 > self.max_history:
            raise InvalidParamsError(
                f"Invalid params: task {rec.task.id} holds {len(rec.task.history or [])} messages, and this one "
                f"would bring it to {held + 1}, over the limit of {self.max_history} (limits.max_history_length); "
                f"start a new task in the same context"
            )
        msg.context_id = rec.task.context_id
        run = Run(rec, Turn(rec.task.id, rec.task.context_id), committed_seq=rec.seq)
        self.runs[rec.task.id] = run  # reserved: a second message now finds the task busy
        run.effects.message = key
        run.effects.lease = self._new_lease()
        run.effects.push_configs = _for_task(push, rec.task.id)
        try:
            await self._append(run, [msg, run.turn.status(m.TaskState.WORKING)], now=True)
        except DuplicateMessage as dup:
            del self.runs[rec.task.id]
            return self._duplicate(await self._visible(agent.id, owner, dup.task_id))
        except SequenceConflict:  # another process continued (or canceled) it first
            del self.runs[rec.task.id]
            raise UnsupportedOperationError(f"Task {rec.task.id} is already working on another message") from None
        first = Entry(rec.seq, rec.task)
        agent_state, _ = unwrap_checkpoint(await self.store.get_checkpoint(rec.task.id))
        run.has_checkpoint = agent_state is not None
        self._start(run, agent, msg, first_turn=False, metadata=req.metadata, checkpoint=agent_state)
        return Submission(rec, run, first)

    def _start(self, run: Run, agent: Agent, msg: m.Message, *, first_turn: bool, metadata: dict | None,
               checkpoint: dict | None = None, context_history: list[m.Message] | None = None) -> None:
        task = run.task
        caller = self.caller()
        ctx = RunContext(
            task_id=task.id,
            context_id=task.context_id,
            message=msg,
            history=list(task.history or []),
            agent_id=agent.id,
            owner=run.record.owner,
            metadata=metadata,
            checkpoint=checkpoint,
            delegator=self.delegator,
            context_history=list(context_history or []),
            skill=_skill(msg, metadata),
            principal=caller.id if caller is not None else None,
            scopes=caller.scopes if caller is not None else frozenset(),
        )
        self.runs[task.id] = run
        run.aio = run.loop.create_task(self._drive(run, agent, ctx, first_turn), name=f"parley-task-{task.id}")

    # --- running ---------------------------------------------------------------------------------

    async def _drive(self, run: Run, agent: Agent, ctx: RunContext, first_turn: bool) -> None:
        task_id = run.task.id
        try:
            if first_turn and agent.replies:
                run.may_reply = True  # `working` comes with the first output, unless that is the reply itself
            elif first_turn:
                async with run.lock:
                    await self._append(run, [run.turn.status(m.TaskState.WORKING)])
            gen = agent.run(ctx)
            run.paced_at = time.monotonic()
            try:
                async for out in gen:
                    pending = run.flush_scheduled  # a flush asked for by an earlier output, not yet run
                    if type(out) is str and not run.may_reply:  # a token: what _take does with text, inline
                        run.turn.open.append(out)
                        self._flush_soon(run)
                    else:
                        await self._take(run, out)
                    if run.settled.is_set():
                        break
                    if run.flush_scheduled:  # the loop has not turned since this flush was asked for
                        # Only a flush an earlier output asked for: never between an output and the one the agent
                        # yields right after it (however late this process was scheduled in between). Counted
                        # from when the agent got the loop if that is later: a creation's flush is asked for
                        # before the agent's first step, which other work on a busy loop may hold back (pacing
                        # then split fast agents' tasks into two commits).
                        if pending and time.monotonic() - max(run.flush_asked_at, run.paced_at) >= PACE_SECONDS:
                            await self._pace(run)
                    elif run.turned:  # the agent waited since its last output: the others had the loop
                        run.turned = False
                        run.paced_at = time.monotonic()
                    elif time.monotonic() - run.paced_at >= PACE_SECONDS:
                        await self._pace(run)
            finally:
                try:
                    await gen.aclose()
                except Exception:  # cleanup after the task settled must not touch its log
                    if not run.settled.is_set():
                        raise
                    log.exception("agent %s failed while cleaning up task %s", agent.id, task_id)
            async with run.lock:
                if not run.settled.is_set():
                    await self._append(run, run.turn.finish())
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling() == 0:
                # The agent let a CancelledError of its own escape: that is a failure, not a cancel.
                log.warning("agent %s raised CancelledError on task %s without being canceled", agent.id, task_id)
                await self._fail(run, f"Agent {agent.id} failed: CancelledError")
            elif run.cancel_requested is not None and not run.lease_lost:
                # Record `canceled` before followers learn the run is done, so every stream sees it.
                async with run.lock:
                    if not is_terminal(run.task.status.state):
                        await self._append(run, run.turn.cancel(run.cancel_requested))
            else:
                raise
        except NotCreated:  # a one-pass task that was not stored: its sender heard why
            pass
        except SequenceConflict as exc:  # another process took the task over: this run must not write again
            run.lease_lost = True
            log.warning("task %s was taken over by another process; its run here stops (%s)", task_id, exc)
        except StoreUnreachable as exc:  # the database stayed away: not the agent's failure; left to be resumed
            self._left(run, exc)
        except InvalidTransition as exc:
            log.warning("agent %s produced an invalid transition on task %s: %s", agent.id, task_id, exc)
            await self._fail(run, f"Invalid agent response: {exc}")
        except AgentError as exc:  # a failure the agent words for its client
            await self._fail(run, str(exc) or f"Agent {agent.id} failed")
        except Exception:  # the agent's own failure becomes the task's; its text stays in the log
            error_id = uuid.uuid4().hex[:12]
            log.exception("agent %s failed on task %s (error %s)", agent.id, task_id, error_id)
            await self._fail(run, f"Agent {agent.id} failed (error {error_id}; the server's log has the details)")
        finally:
            try:
                await self._flush(run)
            except SequenceConflict:
                run.lease_lost = True
            except StoreUnreachable as exc:
                self._left(run, exc)
            except NotCreated:
                pass
            finally:
                if run.created is not None and not run.created.done():  # stopped before anything was written
                    self._not_created(run, StoreError(f"task {task_id} was not stored: its run stopped first"))
                run.done = True
                run.over.set()
                if self.runs.get(task_id) is run:
                    del self.runs[task_id]

    async def _take(self, run: Run, out: AgentOutput) -> None:
        """One output of the agent: buffer text, keep checkpoints and links, append everything else."""
        if run.may_reply and not isinstance(out, InternalEvent):
            run.may_reply = False
            async with run.lock:
                if isinstance(out, Reply):  # the whole interaction is this message (A2A 1.0 section 3.1.1)
                    await self._append(run, [run.turn.reply(out, as_message=True)])
                    return
                await self._append(run, [run.turn.status(m.TaskState.WORKING)])
        if type(out) is str:
            run.turn.open.append(out)  # what Turn.output does with text, without the dispatch
            self._flush_soon(run)
            return
        if isinstance(out, InternalEvent):
            for observer in self.observers:
                observer(run.task.id, out)
            if out.kind == CHECKPOINT:
                await self._checkpoint(run, out.data.get("state") or {})
            elif out.kind == DELEGATION and out.data.get("taskId"):
                d = out.data
                run.effects.links.append(TaskLink(run.task.id, str(d.get("url") or ""), str(d["taskId"]),
                                                  d.get("agent"), time.time()))
                self._flush_soon(run)
            return
        async with run.lock:
            events = run.turn.output(out)
            if events:
                await self._append(run, events)

    async def _checkpoint(self, run: Run, state: dict[str, Any]) -> None:
        """Commit the agent's checkpoint with every entry before it, and the text it holds back, at once."""
        async with run.lock:
            self._fold_text(run)
            run.effects.checkpoint = {CHECKPOINT_MARK: 2, "agent": state, "seq": run.record.seq,
                                      "text": run.turn.text_state().to_json()}
            run.has_checkpoint = True
            await self._flush(run)

    async def _pace(self, run: Run) -> None:
        """Give the event loop to others (and the pending flush its turn): the agent has not waited for
        PACE_SECONDS. Never between outputs that follow each other at once, so that they share one commit (an
        artifact and the checkpoint after it: a resumed run must not find the one without the other)."""
        await asyncio.sleep(0)
        run.paced_at = time.monotonic()

    async def _fail(self, run: Run, reason: str) -> None:
        async with run.lock:
            if not is_terminal(run.task.status.state):
                try:
                    await self._append(run, run.turn.fail(reason))
                except StoreUnreachable as exc:  # not written: the task is resumed once its lease expires
                    self._left(run, exc)

    # --- reading ---------------------------------------------------------------------------------

    async def _visible(self, agent_id: str, owner: str, task_id: str) -> TaskRecord:
        run = self.runs.get(task_id)
        if run is not None and run.record.agent_id == agent_id and run.record.owner == owner:
            return run.record
        rec = await self.store.get(task_id, agent_id=agent_id, owner=owner)
        if rec is None:
            raise TaskNotFoundError(f"Task {task_id!r} not found")
        return rec

    async def record(self, agent_id: str, owner: str, task_id: str) -> TaskRecord:
        """The task as its owner may see it (TaskNotFoundError otherwise)."""
        return await self._visible(agent_id, owner, task_id)

    async def get(self, agent_id: str, owner: str, req: m.GetTaskRequest) -> m.Task:
        """A task snapshot, with at most `historyLength` messages."""
        _check_history_length(req.history_length)
        rec = await self._visible(agent_id, owner, req.id)
        if req.current_generation is not None and generation_of(rec.task) <= req.current_generation:
            rec = await self._await_generation(agent_id, owner, rec, req.current_generation)
        return trim_history(rec.task, req.history_length)

    async def _await_generation(self, agent_id: str, owner: str, rec: TaskRecord, current: int) -> TaskRecord:
        """A2A 1.1 section 3.2.7 long-poll: the task once its generation exceeds `current`, or as it is after
        `limits.long_poll_seconds` (or at once if it is terminal: it cannot move any more). At most
        `limits.long_polls_per_principal` polls of one principal are held at a time; one more is refused (RateLimitedError).
        The wait follows the log (store, then bus): it sees a change made by any replica."""
        if is_terminal(rec.task.status.state):
            return rec
        held = self._long_polls.get(owner, 0)
        if held >= self.limits.long_polls_per_principal:
            raise RateLimitedError(
                f"Too many held GetTask long-polls (currentGeneration): {held} of this caller are waiting, the "
                f"limit is {self.limits.long_polls_per_principal}; retry when one returns", headers={"Retry-After": "1"})
        self._long_polls[owner] = held + 1
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.limits.long_poll_seconds):
                    entries = self.follow(rec.task.id, rec.seq, state=rec.task.status.state, until=is_terminal)
                    async with contextlib.aclosing(entries):
                        async for entry in entries:
                            if entry is not None and counts(entry.event):
                                break
        finally:
            left = self._long_polls[owner] - 1
            if left:
                self._long_polls[owner] = left
            else:
                del self._long_polls[owner]
        return await self._visible(agent_id, owner, rec.task.id)

    async def list(self, agent_id: str, owner: str, req: m.ListTasksRequest) -> m.ListTasksResponse:
        """A page of the owner's tasks on this agent, newest update first."""
        query = make_query(agent_id, owner, req, max_bytes=self.limits.max_page_bytes)
        page = await self.store.list(query)
        tasks = []
        for rec in page.records:
            t = trim_history(rec.task, req.history_length)
            if not req.include_artifacts and t.artifacts is not None:
                t = m.Task(id=t.id, context_id=t.context_id, status=t.status, history=t.history, metadata=t.metadata,
                           generation=t.generation)
            tasks.append(t)
        return m.ListTasksResponse(
            tasks=tasks, next_page_token=encode_cursor(page.next_cursor), page_size=query.page_size,
            total_size=page.total,
        )

    async def wait_settled(self, sub: Submission) -> m.Task:
        """Wait until the submitted task is terminal or interrupted; return its snapshot."""
        run = sub.run
        if run is not None:
            await run.over.wait()
            if run.settled.is_set():
                return run.record.task
            # The run stopped without settling the task: another process took it over; follow it there.
            task, seq = run.record.task, run.committed_seq
        else:
            first = sub.first.event
            assert isinstance(first, m.Task)
            task, seq = first, sub.first.seq
        if is_settled(task.status.state):
            return task
        async for _ in self.follow(task.id, seq, until=is_settled):
            pass
        rec = await self.store.get(task.id)
        assert rec is not None
        return rec.task

    def follow(self, task_id: str, after: int, *, state: m.TaskState | None = None, state_seq: int | None = None,
               until: StopWhen = is_settled, idle: float | None = None,
               first: Entry | None = None, known: list[Entry] | None = None) -> AsyncIterator[Entry | None]:
        """Entries after `after` (stored, then live from the bus) until the task reaches a state `until` takes.

        `state` is the task's state as of entry `state_seq` (default `after`); without it, the
        task's current state is read first. With `idle`, None whenever nothing happened for that
        many seconds; `first` comes before everything; `known` are committed entries right after `after`
        the caller holds (see :func:`parley.tasks.follow.follow_log`).
        """
        if state is None:
            return self._follow_current(task_id, after, until, idle)
        run = self.runs.get(task_id)
        committed = (lambda: run.committed_seq) if run is not None and not run.lease_lost else None
        return follow_log(self.store, self.bus, task_id, after, state=state,
                          state_seq=after if state_seq is None else state_seq, until=until, idle=idle, first=first,
                          committed=committed, known=known)

    async def _follow_current(self, task_id: str, after: int, until: StopWhen,
                              idle: float | None) -> AsyncIterator[Entry | None]:
        run = self.runs.get(task_id)
        rec = run.record if run is not None else await self.store.get(task_id)
        if rec is None:
            return
        entries = follow_log(self.store, self.bus, task_id, after, state=rec.task.status.state, state_seq=rec.seq,
                             until=until, idle=idle)
        async with contextlib.aclosing(entries):  # closing this stream ends the bus subscription at once
            async for entry in entries:
                yield entry

    async def subscribe(
        self, agent_id: str, owner: str, task_id: str, last_event_id: int | None
    ) -> tuple[Entry | None, TaskRecord]:
        """Where a resubscription starts: (the snapshot to send first, or None when replaying after
        `last_event_id`) and the record it was read from."""
        rec = await self._visible(agent_id, owner, task_id)
        if last_event_id is not None:
            return None, rec
        return Entry(rec.seq, rec.task), rec

    # --- cancel ----------------------------------------------------------------------------------

    async def cancel(self, agent_id: str, owner: str, req: m.CancelTaskRequest) -> m.Task:
        """Stop a task's agent, here or in the process that runs it, and record `canceled`.

        A task nobody runs (it waits for input, or its process died) is canceled here,
        with a compare-and-set so that a concurrent continue or cancel is never undone;
        finished tasks are not cancelable.
        """
        metadata = dict(req.metadata or {})
        while True:
            rec = await self._visible(agent_id, owner, req.id)
            state = rec.task.status.state
            if is_terminal(state):
                raise TaskNotCancelableError(f"Task {req.id} is already {state_name(state)} and cannot be canceled")
            run = self.runs.get(req.id)
            if run is not None:
                return await self._cancel_run(run, metadata)
            lease = await self.store.lease(req.id)
            if lease is not None and lease.holder != self.holder and lease.expires_at > time.time():
                task = await self._cancel_elsewhere(rec, metadata, lease)
                if task is not None:
                    return task
                continue  # the other process did not answer before its lease ran out: try again
            run = Run(rec, Turn(rec.task.id, rec.task.context_id), committed_seq=rec.seq)
            try:
                async with run.lock:
                    await self._append(run, run.turn.cancel(metadata))
            except SequenceConflict:
                continue  # it changed meanwhile (continued, canceled elsewhere): look again
            # No agent code ran (the task waited for input): cancel what it delegated to.
            if self.cancel_child is not None:
                links = await self.store.links(req.id)
                await asyncio.gather(*(self.cancel_child(link, rec.owner) for link in links),
                                     return_exceptions=True)
            return run.task

    async def _cancel_run(self, run: Run, metadata: dict[str, Any]) -> m.Task:
        """Cancel a run of this engine: stop the agent, then record `canceled`."""
        if run.aio is not None and not run.aio.done():
            run.cancel_requested = metadata
            run.aio.cancel()
            await asyncio.wait([run.aio])
            if run.task.status.state is m.TaskState.CANCELED:
                return run.task
        async with run.lock:
            if is_terminal(run.task.status.state):
                raise TaskNotCancelableError(
                    f"Task {run.task.id} is already {state_name(run.task.status.state)} and cannot be canceled"
                )
            await self._append(run, run.turn.cancel(metadata))
        return run.task

    async def _cancel_elsewhere(self, rec: TaskRecord, metadata: dict[str, Any], lease: Lease) -> m.Task | None:
        """Ask the process holding the lease to cancel the task, and wait until the task ends.

        None if it did not end before the lease expired (that process may be gone).
        """
        task_id = rec.task.id
        await self.bus.request_cancel(task_id, metadata)
        wait = max(lease.expires_at - time.time(), 0.0) + 1.0
        try:
            async with asyncio.timeout(wait):
                async for _ in self.follow(task_id, rec.seq, state=rec.task.status.state, until=is_terminal):
                    pass
        except TimeoutError:
            return None
        done = await self.store.get(task_id)
        assert done is not None
        if done.task.status.state is not m.TaskState.CANCELED:
            raise TaskNotCancelableError(
                f"Task {task_id} is already {state_name(done.task.status.state)} and cannot be canceled"
            )
        return done.task

    def _on_cancel_request(self, task_id: str, metadata: dict[str, Any]) -> None:
        """A cancel request from the bus: cancel the run if it is ours."""
        run = self.runs.get(task_id)
        if run is None:
            return
        job = asyncio.ensure_future(self._cancel_run(run, dict(metadata)))
        self._background.add(job)
        job.add_done_callback(self._background_done)

    def _background_done(self, job: asyncio.Task) -> None:
        self._background.discard(job)
        if not job.cancelled() and job.exception() is not None:
            exc = job.exception()
            if not isinstance(exc, TaskNotCancelableError):
                log.error("a background job failed", exc_info=exc)

    # --- leases and recovery ---------------------------------------------------------------------

    async def recover(self) -> list[str]:
        """Take over tasks whose run died with its process; return the ids of those marked failed.

        A task whose agent left a checkpoint is resumed from it; the others are failed
        with a message saying so. Only tasks whose lease expired are taken (or, on a
        store no other process writes, every lease not this engine's).
        """
        now = time.time()
        claimed = await self.store.claim_orphans(self.holder, now, now + self.lease_seconds,
                                                 any_other_holder=self.sole)
        failed, resumed = [], 0
        for rec in claimed:
            if rec.task.id in self.runs:
                continue
            try:
                if await self._resume(rec):
                    resumed += 1
                    continue
                run = Run(rec, Turn(rec.task.id, rec.task.context_id), committed_seq=rec.seq)
                async with run.lock:
                    await self._append(run, run.turn.fail(RESTART_MESSAGE))
                failed.append(rec.task.id)
            except SequenceConflict:
                log.info("task %s changed while it was being recovered; left to whoever changed it", rec.task.id)
        if failed:
            log.warning("marked %d task(s) left running by a stopped process as failed", len(failed))
        if resumed:
            log.warning("resumed %d task(s) from their checkpoints", resumed)
        return failed

    async def _resume(self, rec: TaskRecord) -> bool:
        """Restart the agent of a claimed task from its checkpoint; False if it cannot be resumed."""
        agent = self.agents.get(rec.agent_id)
        agent_state, saved = unwrap_checkpoint(await self.store.get_checkpoint(rec.task.id))
        last_user = next((msg for msg in reversed(rec.task.history or []) if msg.role is m.Role.USER), None)
        if agent is None or agent_state is None or last_user is None:
            return False
        text = TextState.from_json(saved.get("text")) if saved else TextState()
        run = Run(rec, Turn(rec.task.id, rec.task.context_id, text), committed_seq=rec.seq, has_checkpoint=True)
        events: list = []
        if saved is not None and isinstance(saved.get("seq"), int) and rec.seq > saved["seq"]:
            events.extend(await self._undo_after(run, saved["seq"]))
        events.append(run.turn.status(m.TaskState.WORKING, RESUME_MESSAGE))
        self.runs[rec.task.id] = run
        try:
            async with run.lock:
                await self._append(run, events, now=True)
        except BaseException:
            del self.runs[rec.task.id]
            raise
        self._start(run, agent, last_user, first_turn=False, metadata=rec.task.metadata, checkpoint=agent_state)
        return True

    async def _undo_after(self, run: Run, checkpoint_seq: int) -> list:
        """Events restoring every artifact changed after the checkpoint to what it was then: the resumed agent
        produces those changes again, so chunks it appends must not land twice. The text artifact keeps the text
        not yet written (Turn.reset_text); an artifact made after the checkpoint is left (the agent makes it again,
        replacing it)."""
        log_entries = await self.store.events_after(run.task.id, 0)
        later = {e.event.artifact.artifact_id for e in log_entries
                 if e.seq > checkpoint_seq and isinstance(e.event, m.TaskArtifactUpdateEvent)}
        if not later:
            return []
        snapshot: m.Task | None = None
        for entry in log_entries:
            if entry.seq > checkpoint_seq:
                break
            snapshot = apply(snapshot, entry)
        then = {a.artifact_id: a for a in (snapshot.artifacts or [])} if snapshot is not None else {}
        events: list = []
        text_id = run.turn.artifact_id
        if text_id in later:
            events.append(run.turn.reset_text(list(then[text_id].parts) if text_id in then else []))
        for artifact_id in sorted(later - {text_id}):
            if artifact_id in then:
                events.append(m.TaskArtifactUpdateEvent(
                    task_id=run.task.id, context_id=run.task.context_id, artifact=then[artifact_id],
                    append=False, last_chunk=False))
        return events

    async def _keep_leases(self) -> None:
        """Renew the leases of the runs here; stop runs whose lease another process took; adopt orphans (not for
        the sole engine of its store: see start)."""
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                ids = [task_id for task_id, run in self.runs.items() if run.committed_seq]  # not: being created
                if ids:
                    held = await self.store.renew_leases(self.holder, ids, time.time() + self.lease_seconds)
                    for task_id in ids:
                        run = self.runs.get(task_id)
                        if task_id not in held and run is not None and not run.done:
                            self._lost(run)
                await self.recover()
            except Exception as exc:
                if unavailable(exc):  # the database is away: one line per interval, not a traceback per beat
                    self._lease_warnings.warning("renewing task leases failed (%s: %s)", type(exc).__name__, exc)
                else:
                    log.exception("renewing task leases failed")


def unwrap_checkpoint(stored: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the agent's own checkpoint state, the engine's record around it) of a stored checkpoint."""
    if stored is None:
        return None, None
    if stored.get(CHECKPOINT_MARK) == 2 and isinstance(stored.get("agent"), dict):
        return stored["agent"], stored
    return stored, None  # written before the engine kept its own state beside the agent's


def state_name(state: m.TaskState) -> str:
    """`TASK_STATE_INPUT_REQUIRED` -> `input-required`."""
    return state.value.removeprefix("TASK_STATE_").lower().replace("_", "-")


def _newest_within(messages: list[m.Message], count: int, size: int) -> list[m.Message]:
    """The newest of `messages` (oldest first) that fit in `count` messages and `size` encoded bytes."""
    kept: list[m.Message] = []
    used = 0
    for msg in reversed(messages[-count:] if count > 0 else []):
        used += len(msgspec.json.encode(msg))
        if used > size:
            break
        kept.append(msg)
    kept.reverse()
    return kept


def check_generation(task: m.Task, config: m.SendMessageConfiguration | None) -> None:
    """A2A 1.1 section 3.2.2: a follow-up with `ifGenerationMatch` other than the task's generation is refused
    (TaskGenerationMismatchError) before anything is written."""
    expected = config.if_generation_match if config is not None else None
    if expected is not None and expected != generation_of(task):
        current = generation_of(task)
        raise TaskGenerationMismatchError(
            f"Task generation mismatch: expected {expected} but current generation is {current}",
            info={"taskId": task.id, "expectedGeneration": str(expected), "currentGeneration": str(current)})


def _check_history_length(value: int | None) -> None:
    if value is not None and value < 0:
        raise InvalidParamsError("Invalid params: `historyLength` must not be negative")


def _skill(msg: m.Message, metadata: dict | None) -> str | None:
    """The skill the turn's message selects (the pipeline refused an ambiguous one before it got here; a task
    stored before that check with an ambiguous one selects none)."""
    if not metadata and not msg.metadata:  # nothing names a skill: no request to build to find none
        return None
    try:
        return requested_skill(m.SendMessageRequest(message=msg, metadata=metadata))
    except InvalidParamsError:
        return None
