"""The request pipeline every binding shares: decode -> authenticate -> authorize -> rate-limit -> service.

Streams are watched: they end with an authentication error when the credential that opened them ends.

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

from parley.protocol.errors import A2AError, InternalError, ServiceUnavailableError
from parley.protocol.operations import Operation
from parley.security.credential_watch import watched, watched_credential
from parley.security.input_limits import check_input
from parley.security.skill import requested_skill
from parley.server.access import (
    NO_GRANT,
    Access,
    AllowAll,
    Authenticator,
    Authorizer,
    Credentials,
    Grant,
    NoLimit,
    OpenAuthenticator,
    Principal,
    RateLimiter,
)
from parley.server.caller import remember
from parley.server.service import A2AService, CallContext
from parley.settings import LimitSettings
from parley.tasks.log import Entry
from parley.tasks.store import unavailable
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
    """What the pipeline returns: the call it decoded, and its result or (streams) its events, and the
    headers the access steps want on the response (rate-limit state)."""

    call: Call
    result: Any = None
    events: AsyncIterator[Entry | None] | None = None  # None items: idle ticks (when the Call asked for them)
    headers: dict[str, str] | None = None


Decoder = Callable[[], Awaitable[Call]]


class Pipeline:
    """Runs one request of any binding through the access steps into the service."""

    def __init__(self, service: A2AService, *, authenticator: Authenticator | None = None,
                 authorizer: Authorizer | None = None, limiter: RateLimiter | None = None,
                 input_limits: LimitSettings | None = None) -> None:
        self.service = service
        self.authenticator: Authenticator = authenticator or OpenAuthenticator()
        self.authorizer: Authorizer = authorizer or AllowAll()
        self.limiter: RateLimiter = limiter or NoLimit()
        self.input_limits = input_limits or LimitSettings()

    async def serve(self, binding: str, credentials: Credentials, decode: Decoder,
                    agent_id: str | None = None) -> Outcome:
        """Decode, check and run one request; raises an A2AError for the binding to encode."""
        telemetry.a2a_request(binding, agent_id)  # telemetry: this is an A2A request (its span)
        try:
            try:
                call = await decode()
            except A2AError:
                # Authentication comes first: a caller without valid credentials gets 401 whatever is wrong
                # with its request (spec 7.4), and strangers learn nothing about the API.
                await self.principal(Access(agent_id or "", None, binding), credentials)
                raise
            telemetry.a2a_method(call.op, call.version, call.request)  # telemetry: method, version, task id
            access = Access(call.agent_id, call.op, binding, call.request)
            principal = await self.principal(access, credentials)
            check_input(call, self.input_limits)  # after authentication: strangers learn nothing of the limits
            if call.op in (Operation.SEND, Operation.STREAM):
                requested_skill(call.request)  # one skill or none, on every server: ambiguity is InvalidParams
            await self.authorizer.authorize(access, principal)
            grant = await self.limiter.acquire(access, principal) or NO_GRANT  # None: nothing to report
            ctx = CallContext(agent_id=call.agent_id, principal=principal, version=call.version, binding=binding,
                              extensions=call.extensions, last_event_id=call.last_event_id,
                              agent_url_of=call.agent_url, idle=call.idle)
            headers = grant.headers or None
            if call.op.streams:
                try:
                    events = await self.service.stream(ctx, call.op, call.request)
                except BaseException:
                    grant.done()
                    raise
                if grant.release is not None:
                    events = _released(events, grant)
                events = self._watched(events, principal)
                return Outcome(call, events=telemetry.stream_events(events), headers=headers)  # telemetry
            try:
                result = await self.service.call(ctx, call.op, call.request)
            finally:
                grant.done()
            telemetry.a2a_result(result)  # telemetry: the task id of a new task
            return Outcome(call, result=result, headers=headers)
        except A2AError as exc:
            telemetry.a2a_error(exc)  # telemetry: error.type
            raise
        except Exception as exc:
            if unavailable(exc):  # the database, bus or counters cannot be reached: retryable, not a bug
                log.warning("a %s request failed: a backend cannot be reached (%s: %s)", binding,
                            type(exc).__name__, exc)
                err = ServiceUnavailableError(headers={"Retry-After": "1"})
                telemetry.a2a_error(err)
                raise err from None
            log.exception("unexpected error handling a %s request", binding)
            err = InternalError()
            telemetry.a2a_error(err)
            raise err from None

    def _watched(self, events: AsyncIterator[Entry | None], principal: Principal) -> AsyncIterator[Entry | None]:
        """A stream ends when the credential that opened it ends (revoked, expired: credential_watch)."""
        check = getattr(self.authenticator, "still_valid", None)
        if check is None or not watched_credential(principal):
            return events
        generation = getattr(self.authenticator, "revocations", lambda: 0)
        return watched(events, principal, check, generation=generation)

    async def principal(self, access: Access, credentials: Credentials) -> Principal:
        """The caller: the principal an in-process call carries, else what the authenticator says."""
        principal = credentials.principal
        if principal is None:
            principal = await self.authenticator.authenticate(access, credentials)
        remember(principal)  # the runs this request starts know their caller (token exchange)
        return principal


async def _released(events: AsyncIterator[Entry | None], grant: Grant) -> AsyncIterator[Entry | None]:
    """The stream's events; what the grant holds is given back when the stream ends, however it ends."""
    try:
        async for entry in events:
            yield entry
    finally:
        grant.done()
        closer = getattr(events, "aclose", None)
        if closer is not None:
            await closer()


__all__ = ["AgentUrl", "Call", "Decoder", "Outcome", "Pipeline"]
