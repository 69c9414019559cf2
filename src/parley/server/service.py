"""The binding-independent A2A service: one method per operation, over the engine.

The request pipeline (:mod:`parley.server.pipeline`) calls :meth:`A2AService.call`
or :meth:`A2AService.stream` with a :class:`CallContext` naming the agent, the
caller's principal and the protocol version; results are canonical objects the
binding encodes in the caller's version. Errors are canonical A2A errors.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from parley.agents.base import Agent
from parley.protocol import models as m
from parley.protocol.errors import (
    ContentTypeNotSupportedError,
    ExtendedCardNotConfiguredError,
    ExtensionSupportRequiredError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from parley.protocol.operations import Operation
from parley.protocol.states import is_settled, is_terminal
from parley.push.configs import MAX_CONFIGS_PER_TASK, PushConfigs
from parley.push.log import push_log_json
from parley.server.access import Principal
from parley.server.subscribers import SubscriberLimit
from parley.tasks.engine import Submission, TaskEngine, bind_push
from parley.tasks.log import Entry, trim_history
from parley.tasks.store import StoredPushConfig
from parley.tasks.turn import reply_of

CardSource = Callable[[str, str], Awaitable[m.AgentCard]]  # (agent id, agent URL) -> the agent's public card
# (agent id, agent URL, caller, whether a card naming that URL may be signed) -> the caller's extended card, or None
# when none is offered
ExtendedCardSource = Callable[[str, str, Principal, bool], Awaitable["m.AgentCard | None"]]


@dataclass(slots=True)
class CallContext:
    """Who is calling which agent, over which binding, in which protocol version."""

    agent_id: str
    principal: Principal
    version: str
    binding: str = "JSONRPC"
    extensions: frozenset[str] = frozenset()
    last_event_id: int | None = None
    agent_url_of: Callable[[], str] | None = None
    idle: float | None = None  # a stream yields None after this many idle seconds (the writer's keep-alive cue)

    @property
    def agent_url(self) -> str | None:
        """The agent's URL as the caller sees it (for cards and traces)."""
        return self.agent_url_of() if self.agent_url_of is not None else None

    @property
    def agent_url_vouched(self) -> bool:
        """Whether this server may sign a card naming :attr:`agent_url`: False when the URL follows a `Host` the
        caller chose (parley.server.urls.names_this_server); True for a URL from the settings."""
        vouched = getattr(self.agent_url_of, "vouched", None)
        return bool(vouched()) if callable(vouched) else True

    @property
    def owner(self) -> str:
        """The principal id the tasks of this call belong to."""
        return self.principal.id


@dataclass(slots=True)
class PushLogRequest:
    """Parley's push delivery log of a task."""

    id: str


@dataclass(slots=True)
class TraceRequest:
    """The Parley trace extension: the delegation tree of a task, `depth` levels deep."""

    id: str
    depth: int


async def reply_or_task(events: AsyncIterator[Entry | None]) -> AsyncIterator[Entry | None]:
    """The stream of a send to an agent that may answer with a Message: the task's first frame waits for the
    agent's first visible output; when that is the reply, the stream is that one Message (A2A 1.0 section
    3.1.1), else the task and everything after it."""
    held: Entry | None = None
    released = False
    async for entry in events:
        if entry is None or released:
            yield entry
            continue
        if held is None:
            held = entry  # the task, as created
            continue
        if isinstance(entry.event, m.TaskStatusUpdateEvent) and (reply := reply_of(entry.event.status)) is not None:
            yield Entry(entry.seq, reply)
            return
        released = True
        yield held
        yield entry
    if held is not None and not released:  # the log ended with the task (a retry of a finished send)
        assert isinstance(held.event, m.Task)
        reply = reply_of(held.event.status)
        yield Entry(held.seq, reply) if reply is not None else held


