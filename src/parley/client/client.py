"""`A2AClient`: an async client for any A2A server, Parley's or anyone else's.

    async with await A2AClient.connect("http://127.0.0.1:8000") as client:
        task = await client.send("hello")
        async for event in client.stream("hello again"):
            ...

It reads the agent card, picks the protocol version and binding both sides
speak, and resumes a dropped stream from the last event id it saw.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, Self

import httpx

from parley.client import transports
from parley.client.card import fetch_card, select_interface
from parley.client.card_trust import CardTrust
from parley.client.errors import ClientError
from parley.client.jsonrpc import StreamItem
from parley.client.transports import Transport
from parley.protocol import models as m
from parley.protocol.operations import Operation
from parley.protocol.states import is_settled, is_terminal

DEFAULT_TIMEOUT = httpx.Timeout(30.0, read=None)
RESUME_ATTEMPTS = 5

Push = m.TaskPushNotificationConfig | str  # a webhook: its URL alone, or a whole config (token, authentication)


def push_config(push: Push | None) -> m.TaskPushNotificationConfig | None:
    """The push-notification config `push` stands for (a bare URL becomes a config with that URL)."""
    if push is None or isinstance(push, m.TaskPushNotificationConfig):
        return push
    if not isinstance(push, str) or not push.strip():
        raise ClientError(f"push must be a webhook URL or a TaskPushNotificationConfig, not {push!r}")
    return m.TaskPushNotificationConfig(url=push)


def user_message(text: str | None = None, *, parts: list[m.Part] | None = None, task_id: str | None = None,
                 context_id: str | None = None, reference_task_ids: list[str] | None = None,
                 metadata: dict[str, Any] | None = None) -> m.Message:
    """A user message with a fresh messageId."""
    return m.Message(
        message_id=str(uuid.uuid4()),
        role=m.Role.USER,
        parts=parts or [m.Part(text=text or "")],
        task_id=task_id,
        context_id=context_id,
        reference_task_ids=reference_task_ids,
        metadata=metadata,
    )


class A2AClient:
    """Talks to one A2A agent through the interface chosen from its card."""

    def __init__(self, transport: Transport, card: m.AgentCard | None = None, *,
                 owns_http: bool = False) -> None:
        self.transport = transport
        self.card = card
        self._owns_http = owns_http
        self._http: httpx.AsyncClient | None = getattr(transport, "http", None)

    @classmethod
    async def connect(cls, url: str, *, version: str | None = None, bindings: list[str] | None = None,
                      headers: dict[str, str] | None = None, http: httpx.AsyncClient | None = None,
                      timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
                      verify: CardTrust | None = None) -> A2AClient:
        """Resolve the card at `url` and build a client for its best interface.

        `version` ("1.0" or "0.3") forces a protocol version the card offers;
        `bindings` (e.g. ["HTTP+JSON", "JSONRPC"]) restricts and orders the bindings;
        `verify` (the keys you trust: parley.client.card_trust.CardTrust) requires the card to be signed
        by one of them (CardVerificationError: unsigned, invalid, or signed by a key you do not trust).
        """
        owns = http is None
        http = http or httpx.AsyncClient(headers=headers, timeout=timeout)
        try:
            card = await fetch_card(http, url, verify)
            iface = select_interface(card, version, bindings)
        except BaseException:
            if owns:
                await http.aclose()
            raise
        return cls(transports.make(http, iface.protocol_binding, iface.url, iface.protocol_version, iface.tenant), card,
                   owns_http=owns)

    @property
    def binding(self) -> str:
        """The binding in use: JSONRPC, HTTP+JSON or GRPC."""
        return getattr(self.transport, "binding", "JSONRPC")

    @property
    def version(self) -> str:
        """The protocol version in use ("1.0" or "0.3")."""
        return self.transport.version

    async def close(self) -> None:
        """Close the HTTP connection pool if this client created it."""
        closer = getattr(self.transport, "close", None)
        if closer is not None:
            await closer()
        if self._owns_http and self._http is not None:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- operations ------------------------------------------------------------

    def _request(self, message: m.Message | str, task_id: str | None, context_id: str | None,
                 blocking: bool, history_length: int | None, push: Push | None = None) -> m.SendMessageRequest:
        """The SendMessage params: the message, and its configuration (blocking, history, webhook)."""
        msg = message if isinstance(message, m.Message) else user_message(message)
        if task_id is not None:
            msg.task_id = task_id
        if context_id is not None:
            msg.context_id = context_id
        conf = m.SendMessageConfiguration(return_immediately=not blocking, history_length=history_length,
                                          task_push_notification_config=push_config(push))
        return m.SendMessageRequest(message=msg, configuration=conf)

    async def send(self, message: m.Message | str, *, task_id: str | None = None, context_id: str | None = None,
                   blocking: bool = True, history_length: int | None = None,
                   push: Push | None = None) -> m.Task | m.Message:
        """Send a message; by default waits until the task finishes or asks for input.

        `push` registers a webhook with the message (a URL, or a TaskPushNotificationConfig with a token):
        the server POSTs the task's changes to it (A2A `taskPushNotificationConfig`; 0.3
        `pushNotificationConfig`).
        """
        req = self._request(message, task_id, context_id, blocking, history_length, push)
        return await self.transport.call(Operation.SEND, req)

    async def stream(self, message: m.Message | str, *, task_id: str | None = None,
                     context_id: str | None = None, push: Push | None = None) -> AsyncIterator[m.StreamEvent]:
        """Send a message and yield the task's events as they happen.

        If the connection drops before the task settles, the stream is resumed
        with `SubscribeToTask` from the last event id seen. `push` registers a webhook, as in `send`.
        """
        req = self._request(message, task_id, context_id, True, None, push)
        async with aclosing(self._resilient(self.transport.stream(Operation.STREAM, req))) as items:
            async for item in items:  # closed with this generator, in its task (not by the garbage collector)
                yield item

    async def resubscribe(self, task_id: str, *, last_event_id: str | None = None) -> AsyncIterator[m.StreamEvent]:
        """Follow a task's events until it finishes (through `input-required`: A2A 1.0 section 3.1.6);
        with `last_event_id`, replay what came after it first."""
        stream = self.transport.stream(Operation.SUBSCRIBE, m.SubscribeToTaskRequest(id=task_id), last_event_id)
        async with aclosing(self._resilient(stream, task_id=task_id, last_event_id=last_event_id,
                                            to_the_end=True)) as items:
            async for item in items:
                yield item

    async def _resilient(self, stream: AsyncIterator[StreamItem], *, task_id: str | None = None,
                         last_event_id: str | None = None, to_the_end: bool = False) -> AsyncIterator[m.StreamEvent]:
        """Yield a stream's events, resubscribing after a dropped connection; stop when the task settles
        (`to_the_end`: when it finishes, as a subscription does through `input-required`)."""
        ends = _ends if to_the_end else _settles
        attempts = 0
        while True:
            try:
                async with aclosing(stream):  # type: ignore[type-var]
                    async for item in stream:
                        attempts = 0
                        if item.event_id is not None:
                            last_event_id = item.event_id
                        ev = item.event
                        task_id = task_id or _task_id_of(ev)
                        yield ev
                        if ends(ev):
                            return
                return
            except (httpx.TransportError, ClientError) as exc:
                if isinstance(exc, ClientError) and "cannot reach" not in str(exc):
                    raise
                # Without an event id (servers that send none) the resubscription starts
                # from the current snapshot instead of replaying the gap.
                if task_id is None or attempts >= RESUME_ATTEMPTS:
                    raise ClientError(f"the stream from {self.transport.url} broke: {exc}") from None
                attempts += 1
                await asyncio.sleep(min(0.2 * 2**attempts, 5.0))
                stream = self.transport.stream(
                    Operation.SUBSCRIBE, m.SubscribeToTaskRequest(id=task_id), last_event_id
                )

    async def get(self, task_id: str, *, history_length: int | None = None) -> m.Task:
        """The current snapshot of a task."""
        return await self.transport.call(Operation.GET, m.GetTaskRequest(id=task_id, history_length=history_length))

    async def list(self, *, context_id: str | None = None, state: m.TaskState | None = None,
                   page_size: int | None = None, page_token: str | None = None,
                   history_length: int | None = None, include_artifacts: bool = False) -> m.ListTasksResponse:
        """One page of tasks, newest first."""
        req = m.ListTasksRequest(context_id=context_id, status=state, page_size=page_size, page_token=page_token,
                                 history_length=history_length, include_artifacts=include_artifacts)
        return await self.transport.call(Operation.LIST, req)

    async def cancel(self, task_id: str) -> m.Task:
        """Ask the agent to stop a task."""
        return await self.transport.call(Operation.CANCEL, m.CancelTaskRequest(id=task_id))


def _task_id_of(ev: m.StreamEvent) -> str | None:
    if isinstance(ev, m.Task):
        return ev.id
    if isinstance(ev, m.Message):
        return ev.task_id
    return ev.task_id


def _ends(ev: m.StreamEvent) -> bool:
    if isinstance(ev, m.Message):
        return True
    return isinstance(ev, (m.TaskStatusUpdateEvent, m.Task)) and is_terminal(ev.status.state)


def _settles(ev: m.StreamEvent) -> bool:
    if isinstance(ev, m.Message):
        return True
    if isinstance(ev, m.TaskStatusUpdateEvent):
        return is_settled(ev.status.state)
    if isinstance(ev, m.Task):
        return ev.status.state in (m.TaskState.COMPLETED, m.TaskState.FAILED, m.TaskState.CANCELED,
                                   m.TaskState.REJECTED)
    return False
