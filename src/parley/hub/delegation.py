"""Delegation over A2A: from inside a run, hand the turn (or a question) to another A2A agent.

    @app.agent(id="billing")
    async def billing(ctx):
        if Delegator.pending(ctx):                 # the user answered a question a child asked
            async for out in ctx.resume_delegation():
                yield out
            return
        yield ctx.say("Looking at your invoice...")
        async for out in ctx.delegate("specialist", ctx.message):
            yield out

`ctx.delegator` is the server's delegator (built by :class:`parley.runtime.Runtime`).

Every call is a real A2A `message/stream` (1.0 `SendStreamingMessage`) over HTTP
through :class:`parley.client.A2AClient`, also when the target lives in the same
process: a local agent is reached the way a remote one is, so it gets its own task,
log, card check and trace. Targets are absolute URLs, paths on this server
(`/a2a/billing`) or bare agent ids of this server (`billing`), resolved against the
server's own base URL (`Settings.self_url`, else `public_url`, else where it listens).

What the child's message carries (the wire contract between Parley hops):

- `referenceTaskIds: [<parent task id>]`, which the child's server records as the
  task's parent (see :mod:`parley.hub.trace`);
- `metadata.parley = {"chain": [<caller agent URLs, first caller first>], "depth": n}`:
  the agents the request went through (this caller last) and the number of hops
  from the original client to the child (1 for a first delegation).

Before calling, a target already in the chain is refused (`delegation cycle:
front-desk -> billing -> front-desk`) and so is a hop beyond `max_depth` (default 5).
The parent then:

- yields progress: `asked <agent>` (and `passed the answer to <agent>` when resuming),
  and the child's own progress messages unless `relay_status=False`;
- yields `internal:delegation` {url, agent, taskId, contextId} once the child's task is
  known (the engine keeps it as a link for traces);
- relays the child's artifacts: with its own artifact ids (`relay="own"`, the
  default: stable ids derived from the parent task, child task and artifact ids),
  unchanged (`"same"`), or not at all (`"none"`; they are still in the result);
- ends as the child ended (`finish=True`, the default): completed with the child's
  final status message, or failed with the child's reason. With `finish=False` a
  finished delegation yields nothing more and the caller reads `Delegation.result`.

`input-required` (and `auth-required`) in the child surface to the parent's client:
the parent checkpoints `{"parley.delegation": {url, agent, taskId, contextId}}` and
yields `ctx.ask(...)` with the child's question parts. The client's answer (a message
with the parent's task id) starts the parent's next turn with that checkpoint, and
:meth:`Delegator.resume` forwards the answer to the child's task; nested chains
resume hop by hop.

Cancelling the parent cancels the child: on `CancelledError` (or any exit before the
child settled) a `CancelTask` is sent, shielded and bounded by `cancel_timeout`, then
the cancellation goes on. A target that cannot be reached is retried `retries` times
with exponential backoff (connection errors only), then the parent fails naming the
agent and the URL.

A parent canceled while it waits for input runs no agent code; the engine then cancels
the children recorded in its links (:meth:`Delegator.cancel_link`). Known limits: a
cancel that lands before the child's first event arrives cannot name the child; a server shutdown cancels running agents the
way a user's cancel does, so the children of parents still running then are canceled
(the parents are marked failed at the next start). The chain compares URLs,
so an agent reached under two URLs (`/` and `/a2a/{id}` of a default agent, or
`localhost` and `127.0.0.1`) is not recognised as a cycle; the depth limit still
stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from parley.agents.base import AgentOutput, ArtifactChunk, InternalEvent, RunContext, Status, new_id
from parley.client import A2AClient, ClientError
from parley.client.card import fetch_card
from parley.protocol import models as m
from parley.protocol.errors import A2AError
from parley.protocol.states import is_interrupted, is_settled
from parley.tasks.store import TaskLink

log = logging.getLogger("parley.hub.delegation")

META_KEY = "parley"  # message metadata namespace: {"chain": [...], "depth": n}
CHECKPOINT_KEY = "parley.delegation"  # checkpoint state key while a child waits for input
DELEGATION_EVENT = "internal:delegation"
DEFAULT_MAX_DEPTH = 5
DEFAULT_BINDINGS = ("JSONRPC", "HTTP+JSON")  # HTTP bindings, JSON-RPC first
WELL_KNOWN_SUFFIXES = ("/.well-known/agent-card.json", "/.well-known/agent.json")

Relay = Literal["own", "same", "none"]
CredentialSource = Callable[[str | None], Awaitable[Mapping[str, str]]]  # owner -> the headers of one call
MessageLike = m.Message | str | Sequence[m.Part] | None


class DelegationError(Exception):
    """A delegation that cannot be made: cycle, depth limit, unreachable or unresolvable target."""


@dataclass
class DelegationResult:
    """How a delegated task ended (or where it stopped, if it asks for input)."""

    url: str
    agent: str
    task_id: str | None = None
    context_id: str | None = None
    state: m.TaskState | None = None
    message: m.Message | None = None  # the child's last status message (or its direct reply)
    artifacts: list[m.Artifact] = field(default_factory=list)
    error: str | None = None  # why the delegation failed, as the parent reports it

    @property
    def ok(self) -> bool:
        """True when the child completed."""
        return self.state is m.TaskState.COMPLETED

    @property
    def text(self) -> str:
        """The child's answer as text: its artifacts' text, else its final message's text."""
        texts = ["".join(p.text for p in a.parts if p.text is not None) for a in self.artifacts]
        joined = "\n".join(t for t in texts if t)
        if joined:
            return joined
        return self.message.text() if self.message is not None else ""


