"""The Turn (sans-IO): an agent's outputs -> task log events.

Text is coalesced per flush (`take_text`) and written at that flush, never held for the agent's next
output; the end of the turn marks `lastChunk` (an empty closing chunk when every piece went out already).
One turn's text is one artifact whatever comes between its pieces, unless the turn ends. The text
artifact's id (known before any text), whether chunks went out and the text not yet written are what a
checkpoint saves (`text_state`).
"""

from __future__ import annotations

from typing import Any

import pytest

from parley.agents.base import ArtifactChunk, InternalEvent, Status
from parley.protocol import models as m
from parley.protocol.states import InvalidTransition
from parley.tasks.log import apply
from parley.tasks.turn import TEXT_ARTIFACT_NAME, TextState, Turn

S = m.TaskState
NOW = "2025-01-01T00:00:00.000Z"


class Ids:
    """Deterministic ids: id1, id2, ..."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"id{self.n}"


def make(text: TextState | None = None) -> Turn:
    return Turn("t1", "c1", text, clock=lambda: NOW, ids=Ids())


def feed(turn: Turn, *texts: str) -> list[Any]:
    """The agent yields `texts`, then the engine flushes."""
    for t in texts:
        assert turn.output(t) == []
    return turn.take_text()


def chunk(text: str, *, aid: str = "id1", append: bool, last: bool) -> m.TaskArtifactUpdateEvent:
    return m.TaskArtifactUpdateEvent(
        task_id="t1", context_id="c1", append=append, last_chunk=last,
        artifact=m.Artifact(artifact_id=aid, name="response", parts=[m.Part(text=text)]),
    )


def snapshot(events: list[Any]) -> m.Task:
    task = m.Task(id="t1", context_id="c1", status=m.TaskStatus(state=S.WORKING))
    for ev in events:
        task = apply(task, ev)
    return task


def test_the_text_artifact_is_called_response() -> None:
    assert TEXT_ARTIFACT_NAME == "response"  # what clients see as the answer's artifact name


# --- text: buffered until a flush, coalesced per flush, written at once ---------------------------------


def test_text_waits_for_a_flush() -> None:
    turn = make()
    assert turn.has_text is False
    assert turn.take_text() == []  # nothing yielded: nothing to flush
    assert turn.output("Hel") == []
    assert turn.has_text is True


def test_the_first_flush_writes_its_text_at_once() -> None:
    """Issue 25: nothing waits for the agent's next output (the chunk once waited to learn whether it was last)."""
    turn = make()
    assert feed(turn, "Hel", "lo") == [chunk("Hello", append=False, last=False)]
    assert turn.has_text is False
    assert turn.text_state() == TextState("id1", True, "")


def test_each_flush_writes_its_own_text() -> None:
    turn = make()
    events = [*feed(turn, "Hel", "lo"), *feed(turn, " wor", "ld")]
    assert events == [chunk("Hello", append=False, last=False), chunk(" world", append=True, last=False)]
    more = feed(turn, "!")
    assert more == [chunk("!", append=True, last=False)]
    end = turn.close_text()
    assert end == [chunk("", append=True, last=True)]  # every piece went out: an empty chunk marks the end
    assert snapshot([*events, *more, *end]).artifacts == [
        m.Artifact(artifact_id="id1", name="response", parts=[m.Part(text="Hello world!")])]
    assert turn.text_state() == TextState("id2", False, "")  # the next text goes to a new artifact


def test_a_flush_without_new_text_writes_nothing() -> None:
    turn = make()
    feed(turn, "a")
    assert turn.take_text() == []
    assert turn.text_state() == TextState("id1", True, "")


def test_close_writes_the_open_text_as_the_last_chunk() -> None:
    turn = make()
    feed(turn, "a")
    turn.output("b")
    turn.output("c")
    assert turn.close_text() == [chunk("bc", append=True, last=True)]
    assert turn.has_text is False
    assert turn.text_state() == TextState("id2", False, "")


def test_close_with_only_open_text() -> None:
    turn = make()
    turn.output("x")
    assert turn.close_text() == [chunk("x", append=False, last=True)]


def test_close_with_no_text_written_writes_nothing() -> None:
    turn = make()
    assert turn.close_text() == []
    assert turn.text_state() == TextState("id1", False, "")  # still the artifact the first text will go to


def test_after_the_last_chunk_text_starts_a_new_artifact() -> None:
    turn = make()
    turn.output("one")
    assert turn.close_text() == [chunk("one", append=False, last=True)]
    assert feed(turn, "two") == [chunk("two", aid="id2", append=False, last=False)]
    assert turn.close_text() == [chunk("", aid="id2", append=True, last=True)]


