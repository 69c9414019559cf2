"""The built-in agents of `parley serve`: echo (the default) and interviewer."""

from __future__ import annotations

from collections.abc import AsyncIterator

from parley.agents.base import AgentOutput, FunctionAgent, RunContext
from parley.protocol import models as m

CHUNK_WORDS = 3


async def echo(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Echoes your message back, streamed in chunks as artifact updates."""
    text = ctx.text or "(your message had no text)"
    words = text.split(" ")
    for i in range(0, len(words), CHUNK_WORDS):
        chunk = " ".join(words[i : i + CHUNK_WORDS])
        yield chunk if i == 0 else " " + chunk


async def interviewer(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Asks one follow-up question (input-required), then answers using both replies."""
    user_turns = [msg.text() for msg in ctx.history if msg.role is m.Role.USER]
    if len(user_turns) == 1:
        yield ctx.ask(f"You said {user_turns[0]!r}. Why does that matter to you?")
        return
    yield f"Thank you. You said {user_turns[0]!r}, and it matters because {user_turns[-1]!r}."


def builtin_agents() -> list[FunctionAgent]:
    """Fresh instances of the built-in agents, the default (echo) first."""
    return [
        FunctionAgent(
            echo,
            id="echo",
            name="Echo",
            skills=[
                m.AgentSkill(
                    id="echo",
                    name="Echo",
                    description="Repeats the text it receives, streamed in chunks.",
                    tags=["echo", "test"],
                    examples=["hello world"],
                )
            ],
        ),
        FunctionAgent(
            interviewer,
            id="interviewer",
            name="Interviewer",
            skills=[
                m.AgentSkill(
                    id="interview",
                    name="Interview",
                    description="Asks a follow-up question before answering (multi-turn, input-required).",
                    tags=["multi-turn", "test"],
                    examples=["I want to learn Rust"],
                )
            ],
        ),
    ]