# --- the run a tool call belongs to ----------------------------------------------------


@dataclass
class RunScope:
    """The run a delegation made outside the agent's generator (a tool call) belongs to.

    Tools cannot yield; the events they produce (`internal:delegation`) wait in
    `events` until the agent wrapper (:class:`parley.hub.routing.RoutedAgent`) yields them.
    """

    ctx: RunContext
    events: list[InternalEvent] = field(default_factory=list)

    def drain(self) -> list[InternalEvent]:
        """Take the waiting events."""
        out, self.events = self.events, []
        return out


CURRENT_RUN: contextvars.ContextVar[RunScope | None] = contextvars.ContextVar("parley_current_run", default=None)


@contextlib.contextmanager
def bind_run(ctx: RunContext) -> Iterator[RunScope]:
    """Make `ctx` the current run for delegations started by tools during the block."""
    scope = RunScope(ctx)
    token = CURRENT_RUN.set(scope)
    try:
        yield scope
    finally:
        with contextlib.suppress(ValueError):  # closed from another context (e.g. by the GC): nothing to undo
            CURRENT_RUN.reset(token)


# --- URLs ------------------------------------------------------------------------------


def normalise_url(url: str) -> str:
    """An agent URL in a comparable form: no card suffix, no trailing slash, lower-case host."""
    for suffix in WELL_KNOWN_SUFFIXES:
        url = url.removesuffix(suffix)
    parts = urlsplit(url)
    if parts.scheme and parts.netloc:
        url = f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path}"
    return url.rstrip("/")


def origin(url: str) -> str:
    """scheme://host:port of a URL (the default port made explicit); host:port of a gRPC target without scheme."""
    parts = urlsplit(url if "://" in url else f"grpc://{url}")
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    return f"{parts.scheme.lower()}://{(parts.hostname or '').lower()}:{port}"


def url_label(url: str) -> str:
    """A short name for an agent URL: the agent id of `/a2a/{id}`, else the last path segment or host."""
    parts = urlsplit(normalise_url(url))
    segments = [s for s in parts.path.split("/") if s]
    if "a2a" in segments and segments.index("a2a") + 1 < len(segments):
        return segments[segments.index("a2a") + 1]
    if segments:
        return segments[-1]
    return parts.netloc or url


def lineage(ctx: RunContext) -> tuple[list[str], int]:
    """(chain of caller URLs, depth) this task was created with; ([], 0) for a client's own task."""
    first = next((msg for msg in ctx.history if msg.role is m.Role.USER), ctx.message)
    info = (first.metadata or {}).get(META_KEY)
    if not isinstance(info, dict):
        return [], 0
    chain = [u for u in info.get("chain") or [] if isinstance(u, str)]
    depth = info.get("depth")
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < len(chain):
        depth = len(chain)  # never trust a depth smaller than the chain the message shows
    return chain, depth