# --- text state: what a checkpoint keeps, and a resumed run ------------------------------------------------


def test_text_state_has_the_text_not_yet_written() -> None:
    turn = make()
    turn.output("x")
    turn.output("y")
    assert turn.text_state() == TextState("id1", False, "xy")
    feed(turn, "a")  # "xya" written
    turn.output("c")
    turn.output("d")
    assert turn.text_state() == TextState("id1", True, "cd")


def test_a_restored_turn_goes_on_with_the_same_artifact() -> None:
    """A checkpoint of an earlier release may hold text back (`held`): it is written with the next flush."""
    ids = Ids()
    turn = Turn("t1", "c1", TextState("a7", True, "held"), clock=lambda: NOW, ids=ids)
    assert ids.n == 0  # no new artifact
    assert turn.has_text is True
    assert feed(turn, " more") == [chunk("held more", aid="a7", append=True, last=False)]
    assert turn.close_text() == [chunk("", aid="a7", append=True, last=True)]


def test_a_restored_open_artifact_with_nothing_held_is_closed_with_an_empty_chunk() -> None:
    turn = make(TextState("a7", True, ""))
    assert turn.has_text is False
    assert turn.close_text() == [chunk("", aid="a7", append=True, last=True)]
    assert turn.text_state() == TextState("id1", False, "")


def test_an_artifact_id_without_chunks_written_needs_no_closing() -> None:
    assert make(TextState("a7", False, "")).close_text() == []


def test_a_checkpoint_without_an_artifact_id_gets_a_new_one() -> None:
    turn = make(TextState(None, False, "x"))
    assert turn.text_state() == TextState("id1", False, "x")
    assert turn.close_text() == [chunk("x", append=False, last=True)]


@pytest.mark.parametrize("before", [[], ["Hel", "lo"]], ids=["before-any-text", "before-the-first-chunk"])
def test_a_checkpoint_before_the_first_chunk_knows_the_artifact(before: list[str]) -> None:
    """The text artifact is named before any text is written, so a run resumed from a checkpoint
    taken before its first chunk writes to the same artifact, from its start."""
    turn = make()
    for t in before:
        turn.output(t)
    state = turn.text_state()
    assert state == TextState("id1", False, "".join(before))
    resumed = Turn("t1", "c1", TextState.from_json(state.to_json()), clock=lambda: NOW, ids=lambda: "other")
    assert feed(resumed, " world") == [chunk("".join(before) + " world", append=False, last=False)]
    assert resumed.close_text() == [chunk("", append=True, last=True)]


def test_text_state_json_round_trip() -> None:
    state = TextState("a1", True, "held text")
    data = state.to_json()
    assert data == {"artifactId": "a1", "started": True, "held": "held text"}
    assert TextState.from_json(data) == state
    assert TextState.from_json(TextState().to_json()) == TextState(None, False, "")


@pytest.mark.parametrize(
    "data",
    [None, [], "x", 3, {}, {"artifactId": 5, "started": "yes", "held": 3}, {"started": 1}, {"held": None}],
)
def test_malformed_text_state_gives_a_fresh_one(data: Any) -> None:
    assert TextState.from_json(data) == TextState(None, False, "")


def test_text_state_reads_each_field() -> None:
    assert TextState.from_json({"artifactId": "a1"}) == TextState("a1", False, "")
    assert TextState.from_json({"started": True}) == TextState(None, True, "")
    assert TextState.from_json({"held": "h"}) == TextState(None, False, "h")


# --- reset_text: a resumed run undoes text written after its checkpoint ------------------------------------


def test_reset_text_replaces_the_artifact_with_parts_and_the_text_not_yet_written() -> None:
    turn = make()
    feed(turn, "a")
    turn.output("b")
    turn.output("c")
    ev = turn.reset_text([m.Part(text="x")])
    assert ev == m.TaskArtifactUpdateEvent(
        task_id="t1", context_id="c1", append=False, last_chunk=False,
        artifact=m.Artifact(artifact_id="id1", name="response", parts=[m.Part(text="x"), m.Part(text="bc")]))
    assert turn.has_text is False
    assert turn.text_state() == TextState("id1", True, "")
    # more text goes on appending to the reset artifact
    assert feed(turn, "d") == [chunk("d", append=True, last=False)]
    assert turn.close_text() == [chunk("", append=True, last=True)]


def test_reset_text_with_only_open_text() -> None:
    turn = make()
    turn.output("a")
    turn.output("b")
    assert turn.reset_text([]).artifact.parts == [m.Part(text="ab")]


