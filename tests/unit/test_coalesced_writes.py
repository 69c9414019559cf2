"""parley.coalesced_writes over a real TCP connection on 127.0.0.1: what a connection's writes of one loop turn
become, and that nothing is lost or reordered when the connection closes.

The real transport's `write` is wrapped to record what reaches it (asyncio's own selector transport, a
Python object); the client is a plain socket reading what the kernel delivers.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable

import pytest

from parley.coalesced_writes import CoalescedWrites

WAIT = 10.0  # failure detector only


class Server(asyncio.Protocol):
    """Accepts one connection and hands its wrapped transport to the test."""

    def __init__(self, ready: asyncio.Future) -> None:
        self.ready = ready

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        real: asyncio.Transport = transport  # type: ignore[assignment]
        written: list[bytes] = []
        write = real.write

        def recording(data: bytes) -> None:
            written.append(bytes(data))
            write(data)

        real.write = recording  # type: ignore[method-assign]
        self.ready.set_result((CoalescedWrites(real, asyncio.get_running_loop()), written))


@pytest.fixture
async def connection() -> AsyncIterator[tuple[CoalescedWrites, list[bytes], socket.socket]]:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future = loop.create_future()
    server = await loop.create_server(lambda: Server(ready), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    client.settimeout(WAIT)
    try:
        async with asyncio.timeout(WAIT):
            wrapped, written = await ready
        yield wrapped, written, client
    finally:
        client.close()
        server.close()
        await server.wait_closed()


async def read_until(client: socket.socket, done: Callable[[bytes], bool]) -> bytes:
    got = b""
    while not done(got):
        chunk = await asyncio.to_thread(client.recv, 65536)
        if not chunk:
            break
        got += chunk
    return got


async def test_the_writes_of_one_loop_turn_reach_the_socket_as_one(connection) -> None:
    """A response's head and body, and frames written together, are one write of the real transport (one
    system call, one segment); a write in a later turn is a write of its own; the client reads them all, in
    order."""
    wrapped, written, client = connection
    wrapped.write(b"HTTP/1.1 200 OK\r\n\r\n")
    wrapped.write(b"data: 1\n\n")
    wrapped.write(b"")  # nothing: not a write
    wrapped.write(b"data: 2\n\n")
    assert written == []  # not yet: the rest of this turn may write more
    await asyncio.sleep(0)
    assert written == [b"HTTP/1.1 200 OK\r\n\r\ndata: 1\n\ndata: 2\n\n"]
    wrapped.write(b"data: 3\n\n")
    await asyncio.sleep(0)
    assert written[1:] == [b"data: 3\n\n"]
    wrapped.write(b"data: 4\n\n")
    wrapped.flush()  # at once, not at the next turn
    assert written[2:] == [b"data: 4\n\n"]
    await asyncio.sleep(0)
    assert len(written) == 3  # the turn's callback found nothing left to write
    got = await read_until(client, lambda b: b.endswith(b"data: 4\n\n"))
    assert got == b"HTTP/1.1 200 OK\r\n\r\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n"


async def test_close_writes_what_is_pending_first(connection) -> None:
    """uvicorn closes a `Connection: close` response's connection right after writing its body, in the same
    turn: the body still reaches the client, then the end of the stream."""
    wrapped, written, client = connection
    wrapped.writelines([b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", b"bye"])
    wrapped.close()
    assert wrapped.is_closing()
    got = await read_until(client, lambda b: False)  # to the end of the stream
    assert got == b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbye"
    assert written == [got]


async def test_abort_drops_what_is_pending(connection) -> None:
    """An aborted connection (a stalled reader, a slowloris client) frees its buffers at once: what was
    written in that turn is not sent."""
    wrapped, written, client = connection
    wrapped.write(b"never sent")
    assert wrapped.get_write_buffer_size() == len(b"never sent")
    wrapped.abort()
    await asyncio.sleep(0)
    assert written == []
    try:
        got = await read_until(client, lambda b: False)
    except ConnectionResetError:  # the usual report of an aborted connection; an end of stream is the other
        got = b""
    assert got == b""


async def test_parley_s_http_protocol_sends_a_response_in_one_write() -> None:
    """`parley serve`'s protocol (guarded_http) writes through CoalescedWrites: a real request to a real
    uvicorn protocol on 127.0.0.1 is answered with its head and body in one write of the socket's transport,
    made as soon as the response is complete (the app sees it written when its last send returns), not a loop
    turn later."""
    import uvicorn
    from uvicorn.server import ServerState

    from parley.guarded_http import guarded_protocol

    writes_when_sent: list[int] = []

    async def app(scope, receive, send) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]})
        await send({"type": "http.response.body", "body": b"hello"})
        writes_when_sent.append(len(written))

    config = uvicorn.Config(app, lifespan="off", log_level="warning")
    config.load()
    loop = asyncio.get_running_loop()
    protocol_class = guarded_protocol(10.0, 60.0)
    written: list[bytes] = []

    def protocol() -> asyncio.Protocol:
        p = protocol_class(config=config, server_state=ServerState(), app_state={})
        made = p.connection_made

        def connection_made(transport: asyncio.Transport) -> None:
            write = transport.write
            transport.write = lambda data: (written.append(bytes(data)), write(data))[1]  # type: ignore[method-assign]
            made(transport)

        p.connection_made = connection_made  # type: ignore[method-assign]
        return p

    server = await loop.create_server(protocol, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    client.settimeout(WAIT)
    try:
        client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        got = await read_until(client, lambda b: b.endswith(b"hello"))
        assert got.startswith(b"HTTP/1.1 200 OK\r\n") and got.endswith(b"\r\n\r\nhello")
        assert written == [got], written  # one write: head and body together
        assert writes_when_sent == [1]
    finally:
        client.close()
        server.close()
        await server.wait_closed()
