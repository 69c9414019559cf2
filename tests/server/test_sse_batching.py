"""SSE frames that are ready together go out in one write, and no frame waits for the next one
(issue 25: a stream made one socket write per event, ~9 per echo stream; instant delivery stays)."""

from __future__ import annotations

import asyncio

from parley.server.http import EventStreamResponse
from parley.server.ready import ReadyItems


def test_ready_frames_are_written_together_and_none_waits_for_the_next() -> None:
    """Frames a and b are ready together: one body message; c comes only after the client has a and b (the
    source waits for that), so a frame is never held back for the next; the last frame ends the response."""

    async def run() -> list[dict]:
        seen_ab = asyncio.Event()
        closed = []

        async def frames():
            try:
                yield b"a"
                yield b"b"
                await seen_ab.wait()
                yield b"c"
            finally:
                closed.append(True)

        sent: list[dict] = []
        disconnect = asyncio.Event()

        async def receive() -> dict:
            await disconnect.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            sent.append(message)
            if message.get("body") == b"ab":
                seen_ab.set()

        scope = {"type": "http", "method": "POST", "headers": []}
        await asyncio.wait_for(EventStreamResponse(frames())(scope, receive, send), 10)
        assert closed == [True]
        return sent

    sent = asyncio.run(run())
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body", "http.response.body"]
    assert (sent[1]["body"], sent[1]["more_body"]) == (b"ab", True)
    assert (sent[2]["body"], sent[2]["more_body"]) == (b"c", False)


def test_a_waiting_step_is_ended_by_abandon_so_the_iterator_closes() -> None:
    """A client that leaves while the writer holds a suspended step: the source's cleanup runs, once."""

    async def run() -> list[str]:
        log: list[str] = []

        async def items():
            try:
                yield 1
                await asyncio.Event().wait()  # never set
                yield 2
            finally:
                log.append("closed")

        source = items()
        ready = ReadyItems(source)
        assert ready.poll() == (True, 1)
        assert ready.poll() == (False, None)
        ready.abandon()
        await source.aclose()
        return log

    assert asyncio.run(run()) == ["closed"]