def test_reset_text_keeps_the_artifact_id_and_adds_no_empty_part() -> None:
    ids = Ids()
    turn = Turn("t1", "c1", TextState("a7", True, ""), clock=lambda: NOW, ids=ids)
    ev = turn.reset_text([m.Part(text="x"), m.Part(data={"k": 1})])
    assert ev.artifact.artifact_id == "a7" and ids.n == 0
    assert ev.artifact.parts == [m.Part(text="x"), m.Part(data={"k": 1})]


def test_reset_text_with_nothing_is_one_empty_text_part_of_a_new_artifact() -> None:
    turn = make()
    ev = turn.reset_text([])
    assert ev.artifact.parts == [m.Part(text="")]
    assert ev.artifact.artifact_id == "id1" and ev.artifact.name == "response"
    assert (ev.append, ev.last_chunk) == (False, False)
    assert turn.text_state() == TextState("id1", True, "")


def test_reset_text_does_not_share_the_callers_list() -> None:
    parts = [m.Part(text="x")]
    ev = make(TextState("a7", True, "")).reset_text(parts)
    parts.append(m.Part(text="later"))
    assert ev.artifact.parts == [m.Part(text="x")]


def test_reset_text_undoes_text_written_after_the_checkpoint() -> None:
    turn = make()
    written = [*feed(turn, "Hello"), *feed(turn, " wrong")]
    assert [e.artifact.parts[0].text for e in written] == ["Hello", " wrong"]
    turn.output(" more")  # yielded, not yet written when the run resumes
    reset = turn.reset_text([m.Part(text="Hello")])  # the checkpoint saw "Hello"
    end = [*feed(turn, " again"), *turn.close_text()]
    task = snapshot([*written, reset, *end])
    assert [p.text for p in task.artifacts[0].parts] == ["Hello", " more again"]  # type: ignore[index]


# --- outputs ---------------------------------------------------------------------------------------------


def test_internal_events_are_not_task_events_and_keep_the_text_open() -> None:
    turn = make()
    turn.output("a")
    assert turn.output(InternalEvent("internal:llm-call", {"n": 1})) == []
    assert turn.text_state() == TextState("id1", False, "a")


def fresh_message_id(turn: Turn, event: m.TaskStatusUpdateEvent, *taken: str) -> str:
    """The id of the event's message: one the turn's id source issued, not an artifact's."""
    assert event.status.message is not None
    mid = event.status.message.message_id
    assert isinstance(mid, str) and mid.startswith("id") and mid not in {*taken, turn.text_state().artifact_id}
    return mid


def test_a_status_that_ends_the_turn_closes_the_text_first() -> None:
    turn = make()
    turn.output("answer")
    events = turn.output(Status(S.INPUT_REQUIRED, "more?", metadata={"k": 1}))
    mid = fresh_message_id(turn, events[1], "id1")
    assert events == [
        chunk("answer", append=False, last=True),
        m.TaskStatusUpdateEvent(
            task_id="t1", context_id="c1", metadata={"k": 1},
            status=m.TaskStatus(state=S.INPUT_REQUIRED, timestamp=NOW, message=m.Message(
                message_id=mid, role=m.Role.AGENT, parts=[m.Part(text="more?")], task_id="t1", context_id="c1"))),
    ]


def test_status_message_from_parts_text_or_none() -> None:
    turn = make()
    parts = [m.Part(text="see"), m.Part(data={"k": 1})]
    (ev,) = turn.output(Status(S.WORKING, parts=parts))
    assert ev.status.message is not None and ev.status.message.parts == parts
    (ev,) = turn.output(Status(S.WORKING, text="ignored?", parts=parts))
    assert ev.status.message is not None and ev.status.message.parts == parts  # parts win over text
    (ev,) = turn.output(Status(S.WORKING))
    assert ev.status.message is None and ev.metadata is None
    (ev,) = turn.output(Status(S.WORKING, text=""))
    assert ev.status.message is not None and ev.status.message.parts == [m.Part(text="")]
    (ev,) = turn.output(Status(S.WORKING, parts=[]))
    assert ev.status.message is None


@pytest.mark.parametrize("state", [S.INPUT_REQUIRED, S.AUTH_REQUIRED, S.COMPLETED, S.FAILED, S.REJECTED])
def test_a_status_that_ends_the_turn_after_written_text_closes_it_with_an_empty_chunk(state: m.TaskState) -> None:
    turn = make()
    feed(turn, "answer")
    events = turn.output(Status(state, "why"))
    assert events[0] == chunk("", append=True, last=True)
    assert events[1].status.state is state and len(events) == 2


