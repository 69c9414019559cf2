"""The task table's previews (parley.web.preview): the first words of what a task was asked and answered."""

from __future__ import annotations

from parley.protocol import models as m
from parley.web.preview import answered, asked, first_words


def message(role: m.Role, text: str) -> m.Message:
    return m.Message(message_id="m", role=role, parts=[m.Part(text=text)])


def test_a_long_text_is_cut_to_its_first_words_and_marked() -> None:
    """Twelve words at most, a hundred characters at most, and "…" says that something was cut."""
    assert first_words("one two three") == "one two three"
    assert first_words(" ".join(str(i) for i in range(20))) == "0 1 2 3 4 5 6 7 8 9 10 11…"
    assert first_words("x" * 300) == "x" * 100 + "…"


def test_the_question_is_the_first_user_message_and_the_answer_the_artifacts_or_the_status() -> None:
    """Asked: the first user message with text. Answered: the artifacts' text; without any, the agent's status
    message (an input-required question)."""
    status = m.TaskStatus(state=m.TaskState.INPUT_REQUIRED, message=message(m.Role.AGENT, "What is your name?"))
    task = m.Task(id="t", context_id="c", status=status,
                  history=[message(m.Role.AGENT, "hello"), message(m.Role.USER, "Book a table for two")])
    assert asked(task) == "Book a table for two"
    assert answered(task) == "What is your name?"
    done = m.Task(id="t", context_id="c", status=m.TaskStatus(state=m.TaskState.COMPLETED),
                  artifacts=[m.Artifact(artifact_id="a", parts=[m.Part(text="**Done**: table booked")])])
    assert asked(done) == "" and answered(done) == "**Done**: table booked"
