"""The request pipeline every binding shares: decode -> authenticate -> authorize -> rate-limit -> service.

A binding (JSON-RPC, HTTP+JSON, gRPC, the trace endpoint, the in-process transport)
only knows its wire format: it hands the pipeline a `decode` function that turns its
request into a :class:`Call`, and encodes what comes back. Everything else happens
here, once: telemetry of the request, the caller's :class:`~parley.server.access.Principal`,
the access checks, and the operation itself (:class:`parley.server.service.A2AService`).

Errors are A2A errors (`parley.protocol.errors`) for the binding to encode; anything
unexpected is logged and becomes InternalError, never a traceback on the wire.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from parley.protocol.errors import A2AError, InternalError
from parley.protocol.operations import Operation
from parley.server.access import (
    Access,
    AllowAll,
    Authenticator,
    Authorizer,
    Credentials,
    NoLimit,
    OpenAuthenticator,
    Principal,
    RateLimiter,
)
from parley.server.service import A2AService, CallContext
from parley.tasks.log import Entry
from parley.telemetry import hooks as telemetry

log = logging.getLogger("parley.pipeline")


AgentUrl = Callable[[], str]  # computed only by the operations that need it: it costs a look at the headers


@dataclass(slots=True)
class Call:
    """A decoded request, whatever its binding: which operation on which agent, and its canonical request."""

    agent_id: str
    op: Operation
    request: Any
    version: str
    extensions: frozenset[str] = frozenset()
    last_event_id: int | None = None
    agent_url: AgentUrl | None = None  # the agent's URL as the caller sees it (cards, traces), on demand
    idle: float | None = None  # streams: yield None after this many idle seconds (SSE keep-alives)
    tag: Any = None  # the binding's own data (the JSON-RPC request, to answer with its id)


@dataclass(slots=True)
class Outcome:
    """What the pipeline returns: the call it decoded, and its result or (streams) its events."""

    call: Call
    result: Any = None
    events: AsyncIterator[Entry | None] | None = None  # None items: idle ticks (when the Call asked for them)


Decoder = Callable[[], Awaitable[Call]]


class Pipeline:
    """Runs one request of any binding through the access steps into the service."""

    def __init__(self, service: A2AService, *, authenticator: Authenticator | None = None,
                 authorizer: Authorizer | None = None, limiter: RateLimiter | None = None) -> None:
        self.service = service
        self.authenticator: Authenticator = authenticator or OpenAuthenticator()
        self.authorizer: Authorizer = authorizer or AllowAll()
        self.limiter: RateLimiter = limiter or NoLimit()

    async def serve(self, binding: str, credentials: Credentials, decode: Decoder,
                    agent_id: str | None = None) -> Outcome:
        """Decode, check and run one request; raises an A2AError for the binding to encode."""
        telemetry.a2a_request(binding, agent_id)  # telemetry: this is an A2A request (its span)
        try:
            call = await decode()
            telemetry.a2a_method(call.op, call.version, call.request)  # telemetry: method, version, task id
            access = Access(call.agent_id, call.op, binding)
            principal = await self.principal(access, credentials)
            await self.authorizer.authorize(access, principal)
            await self.limiter.acquire(access, principal)
            ctx = CallContext(agent_id=call.agent_id, principal=principal, version=call.version, binding=binding,
                              extensions=call.extensions, last_event_id=call.last_event_id,
                              agent_url_of=call.agent_url, idle=call.idle)
            if call.op.streams:
                events = await self.service.stream(ctx, call.op, call.request)
                return Outcome(call, events=telemetry.stream_events(events))  # telemetry: subscriber, span end
            result = await self.service.call(ctx, call.op, call.request)
            telemetry.a2a_result(result)  # telemetry: the task id of a new task
            return Outcome(call, result=result)
        except A2AError as exc:
            telemetry.a2a_error(exc)  # telemetry: error.type
            raise
        except Exception:
            log.exception("unexpected error handling a %s request", binding)
            err = InternalError()
            telemetry.a2a_error(err)
            raise err from None

    async def principal(self, access: Access, credentials: Credentials) -> Principal:
        """The caller: the principal an in-process call carries, else what the authenticator says."""
        if credentials.principal is not None:
            return credentials.principal
        return await self.authenticator.authenticate(access, credentials)


__all__ = ["Call", "Decoder", "Outcome", "Pipeline"]