def _unreachable(exc: BaseException) -> bool:
    return isinstance(exc, httpx.TransportError) or (isinstance(exc, ClientError) and "cannot reach" in str(exc))


def _ids(ev: m.StreamEvent) -> tuple[str | None, str | None]:
    if isinstance(ev, m.Task):
        return ev.id, ev.context_id
    return ev.task_id, ev.context_id


# --- the delegator -----------------------------------------------------------------------


class Delegator:
    """Calls other A2A agents from inside a run; one instance serves any number of agents and tasks.

    Args:
        self_url: this server's base URL (a string or a function returning it, read at call
            time), used for the caller's own URL in the chain and for local targets.
        max_depth: the most hops a request may go through (client -> a -> b is 2).
        retries: extra attempts when the target cannot be reached (connection errors only).
        backoff: seconds before the first retry; doubled for each further one.
        cancel_timeout: how long cancelling a child may take when the parent is canceled.
        relay: default artifact relay mode, "own", "same" or "none" (see the module docs).
        relay_status: relay the child's progress messages as the parent's.
        headers: HTTP headers for every call (e.g. an Authorization header).
        bindings: A2A bindings to use, in order of preference (HTTP ones).
        version: force an A2A version ("1.0" or "0.3"); default: the card's first.
        timeout: HTTP connect/write timeout in seconds (streams have no read timeout).
        local: the agents of this server (:class:`parley.server.local.LocalAgents`): a target among
            them is called in process, as the caller's principal, instead of over HTTP.
    """

    def __init__(
        self,
        *,
        self_url: str | Callable[[], str | None] | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
        retries: int = 3,
        backoff: float = 0.25,
        cancel_timeout: float = 5.0,
        relay: Relay = "own",
        relay_status: bool = True,
        headers: Mapping[str, str] | None = None,
        bindings: Sequence[str] = DEFAULT_BINDINGS,
        version: str | None = None,
        timeout: float = 30.0,
        local: Any = None,
    ) -> None:
        if relay not in ("own", "same", "none"):
            raise ValueError(f"relay must be 'own', 'same' or 'none', not {relay!r}")
        if max_depth < 1 or retries < 0:
            raise ValueError("max_depth must be at least 1 and retries not negative")
        self._self_url = self_url
        self.max_depth = max_depth
        self.retries = retries
        self.backoff = backoff
        self.cancel_timeout = cancel_timeout
        self.relay: Relay = relay
        self.relay_status = relay_status
        self.headers = dict(headers or {})
        self.credentials: dict[str, dict[str, str] | CredentialSource] = {}  # agent URL (normalised) -> its own
        self.bindings = list(bindings)
        self.version = version
        self.timeout = timeout
        self.local = local

    # --- credentials -------------------------------------------------------------------

    def add_credentials(self, url: str, headers: Mapping[str, str] | CredentialSource) -> None:
        """Send `headers` (an API key, a bearer token) on every call to the agent at `url`, and only there.

        `headers` may be a source instead: an async function of the calling task's owner returning the
        headers of one call (a token exchanged for the caller, :mod:`parley.hub.remote`); it raises
        DelegationError to refuse the call, which then fails with that reason. Whatever the agent's card says,
        they are sent only to the origin of `url`: a card naming an interface elsewhere fails the call."""
        self.credentials[normalise_url(url)] = headers if callable(headers) else dict(headers)

    def headers_for(self, url: str) -> dict[str, str]:
        """The headers of a call to `url`: the ones for every call, then the agent's own fixed credentials
        (a credential source is asked at call time, by :meth:`call_headers`)."""
        own = self.credentials.get(normalise_url(url)) if self.credentials else None
        return {**self.headers, **own} if isinstance(own, dict) and own else self.headers

    async def call_headers(self, url: str, owner: str | None) -> dict[str, str]:
        """The headers of one call to `url` made for a task of `owner`: its source asked, if it has one."""
        own = self.credentials.get(normalise_url(url)) if self.credentials else None
        if callable(own):
            return {**self.headers, **await own(owner)}
        return self.headers_for(url)

    # --- addresses ---------------------------------------------------------------------

    def base_url(self) -> str | None:
        """This server's base URL, if known."""
        value = self._self_url() if callable(self._self_url) else self._self_url
        return value.rstrip("/") if value else None

    def resolve(self, target: str) -> str:
        """An absolute agent URL for an absolute URL, a path on this server, or a local agent id."""
        if target.startswith(("http://", "https://")):
            return target
        base = self.base_url()
        if base is None:
            raise DelegationError(
                f"cannot resolve {target!r}: delegating to this server's own agents needs its base URL "
                "(Settings.self_url or public_url)"
            )
        return f"{base}{target}" if target.startswith("/") else f"{base}/a2a/{target}"

    def caller_url(self, ctx: RunContext) -> str:
        """The URL of the agent running `ctx` (as it goes into the chain)."""
        base = self.base_url()
        return f"{base}/a2a/{ctx.agent_id}" if base else f"/a2a/{ctx.agent_id}"

    def refusal(self, ctx: RunContext, url: str) -> str | None:
        """Why delegating from `ctx` to `url` is refused (cycle or depth), or None."""
        chain, depth = lineage(ctx)
        path = [*chain, self.caller_url(ctx)] if ctx.agent_id else chain
        target = normalise_url(url)
        if target in {normalise_url(u) for u in path}:
            return "delegation cycle: " + " -> ".join(url_label(u) for u in [*path, url])
        if depth + 1 > self.max_depth:
            route = " -> ".join(url_label(u) for u in [*path, url])
            return (f"delegation depth limit reached: {route} would be {depth + 1} hops, "
                    f"more than the limit of {self.max_depth}")
        return None

    # --- the calls -----------------------------------------------------------------------

    @staticmethod
    def pending(ctx: RunContext) -> dict[str, Any] | None:
        """The delegated task waiting for this turn's message, if the last turn ended on a child's question."""
        state = (ctx.checkpoint or {}).get(CHECKPOINT_KEY)
        if isinstance(state, dict) and state.get("url") and state.get("taskId"):
            return state
        return None

    def delegate(self, ctx: RunContext, target: str, message: MessageLike = None, *, name: str | None = None,
                 relay: Relay | None = None, finish: bool = True) -> Delegation:
        """Delegate to `target`; iterate the result for the parent's outputs.

        `message` is what the child receives: a message (its parts and metadata are
        forwarded), text, parts, or None for this turn's message.
        """
        return Delegation(self, ctx, target, message, name=name, relay=relay or self.relay, finish=finish)

    def resume(self, ctx: RunContext, message: MessageLike = None, *, relay: Relay | None = None,
               finish: bool = True) -> Delegation:
        """Forward this turn's message (the answer) to the child that asked (see :meth:`pending`)."""
        state = self.pending(ctx)
        if state is None:
            raise DelegationError("no delegated task is waiting for input on this task")
        return Delegation(self, ctx, str(state["url"]), message, name=state.get("agent"),
                          relay=relay or self.relay, finish=finish, waiting=state)

    async def ask(self, target: str, message: MessageLike, *, ctx: RunContext | None = None,
                  name: str | None = None) -> DelegationResult:
        """Delegate and wait for the result without yielding anything (for tools).

        The run is `ctx`, else the current one (:func:`bind_run`); its `internal:delegation`
        events are queued on the current :class:`RunScope`. A child that asks for input is
        canceled (a tool call cannot take a user's answer); the result says what it asked.
        """
        scope = CURRENT_RUN.get()
        run = ctx or (scope.ctx if scope is not None else None) or _detached_context()
        call = Delegation(self, run, target, message, name=name, relay="none", finish=False)
        async for out in call:
            if scope is not None and isinstance(out, InternalEvent) and out.kind == DELEGATION_EVENT:
                scope.events.append(out)
        res = call.result
        if res.state is not None and is_interrupted(res.state) and res.task_id:
            await self.cancel(res.url, res.task_id)
        return res

    async def cancel_link(self, link: TaskLink, owner: str | None = None) -> None:
        """Cancel the child task a delegation link names, as `owner` (best effort, see :meth:`cancel`)."""
        await self.cancel(link.child_url, link.child_task_id, owner)

    async def cancel(self, url: str, task_id: str, owner: str | None = None) -> None:
        """Best-effort CancelTask of a delegated task, bounded by `cancel_timeout`."""

        async def go() -> None:
            async with await self._connect(url, owner) as client:
                await client.cancel(task_id)

        try:  # asyncio.timeout, not wait_for (on 3.11 it could drop a cancel of the caller); shielded: best effort
            async with asyncio.timeout(self.cancel_timeout):
                await asyncio.shield(go())
        except (TimeoutError, A2AError, ClientError, DelegationError, httpx.HTTPError) as exc:
            log.info("could not cancel delegated task %s at %s: %s", task_id, url, exc)

    async def card(self, url: str) -> m.AgentCard:
        """The card of the agent at `url`: read in process for an agent of this server, else fetched."""
        local = self.local.card(url) if self.local is not None else None
        if local is not None:
            return local
        async with httpx.AsyncClient(timeout=self.timeout, headers=self.headers_for(url) or None) as http:
            return await fetch_card(http, url)

    async def _connect(self, url: str, owner: str | None = None) -> A2AClient:
        """A client for `url`: in process for an agent of this server (calling as `owner`), else over HTTP."""
        if self.local is not None and owner is not None:
            transport = self.local.transport(url, owner)
            if transport is not None:
                return A2AClient(transport, self.local.card(url))
        headers = await self.call_headers(url, owner)
        client = await A2AClient.connect(url, version=self.version, bindings=self.bindings or None,
                                         headers=headers or None, timeout=httpx.Timeout(self.timeout, read=None))
        if self.credentials.get(normalise_url(url)) and origin(client.transport.url) != origin(url):
            # The card chooses where the calls go: never let it send this agent's credentials elsewhere.
            await client.close()
            raise DelegationError(f"the card of {url_label(url)} ({url}) names an interface at "
                                  f"{origin(client.transport.url)}; its credentials are sent only to {origin(url)}")
        return client


