"""Test support shared by every test folder: live Parley servers on 127.0.0.1, JSON-RPC helper,
and the guard of tests that need an optional extra (:func:`require`, :func:`needs`).

Import it as `from support import ...` (a unique module name: several folders have a conftest)."""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import NoReturn

import httpx
import pytest
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


def wait_until_ready(proc: subprocess.Popen, base_url: str, timeout: float = 30, *,
                     output: Callable[[], str] | None = None) -> None:
    """Poll `base_url`/readyz until it answers 200; fail with the process's output if it exits or the deadline
    passes (a starting process is polled: there is nothing to wait on instead)."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}) before it was ready:\n"
                               f"{output() if output else ''}")
        try:
            if httpx.get(f"{base_url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server was not ready after {timeout} s:\n{output() if output else ''}")
        time.sleep(0.05)


def rpc(url: str, method: str, params: dict | None = None, *, version: str | None = None, rid: int | str = 1,
        timeout: float = 30) -> httpx.Response:
    """POST one JSON-RPC request (sync helper for tests)."""
    headers = {"A2A-Version": version} if version else {}
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}
    return httpx.post(url, json=body, headers=headers, timeout=timeout)


def raw_exchange(port: int, head: str, body: bytes = b"", *, timeout: float = 10) -> bytes:
    """Send `head` (request line and headers, CRLF-separated, without the blank line) and `body` to 127.0.0.1:`port`
    over a raw socket, then read until the server closes the connection (or `timeout`, a safety net: a server that
    waits for more of the body than was sent never answers, and the caller sees what arrived, maybe nothing).

    For what httpx cannot do: a request that declares more body than it sends."""
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.encode("latin-1") + b"\r\n\r\n" + body)
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return answer


def secured_app(admin_env: str = "PARLEY_TEST_ADMIN_KEY") -> tuple[Parley, str]:
    """The built-in agents on an in-memory store, secured by an admin key in the environment variable `admin_env`
    (set here, to a fresh random key): (the app, the key)."""
    import secrets

    from parley.serve import default_app
    from parley.settings import AuthSettings, Settings

    key = "admin-" + secrets.token_urlsafe(24)
    os.environ[admin_env] = key
    return default_app(None, settings=Settings(db="memory", auth=AuthSettings(admin_key_env=admin_env))), key


# --- optional extras ---------------------------------------------------------------------------------------------
#
# The gRPC, MCP and OpenTelemetry tests need modules of optional extras (all installed by the dev extra). Without
# them a developer's run skips those tests, with the reason; the CI (CI=true) installs the dev extra, so there a
# missing module is a broken install and the tests that need it FAIL instead of skipping silently.


def in_ci() -> bool:
    """Whether this run is the CI's (the environment variable CI is "true"): a missing extra fails there."""
    return os.environ.get("CI", "").strip().lower() == "true"


def missing_extra(module: str, extra: str, error: BaseException | str) -> NoReturn:
    """`module` (of the parley-a2a[`extra`] extra) cannot be imported: fail under CI=true, skip otherwise.

    Callable at module level (it skips the whole module), in a fixture or in a test."""
    __tracebackhide__ = True  # reported at the caller's line
    message = f"{module} cannot be imported ({error}): these tests need the parley-a2a[{extra}] extra"
    if in_ci():
        pytest.fail(f"CI=true and {message}, which the dev extra installs: `pip install -e '.[dev]'` must have "
                    "failed", pytrace=False)
    pytest.skip(f"{message} (set CI=true to make this a failure)", allow_module_level=True)


def require(module: str, extra: str) -> ModuleType:
    """Import `module`, which the parley-a2a[`extra`] extra installs: without it the calling test (or module, at
    module level) is skipped, or fails under CI=true. Use this instead of `pytest.importorskip`."""
    __tracebackhide__ = True
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing_extra(module, extra, exc)


def available(module: str) -> bool:
    """Whether `module` imports (to choose what to run; a test that needs it still goes through :func:`needs`)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def needs(module: str, extra: str) -> pytest.MarkDecorator:
    """A mark for a test or a param that needs `module` (of the parley-a2a[`extra`] extra): before the test runs,
    tests/conftest.py does :func:`require` (skips without it, fails under CI=true). Use it instead of
    `pytest.mark.skipif(not HAVE_...)`."""
    return pytest.mark.needs_extra(module, extra)


__all__ = ["LiveServer", "available", "free_port", "in_ci", "missing_extra", "needs", "raw_exchange", "require", "rpc",
           "running", "secured_app", "wait_until_ready"]
