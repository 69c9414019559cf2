"""Official a2a-sdk servers with three test agents, for Parley's client to talk to.

Two server flavours:

* :func:`start_sdk13_server` runs a2a-sdk 1.3 (the version installed in the
  project venv) in a background thread: one JSON-RPC endpoint per agent with
  the 0.3 compatibility layer on, and a card listing JSONRPC 1.0 and JSONRPC 0.3.
* :func:`start_sdk03_server` runs ``sdk03_server.py`` with the last 0.3 release
  (a2a-sdk 0.3.26) from its own virtualenv (:func:`ensure_sdk03_venv`), as a
  subprocess.

Both serve the same agents, each under its own path (``/echo``,
``/interviewer``, ``/slow``) with its card at
``/<agent>/.well-known/agent-card.json``:

``echo``
    Streams the user's text back in :data:`ECHO_CHUNKS` chunks of one artifact
    (``artifactId`` ``"echo"``), then completes.
``interviewer``
    First message: input-required with :data:`INTERVIEW_QUESTION`. A second
    message on the same task completes it with an artifact
    ``"Nice to meet you, <text>!"``.
``slow``
    Emits a working status, then waits until the task is cancelled or released
    with ``POST /_control/release/<task id>``; on release it adds an artifact
    ``"released"`` and completes. If the user's text contains ``heartbeat`` it
    also adds an artifact chunk (``artifactId`` ``"heartbeat"``) every
    :data:`HEARTBEAT_INTERVAL` seconds while it waits, so a subscriber always
    has an event to observe (SDK 0.3.26's resubscribe does not start with a
    Task snapshot).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

AGENTS = ("echo", "interviewer", "slow")
ECHO_CHUNKS = 3
INTERVIEW_QUESTION = "What is your name?"
HEARTBEAT_INTERVAL = 0.2
STARTUP_TIMEOUT = 30.0

REPO = Path(__file__).resolve().parents[2]
SDK03_VERSION = "0.3.26"
SDK03_VENV = REPO / ".venv-sdk03"
SDK03_LOCK = REPO / ".venv-sdk03.lock"
SDK03_PYTHON = SDK03_VENV / "bin" / "python"
SDK03_SCRIPT = Path(__file__).resolve().parent / "sdk03_server.py"
SDK03_READY_CHECK = (
    "import a2a, importlib.metadata as m; assert m.version('a2a-sdk')=='0.3.26'"
)
SDK03_PIP_ARGS = [f"a2a-sdk[http-server]=={SDK03_VERSION}", "uvicorn"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chunks(text: str, n: int = ECHO_CHUNKS) -> list[str]:
    """`text` split into at most `n` non-empty consecutive pieces (one piece for short text)."""
    if len(text) < n:
        return [text]
    size, rest = divmod(len(text), n)
    out, pos = [], 0
    for i in range(n):
        end = pos + size + (1 if i < rest else 0)
        out.append(text[pos:end])
        pos = end
    return out


# --- a2a-sdk 1.3 ---------------------------------------------------------------


class ReleaseRegistry:
    """Per-task release events for the slow agent (lives on the server's event loop)."""

    def __init__(self) -> None:
        self.events: dict[str, asyncio.Event] = {}

    def register(self, task_id: str) -> asyncio.Event:
        return self.events.setdefault(task_id, asyncio.Event())

    def release(self, task_id: str) -> bool:
        ev = self.events.get(task_id)
        if ev is None:
            return False
        ev.set()
        return True

    def forget(self, task_id: str) -> None:
        self.events.pop(task_id, None)


def build_sdk13_app(base_url: str):
    """A Starlette app serving the three agents with a2a-sdk 1.3 (JSON-RPC 1.0 + 0.3 compat)."""
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import Part, TaskState
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from support import sdk13_agent_card, sdk13_begin

    releases = ReleaseRegistry()

    class Base(AgentExecutor):
        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            releases.forget(context.task_id)
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    class Echo(Base):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            updater = await sdk13_begin(context, event_queue)
            await updater.start_work()
            pieces = chunks(context.get_user_input())
            for i, piece in enumerate(pieces):
                await updater.add_artifact([Part(text=piece)], artifact_id="echo", name="echo",
                                           append=i > 0, last_chunk=i == len(pieces) - 1)
            await updater.complete()

    class Interviewer(Base):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task = context.current_task
            updater = await sdk13_begin(context, event_queue)
            if task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                await updater.start_work()
                await updater.add_artifact([Part(text=f"Nice to meet you, {context.get_user_input()}!")],
                                           artifact_id="answer", name="answer")
                await updater.complete()
                return
            await updater.requires_input(updater.new_agent_message([Part(text=INTERVIEW_QUESTION)]))

    class Slow(Base):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            heartbeat = "heartbeat" in context.get_user_input()
            released = releases.register(context.task_id)
            updater = await sdk13_begin(context, event_queue)
            try:
                await updater.start_work(updater.new_agent_message([Part(text="working")]))
                beats = 0
                while not released.is_set():
                    if not heartbeat:
                        await released.wait()
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(released.wait(), HEARTBEAT_INTERVAL)
                    if not released.is_set():
                        await updater.add_artifact([Part(text=".")], artifact_id="heartbeat", name="heartbeat",
                                                   append=beats > 0)
                        beats += 1
                await updater.add_artifact([Part(text="released")], artifact_id="result", name="result")
                await updater.complete()
            finally:
                releases.forget(context.task_id)

    executors = {"echo": Echo(), "interviewer": Interviewer(), "slow": Slow()}
    handlers = []
    routes: list = []
    for name, executor in executors.items():
        url = f"{base_url}/{name}"
        card = sdk13_agent_card(url, name, "JSONRPC")
        handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
        handlers.append(handler)
        routes += create_agent_card_routes(card, card_url=f"/{name}/.well-known/agent-card.json")
        routes += create_jsonrpc_routes(handler, rpc_url=f"/{name}", enable_v0_3_compat=True)

    async def release(request: Request) -> JSONResponse:
        ok = releases.release(request.path_params["task_id"])
        return JSONResponse({"released": ok}, status_code=200 if ok else 404)

    routes.append(Route("/_control/release/{task_id}", release, methods=["POST"]))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        for handler in handlers:
            await handler.aclose()

    return Starlette(routes=routes, lifespan=lifespan)


@dataclass
class SdkServer:
    """A running SDK server: its base URL and how to stop it."""

    url: str
    label: str
    stop_fn: object = None
    log: list[str] = field(default_factory=list)

    def agent_url(self, agent: str) -> str:
        return f"{self.url}/{agent}"

    def stop(self) -> None:
        if callable(self.stop_fn):
            self.stop_fn()


def start_sdk13_server() -> SdkServer:
    """a2a-sdk 1.3 on 127.0.0.1 (free port) in a daemon thread."""

    from support import UvicornThread

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = UvicornThread(build_sdk13_app(url), port, label="the a2a-sdk 1.3 test server").start(STARTUP_TIMEOUT)
    return SdkServer(url=url, label="a2a-sdk 1.3", stop_fn=server.stop)


# --- a2a-sdk 0.3.26 (separate virtualenv, subprocess) -------------------------


class Sdk03Unavailable(RuntimeError):
    """The 0.3.26 virtualenv could not be created (typically: no network)."""


def _sdk03_ready() -> bool:
    if not SDK03_PYTHON.exists():
        return False
    checks = [SDK03_READY_CHECK, "import uvicorn"]
    for code in checks:
        r = subprocess.run([str(SDK03_PYTHON), "-c", code], check=False, capture_output=True, timeout=120)
        if r.returncode != 0:
            return False
    return True


def ensure_sdk03_venv() -> Path:
    """The python of a virtualenv with a2a-sdk 0.3.26 (and uvicorn), created on first use.

    Creation is guarded by an fcntl lock on ``.venv-sdk03.lock`` because other
    test helpers may create the same venv concurrently. Raises
    :class:`Sdk03Unavailable` with pip's output when it cannot be built.
    """
    if _sdk03_ready():
        return SDK03_PYTHON
    with open(SDK03_LOCK, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if _sdk03_ready():
                return SDK03_PYTHON
            if not SDK03_PYTHON.exists():
                r = subprocess.run(["python3", "-m", "venv", str(SDK03_VENV)], check=False, capture_output=True, text=True,
                                   timeout=300)
                if r.returncode != 0:
                    raise Sdk03Unavailable(f"python3 -m venv {SDK03_VENV} failed:\n{r.stdout}{r.stderr}")
            r = subprocess.run([str(SDK03_PYTHON), "-m", "pip", "install", "-q", *SDK03_PIP_ARGS],
                               check=False, capture_output=True, text=True, timeout=900)
            if r.returncode != 0 or not _sdk03_ready():
                raise Sdk03Unavailable(
                    f"pip install {' '.join(SDK03_PIP_ARGS)} into {SDK03_VENV} failed "
                    f"(exit {r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-4000:]}"
                )
            return SDK03_PYTHON
        except subprocess.TimeoutExpired as exc:
            raise Sdk03Unavailable(f"creating {SDK03_VENV} timed out: {exc}") from None
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def start_sdk03_server(python: Path | None = None) -> SdkServer:
    """``sdk03_server.py`` under a2a-sdk 0.3.26, on a free port; returns once it printed its ready line."""
    python = python or ensure_sdk03_venv()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen([str(python), str(SDK03_SCRIPT), str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, cwd=str(SDK03_SCRIPT.parent))
    log: list[str] = []
    url = None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    try:
        while url is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not sel.select(timeout=remaining):
                raise RuntimeError("the a2a-sdk 0.3.26 server did not print its ready line:\n" + "".join(log))
            line = proc.stdout.readline()
            if not line:
                proc.wait(timeout=5)
                raise RuntimeError(f"the a2a-sdk 0.3.26 server exited ({proc.returncode}):\n" + "".join(log))
            log.append(line)
            if line.startswith("READY "):
                url = line.split()[1]
    except BaseException:
        _terminate(proc)
        raise
    finally:
        sel.close()

    # Keep draining the output so the child never blocks on a full pipe.
    def drain() -> None:
        log.extend(proc.stdout)

    threading.Thread(target=drain, name="sdk03-log", daemon=True).start()
    return SdkServer(url=url, label="a2a-sdk 0.3.26", stop_fn=lambda: _terminate(proc), log=log)


def _terminate(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@contextlib.contextmanager
def running(start) -> Iterator[SdkServer]:
    """Run a server from one of the ``start_*`` functions for the duration of the block."""
    srv = start()
    try:
        yield srv
    finally:
        srv.stop()


if __name__ == "__main__":  # manual use: serve the 1.3 agents until Ctrl-C
    s = start_sdk13_server()
    print(f"READY {s.url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        threading.Event().wait()
    s.stop()
    sys.exit(0)
