"""The binding-independent A2A service: one call per operation, over the engine.

Transports (JSON-RPC now, HTTP+JSON and gRPC later) decode a request into the
canonical model, call :meth:`A2AService.call` or :meth:`A2AService.stream`,
and encode what comes back in the caller's protocol version.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
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
from parley.protocol.states import is_terminal
from parley.tasks.engine import TaskEngine
from parley.tasks.log import Entry, trim_history


@dataclass(slots=True)
class CallContext:
    """Who is calling which agent, in which protocol version."""

    agent_id: str
    owner: str
    version: str
    last_event_id: int | None = None
    extensions: frozenset[str] = frozenset()


class A2AService:
    """Implements each A2A operation on top of the task engine."""

    def __init__(self, engine: TaskEngine, *, push_notifications: bool = False, streaming: bool = True) -> None:
        self.engine = engine
        self.push_notifications = push_notifications
        self.streaming = streaming

    async def call(self, ctx: CallContext, op: Operation, req: Any) -> Any:
        """Run a unary operation; returns a canonical result."""
        e = self.engine
        if op is Operation.SEND:
            if req.configuration is not None and (req.configuration.history_length or 0) < 0:
                raise InvalidParamsError("Invalid params: `configuration.historyLength` must not be negative")
            self._check_message(ctx, req)
            sub = await e.submit(ctx.agent_id, ctx.owner, req)
            conf = req.configuration
            if conf is not None and conf.return_immediately:
                task = sub.record.task
            else:
                task = await e.wait_settled(sub)
            return trim_history(task, conf.history_length if conf else None)
        if op is Operation.GET:
            return await e.get(ctx.agent_id, ctx.owner, req)
        if op is Operation.LIST:
            return await e.list(ctx.agent_id, ctx.owner, req)
        if op is Operation.CANCEL:
            return await e.cancel(ctx.agent_id, ctx.owner, req)
        if op is Operation.EXTENDED_CARD:
            if ctx.version == "1.0":
                raise UnsupportedOperationError("This agent does not offer an extended agent card")
            raise ExtendedCardNotConfiguredError()
        return await self._push(ctx, op, req)

    async def stream(self, ctx: CallContext, op: Operation, req: Any) -> AsyncIterator[Entry | None]:
        """Start a streaming operation; errors before the first event are raised here."""
        if not self.streaming:
            raise UnsupportedOperationError("This agent does not support streaming")
        e = self.engine
        if op is Operation.STREAM:
            self._check_message(ctx, req)
            sub = await e.submit(ctx.agent_id, ctx.owner, req)
            return _chain(sub.first, e.follow(sub.record.task.id, sub.first.seq))
        first, after = await e.subscribe(ctx.agent_id, ctx.owner, req.id, ctx.last_event_id)
        if first is not None and is_terminal(first.event.status.state) and ctx.version == "1.0":
            raise UnsupportedOperationError(
                f"Task {req.id} is already finished; use GetTask, or resubscribe with Last-Event-ID to replay"
            )
        return _chain(first, e.follow(req.id, after))

    def _check_message(self, ctx: CallContext, req: m.SendMessageRequest) -> None:
        """Refuse what the agent declared it cannot take: media types, missing required extensions."""
        agent = self.engine.agents[ctx.agent_id]
        check_extensions(agent, ctx.extensions)
        check_media_types(agent, req)

    async def _push(self, ctx: CallContext, op: Operation, req: Any) -> Any:
        if not self.push_notifications:
            raise PushNotificationNotSupportedError()
        store = self.engine.store
        task_id = req.task_id
        await self.engine.get(ctx.agent_id, ctx.owner, m.GetTaskRequest(id=task_id, history_length=0))
        if op is Operation.PUSH_SET:
            req.id = req.id or str(uuid.uuid4())
            await store.put_push_config(req)
            return req
        if op is Operation.PUSH_GET:
            cfg = await store.get_push_config(task_id, req.id)
            if cfg is None:
                raise TaskNotFoundError(f"Push notification config {req.id!r} not found for task {task_id!r}")
            return cfg
        if op is Operation.PUSH_LIST:
            return m.ListTaskPushConfigsResponse(configs=await store.list_push_configs(task_id))
        await store.delete_push_config(task_id, req.id)
        return None


async def _chain(first: Entry | None, rest: AsyncIterator[Entry | None]) -> AsyncIterator[Entry | None]:
    if first is not None:
        yield first
    async for entry in rest:
        yield entry


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
    if conf is not None and conf.accepted_output_modes:
        if not any(media_type_matches(out, conf.accepted_output_modes) for out in agent.output_modes):
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
