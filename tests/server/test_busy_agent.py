"""A busy agent cannot freeze the server.

(a) An agent that yields text in a loop and never awaits, until another request sets a flag: the
    other requests (GET /healthz, GetTask, a SendMessage to the agent that sets the flag) are
    answered while it runs, so the busy task can finish; its streamed chunks join to exactly the
    text it yielded, coalesced into far fewer chunks than outputs.
(b) The built-in echo agent given 2 MiB of text streams it back in about 64 chunks whose join is
    the input, exactly, while small requests to the same server keep being answered.

A2A 1.0 section 3.1.2 (SendStreamingMessage: the task's events, in order, as they happen) and
section 3.5.2 (events delivered in the order they were generated, none lost); what is checked
beyond that is the server's own promise (docs/architecture.md, "Running an agent").
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from accesskit import WAIT, Reader, Server, artifact_texts, connect, is_final, start, task_text
from srvkit import uid

from parley.agents.base import RunContext
from parley.app import Parley
from parley.client import A2AClient
from parley.protocol import models as m
from parley.protocol.operations import Operation
from parley.serve import default_app

S = m.TaskState
SAFETY_SECONDS = 60.0  # the busy agent gives up after this (and says so): a frozen server must not spin forever
ECHO_CHUNK_LIMIT = 70  # the echo agent cuts any text into about 64 chunks (agents/builtin.py)
POLLERS = 4  # concurrent /healthz loops, each on its own connection


class Flags:
    """Thread-safe flags and records shared by the test and the agents on the server's loop."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flags: dict[str, threading.Event] = {}
        self.outputs: dict[str, int] = {}
        self.gave_up: set[str] = set()

    def flag(self, key: str) -> threading.Event:
        with self.lock:
            return self.flags.setdefault(key, threading.Event())


def busy_app(flags: Flags) -> Parley:
    app = Parley()

    @app.agent(id="busy", description="Yields '<n> ' for n = 1, 2, ... without ever awaiting, until flag <text>")
    async def busy(ctx: RunContext):
        key = ctx.text
        flag = flags.flag(key)
        deadline = time.monotonic() + SAFETY_SECONDS
        n = 0
        while not flag.is_set():
            n += 1
            yield f"{n} "
            if n % 4096 == 0 and time.monotonic() > deadline:
                flags.gave_up.add(key)
                break
        with flags.lock:
            flags.outputs[key] = n

    @app.agent(id="release", description="Sets flag <text>")
    async def release(ctx: RunContext):
        flags.flag(ctx.text).set()
        yield f"released {ctx.text}"

    return app


@pytest.fixture(scope="module")
def busy_env() -> Iterator[tuple[Server, Flags]]:
    flags = Flags()
    srv = start(busy_app(flags), grpc=False)
    yield srv, flags
    with flags.lock:
        pending = list(flags.flags.values())
    for f in pending:
        f.set()
    srv.stop()


@pytest.fixture(scope="module")
def echo_server() -> Iterator[Server]:
    srv = start(default_app(None), grpc=False)
    yield srv
    srv.stop()


@pytest.fixture
async def closing() -> AsyncIterator[list[A2AClient]]:
    made: list[A2AClient] = []
    yield made
    for client in made:
        await client.close()


def stream_of(client: A2AClient, text: str) -> Reader:
    msg = m.Message(message_id=uid("m-"), role=m.Role.USER, parts=[m.Part(text=text)])
    return Reader(client.transport.stream(Operation.STREAM, m.SendMessageRequest(message=msg)))


def chunks(reader: Reader) -> list[m.TaskArtifactUpdateEvent]:
    return [ev for ev in reader.events if isinstance(ev, m.TaskArtifactUpdateEvent)]


@pytest.mark.parametrize("binding, version", [("JSONRPC", "1.0"), ("HTTP+JSON", "0.3")], ids=["JSONRPC-1.0",
                                                                                              "HTTP+JSON-0.3"])
