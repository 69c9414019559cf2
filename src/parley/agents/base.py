"""The agent contract: an async generator of A2A events, and what it can see.

An agent is called once per turn (a new task, or a message continuing an
interrupted one) with a :class:`RunContext`, and yields text chunks, status
changes, artifacts and internal observability events. The engine turns them
into the task's log; internal events never reach A2A clients.
"""

from __future__ import annotations

import inspect
import os
import random
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from parley.protocol import models as m


@dataclass(slots=True)
class Status:
    """Move the task to `state`, optionally with an agent message."""

    state: m.TaskState
    text: str | None = None
    parts: list[m.Part] | None = None
    metadata: dict[str, Any] | None = None


@dataclass(slots=True)
class ArtifactChunk:
    """Add an artifact, or a chunk of one (`append`, `last_chunk`)."""

    artifact: m.Artifact
    append: bool = False
    last_chunk: bool = True


@dataclass(slots=True)
class InternalEvent:
    """An observability event (`internal:llm-call`, ...); never sent to clients."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Reply:
    """The agent's answer, complete in one message (`ctx.reply(...)`); the turn ends with it.

    From an agent declared with `replies=True`, a Reply that comes before anything else is the
    whole interaction: the client gets a Message, not a Task (A2A 1.0 section 3.1.1). Otherwise
    it completes the task with this message as its status message.
    """

    parts: list[m.Part]
    metadata: dict[str, Any] | None = None


AgentOutput = str | Status | ArtifactChunk | InternalEvent | m.Artifact | m.Message | Reply


class AgentError(Exception):
    """Raise it to fail the task with this message, which the client sees.

    Any other exception fails the task with a generic message and an error id; its text
    (which may hold paths, queries or secrets) goes only to the server's log.
    """


@dataclass(slots=True)
class RunContext:
    """What an agent sees for one turn of a task."""

    task_id: str
    context_id: str
    message: m.Message
    history: list[m.Message]
    agent_id: str
    owner: str
    metadata: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None  # the agent's last checkpoint, when resuming
    # Earlier tasks of the same contextId (oldest first): their messages, each task's answer
    # (its artifacts' text) as an agent message. Empty for the first task of a context.
    context_history: list[m.Message] = field(default_factory=list)
    delegator: Any = None  # parley.hub.delegation.Delegator of the server, if any
    # The one skill the message selects (metadata "parley.skill", checked against the caller's scopes), or None.
    skill: str | None = None
    # Who sent this turn's message, for an agent that checks again: the caller's principal id and scopes. A run
    # resumed after a restart (or taken over by another replica) has no caller: principal None, no scopes.
    principal: str | None = None
    scopes: frozenset[str] = frozenset()

    def delegate(self, target: str, message: Any = None, **options: Any) -> Any:
        """Hand this turn to another A2A agent (an agent id of this server, a path or a URL).

        Use as `async for out in ctx.delegate("billing"): yield out`; see
        :class:`parley.hub.delegation.Delegator` for what is relayed and the options.
        """
        if self.delegator is None:
            raise RuntimeError("this server has no delegator (serve the agent with parley.Parley)")
        return self.delegator.delegate(self, target, message, **options)

    def resume_delegation(self, message: Any = None, **options: Any) -> Any:
        """Forward the user's answer to the delegated task that asked for it, if any (else None)."""
        if self.delegator is None or self.delegator.pending(self) is None:
            return None
        return self.delegator.resume(self, message, **options)

    @property
    def text(self) -> str:
        """The text of the message that started this turn."""
        return self.message.text()

    @property
    def turn(self) -> int:
        """How many user messages the task has had, this one included."""
        return sum(1 for msg in self.history if msg.role is m.Role.USER)

    def ask(self, question: str) -> Status:
        """Ask the user for more input (`input-required`)."""
        return Status(m.TaskState.INPUT_REQUIRED, question)

    def say(self, text: str) -> Status:
        """A progress message while working."""
        return Status(m.TaskState.WORKING, text)

    def fail(self, reason: str) -> Status:
        """End the task as failed, telling the client why."""
        return Status(m.TaskState.FAILED, reason)

    def reject(self, reason: str) -> Status:
        """Refuse the task."""
        return Status(m.TaskState.REJECTED, reason)

    def reply(self, content: str | list[m.Part], metadata: dict[str, Any] | None = None) -> Reply:
        """Answer in one message and end the turn: a Message result for an agent declared `replies=True` (when
        nothing came before it), else the task completes with it as its status message."""
        parts = [m.Part(text=content)] if isinstance(content, str) else list(content)
        return Reply(parts, metadata)

    def internal(self, kind: str, **data: Any) -> InternalEvent:
        """An internal observability event."""
        return InternalEvent(kind if kind.startswith("internal:") else f"internal:{kind}", data)