def test_a_working_status_between_two_pieces_of_text_leaves_one_artifact() -> None:
    """Issue 26: `yield "a"; yield ctx.say("..."); yield "b"` is one answer, one artifact, in the agent's order."""
    turn = make()
    turn.output("a")
    said = turn.output(Status(S.WORKING, "looking it up"))
    assert said[0] == chunk("a", append=False, last=False)  # the text first: the log keeps the agent's order
    assert said[1].status.state is S.WORKING and len(said) == 2
    turn.output("b")
    events = [*said, *turn.finish()]
    task = snapshot(events)
    assert [(a.artifact_id, a.name, a.parts) for a in task.artifacts or []] == [
        ("id1", "response", [m.Part(text="ab")])]
    assert [e.last_chunk for e in events if isinstance(e, m.TaskArtifactUpdateEvent)] == [False, True]


def test_an_artifact_chunk_keeps_its_flags_after_the_text() -> None:
    turn = make()
    turn.output("a")
    art = m.Artifact(artifact_id="f1", parts=[m.Part(data={"x": 1})], name="data")
    events = turn.output(ArtifactChunk(art, append=True, last_chunk=False))
    assert events == [
        chunk("a", append=False, last=False),
        m.TaskArtifactUpdateEvent(task_id="t1", context_id="c1", artifact=art, append=True, last_chunk=False),
    ]
    (ev,) = turn.output(ArtifactChunk(art))
    assert (ev.append, ev.last_chunk) == (False, True)


def test_a_whole_artifact_is_its_own_last_chunk_after_the_text() -> None:
    turn = make()
    art = m.Artifact(artifact_id="f1", parts=[m.Part(text="file")])
    assert turn.output(art) == [
        m.TaskArtifactUpdateEvent(task_id="t1", context_id="c1", artifact=art, append=False, last_chunk=True)]
    turn.output("text")
    assert turn.output(art) == [
        chunk("text", append=False, last=False),  # the text answer goes on after the other artifact
        m.TaskArtifactUpdateEvent(task_id="t1", context_id="c1", artifact=art, append=False, last_chunk=True)]
    turn.output(" more")
    assert turn.finish()[0] == chunk(" more", append=True, last=True)


def test_a_message_is_a_working_status_with_its_parts() -> None:
    turn = make()
    turn.output("a")
    out = m.Message(message_id="agent-msg", role=m.Role.AGENT, parts=[m.Part(text="progress")])
    events = turn.output(out)
    assert events[0] == chunk("a", append=False, last=False)
    mid = fresh_message_id(turn, events[1], "id1", "agent-msg")
    assert events[1] == m.TaskStatusUpdateEvent(
        task_id="t1", context_id="c1",
        status=m.TaskStatus(state=S.WORKING, timestamp=NOW, message=m.Message(
            message_id=mid, role=m.Role.AGENT, parts=[m.Part(text="progress")], task_id="t1", context_id="c1")))


@pytest.mark.parametrize("junk", [42, None, {"text": "x"}, m.Part(text="x")])
def test_anything_else_is_refused(junk: Any) -> None:
    with pytest.raises(InvalidTransition, match=type(junk).__name__):
        make().output(junk)


# --- endings ---------------------------------------------------------------------------------------------


def test_finish_writes_the_rest_then_completed() -> None:
    turn = make()
    feed(turn, "a")
    turn.output("b")
    assert turn.finish() == [
        chunk("b", append=True, last=True),
        m.TaskStatusUpdateEvent(task_id="t1", context_id="c1", status=m.TaskStatus(state=S.COMPLETED, timestamp=NOW)),
    ]
    assert make().finish() == [
        m.TaskStatusUpdateEvent(task_id="t1", context_id="c1", status=m.TaskStatus(state=S.COMPLETED, timestamp=NOW))]


def test_fail_writes_the_text_so_far_then_failed_with_the_reason() -> None:
    turn = make()
    feed(turn, "partial")
    events = turn.fail("model unreachable")
    assert events[0] == chunk("", append=True, last=True)
    assert events[1].status.state is S.FAILED and events[1].status.timestamp == NOW
    assert events[1].status.message is not None and events[1].status.message.text() == "model unreachable"
    assert events[1].status.message.role is m.Role.AGENT
    assert len(events) == 2


def test_cancel_drops_the_text_not_yet_written() -> None:
    turn = make()
    feed(turn, "a")
    turn.output("b")
    assert turn.cancel({"reason": "user"}) == [m.TaskStatusUpdateEvent(
        task_id="t1", context_id="c1", metadata={"reason": "user"},
        status=m.TaskStatus(state=S.CANCELED, timestamp=NOW))]
    assert turn.has_text is False
    assert turn.text_state().held == ""
    assert turn.close_text() == []


