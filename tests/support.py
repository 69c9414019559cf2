"""Test support shared by every test folder: live Parley servers on 127.0.0.1, JSON-RPC helper.

Import it as `from support import ...` (a unique module name: several folders have a conftest)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn

from parley.app import Parley


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """A uvicorn server running a Parley app in a background thread."""

    def __init__(self, app: Parley, port: int | None = None, *, self_url: bool = False) -> None:
        self.parley = app
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        if self_url and app.settings.self_url is None:  # agents that delegate in-process reach the server here
            app.settings.self_url = self.url
        config = uvicorn.Config(app.asgi(), host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the Parley test server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


@contextmanager
def running(app: Parley, port: int | None = None) -> Iterator[LiveServer]:
    """Run `app` on 127.0.0.1 for the duration of the block."""
    srv = LiveServer(app, port).start()
    try:
        yield srv
    finally:
        srv.stop()


def rpc(url: str, method: str, params: dict | None = None, *, version: str | None = None, rid: int | str = 1,
        timeout: float = 30) -> httpx.Response:
    """POST one JSON-RPC request (sync helper for tests)."""
    headers = {"A2A-Version": version} if version else {}
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}
    return httpx.post(url, json=body, headers=headers, timeout=timeout)


__all__ = ["LiveServer", "free_port", "rpc", "running"]