class A2AService:
    """Implements each A2A operation on top of the task engine."""

    def __init__(self, engine: TaskEngine, *, card: CardSource | None = None,
                 extended_card: ExtendedCardSource | None = None, push_notifications: bool = False,
                 streaming: bool = True, max_subscribers: int | None = None,
                 push: PushConfigs | None = None) -> None:
        self.engine = engine
        self.push = push if push_notifications else None  # None: push notifications are not supported
        self.subscribers = SubscriberLimit(max_subscribers)
        self.card = card
        self.extended_card = extended_card
        self.push_notifications = push_notifications
        self.streaming = streaming

    async def call(self, ctx: CallContext, op: Operation, req: Any) -> Any:
        """Run a unary operation; returns a canonical result."""
        e = self.engine
        if op is Operation.SEND:
            if req.configuration is not None and (req.configuration.history_length or 0) < 0:
                raise InvalidParamsError("Invalid params: `configuration.historyLength` must not be negative")
            self._check_message(ctx, req)
            sub = await self._submit(ctx, req)
            conf = req.configuration
            if conf is not None and conf.return_immediately:
                # A2A 1.0.1 section 3.2.2: "MUST return immediately after creating the task ... The returned
                # task will have an in-progress state": the task as it was when it was created (submitted) or
                # continued (working), never what a fast agent made of it since (a one-pass creation commits
                # the agent's first outputs with the task, and the record keeps changing while it runs).
                task = sub.first.event
                assert isinstance(task, m.Task)
            else:
                task = await e.wait_settled(sub)
                reply = reply_of(task.status)
                if reply is not None:  # the agent answered with a Message, not a Task (A2A 1.0 section 3.1.1)
                    return reply
            return trim_history(task, conf.history_length if conf else None)
        if op is Operation.GET:
            return await e.get(ctx.agent_id, ctx.owner, req)
        if op is Operation.LIST:
            return await e.list(ctx.agent_id, ctx.owner, req)
        if op is Operation.CANCEL:
            return await e.cancel(ctx.agent_id, ctx.owner, req)
        if op is Operation.EXTENDED_CARD:
            card = None
            if self.extended_card is not None:
                card = await self.extended_card(ctx.agent_id, ctx.agent_url or "", ctx.principal, ctx.agent_url_vouched)
            if card is not None:
                return card
            if ctx.version == "1.0":
                raise UnsupportedOperationError("This agent does not offer an extended agent card")
            raise ExtendedCardNotConfiguredError()
        if op is Operation.CARD:
            if self.card is None or ctx.agent_url is None:
                raise UnsupportedOperationError("The agent card is served at the well-known URL")
            return await self.card(ctx.agent_id, ctx.agent_url)
        if op is Operation.TRACE:
            return await self._trace(ctx, req)
        if op is Operation.PUSH_LOG:
            return await self.push_log(ctx, req.id)
        return await self._push(ctx, op, req)

    async def stream(self, ctx: CallContext, op: Operation, req: Any) -> AsyncIterator[Entry | None]:
        """Start a streaming operation; errors before the first event are raised here.

        The stream of a send ends when the task settles (terminal or interrupted); a
        subscription follows the task through `input-required` to its end (A2A 1.0
        section 3.1.6).
        """
        if not self.streaming:
            raise UnsupportedOperationError("This agent does not support streaming")
        e = self.engine
        if op is Operation.STREAM:
            self._check_message(ctx, req)
            sub = await self._submit(ctx, req)
            first = sub.first
            assert isinstance(first.event, m.Task)
            events = e.follow(first.event.id, first.seq, state=first.event.status.state, until=is_settled,
                              idle=ctx.idle, first=first, known=sub.committed)
            if e.agents[ctx.agent_id].replies:
                events = reply_or_task(events)
            return self.subscribers.follow(first.event.id, events)
        first, rec = await e.subscribe(ctx.agent_id, ctx.owner, req.id, ctx.last_event_id)
        state = rec.task.status.state
        if first is not None and is_terminal(state) and ctx.version == "1.0":
            raise UnsupportedOperationError(
                f"Task {req.id} is already finished; use GetTask, or resubscribe with Last-Event-ID to replay"
            )
        after = rec.seq if ctx.last_event_id is None else ctx.last_event_id
        return self.subscribers.follow(req.id, e.follow(req.id, after, state=state, state_seq=rec.seq,
                                                         until=is_terminal, idle=ctx.idle, first=first))

    def _check_message(self, ctx: CallContext, req: m.SendMessageRequest) -> None:
        """Refuse what the agent declared it cannot take: media types, missing required extensions."""
        agent = self.engine.agents[ctx.agent_id]
        check_extensions(agent, ctx.extensions)
        check_media_types(agent, req)

    async def _trace(self, ctx: CallContext, req: TraceRequest) -> dict[str, Any]:
        from parley.hub.trace import build_trace

        rec = await self.engine.record(ctx.agent_id, ctx.owner, req.id)
        return await build_trace(self.engine.store, rec, url=ctx.agent_url, depth=req.depth, viewer=ctx.owner)

    async def _submit(self, ctx: CallContext, req: m.SendMessageRequest) -> Submission:
        """Submit a send with its inline webhook. A retry (the same message again) is answered with the task it
        went to; a webhook it carries is registered for that task all the same (stored before the answer, so
        it hears of every later change), never dropped: the client asked for it, maybe because the first
        send's answer, and its config, were lost."""
        push = await self._inline_push(ctx, req)
        sub = await self.engine.submit(ctx.agent_id, ctx.owner, req, push)
        if sub.duplicate and push is not None:
            task_id = sub.record.task.id
            sent = req.configuration.task_push_notification_config if req.configuration else None
            if sent is not None and not sent.id:
                # A config without an id, retried: the same webhook again replaces its config (its token, say)
                # rather than adding one more, which would have it told of every change twice.
                for existing in await self.engine.store.list_push_configs(task_id):
                    if existing.url == push.config.url:
                        push.config.id = existing.id
                        break
            bound = bind_push(push, task_id)
            await self._check_room(task_id, bound.config.id)
            await self.engine.store.put_push_config(bound)
        return sub

    async def _inline_push(self, ctx: CallContext, req: m.SendMessageRequest) -> StoredPushConfig | None:
        """The webhook a send registers with its message (`configuration.taskPushNotificationConfig`)."""
        conf = req.configuration
        if conf is None or conf.task_push_notification_config is None:
            return None
        if self.push is None:
            raise PushNotificationNotSupportedError()
        stored = await self.push.prepare(conf.task_push_notification_config, ctx.version, ctx.agent_id, ctx.owner)
        task_id = req.message.task_id
        if task_id:  # continuing a task: it may not go over its number of configs
            await self.engine.record(ctx.agent_id, ctx.owner, task_id)
            await self._check_room(task_id, stored.config.id)
        return stored

    async def _check_room(self, task_id: str, config_id: str) -> None:
        """InvalidParamsError when a new config would give the task more than MAX_CONFIGS_PER_TASK."""
        existing = await self.engine.store.list_push_configs(task_id)
        if config_id not in {c.id for c in existing} and len(existing) >= MAX_CONFIGS_PER_TASK:
            raise InvalidParamsError(f"Invalid params: task {task_id} has {len(existing)} push configs, "
                                     f"the most a task may have")

    async def _push(self, ctx: CallContext, op: Operation, req: Any) -> Any:
        if self.push is None:
            raise PushNotificationNotSupportedError()
        store = self.engine.store
        task_id = req.task_id
        await self.engine.get(ctx.agent_id, ctx.owner, m.GetTaskRequest(id=task_id, history_length=0))
        if op is Operation.PUSH_SET:
            stored = bind_push(await self.push.prepare(req, ctx.version, ctx.agent_id, ctx.owner), task_id)
            await self._check_room(task_id, stored.config.id)
            await store.put_push_config(stored)
            return self.push.shown(stored.config)
        if op is Operation.PUSH_GET:
            cfg = await store.get_push_config(task_id, req.id)
            if cfg is None:
                raise TaskNotFoundError(f"Push notification config {req.id!r} not found for task {task_id!r}")
            return self.push.shown(cfg)
        if op is Operation.PUSH_LIST:
            return m.ListTaskPushConfigsResponse(configs=[self.push.shown(c)
                                                          for c in await store.list_push_configs(task_id)])
        await store.delete_push_config(task_id, req.id)
        return None

    async def push_log(self, ctx: CallContext, task_id: str) -> dict[str, Any]:
        """The delivery log of a task the caller owns (Parley's extension: `GET .../tasks/{id}/pushLog`)."""
        if self.push is None:
            raise PushNotificationNotSupportedError()
        await self.engine.record(ctx.agent_id, ctx.owner, task_id)
        notifications, attempts = await self.engine.store.push_log(task_id)
        return push_log_json(task_id, notifications, attempts)