async def test_an_agent_that_never_awaits_does_not_freeze_the_server(busy_env, closing, binding, version):
    """Other requests are served while an agent yields without awaiting; the agent that sets the flag
    runs; the busy task completes with exactly its text, coalesced (sections 3.1.2, 3.5.2)."""
    srv, flags = busy_env
    key = uid("busy-")
    busy = await connect(srv, "busy", binding, version)
    closing.append(busy)
    sse = stream_of(busy, key)
    first = await sse.next()
    assert first is not None and isinstance(first.event, m.Task)
    task_id = first.event.id
    while len(chunks(sse)) < 2:  # the agent is in its loop, and its text is streaming
        item = await sse.next()
        assert item is not None and not is_final(item.event), "the busy task ended before it was released"

    async with httpx.AsyncClient(timeout=WAIT) as http:  # other connections, each bounded by WAIT
        health = await http.get(f"{srv.url}/healthz")
        assert health.status_code == 200 and health.json()["running_tasks"] >= 1
    other = await connect(srv, "busy", "JSONRPC", "0.3")
    closing.append(other)
    assert (await other.get(task_id, history_length=0)).status.state is S.WORKING
    releaser = await connect(srv, "release", "JSONRPC", "1.0")
    closing.append(releaser)
    released = await releaser.send(key)
    assert released.status.state is S.COMPLETED and task_text(released) == f"released {key}"

    await sse.rest()
    assert is_final(sse.events[-1]) and sse.events[-1].status.state is S.COMPLETED
    assert key not in flags.gave_up
    n = flags.outputs[key]
    expected = "".join(f"{i} " for i in range(1, n + 1))
    texts = artifact_texts(sse.events)
    assert "".join(texts) == expected
    assert len(texts) * 20 <= n, f"{n} outputs were streamed as {len(texts)} chunks: not coalesced"
    parts = chunks(sse)
    assert len({c.artifact.artifact_id for c in parts}) == 1
    assert [c.last_chunk for c in parts] == [False] * (len(parts) - 1) + [True]
    assert task_text(await other.get(task_id)) == expected


def big_text(size: int) -> str:
    """`size` characters of words (some not ASCII), deterministic."""
    rng = random.Random(20240501)
    words = ["alpha", "beta", "gamma", "délta", "ε", "zeta", "日本語", "x" * 40, "\u2028sep", "tab\tbed", "quote\"d"]
    out: list[str] = []
    total = 0
    while total < size:
        w = rng.choice(words)
        out.append(w)
        total += len(w) + 1
    return " ".join(out)[:size]


@pytest.mark.parametrize("binding, version", [("JSONRPC", "1.0"), ("JSONRPC", "0.3"), ("HTTP+JSON", "1.0")],
                         ids=["JSONRPC-1.0", "JSONRPC-0.3", "HTTP+JSON-1.0"])
async def test_echo_of_two_mebibytes_streams_in_few_chunks_while_small_requests_are_answered(
        echo_server, closing, binding, version):
    """The built-in echo agent streams 2 MiB back in at most ~70 chunks that join to the input exactly,
    and /healthz is answered while the echo task is still running (it reports the running task)."""
    srv = echo_server
    text = big_text(2 * 1024 * 1024)
    echo = await connect(srv, "echo", binding, version)
    closing.append(echo)
    answers: list[int] = []  # running_tasks of each /healthz answered while the echo stream was open
    polling = asyncio.Event()
    echo_done = asyncio.Event()

    async def health() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            while not echo_done.is_set():
                resp = await http.get(f"{srv.url}/healthz")
                assert resp.status_code == 200
                polling.set()
                if not echo_done.is_set():
                    answers.append(resp.json()["running_tasks"])

    pollers = [asyncio.create_task(health()) for _ in range(POLLERS)]
    try:
        async with asyncio.timeout(WAIT):
            await polling.wait()  # small requests are being answered before the echo request goes out
        sse = stream_of(echo, text)
        await sse.rest()
    finally:
        echo_done.set()
    async with asyncio.timeout(WAIT):
        await asyncio.gather(*pollers)

    assert is_final(sse.events[-1]) and sse.events[-1].status.state is S.COMPLETED
    texts = artifact_texts(sse.events)
    assert "".join(texts) == text
    assert 2 <= len(texts) <= ECHO_CHUNK_LIMIT, len(texts)
    assert any(running >= 1 for running in answers), \
        f"no /healthz was answered while the echo task ran ({answers})"
