"""The task engine: runs agents for tasks and keeps each task's event log.

It creates and continues tasks, drives the agent's generator as a background
asyncio task, appends every change to the log (persisted by the store, then
published to live followers), answers reads, cancels runs, and recovers tasks
left running by a previous process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from parley.agents.base import Agent, AgentOutput, ArtifactChunk, InternalEvent, RunContext, Status, new_id
from parley.protocol import models as m
from parley.protocol.codec import copy
from parley.protocol.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from parley.protocol.states import InvalidTransition, check_transition, is_settled, is_terminal
from parley.tasks.log import Entry, apply, now_iso, trim_history
from parley.tasks.store import TaskLink, TaskQuery, TaskRecord, TaskStore, encode_cursor, make_query

log = logging.getLogger("parley.engine")

RESTART_MESSAGE = "The server stopped while this task was running; it was not resumed. Send the request again."
RESUME_MESSAGE = "Resumed from the last checkpoint after a server restart."
CHECKPOINT = "internal:checkpoint"
CONTEXT_TASKS = 50  # earlier tasks of a context handed to a new task's agent, newest kept
DELEGATION = "internal:delegation"  # {url, agent, taskId, contextId}: a child task, kept as a link for traces
KEEPALIVE_SECONDS = 15.0

Observer = Callable[[str, InternalEvent], None]
Listener = Callable[[TaskRecord, list[Entry]], None]


@dataclass(eq=False)
class Run:
    """A task whose agent runs in this process, and the entries it appended."""

    record: TaskRecord
    entries: list[Entry] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    aio: asyncio.Task | None = None
    done: bool = False
    cancel_requested: dict | None = None
    unflushed: list[Entry] = field(default_factory=list)
    flush_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    flush_scheduled: bool = False
    checkpointed: bool = False
    text_artifact: str | None = None
    text_started: bool = False
    pending_text: str | None = None

    @property
    def task(self) -> m.Task:
        return self.record.task

    def notify(self) -> None:
        """Wake every follower waiting for new entries."""
        self.changed.set()
        self.changed = asyncio.Event()


@dataclass(slots=True)
class Submission:
    """The outcome of submitting a message: the task, its run, and where a stream starts."""

    record: TaskRecord
    run: Run | None
    first: Entry
    duplicate: bool = False


class TaskEngine:
    """Runs agents for tasks and serves reads of their logs."""

    def __init__(
        self,
        store: TaskStore,
        agents: Mapping[str, Agent],
        *,
        keepalive: float = KEEPALIVE_SECONDS,
        observers: list[Observer] | None = None,
        delegator: object | None = None,
    ) -> None:
        self.store = store
        self.agents = agents
        self.keepalive = keepalive
        self.observers: list[Observer] = observers or []
        self.listeners: list[Listener] = []  # told of every appended batch (telemetry, metrics)
        # Cancels a delegated child task (set by the server: over A2A, through the delegator).
        self.child_canceler: Callable[[TaskLink], Awaitable[None]] | None = None
        self.delegator = delegator
        self.runs: dict[str, Run] = {}
        self._submitting: dict[tuple[str, str, str], asyncio.Future[Submission]] = {}
        self._flushes: set[asyncio.Task] = set()

    # --- writing -----------------------------------------------------------

    async def _append(self, run: Run, events: list) -> None:
        """Fold, persist and publish events (callers hold `run.lock` or own the run)."""
        rec = run.record
        state = rec.task.status.state
        for ev in events:  # check the whole batch first: a refused event must leave no trace
            if isinstance(ev, m.TaskStatusUpdateEvent):
                check_transition(state, ev.status.state)
                state = ev.status.state
        entries: list[Entry] = []
        for ev in events:
            rec.seq += 1
            entries.append(Entry(rec.seq, ev))
            apply(rec.task, ev)
        rec.updated_at = time.time()
        run.unflushed.extend(entries)
        settled = is_settled(rec.task.status.state)
        if settled:
            await self._flush(run)  # a settled state is durable before anyone hears of it
        else:
            self._flush_soon(run)
        run.entries.extend(entries)
        for listener in self.listeners:
            try:
                listener(rec, entries)
            except Exception:  # a broken listener must not break tasks
                log.exception("task listener %r failed", listener)
        if settled:
            run.settled.set()
            if self.runs.get(rec.task.id) is run:  # a settled task takes new messages at once
                del self.runs[rec.task.id]
        run.notify()

    async def _flush(self, run: Run) -> None:
        """Write the run's unwritten entries and its snapshot in one store transaction."""
        async with run.flush_lock:
            if not run.unflushed:
                return
            batch, run.unflushed = run.unflushed, []
            rec = run.record
            await self.store.append(rec.task.id, batch, rec.task, rec.updated_at)

    def _flush_soon(self, run: Run) -> None:
        """Group commit: entries appended in the same event-loop turn share one transaction."""
        if run.flush_scheduled:
            return
        run.flush_scheduled = True

        def start() -> None:
            run.flush_scheduled = False
            task = asyncio.ensure_future(self._flush(run))
            self._flushes.add(task)
            task.add_done_callback(self._flush_done)

        asyncio.get_running_loop().call_soon(start)

    def _flush_done(self, task: asyncio.Task) -> None:
        self._flushes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("writing task events failed", exc_info=task.exception())

    def _status(self, task: m.Task, state: m.TaskState, text: str | None = None, parts: list[m.Part] | None = None,
                metadata: dict | None = None) -> m.TaskStatusUpdateEvent:
        message = None
        if text is not None or parts:
            message = m.Message(
                message_id=new_id(),
                role=m.Role.AGENT,
                parts=parts or [m.Part(text=text or "")],
                task_id=task.id,
                context_id=task.context_id,
            )
        return m.TaskStatusUpdateEvent(
            task_id=task.id,
            context_id=task.context_id,
            status=m.TaskStatus(state=state, message=message, timestamp=now_iso()),
            metadata=metadata,
        )

    # --- submitting ----------------------------------------------------------

    async def submit(self, agent_id: str, owner: str, req: m.SendMessageRequest) -> Submission:
        """Create or continue the task a message belongs to, and start its agent."""
        msg = req.message
        if msg.role is not m.Role.USER:
            raise InvalidParamsError("Invalid params: a message sent to an agent must have the user role")
        key = (agent_id, owner, msg.message_id)
        pending = self._submitting.get(key)
        if pending is not None:  # the same message is being submitted right now: share its outcome
            sub = await asyncio.shield(pending)
            return Submission(sub.record, sub.run, Entry(sub.record.seq, copy(sub.record.task)), duplicate=True)
        fut: asyncio.Future[Submission] = asyncio.get_running_loop().create_future()
        self._submitting[key] = fut
        try:
            sub = await self._submit(agent_id, owner, req)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                fut.cancel()
            else:
                fut.set_exception(exc)
                fut.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        else:
            fut.set_result(sub)
            return sub
        finally:
            del self._submitting[key]

    async def _submit(self, agent_id: str, owner: str, req: m.SendMessageRequest) -> Submission:
        agent = self.agents[agent_id]
        msg = req.message
        prior = await self.store.find_message(agent_id, owner, msg.message_id)
        if prior is not None:
            rec = await self._visible(agent_id, owner, prior)
            run = self.runs.get(prior)
            if run is not None:
                rec = run.record
            return Submission(rec, run, Entry(rec.seq, copy(rec.task)), duplicate=True)
        if msg.task_id:
            return await self._continue(agent, owner, req)
        return await self._create(agent, owner, req)

    async def _create(self, agent: Agent, owner: str, req: m.SendMessageRequest) -> Submission:
        msg = req.message
        task_id = new_id()
        msg.task_id = task_id
        given_context = msg.context_id is not None
        msg.context_id = msg.context_id or new_id()
        task = m.Task(
            id=task_id,
            context_id=msg.context_id,
            status=m.TaskStatus(state=m.TaskState.SUBMITTED, timestamp=now_iso()),
            history=[msg],
            metadata=req.metadata,
        )
        now = time.time()
        parent = msg.reference_task_ids[0] if msg.reference_task_ids else None  # who delegated this task, if anyone
        rec = TaskRecord(task=task, agent_id=agent.id, owner=owner, seq=1, created_at=now, updated_at=now,
                         parent_task_id=parent)
        first = Entry(1, copy(task))
        earlier = await self._context_history(agent.id, owner, msg.context_id) if given_context else []
        await self.store.create(rec, first, msg.message_id)
        run = Run(rec)
        self._start(run, agent, msg, first_turn=True, metadata=req.metadata, context_history=earlier)
        return Submission(rec, run, first)

    async def _context_history(self, agent_id: str, owner: str, context_id: str) -> list[m.Message]:
        """The conversation of earlier tasks in a context, oldest first, each answer as an agent message."""
        page = await self.store.list(TaskQuery(agent_id=agent_id, owner=owner, context_id=context_id,
                                                page_size=CONTEXT_TASKS))
        messages: list[m.Message] = []
        for rec in sorted(page.records, key=lambda r: (r.created_at, r.task.id)):
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

    async def _continue(self, agent: Agent, owner: str, req: m.SendMessageRequest) -> Submission:
        msg = req.message
        assert msg.task_id is not None
        rec = await self._visible(agent.id, owner, msg.task_id)
        state = rec.task.status.state
        if msg.context_id and msg.context_id != rec.task.context_id:
            raise InvalidParamsError(
                f"Invalid params: message contextId {msg.context_id!r} does not match task {rec.task.id}'s "
                f"contextId {rec.task.context_id!r}"
            )
        if is_terminal(state):
            raise UnsupportedOperationError(
                f"Task {rec.task.id} is {_state_name(state)}; a finished task accepts no more messages"
            )
        if not is_settled(state):
            raise UnsupportedOperationError(
                f"Task {rec.task.id} is still {_state_name(state)}; send a message when it asks for input"
            )
        if rec.task.id in self.runs:  # another message continued it while we were reading
            raise UnsupportedOperationError(f"Task {rec.task.id} is already working on another message")
        msg.context_id = rec.task.context_id
        run = Run(rec)
        self.runs[rec.task.id] = run
        await self.store.remember_message(agent.id, owner, msg.message_id, rec.task.id)
        await self._append(run, [msg, self._status(rec.task, m.TaskState.WORKING)])
        run.settled.clear()
        first = Entry(rec.seq, copy(rec.task))
        checkpoint = await self.store.get_checkpoint(rec.task.id)
        self._start(run, agent, msg, first_turn=False, metadata=req.metadata, checkpoint=checkpoint)
        return Submission(rec, run, first)

    def _start(self, run: Run, agent: Agent, msg: m.Message, *, first_turn: bool, metadata: dict | None,
               checkpoint: dict | None = None, context_history: list[m.Message] | None = None) -> None:
        task = run.task
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
        )
        self.runs[task.id] = run
        run.aio = asyncio.create_task(self._drive(run, agent, ctx, first_turn), name=f"parley-task-{task.id}")

    # --- running -------------------------------------------------------------

    async def _drive(self, run: Run, agent: Agent, ctx: RunContext, first_turn: bool) -> None:
        task = run.task
        try:
            async with run.lock:
                if first_turn:
                    await self._append(run, [self._status(task, m.TaskState.WORKING)])
            gen = agent.run(ctx)
            try:
                async for out in gen:
                    if isinstance(out, InternalEvent) and out.kind == CHECKPOINT:
                        await self.store.put_checkpoint(task.id, out.data.get("state") or {})
                        run.checkpointed = True
                    elif isinstance(out, InternalEvent) and out.kind == DELEGATION and out.data.get("taskId"):
                        d = out.data
                        await self.store.add_link(task.id, str(d.get("url") or ""), str(d["taskId"]), d.get("agent"))
                    async with run.lock:
                        events = self._convert(run, out)
                        if events:
                            await self._append(run, events)
                    if run.settled.is_set():
                        break
            finally:
                try:
                    await gen.aclose()
                except Exception:  # cleanup after the task settled must not touch its log
                    if not run.settled.is_set():
                        raise
                    log.exception("agent %s failed while cleaning up task %s", agent.id, task.id)
            async with run.lock:
                if not run.settled.is_set():
                    await self._append(run, [*self._flush_text(run), self._status(task, m.TaskState.COMPLETED)])
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling() == 0:
                # The agent let a CancelledError of its own escape: that is a failure, not a cancel.
                log.warning("agent %s raised CancelledError on task %s without being canceled", agent.id, task.id)
                await self._fail(run, f"Agent {agent.id} failed: CancelledError")
            elif run.cancel_requested is not None:
                # Record `canceled` before followers learn the run is done, so every stream sees it.
                async with run.lock:
                    if not is_terminal(run.task.status.state):
                        run.pending_text = None
                        await self._append(
                            run, [self._status(task, m.TaskState.CANCELED, metadata=run.cancel_requested or None)]
                        )
            else:
                raise
        except InvalidTransition as exc:
            log.warning("agent %s produced an invalid transition on task %s: %s", agent.id, task.id, exc)
            await self._fail(run, f"Invalid agent response: {exc}")
        except Exception as exc:  # the agent's own failure becomes the task's
            log.exception("agent %s failed on task %s", agent.id, task.id)
            await self._fail(run, f"Agent {agent.id} failed: {type(exc).__name__}: {exc}")
        finally:
            await self._flush(run)
            if is_terminal(run.task.status.state) and (run.checkpointed or ctx.checkpoint is not None):
                await self.store.delete_checkpoint(task.id)
            run.done = True
            run.notify()
            if self.runs.get(task.id) is run:
                del self.runs[task.id]

    async def _fail(self, run: Run, reason: str) -> None:
        async with run.lock:
            if not is_terminal(run.task.status.state):
                events = [*self._flush_text(run), self._status(run.task, m.TaskState.FAILED, reason)]
                await self._append(run, events)

    def _convert(self, run: Run, out: AgentOutput) -> list:
        """Agent output -> log events; text chunks are held back one step to mark the last."""
        task = run.task
        if isinstance(out, str):
            events = []
            if run.pending_text is not None:
                events.append(self._text_chunk(run, run.pending_text, last=False))
            run.pending_text = out
            return events
        if isinstance(out, InternalEvent):
            for observer in self.observers:
                observer(task.id, out)
            return []
        events = self._flush_text(run)
        if isinstance(out, Status):
            events.append(self._status(task, out.state, out.text, out.parts, out.metadata))
        elif isinstance(out, ArtifactChunk):
            events.append(
                m.TaskArtifactUpdateEvent(
                    task_id=task.id,
                    context_id=task.context_id,
                    artifact=out.artifact,
                    append=out.append,
                    last_chunk=out.last_chunk,
                )
            )
        elif isinstance(out, m.Artifact):
            events.append(
                m.TaskArtifactUpdateEvent(task_id=task.id, context_id=task.context_id, artifact=out, last_chunk=True)
            )
        elif isinstance(out, m.Message):
            events.append(self._status(task, m.TaskState.WORKING, parts=out.parts))
        else:
            raise InvalidTransition(f"an agent cannot yield {type(out).__name__}")
        return events

    def _text_chunk(self, run: Run, text: str, *, last: bool) -> m.TaskArtifactUpdateEvent:
        if run.text_artifact is None:
            run.text_artifact = new_id()
            run.text_started = False
        ev = m.TaskArtifactUpdateEvent(
            task_id=run.task.id,
            context_id=run.task.context_id,
            artifact=m.Artifact(artifact_id=run.text_artifact, name="response", parts=[m.Part(text=text)]),
            append=run.text_started,
            last_chunk=last,
        )
        run.text_started = True
        if last:
            run.text_artifact = None
        return ev

    def _flush_text(self, run: Run) -> list:
        if run.pending_text is None:
            return []
        text, run.pending_text = run.pending_text, None
        return [self._text_chunk(run, text, last=True)]

    # --- reading -------------------------------------------------------------

    async def _visible(self, agent_id: str, owner: str, task_id: str) -> TaskRecord:
        run = self.runs.get(task_id)
        rec = run.record if run is not None else await self.store.get(task_id)
        if rec is None or rec.agent_id != agent_id or rec.owner != owner:
            raise TaskNotFoundError(f"Task {task_id!r} not found")
        return rec

    async def get(self, agent_id: str, owner: str, req: m.GetTaskRequest) -> m.Task:
        """A task snapshot, with at most `historyLength` messages."""
        _check_history_length(req.history_length)
        rec = await self._visible(agent_id, owner, req.id)
        return trim_history(rec.task, req.history_length)

    async def list(self, agent_id: str, owner: str, req: m.ListTasksRequest) -> m.ListTasksResponse:
        """A page of the owner's tasks on this agent, newest update first."""
        query = make_query(agent_id, owner, req)
        page = await self.store.list(query)
        tasks = []
        for rec in page.records:
            t = trim_history(rec.task, req.history_length)
            if not req.include_artifacts and t.artifacts is not None:
                t = m.Task(id=t.id, context_id=t.context_id, status=t.status, history=t.history, metadata=t.metadata)
            tasks.append(t)
        return m.ListTasksResponse(
            tasks=tasks, next_page_token=encode_cursor(page.next_cursor), page_size=query.page_size,
            total_size=page.total,
        )

    async def wait_settled(self, sub: Submission) -> m.Task:
        """Wait until the submitted task is terminal or interrupted; return its snapshot."""
        if sub.run is not None:
            await sub.run.settled.wait()
        return sub.record.task

    async def follow(self, task_id: str, after: int) -> AsyncIterator[Entry | None]:
        """Entries after `after`: stored ones, then live ones until the task settles.

        Yields None as a keep-alive tick when nothing happened for `keepalive` seconds.
        """
        run = self.runs.get(task_id)
        for entry in await self.store.events_after(task_id, after):
            after = entry.seq
            if entry.streamed:
                yield entry
        run = run or self.runs.get(task_id)
        if run is None:
            return
        while True:
            changed = run.changed
            fresh = [e for e in run.entries if e.seq > after] if run.entries and run.entries[-1].seq > after else []
            for entry in fresh:
                after = entry.seq
                if entry.streamed:
                    yield entry
            if run.done or (run.settled.is_set() and not fresh and is_settled(run.task.status.state)):
                if not [e for e in run.entries if e.seq > after]:
                    return
                continue
            try:
                await asyncio.wait_for(changed.wait(), self.keepalive)
            except TimeoutError:
                yield None

    async def subscribe(
        self, agent_id: str, owner: str, task_id: str, last_event_id: int | None
    ) -> tuple[Entry | None, int]:
        """Where a resubscription starts: (snapshot to send first or None, seq to follow after)."""
        rec = await self._visible(agent_id, owner, task_id)
        if last_event_id is not None:
            return None, last_event_id
        return Entry(rec.seq, copy(rec.task)), rec.seq

    # --- cancel and recovery ----------------------------------------------------

    async def cancel(self, agent_id: str, owner: str, req: m.CancelTaskRequest) -> m.Task:
        """Stop a task's agent and record `canceled`; finished tasks are not cancelable."""
        rec = await self._visible(agent_id, owner, req.id)
        run = self.runs.get(req.id)
        if run is None:
            run = Run(rec)
        if is_terminal(run.task.status.state):
            raise TaskNotCancelableError(
                f"Task {req.id} is already {_state_name(run.task.status.state)} and cannot be canceled"
            )
        if run.aio is not None and not run.aio.done():
            run.cancel_requested = dict(req.metadata or {})
            run.aio.cancel()
            await asyncio.wait([run.aio])
            if run.task.status.state is m.TaskState.CANCELED:
                return run.task
        async with run.lock:
            if is_terminal(run.task.status.state):
                raise TaskNotCancelableError(
                    f"Task {req.id} is already {_state_name(run.task.status.state)} and cannot be canceled"
                )
            run.pending_text = None
            await self._append(run, [self._status(run.task, m.TaskState.CANCELED, metadata=req.metadata)])
        # No agent code ran (the task waited for input): cancel what it delegated to ourselves.
        if self.child_canceler is not None:
            links = await self.store.links(req.id)
            await asyncio.gather(*(self.child_canceler(link) for link in links), return_exceptions=True)
        return run.task

    async def recover(self) -> list[str]:
        """Deal with tasks a previous process left running; return the ids of those marked failed.

        A task whose agent left a checkpoint is resumed from it; the others are
        marked failed with a message saying so.
        """
        failed = []
        resumed = 0
        for rec in await self.store.unfinished():
            if rec.task.id in self.runs:
                continue
            agent = self.agents.get(rec.agent_id)
            checkpoint = await self.store.get_checkpoint(rec.task.id)
            last_user = next((msg for msg in reversed(rec.task.history or []) if msg.role is m.Role.USER), None)
            if agent is not None and checkpoint is not None and last_user is not None:
                run = Run(rec)
                self.runs[rec.task.id] = run
                await self._append(run, [self._status(rec.task, m.TaskState.WORKING, RESUME_MESSAGE)])
                self._start(run, agent, last_user, first_turn=False, metadata=rec.task.metadata, checkpoint=checkpoint)
                resumed += 1
                continue
            await self._append(Run(rec), [self._status(rec.task, m.TaskState.FAILED, RESTART_MESSAGE)])
            failed.append(rec.task.id)
        if failed:
            log.warning("marked %d task(s) left running by a previous process as failed", len(failed))
        if resumed:
            log.warning("resumed %d task(s) from their checkpoints after a restart", resumed)
        return failed

    async def shutdown(self) -> None:
        """Cancel every running agent and write what is still unwritten (used when the server stops)."""
        tasks = [run.aio for run in self.runs.values() if run.aio is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*list(self._flushes), return_exceptions=True)


def _state_name(state: m.TaskState) -> str:
    return state.value.removeprefix("TASK_STATE_").lower().replace("_", "-")


def _check_history_length(value: int | None) -> None:
    if value is not None and value < 0:
        raise InvalidParamsError("Invalid params: `historyLength` must not be negative")
