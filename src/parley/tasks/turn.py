"""One turn of an agent over a task: its outputs become log events (sans-IO).

The agent yields text, status changes, artifacts and internal events; a
:class:`Turn` turns them into the events of the task's log. Text is coalesced: the
text an agent yields between two flushes of the engine (in practice, within one
event-loop turn) becomes one artifact chunk, written at that flush: nothing waits
for the agent's next output, so a client sees "Let me look that up..." while the
agent waits for its tool. One turn's text is one artifact (`response`) however
many working statuses, messages or other artifacts come between its pieces; the
turn's end (an interrupted or terminal state, a reply) closes it, and when its
last piece went out before the end, an empty chunk marks `lastChunk`. Text not yet
written is part of the turn's state (:meth:`Turn.text_state`), which a checkpoint
saves and a resumed run restores, so a restart neither loses nor splits the answer.

No store, no event loop: the engine (:mod:`parley.tasks.engine`) does the I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from parley.agents.base import AgentOutput, ArtifactChunk, InternalEvent, Reply, Status, new_id
from parley.protocol import models as m
from parley.protocol.states import InvalidTransition
from parley.tasks.log import now_iso

REPLY_MARK = "parley.reply"  # in the metadata of a status message that is the whole answer (a Message result)

TEXT_ARTIFACT_NAME = "response"
Event = m.Message | m.TaskStatusUpdateEvent | m.TaskArtifactUpdateEvent


@dataclass(slots=True)
class TextState:
    """Where the turn's text artifact stands: its id, whether chunks went out, and the text not yet written
    (`held`: yielded since the last flush)."""

    artifact_id: str | None = None
    started: bool = False
    held: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form, for checkpoints."""
        return {"artifactId": self.artifact_id, "started": self.started, "held": self.held}

    @classmethod
    def from_json(cls, data: Any) -> TextState:
        """Read `to_json` back; anything malformed gives a fresh state."""
        if not isinstance(data, dict):
            return cls()
        artifact_id = data.get("artifactId")
        held = data.get("held")
        return cls(artifact_id=artifact_id if isinstance(artifact_id, str) else None,
                   started=data.get("started") is True, held=held if isinstance(held, str) else "")


