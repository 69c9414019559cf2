"""The built-in agents of `parley serve`: echo (the default) and interviewer."""

from __future__ import annotations

from collections.abc import AsyncIterator

from parley.agents.base import AgentOutput, ArtifactChunk, FunctionAgent, RunContext, new_id
from parley.protocol import models as m

MIN_CHUNK = 16  # characters; longer texts get longer chunks:
MAX_CHUNKS = 64  # a text of any size streams back in about this many chunks at most


def chunks_of(text: str) -> list[str]:
    """`text` cut into pieces of about max(MIN_CHUNK, len/MAX_CHUNKS) characters, at spaces where possible."""
    size = max(MIN_CHUNK, -(-len(text) // MAX_CHUNKS))
    if len(text) <= size:
        return [text]
    out, i = [], 0
    while i < len(text):
        end = min(i + size, len(text))
        if end < len(text):
            cut = text.rfind(" ", i + 1, end + 1)  # the space starts the next piece, as in " world"
            if cut > i:
                end = cut
        out.append(text[i:end])
        i = end
    return out


async def echo(ctx: RunContext) -> AsyncIterator[AgentOutput]:
    """Echoes your message back, streamed in chunks as artifact updates."""
    text = ctx.text or "(your message had no text)"
    pieces = chunks_of(text)
    artifact_id = new_id()
    for i, piece in enumerate(pieces):
        # Chunks of its own making (plain text yielded in one go would be coalesced into one chunk).
        yield ArtifactChunk(m.Artifact(artifact_id=artifact_id, name="response", parts=[m.Part(text=piece)]),
                            append=i > 0, last_chunk=i == len(pieces) - 1)


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