def test_cancel_without_metadata() -> None:
    assert make().cancel() == make().cancel({}) == [m.TaskStatusUpdateEvent(
        task_id="t1", context_id="c1", status=m.TaskStatus(state=S.CANCELED, timestamp=NOW))]


def test_a_whole_run_folds_into_the_answer() -> None:
    """What a client sees: one text artifact, chunked per flush, exactly one chunk marked last, a working
    status in the middle included."""
    turn = make()
    events: list[Any] = []
    for flush in (["The ", "answer"], [" is"], [" 42", "."]):
        events += feed(turn, *flush)
    events += turn.output(Status(S.WORKING, "checking"))
    events += feed(turn, " Sure.")
    events += turn.finish()
    texts = [e for e in events if isinstance(e, m.TaskArtifactUpdateEvent)]
    assert [(e.artifact.parts[0].text, e.append, e.last_chunk) for e in texts] == [
        ("The answer", False, False), (" is", True, False), (" 42.", True, False), (" Sure.", True, False),
        ("", True, True)]
    assert {e.artifact.artifact_id for e in texts} == {"id1"}
    task = snapshot(events)
    assert [(a.artifact_id, a.parts) for a in task.artifacts or []] == [
        ("id1", [m.Part(text="The answer is 42. Sure.")])]
    assert task.status.state is S.COMPLETED
    assert [h.text() for h in task.history or []] == ["checking"]


# --- replies (ctx.reply): a completed status whose message is the answer; as a Message result (A2A 1.0 §3.1.1) --


def test_a_reply_closes_the_text_then_completes_with_the_reply_as_status_message() -> None:
    from parley.agents.base import Reply

    turn = make()
    assert turn.output("thinking") == []
    events = turn.output(Reply([m.Part(text="42")], {"k": 1}))
    assert events == [
        chunk("thinking", aid="id1", append=False, last=True),
        m.TaskStatusUpdateEvent(task_id="t1", context_id="c1", status=m.TaskStatus(
            state=S.COMPLETED, timestamp=NOW,
            message=m.Message(message_id="id2", role=m.Role.AGENT, parts=[m.Part(text="42")], task_id="t1",
                              context_id="c1", metadata={"k": 1}))),
    ]


def test_a_reply_as_the_whole_answer_is_marked_and_read_back_as_the_clients_message() -> None:
    from parley.agents.base import Reply
    from parley.tasks.turn import REPLY_MARK, reply_of

    assert REPLY_MARK == "parley.reply"  # stored in task logs: changing it would lose old replies
    turn = make()
    plain = turn.reply(Reply([m.Part(text="hi")]))
    assert plain.status.message.metadata is None and reply_of(plain.status) is None  # a task's answer
    event = turn.reply(Reply([m.Part(text="hi")], {"mood": "ok"}), as_message=True)
    assert event.status.state is S.COMPLETED
    assert event.status.message.metadata == {"mood": "ok", "parley.reply": True}
    assert reply_of(event.status) == m.Message(message_id="id2", role=m.Role.AGENT, parts=[m.Part(text="hi")],
                                               context_id="c1", metadata={"mood": "ok"})
    bare = turn.reply(Reply([m.Part(text="x")]), as_message=True)
    assert bare.status.message.metadata == {"parley.reply": True}
    assert reply_of(bare.status).metadata is None  # nothing of the agent's: no metadata, not an empty one
    failed = m.TaskStatus(state=S.FAILED, message=event.status.message)
    assert reply_of(failed) is None  # only a completed task answered with a reply
    assert reply_of(m.TaskStatus(state=S.COMPLETED)) is None


def test_reply_of_keeps_the_messages_extensions_and_references() -> None:
    from parley.tasks.turn import REPLY_MARK, reply_of

    message = m.Message(message_id="r1", role=m.Role.AGENT, parts=[m.Part(text="x")], task_id="t1", context_id="c1",
                        metadata={REPLY_MARK: True}, extensions=["urn:e"], reference_task_ids=["t0"])
    assert reply_of(m.TaskStatus(state=S.COMPLETED, message=message)) == m.Message(
        message_id="r1", role=m.Role.AGENT, parts=[m.Part(text="x")], context_id="c1", extensions=["urn:e"],
        reference_task_ids=["t0"])


def test_an_empty_reply_metadata_is_no_metadata() -> None:
    from parley.agents.base import Reply

    assert make().reply(Reply([m.Part(text="x")], {})).status.message.metadata is None
