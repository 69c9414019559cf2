"""The first words of what a task was asked and what it answered, for the dashboard's task table (a row says
what the task is about without opening it)."""

from __future__ import annotations

from parley.protocol import models as m

WORDS = 12  # at most this many words of each
CHARS = 100  # and at most this many characters (one long "word" stays short)


def first_words(text: str, words: int = WORDS, chars: int = CHARS) -> str:
    """`text` cut to its first `words` words and `chars` characters, with "…" when something was cut."""
    parts = text.split()
    short = " ".join(parts[:words])
    cut = len(parts) > words
    if len(short) > chars:
        short, cut = short[:chars].rstrip(), True
    return short + ("…" if cut else "")


def _text(parts: list[m.Part] | None) -> str:
    return " ".join(p.text for p in parts or [] if p.text is not None)


def asked(task: m.Task) -> str:
    """The first words of the task's first user message ("" when it has none with text)."""
    for message in task.history or []:
        if message.role is m.Role.USER and _text(message.parts).strip():
            return first_words(_text(message.parts))
    return ""


def answered(task: m.Task) -> str:
    """The first words of its artifacts, else of the agent's status message (a question, an error), else ""."""
    text = " ".join(_text(a.parts) for a in task.artifacts or [])
    if not text.strip() and task.status.message is not None:
        text = _text(task.status.message.parts)
    return first_words(text) if text.strip() else ""


__all__ = ["answered", "asked", "first_words"]