class Agent(ABC):
    """An A2A agent: a card's worth of metadata and a `run` generator."""

    id: str
    name: str
    description: str
    skills: list[m.AgentSkill]
    version: str = "1.0.0"
    input_modes: list[str] = ["text/plain"]  # noqa: RUF012 - a default instances replace, never mutate
    output_modes: list[str] = ["text/plain"]  # noqa: RUF012 - a default instances replace, never mutate
    extensions: list[m.AgentExtension] = []  # noqa: RUF012 - a default instances replace, never mutate
    replies: bool = False  # may answer with a Message instead of a Task (ctx.reply first): streams wait for it
    problem: str | None = None  # why the agent cannot work now (a remote agent out of reach); None: available

    @abstractmethod
    def run(self, ctx: RunContext) -> AsyncIterator[AgentOutput]:
        """Yield the turn's outputs; return when done."""

    async def recheck(self) -> bool:
        """Try again what made the agent unavailable (the server calls it in the background while `problem`
        is set); True once it is available."""
        return self.problem is None

    async def check_at_start(self) -> None:
        """Find out, as the server starts, whether the agent can work (an LLM agent asks its model server);
        set `problem` when it cannot. Nothing to check by default."""


class FunctionAgent(Agent):
    """An agent whose `run` is a plain async generator function."""

    def __init__(
        self,
        fn: Callable[[RunContext], AsyncIterator[AgentOutput]],
        *,
        id: str,
        name: str | None = None,
        description: str | None = None,
        skills: list[m.AgentSkill] | None = None,
        version: str = "1.0.0",
        input_modes: list[str] | None = None,
        output_modes: list[str] | None = None,
        replies: bool = False,
    ) -> None:
        if not inspect.isasyncgenfunction(fn):
            raise TypeError(f"agent {id!r}: {fn.__name__} must be an async generator function (async def + yield)")
        self.fn = fn
        self.id = id
        self.name = name or id
        self.description = description or (inspect.getdoc(fn) or f"The {id} agent").strip()
        self.skills = skills or [
            m.AgentSkill(id=id, name=self.name, description=self.description, tags=[id])
        ]
        self.version = version
        self.input_modes = input_modes or ["text/plain"]
        self.output_modes = output_modes or ["text/plain"]
        self.extensions = []
        self.replies = replies

    def run(self, ctx: RunContext) -> AsyncIterator[AgentOutput]:
        return self.fn(ctx)


def new_id() -> str:
    """A fresh identifier: a UUIDv7 (RFC 9562 section 5.7), 74 random bits after a millisecond timestamp.

    Ids made one after another sort together, so the stores' indexes on task ids grow at one end (a
    commit touches the pages concurrent tasks touch too) instead of at a random page each.

    The random bits come from a generator of Parley's own, seeded from the OS at start-up and again in a
    forked child (`os.urandom` per id was a system call per id; ids are names, not secrets: who may see a
    task is decided by its owner). Agents seeding the `random` module do not touch it."""
    value = ((time.time_ns() // 1_000_000) & _MS48) << 80 | _ids.getrandbits(76) & _RANDOM
    h = f"{value | _V7:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_MS48 = (1 << 48) - 1
_V7 = 0x7 << 76 | 0x2 << 62  # version 7, variant 10
_RANDOM = (0xFFF << 64) | ((1 << 62) - 1)  # rand_a (12 bits) and rand_b (62 bits)
_ids = random.Random()  # seeded from os.urandom
os.register_at_fork(after_in_child=_ids.seed)  # a forked worker must not repeat its parent's ids