def _detached_context() -> RunContext:
    """A stand-in run for delegations made outside any task (no parent, empty chain)."""
    return RunContext(task_id="", context_id="", message=m.Message(message_id="-", role=m.Role.USER,
                      parts=[m.Part(text="")]), history=[], agent_id="", owner="")


class Delegation:
    """One delegated call: `async for out in delegation` yields the parent's outputs; then read `result`.

    Iterate it once. Wrapping it in `contextlib.aclosing` makes an early exit (the
    parent's generator closed at a yield) cancel the child at once rather than when
    the abandoned generator is collected.
    """

    def __init__(self, delegator: Delegator, ctx: RunContext, target: str, message: MessageLike, *,
                 name: str | None, relay: Relay, finish: bool, waiting: dict[str, Any] | None = None) -> None:
        self.delegator = delegator
        self.ctx = ctx
        self.target = target
        self.message = message
        self.name = name
        self.relay = relay
        self.finish = finish
        self.waiting = waiting  # the checkpointed child, when resuming
        self.result = DelegationResult(url=target, agent=name or url_label(target))
        self.settled = False
        self._collected: dict[str, m.Artifact] = {}
        self._gen: AsyncIterator[AgentOutput] | None = None

    def __aiter__(self) -> AsyncIterator[AgentOutput]:
        if self._gen is None:
            self._gen = self._outputs()
        return self._gen

    async def aclose(self) -> None:
        """Stop early: a child that has not finished is canceled (use with `contextlib.aclosing`)."""
        if self._gen is not None:
            await self._gen.aclose()  # type: ignore[attr-defined]

    # --- the run ---------------------------------------------------------------------------

    async def _outputs(self) -> AsyncIterator[AgentOutput]:
        ctx, res = self.ctx, self.result
        if self.waiting is not None:
            res.task_id = str(self.waiting["taskId"])
            res.context_id = self.waiting.get("contextId")
        try:
            res.url = self.delegator.resolve(self.target)
            if self.waiting is None:
                problem = self.delegator.refusal(ctx, res.url)
                if problem is not None:
                    raise DelegationError(problem)
        except DelegationError as exc:
            self._fail(str(exc))
            for out in self._ending():
                yield out
            return
        if self.waiting is not None:  # the child is known already: keep the link for this turn too
            yield self._link_event()
        client: A2AClient | None = None
        stream: AsyncIterator[m.StreamEvent] | None = None
        try:
            client, stream, first = await self._open(self._child_message())
            verb = "passed the answer to" if self.waiting is not None else "asked"
            yield Status(m.TaskState.WORKING, f"{verb} {res.agent}", metadata=self._meta())
            for out in self._on_event(first):
                yield out
            while not self.settled:
                try:
                    ev = await stream.__anext__()
                except StopAsyncIteration:
                    break
                for out in self._on_event(ev):
                    yield out
            if not self.settled:  # the stream ended early: ask for the task itself
                if res.task_id is None:
                    raise ClientError("the stream ended before the task was created")
                for out in self._on_event(await client.get(res.task_id, history_length=0)):
                    yield out
                if not self.settled:
                    raise ClientError("the stream ended before the task finished")
        except DelegationError as exc:
            self._fail(str(exc))
        except A2AError as exc:
            self._fail(f"{res.agent} ({res.url}) refused the request: {exc.message}")
        except ClientError as exc:
            self._fail(f"lost {res.agent} ({res.url}): {exc}")
        except BaseException:
            # Canceled (or closed) before the child settled: the child must not outlive its parent.
            if not self.settled and res.task_id is not None and client is not None:
                await self._cancel_child(client)
            raise
        finally:
            if stream is not None:
                with contextlib.suppress(Exception):
                    await stream.aclose()  # type: ignore[attr-defined]
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.close()
        for out in self._ending():
            yield out

    async def _open(self, msg: m.Message) -> tuple[A2AClient, AsyncIterator[m.StreamEvent], m.StreamEvent]:
        """Connect and start the stream, retrying while the target cannot be reached."""
        d, res = self.delegator, self.result
        attempts = d.retries + 1
        last: BaseException | None = None
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(d.backoff * 2 ** (attempt - 1))
            client: A2AClient | None = None
            stream: AsyncIterator[m.StreamEvent] | None = None
            try:
                client = await d._connect(res.url, self.ctx.owner or None)
                if self.name is None and client.card is not None and client.card.name:
                    res.agent = client.card.name
                stream = client.stream(msg)
                try:
                    first = await stream.__anext__()
                except StopAsyncIteration:
                    raise ClientError("the stream ended without any event") from None
                return client, stream, first
            except BaseException as exc:
                if stream is not None:
                    with contextlib.suppress(Exception):
                        await stream.aclose()  # type: ignore[attr-defined]
                if client is not None:
                    with contextlib.suppress(Exception):
                        await client.close()
                if not _unreachable(exc):
                    raise
                last = exc
        raise DelegationError(f"could not reach {res.agent} at {res.url} after {attempts} attempt(s): {last}")

    async def _cancel_child(self, client: A2AClient) -> None:
        task_id = self.result.task_id
        assert task_id is not None
        try:
            async with asyncio.timeout(self.delegator.cancel_timeout):
                await asyncio.shield(client.cancel(task_id))
        except (TimeoutError, A2AError, ClientError, httpx.HTTPError) as exc:
            log.info("could not cancel delegated task %s at %s: %s", task_id, self.result.url, exc)

    # --- messages in, outputs out ----------------------------------------------------------

    def _child_message(self) -> m.Message:
        ctx, src = self.ctx, self.message
        if src is None:
            src = ctx.message
        if isinstance(src, m.Message):
            parts, meta = list(src.parts), dict(src.metadata or {})
        elif isinstance(src, str):
            parts, meta = [m.Part(text=src)], {}
        else:
            parts, meta = list(src), {}
        if not parts:
            parts = [m.Part(text="")]
        chain, depth = lineage(ctx)
        if ctx.agent_id:
            chain = [*chain, self.delegator.caller_url(ctx)]
        meta[META_KEY] = {"chain": chain, "depth": depth + 1}
        waiting = self.waiting or {}
        return m.Message(
            message_id=new_id(),
            role=m.Role.USER,
            parts=parts,
            task_id=waiting.get("taskId"),
            context_id=waiting.get("contextId"),
            reference_task_ids=[ctx.task_id] if ctx.task_id else None,
            metadata=meta,
        )

    def _meta(self) -> dict[str, Any]:
        res = self.result
        info = {"agent": res.agent, "url": res.url}
        if res.task_id:
            info["taskId"] = res.task_id
        return {META_KEY: {"delegate": info}}

    def _link_event(self) -> InternalEvent:
        res = self.result
        return self.ctx.internal("delegation", url=res.url, agent=res.agent, taskId=res.task_id,
                                 contextId=res.context_id)

    def _on_event(self, ev: m.StreamEvent) -> list[AgentOutput]:
        """Outputs for one event of the child's stream; notes when the child settles."""
        res = self.result
        outs: list[AgentOutput] = []
        if isinstance(ev, m.Message):  # a direct reply, no task
            res.message, res.state = ev, m.TaskState.COMPLETED
            self.settled = True
            return outs
        task_id, context_id = _ids(ev)
        if res.task_id is None and task_id:
            res.task_id, res.context_id = task_id, context_id
            outs.append(self._link_event())
        if isinstance(ev, m.Task):
            if is_settled(ev.status.state):  # answered at once (or replayed): take the snapshot's artifacts
                for art in ev.artifacts or []:
                    if art.artifact_id not in self._collected:
                        outs.extend(self._artifact(art, append=False, last=True))
                outs.extend(self._status(ev.status))
        elif isinstance(ev, m.TaskArtifactUpdateEvent):
            outs.extend(self._artifact(ev.artifact, append=ev.append, last=ev.last_chunk))
        else:
            outs.extend(self._status(ev.status))
        return outs

    def _status(self, status: m.TaskStatus) -> list[AgentOutput]:
        res = self.result
        if is_settled(status.state):
            res.state, res.message = status.state, status.message
            self.settled = True
            reason = status.message.text() if status.message is not None else ""
            reason = reason or "no reason given"
            if status.state is m.TaskState.FAILED:
                res.error = f"{res.agent} failed: {reason}"
            elif status.state is m.TaskState.REJECTED:
                res.error = f"{res.agent} rejected the request: {reason}"
            elif status.state is m.TaskState.CANCELED:
                res.error = f"{res.agent}'s task was canceled"
            return []
        if status.message is not None and self.delegator.relay_status:
            return [Status(m.TaskState.WORKING, parts=list(status.message.parts), metadata=self._meta())]
        return []

    def _artifact(self, art: m.Artifact, *, append: bool, last: bool) -> list[AgentOutput]:
        seen = self._collected.get(art.artifact_id)
        if append and seen is not None:
            seen.parts.extend(art.parts)
        else:
            self._collected[art.artifact_id] = m.Artifact(artifact_id=art.artifact_id, parts=list(art.parts),
                                                          name=art.name, description=art.description)
            self.result.artifacts = list(self._collected.values())
        if self.relay == "none":
            return []
        if self.relay == "same":
            return [ArtifactChunk(art, append=append, last_chunk=last)]
        res = self.result
        own = str(uuid.uuid5(uuid.NAMESPACE_URL, f"parley:{self.ctx.task_id}/{res.task_id}/{art.artifact_id}"))
        meta = dict(art.metadata or {})
        meta[META_KEY] = {"delegate": {"agent": res.agent, "taskId": res.task_id, "artifactId": art.artifact_id}}
        relayed = m.Artifact(artifact_id=own, parts=list(art.parts), name=art.name, description=art.description,
                             metadata=meta, extensions=art.extensions)
        return [ArtifactChunk(relayed, append=append, last_chunk=last)]

    def _fail(self, reason: str) -> None:
        self.result.state, self.result.error = m.TaskState.FAILED, reason
        self.settled = True

    def _ending(self) -> list[AgentOutput]:
        """The parent's last outputs: the child's question, or (with `finish`) the child's outcome."""
        ctx, res = self.ctx, self.result
        state = res.state
        if state is not None and is_interrupted(state):
            checkpoint = {CHECKPOINT_KEY: {"url": res.url, "agent": res.agent, "taskId": res.task_id,
                                           "contextId": res.context_id}}
            parts = list(res.message.parts) if res.message is not None else [
                m.Part(text=f"{res.agent} needs more input")]
            ask = ctx.ask(res.message.text() if res.message is not None else f"{res.agent} needs more input")
            ask.state, ask.parts, ask.metadata = state, parts, self._meta()
            return [ctx.internal("checkpoint", state=checkpoint), ask]
        if not self.finish:
            return []
        if state is m.TaskState.COMPLETED:
            parts = list(res.message.parts) if res.message is not None else None
            return [Status(m.TaskState.COMPLETED, parts=parts, metadata=self._meta())]
        return [ctx.fail(res.error or f"{res.agent} did not finish")]
