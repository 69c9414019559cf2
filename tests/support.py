"""Test support shared by every test folder: live Parley servers on 127.0.0.1, JSON-RPC helper,
and the guard of tests that need an optional extra (:func:`require`, :func:`needs`).

Import it as `from support import ...` (a unique module name: several folders have a conftest)."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import httpx
import pytest
import uvicorn

from parley.app import Parley
from parley.protocol import models as m
from parley.protocol.errors import RateLimitedError
from parley.protocol.operations import Operation
from parley.security.ratelimit import Limiter
from parley.server.access import Access, Credentials, Principal
from parley.server.pipeline import Call, Pipeline
from parley.settings import LimitSettings


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the server has closed this connection (without blocking): EOF or a reset."""
    sock.setblocking(False)
    try:
        return sock.recv(65536) == b""
    except BlockingIOError:
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True
    finally:
        sock.setblocking(True)


class UvicornThread:
    """Any ASGI app served by uvicorn on 127.0.0.1:`port` (a free one by default) in a daemon thread; `config` goes
    to uvicorn.Config. `label` names it in the error of a server that does not start."""

    def __init__(self, asgi: Any, port: int | None = None, *, label: str = "the test server",
                 **config: Any) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.label = label
        config = {"log_level": "warning", "lifespan": "on", **config}
        self.server = uvicorn.Server(uvicorn.Config(asgi, host="127.0.0.1", port=self.port, **config))
        self.thread = threading.Thread(target=self.server.run, name=label, daemon=True)

    def start(self, timeout: float = 30) -> UvicornThread:
        """Start it and wait until uvicorn listens (polled with a deadline: uvicorn offers no event for it)."""
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.server.should_exit = True
                raise RuntimeError(f"{self.label} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Ask uvicorn to exit (a graceful stop) and wait for its thread."""
        self.server.should_exit = True
        self.thread.join(timeout=20)


class LiveServer(UvicornThread):
    """A uvicorn server running a Parley app in a background thread."""

    def __init__(self, app: Parley, port: int | None = None, *, self_url: bool = False) -> None:
        self.parley = app
        port = port or free_port()
        if self_url and app.settings.self_url is None:  # agents that delegate in-process reach the server here
            app.settings.self_url = f"http://127.0.0.1:{port}"
        super().__init__(app.asgi(), port, label="the Parley test server")

    def start(self, timeout: float = 20) -> LiveServer:
        super().start(timeout)
        return self


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


def stop_process(proc: subprocess.Popen, timeout: float = 30) -> int:
    """Stop a server process as an operator would (SIGTERM, a graceful stop), SIGKILL it if it has not exited
    within `timeout`; its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait(timeout)


class PrivateRedis:
    """A redis-server of the test's own on a free port of 127.0.0.1 (no persistence), which the test may stop
    (the bus goes down for whoever uses it) and start again on the same port. Skips without the binary (fails
    under CI=true)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 20) -> PrivateRedis:
        """Start it and wait until it answers PING (polled with a deadline)."""
        binary = shutil.which("redis-server")
        if binary is None:
            if in_ci():
                pytest.fail("CI=true and redis-server is not installed", pytrace=False)
            pytest.skip("redis-server is not installed (set CI=true to make this a failure)")
        self.proc = subprocess.Popen([binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not self.answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.02)
        return self

    def answers(self) -> bool:
        """Whether it answers PING now."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL) and wait for the process to end."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


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


JS_SDK = "@a2a-js/sdk@1.3.0"  # the official JavaScript SDK the interop tests run (tests/cards, tests/e2e)
# what its server needs (peer dependencies it marks optional): express for HTTP, grpc-js and protobuf-es for gRPC
JS_SDK_SERVER = ("express@5.1.0", "@grpc/grpc-js@1.14.7", "@bufbuild/protobuf@2.17.0")


def install_js_sdk(where: Path, *packages: str) -> Path:
    """@a2a-js/sdk (JS_SDK) and `packages`, pinned, installed from the npm registry into `where` (an ES-module
    package): scripts copied there import them. Without npm, or when the install fails: skip, or fail under
    CI=true."""
    __tracebackhide__ = True
    if shutil.which("npm") is None or shutil.which("node") is None:
        (pytest.fail if in_ci() else pytest.skip)("npm and node are not installed: the @a2a-js/sdk tests cannot run")
    (where / "package.json").write_text('{"private": true, "type": "module"}')
    done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", JS_SDK, *packages], cwd=where,
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "npm_config_update_notifier": "false"})
    if done.returncode != 0:
        (pytest.fail if in_ci() else pytest.skip)(f"npm install {JS_SDK} failed: {done.stderr[-500:]}")
    return where


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


# --- the dashboard in a browser -----------------------------------------------------------------------------------
#
# Debian's chromium (`/usr/bin/chromium`, installed by .ci/run) under Playwright, never a downloaded browser. Without
# it the browser tests are skipped, except under CI=true, where its absence is a failure.

CHROMIUM = os.environ.get("PARLEY_CHROMIUM", "/usr/bin/chromium")
# The flags a root, offline, headless Chromium needs here (no sandbox as root; no background fetches that the
# closed network refuses).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]


def chromium_or_skip() -> str:
    """The chromium binary; a skip (a failure under CI=true) when it is not installed."""
    __tracebackhide__ = True
    if shutil.which(CHROMIUM) or Path(CHROMIUM).exists():
        return CHROMIUM
    if in_ci():
        pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium for the dashboard tests")
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")


@contextmanager
def chromium_browser() -> Iterator[object]:
    """One headless Debian chromium under Playwright for as long as the block runs (skipped without it, failed
    under CI=true)."""
    executable = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def dashboard_login(page, base: str, credential: str) -> None:
    """Log in to the dashboard at `base` through its login form, as a person would (a Playwright page)."""
    page.goto(f"{base}/ui/login")
    page.get_by_label("Admin API key or bearer token").fill(credential)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/")


__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "LiveServer",
    "PrivateRedis",
    "available",
    "chromium_browser",
    "chromium_or_skip",
    "closed_by_peer",
    "dashboard_login",
    "free_port",
    "in_ci",
    "missing_extra",
    "needs",
    "raw_exchange",
    "require",
    "rpc",
    "running",
    "secured_app",
    "stop_process",
    "wait_until_ready",
]


def webhook_receiver() -> ModuleType:
    """tests/push_e2e/receiver.py (a recording webhook on 127.0.0.1), loaded once under a name of its own
    (another test folder may have a top-level `receiver` too)."""
    name = "push_e2e_receiver"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("push_e2e") / "receiver.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def settled_push_log(url: str, task_id: str, wait: float = 30.0, headers: dict[str, str] | None = None) -> dict:
    """A task's push log (GET /tasks/{id}/pushLog, with `headers`: credentials) once no notification is pending
    (a bounded poll: delivery runs on its own)."""
    deadline = time.monotonic() + wait
    while True:
        log = httpx.get(f"{url}/tasks/{task_id}/pushLog", timeout=wait, headers=headers).json()
        if log["notifications"] and all(n["state"] != "pending" for n in log["notifications"]):
            return log
        assert time.monotonic() < deadline, log
        time.sleep(0.02)


# --- a gate: test agents wait, the test opens ---------------------------------------------------------------------


class Gate:
    """A one-shot latch: agents `await gate.wait()` on the server's loop, the test (any thread) calls `open()`; waiters
    are woken with `call_soon_threadsafe`, so nothing polls or sleeps. `reached` is set once an agent waits (or has
    waited) here, `opened` once the test opened it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._opened = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self.reached = threading.Event()

    @property
    def opened(self) -> bool:
        return self._opened

    def open(self) -> None:
        with self._lock:
            self._opened = True
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            loop.call_soon_threadsafe(event.set)

    async def wait(self, timeout: float | None = None) -> None:
        """Return once the gate is open; with `timeout`, raise TimeoutError after that many seconds (a safety net
        for an agent that would otherwise wait for ever when a test fails before it opens the gate)."""
        event = asyncio.Event()
        entry = (asyncio.get_running_loop(), event)
        with self._lock:
            if self._opened:
                self.reached.set()
                return
            self._waiters.append(entry)
        self.reached.set()
        try:
            await asyncio.wait_for(event.wait(), timeout)
        finally:
            with self._lock:
                if entry in self._waiters:
                    self._waiters.remove(entry)


# --- gRPC errors as a client sees them ----------------------------------------------------------------------------


def grpc_error_infos(error: object) -> list:
    """The google.rpc.ErrorInfo details a gRPC error carries in its `grpc-status-details-bin` trailer (A2A 1.0
    section 10.6: the reason travels there), in order; [] without that trailer. `error` is a grpc.RpcError."""
    from google.rpc import error_details_pb2, status_pb2

    infos = []
    for key, value in error.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key == "grpc-status-details-bin":
            for detail in status_pb2.Status.FromString(value).details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    infos.append(info)
    return infos


def grpc_error_reason(error: object) -> str | None:
    """The reason of the last ErrorInfo of a gRPC error (see :func:`grpc_error_infos`), None without one."""
    infos = grpc_error_infos(error)
    return infos[-1].reason if infos else None


def grpc_text_trailers(error: object) -> dict[str, str]:
    """A gRPC error's trailing metadata of text values (the binary `-bin` entries left out)."""
    return {key: value for key, value in error.trailing_metadata() or () if isinstance(value, str)}  # type: ignore[attr-defined]


# --- `parley serve` as a subprocess -------------------------------------------------------------------------------

_PARLEY_SCRIPT = Path(sys.executable).with_name("parley")
# The `parley` command of this venv (its console script, or the module where the script is not installed).
PARLEY = [str(_PARLEY_SCRIPT)] if _PARLEY_SCRIPT.exists() else [sys.executable, "-m", "parley.cli"]


class ServeProcess:
    """One `parley serve [--port PORT] --log-level warning ARGS` subprocess (`port`: a free one by default; without
    `port_flag` ARGS say where it listens); its stdout and stderr go to `cwd`/NAME.log (shown when something fails).
    Ready once it answers GET /healthz (:meth:`wait_ready`, a bounded poll); stopped with SIGTERM (:meth:`terminate`)
    or SIGKILL (:meth:`kill`); :meth:`close` always cleans up. `wait` bounds each step (a failure detector only)."""

    def __init__(self, name: str, args: list[str], *, cwd: Path, env: dict[str, str], port: int | None = None,
                 port_flag: bool = True, wait: float = 30.0) -> None:
        self.name = name
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.wait = wait
        self.log = cwd / f"{name}.log"
        self._out = self.log.open("w")
        cmd = [*PARLEY, "serve", *(["--port", str(self.port)] if port_flag else []), "--log-level", "warning", *args]
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=self._out, stderr=subprocess.STDOUT)

    def output(self) -> str:
        """What the process has printed so far."""
        self._out.flush()
        return self.log.read_text(errors="replace")

    def wait_ready(self) -> ServeProcess:
        """Poll /healthz until it answers 200; fail with the output if the process exits or `wait` passes."""
        deadline = time.monotonic() + self.wait
        while True:  # bounded polling: /healthz answering is the readiness signal
            if self.proc.poll() is not None:
                raise AssertionError(f"parley serve ({self.name}) exited with {self.proc.returncode}:\n{self.output()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"parley serve ({self.name}) did not answer on {self.url}:\n{self.output()}")
            time.sleep(0.05)

    def terminate(self) -> int:
        """SIGTERM, and wait for the process to exit; its exit code."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        return self.proc.wait(self.wait)

    def kill(self) -> None:
        """SIGKILL: the process dies at once, whatever it was doing."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(self.wait)

    def close(self) -> None:
        """Kill the process if it still runs; close its log."""
        try:
            if self.proc.poll() is None:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(self.wait)
        finally:
            self._out.close()


def replay_log(agent_url: str, task_id: str, wait: float = 30.0) -> list[tuple[int, dict]]:
    """A task's whole log as (seq, A2A 1.0 StreamResponse): SubscribeToTask with `Last-Event-ID: 0` over SSE (A2A
    1.0 section 3.1.6), followed until the server ends the stream (the task is terminal); each event must carry its
    own `id:` (the seq)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
    headers = {"A2A-Version": "1.0", "Last-Event-ID": "0", "Accept": "text/event-stream"}
    entries: list[tuple[int, dict]] = []
    seq: int | None = None
    with httpx.stream("POST", agent_url, json=body, headers=headers, timeout=wait) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if line.startswith("id:"):
                seq = int(line[3:].strip())
            elif line.startswith("data:"):
                frame = json.loads(line[5:])
                assert "result" in frame, frame
                assert seq is not None, frame
                entries.append((seq, frame["result"]))
                seq = None
    return entries


# --- the rate limiter driven directly (tests/security/test_ratelimit.py, tests/cluster/test_redis_counters.py) -----


def access(op: Operation = Operation.GET, agent: str = "echo", request: Any = None) -> Access:
    """What the limiter is asked about: `op` on `agent` over JSON-RPC."""
    return Access(agent, op, "JSONRPC", request)


def send_request(task_id: str | None = None) -> m.SendMessageRequest:
    """A fresh SendMessageRequest saying "hi" (to `task_id` if given)."""
    msg = m.Message(message_id=uuid.uuid4().hex, role=m.Role.USER, parts=[m.Part(text="hi")], task_id=task_id)
    return m.SendMessageRequest(message=msg)


async def refused(limiter: Limiter, acc: Access, who: Principal) -> RateLimitedError:
    """`limiter.acquire(acc, who)` must raise RateLimitedError; that error."""
    with pytest.raises(RateLimitedError) as caught:
        await limiter.acquire(acc, who)
    return caught.value


class EndlessService:
    """A stand-in for A2AService under a Pipeline: its streams never end by themselves (1, 2, 3, ..., one a loop
    turn); `fail` makes stream() raise instead."""

    def __init__(self) -> None:
        self.fail: Exception | None = None

    async def stream(self, ctx: Any, op: Operation, request: Any) -> AsyncIterator[Any]:
        if self.fail is not None:
            raise self.fail

        async def events() -> AsyncIterator[Any]:
            n = 0
            while True:
                n += 1
                yield n
                await asyncio.sleep(0)

        return events()

    async def call(self, ctx: Any, op: Operation, request: Any) -> Any:
        return "ok"


def stream_pipeline(counters: Any) -> tuple[EndlessService, Callable[[], Awaitable[Any]]]:
    """A Pipeline with streams_per_principal=1 over `counters` (LocalCounters or RedisCounters) and an
    EndlessService: (the service, `serve()`, which serves one SendStreamingMessage of alice's to `echo` and returns
    the pipeline's outcome)."""
    service = EndlessService()
    pipeline = Pipeline(service, limiter=Limiter(LimitSettings(streams_per_principal=1), counters=counters))  # type: ignore[arg-type]

    async def serve() -> Any:
        async def decode() -> Call:
            return Call("echo", Operation.STREAM, send_request(), "1.0")

        return await pipeline.serve("JSONRPC", Credentials(principal=Principal("alice", kind="token")), decode, "echo")

    return service, serve


# --- what the official a2a-sdk 1.x client sends and returns (tests/interop, tests/rest, tests/grpc) ----------------
#
# The a2a-sdk is a dev dependency, imported here only when one of these runs.


def sdk_message(text: str, *, task_id: str | None = None, context_id: str | None = None) -> Any:
    """A user a2a.types.Message of the a2a-sdk 1.x with a fresh messageId (the task and context ids if given)."""
    from a2a.types import Message, Part, Role

    msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        msg.task_id = task_id
    if context_id:
        msg.context_id = context_id
    return msg


def sdk_state_name(state: int) -> str:
    """TASK_STATE_INPUT_REQUIRED -> 'input-required' (the 0.3 spelling, shared with the 0.3 drivers' output)."""
    from a2a.types import TaskState

    return TaskState.Name(state).removeprefix("TASK_STATE_").lower().replace("_", "-")


def sdk_parts_text(parts: Any) -> str:
    """The text of the text parts of an a2a-sdk 1.x message or artifact."""
    return "".join(p.text for p in parts if p.WhichOneof("content") == "text")


def sdk_artifact_text(task: Any) -> str:
    """The text of every artifact of an a2a-sdk 1.x Task, in order."""
    return "".join(sdk_parts_text(a.parts) for a in task.artifacts)


def sdk_history_texts(task: Any) -> list[tuple[str, str]]:
    """An a2a-sdk 1.x Task's history as (user | agent, text)."""
    from a2a.types import Role

    return [("user" if msg.role == Role.ROLE_USER else "agent", sdk_parts_text(msg.parts)) for msg in task.history]


def sdk_summary(ev: Any) -> dict[str, Any]:
    """One streamed a2a-sdk 1.x StreamResponse as a small dict (the shape of the 0.3 drivers' output)."""
    kind = ev.WhichOneof("payload")
    if kind == "task":
        return {"kind": "task", "taskId": ev.task.id, "contextId": ev.task.context_id,
                "state": sdk_state_name(ev.task.status.state)}
    if kind == "status_update":
        su = ev.status_update
        out = {"kind": "status", "taskId": su.task_id, "contextId": su.context_id,
               "state": sdk_state_name(su.status.state)}
        if su.status.HasField("message"):
            out["text"] = sdk_parts_text(su.status.message.parts)
        return out
    if kind == "artifact_update":
        au = ev.artifact_update
        return {"kind": "artifact", "taskId": au.task_id, "contextId": au.context_id,
                "artifactId": au.artifact.artifact_id, "text": sdk_parts_text(au.artifact.parts),
                "append": au.append, "lastChunk": au.last_chunk}
    if kind == "message":
        return {"kind": "message", "text": sdk_parts_text(ev.message.parts)}
    return {"kind": str(kind)}


async def next_within(stream: AsyncIterator[Any], wait: float) -> Any:
    """The next item of an async stream, failing after `wait` seconds (awaited in the caller's task)."""
    async with asyncio.timeout(wait):
        return await anext(stream)


async def drain_within(stream: AsyncIterator[Any], wait: float,
                       until: Callable[[Any], bool] | None = None) -> list[Any]:
    """The remaining items of an async stream until it ends (or, with `until`, up to the first item for which it is
    true, included), failing after `wait` seconds."""
    out = []
    async with asyncio.timeout(wait):
        async for ev in stream:
            out.append(ev)
            if until is not None and until(ev):
                break
    return out


def interviewer_question(first: str) -> str:
    """What the built-in interviewer agent asks after the first answer `first`."""
    return f"You said {first!r}. Why does that matter to you?"


def interviewer_thanks(first: str, second: str) -> str:
    """What the built-in interviewer agent says at the end, after the answers `first` and `second`."""
    return f"Thank you. You said {first!r}, and it matters because {second!r}."


def sdk13_agent_card(url: str, agent: str, binding: str) -> Any:
    """The a2a-sdk 1.x AgentCard of a test agent `agent` of an SDK server, at `url` over `binding` ("JSONRPC",
    "HTTP+JSON"), in A2A 1.0 and 0.3 (the SDK's compat mode), streaming, one skill named after the agent."""
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

    return AgentCard(
        name=f"sdk13-{binding.lower()}-{agent}",
        description=f"a2a-sdk 1.3 {binding} test agent {agent!r}",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding=binding, protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding=binding, protocol_version="0.3"),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id=agent, name=agent, description=f"the {agent} test agent", tags=["test"])],
    )


@contextmanager
def stopped_at_end(stop: Callable[[Any], object]) -> Iterator[list[Any]]:
    """The list a fixture's factory appends what it starts to (servers, processes, webhooks); when the block ends
    (the test is over), `stop` is called on each, in the order they were started."""
    started: list[Any] = []
    try:
        yield started
    finally:
        for thing in started:
            stop(thing)


async def sdk13_begin(context: Any, event_queue: Any) -> Any:
    """The start of an a2a-sdk 1.x test agent's run: the Task published first when the message starts one (the SDK's
    own agents must), then a TaskUpdater for it."""
    from a2a.helpers import new_task_from_user_message
    from a2a.server.tasks import TaskUpdater

    if context.current_task is None:
        await event_queue.enqueue_event(new_task_from_user_message(context.message))
    return TaskUpdater(event_queue, context.task_id, context.context_id)