class Turn:
    """Converts one agent run's outputs into task events; holds the text yielded since the last flush."""

    def __init__(self, task_id: str, context_id: str, text: TextState | None = None, *,
                 clock: Callable[[], str] = now_iso, ids: Callable[[], str] = new_id) -> None:
        self.task_id = task_id
        self.context_id = context_id
        self.clock = clock
        self.ids = ids
        state = text or TextState()
        self._artifact_id = state.artifact_id
        self.started = state.started
        self.open: list[str] = [state.held] if state.held else []  # text yielded since the engine last flushed

    @property
    def artifact_id(self) -> str:
        """The id the text artifact has, or the next one will have. Named the first time anyone asks (a chunk,
        a checkpoint), so a checkpoint always says where the turn's text goes: a resumed run writes there."""
        if self._artifact_id is None:
            self._artifact_id = self.ids()
        return self._artifact_id

    # --- text ---------------------------------------------------------------------------------------

    @property
    def has_text(self) -> bool:
        """Whether text is waiting to be written."""
        return bool(self.open)

    def take_text(self) -> list[Event]:
        """At a flush: the text yielded since the last one becomes one chunk, written now. It is not marked
        `lastChunk` (the agent may yield more); :meth:`close_text` marks the end."""
        if not self.open:
            return []
        group, self.open = "".join(self.open), []
        return [self._chunk(group, last=False)]

    def close_text(self) -> list[Event]:
        """The text not yet written as the last chunk; an empty last chunk when every piece went out already;
        nothing when no text artifact is open."""
        pending, self.open = "".join(self.open), []
        if pending or self.started:
            return [self._chunk(pending, last=True)]
        return []

    def text_state(self) -> TextState:
        """The text artifact and the text not yet written, as a checkpoint keeps them."""
        return TextState(self.artifact_id, self.started, "".join(self.open))

    def reset_text(self, parts: list[m.Part]) -> Event:
        """Replace the text artifact with `parts` plus the text not yet written (a resumed run undoes text written after
        its checkpoint, which the agent will produce again)."""
        held, self.open = "".join(self.open), []
        content = [*parts, m.Part(text=held)] if held or not parts else list(parts)
        self.started = True
        return m.TaskArtifactUpdateEvent(
            task_id=self.task_id, context_id=self.context_id,
            artifact=m.Artifact(artifact_id=self.artifact_id, name=TEXT_ARTIFACT_NAME, parts=content),
            append=False, last_chunk=False,
        )

    def _chunk(self, text: str, *, last: bool) -> m.TaskArtifactUpdateEvent:
        part = m.new_text_part()  # m.Part(text=text), once per streamed token
        part.text = text
        ev = m.TaskArtifactUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            artifact=m.Artifact(artifact_id=self.artifact_id, name=TEXT_ARTIFACT_NAME, parts=[part]),
            append=self.started,
            last_chunk=last,
        )
        self.started = True
        if last:  # the next text starts a new artifact
            self._artifact_id = None
            self.started = False
        return ev

    # --- outputs ------------------------------------------------------------------------------------

    def output(self, out: AgentOutput) -> list[Event]:
        """The events for one agent output (text is buffered: none yet); InvalidTransition for junk.

        Text yielded before another output is written first, so the log keeps the agent's order. Only a status
        that ends the turn (interrupted or terminal) or a reply closes the text artifact: a working status, a
        message or another artifact between two pieces of text leaves the answer one artifact."""
        if isinstance(out, str):
            self.open.append(out)
            return []
        if isinstance(out, InternalEvent):
            return []
        if isinstance(out, Status):
            text = self.take_text() if out.state is m.TaskState.WORKING else self.close_text()
            return [*text, self.status(out.state, out.text, out.parts, out.metadata)]
        if isinstance(out, ArtifactChunk):
            return [*self.take_text(), m.TaskArtifactUpdateEvent(
                task_id=self.task_id, context_id=self.context_id, artifact=out.artifact, append=out.append,
                last_chunk=out.last_chunk)]
        if isinstance(out, m.Artifact):
            return [*self.take_text(), m.TaskArtifactUpdateEvent(
                task_id=self.task_id, context_id=self.context_id, artifact=out, last_chunk=True)]
        if isinstance(out, m.Message):
            return [*self.take_text(), self.status(m.TaskState.WORKING, parts=out.parts)]
        if isinstance(out, Reply):
            return [*self.close_text(), self.reply(out)]
        raise InvalidTransition(f"an agent cannot yield {type(out).__name__}")

    def status(self, state: m.TaskState, text: str | None = None, parts: list[m.Part] | None = None,
               metadata: dict[str, Any] | None = None) -> m.TaskStatusUpdateEvent:
        """A status update, with an agent message when there is text or parts."""
        message = None
        if text is not None or parts:
            message = m.Message(message_id=self.ids(), role=m.Role.AGENT, parts=parts or [m.Part(text=text or "")],
                                task_id=self.task_id, context_id=self.context_id)
        return m.TaskStatusUpdateEvent(task_id=self.task_id, context_id=self.context_id,
                                       status=m.TaskStatus(state=state, message=message, timestamp=self.clock()),
                                       metadata=metadata)

    def reply(self, out: Reply, *, as_message: bool = False) -> m.TaskStatusUpdateEvent:
        """`completed`, with the reply as the status message; `as_message`: the interaction is that one message
        (marked with REPLY_MARK in its metadata, so a retry of the request gets the Message again)."""
        metadata = {**(out.metadata or {}), REPLY_MARK: True} if as_message else out.metadata
        message = m.Message(message_id=self.ids(), role=m.Role.AGENT, parts=out.parts, task_id=self.task_id,
                            context_id=self.context_id, metadata=metadata or None)
        return m.TaskStatusUpdateEvent(task_id=self.task_id, context_id=self.context_id,
                                       status=m.TaskStatus(state=m.TaskState.COMPLETED, message=message,
                                                           timestamp=self.clock()))

    # --- endings ------------------------------------------------------------------------------------

    def finish(self) -> list[Event]:
        """The agent returned: the rest of the text, then `completed`."""
        return [*self.close_text(), self.status(m.TaskState.COMPLETED)]

    def fail(self, reason: str) -> list[Event]:
        """The run failed: the text so far, then `failed` with the reason."""
        return [*self.close_text(), self.status(m.TaskState.FAILED, reason)]

    def cancel(self, metadata: dict[str, Any] | None = None) -> list[Event]:
        """The task was canceled: text not yet written is dropped, the task ends `canceled` (which ends its
        artifacts: nothing is written to them after it)."""
        self.open, self.started = [], False
        return [self.status(m.TaskState.CANCELED, metadata=metadata or None)]


def reply_of(status: m.TaskStatus) -> m.Message | None:
    """The Message a task answered with, when the interaction was one reply (see :meth:`Turn.reply`); None
    otherwise. The message is returned as the client sees it: no task id, no marker."""
    message = status.message
    if status.state is not m.TaskState.COMPLETED or message is None or not (message.metadata or {}).get(REPLY_MARK):
        return None
    metadata = {k: v for k, v in message.metadata.items() if k != REPLY_MARK} or None
    return m.Message(message_id=message.message_id, role=message.role, parts=message.parts,
                     context_id=message.context_id, metadata=metadata, extensions=message.extensions,
                     reference_task_ids=message.reference_task_ids)
