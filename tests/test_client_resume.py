"""The client resumes a dropped stream from the last event id it saw, losing and repeating nothing."""

import asyncio
import threading

from parley.app import Parley
from parley.client import A2AClient
from parley.protocol import models as m


class CuttingProxy:
    """A TCP proxy on 127.0.0.1 whose open connections the test can cut at will."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.base_events.Server | None = None
        self.connections = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self.writers += [client_w, up_w]
        try:
            await asyncio.gather(self._pipe(client_r, up_w), self._pipe(up_r, client_w))
        except asyncio.CancelledError:
            pass

    def cut(self) -> None:
        for w in self.writers:
            w.transport.abort()
        self.writers.clear()

    async def close(self) -> None:
        self.cut()
        assert self.server is not None
        self.server.close()


def gated_app(gate: threading.Event) -> Parley:
    app = Parley()

    @app.agent(id="gated")
    async def gated(ctx):
        yield ctx.say("started")
        await asyncio.to_thread(gate.wait, 30)
        yield "after the cut"
        yield ctx.say("almost done")

    return app


async def test_stream_resumes_after_the_connection_drops(serve):
    gate = threading.Event()
    srv = serve(gated_app(gate))
    proxy = CuttingProxy(srv.port)
    port = await proxy.start()
    events = []
    try:
        async with await A2AClient.connect(f"http://127.0.0.1:{port}/a2a/gated") as client:
            async for ev in client.stream("go"):
                events.append(ev)
                if isinstance(ev, m.TaskStatusUpdateEvent) and ev.status.message is not None \
                        and ev.status.message.parts[0].text == "started":
                    proxy.cut()   # the connection dies mid-stream ...
                    gate.set()    # ... while the agent goes on
    finally:
        gate.set()
        await proxy.close()

    kinds = [type(e).__name__ for e in events]
    assert kinds[0] == "Task"
    texts = [p.text for e in events if isinstance(e, m.TaskArtifactUpdateEvent) for p in e.artifact.parts]
    assert texts == ["after the cut", ""]  # the answer, then the empty chunk that marks its end (lastChunk)
    states = [e.status.state for e in events if isinstance(e, m.TaskStatusUpdateEvent)]
    assert states == [m.TaskState.WORKING, m.TaskState.WORKING, m.TaskState.WORKING, m.TaskState.COMPLETED]
    assert proxy.connections >= 2  # the cut connection, then the resubscription