def part_media_type(part: m.Part) -> str:
    """The media type a part carries (declared, or implied by its kind)."""
    if part.media_type:
        return part.media_type
    if part.text is not None:
        return "text/plain"
    if part.data is not msgspec.UNSET:
        return "application/json"
    return "application/octet-stream"


def media_type_matches(media_type: str, accepted: list[str]) -> bool:
    """Whether `media_type` is in `accepted`, honouring `*/*` and `type/*` wildcards and parameters."""
    base = media_type.split(";", 1)[0].strip().lower()
    major = base.split("/", 1)[0]
    for a in accepted:
        a = a.split(";", 1)[0].strip().lower()
        if a in ("*/*", "*", base) or (a.endswith("/*") and a[:-2] == major):
            return True
    return False


def check_media_types(agent: Agent, req: m.SendMessageRequest) -> None:
    """ContentTypeNotSupportedError unless the agent takes every part and can answer in an accepted mode."""
    for i, part in enumerate(req.message.parts):
        mt = part_media_type(part)
        if not media_type_matches(mt, agent.input_modes):
            raise ContentTypeNotSupportedError(
                f"Part {i} is {mt}, which agent {agent.id!r} does not accept (it accepts {', '.join(agent.input_modes)})"
            )
    conf = req.configuration
    if (conf is not None and conf.accepted_output_modes
            and not any(media_type_matches(out, conf.accepted_output_modes) for out in agent.output_modes)):
        raise ContentTypeNotSupportedError(
            f"Agent {agent.id!r} answers in {', '.join(agent.output_modes)}, none of which the client accepts "
            f"({', '.join(conf.accepted_output_modes)})"
        )


def check_extensions(agent: Agent, activated: frozenset[str]) -> None:
    """ExtensionSupportRequiredError if the agent requires an extension the client did not activate."""
    for ext in agent.extensions:
        if ext.required and ext.uri not in activated:
            raise ExtensionSupportRequiredError(
                f"Agent {agent.id!r} requires the extension {ext.uri}; activate it with the A2A-Extensions header"
            )
