"""Helpers for the HTTP+JSON (REST) suite: raw HTTP + SSE, a slow agent, the 0.3.26 venv, an SDK REST server.

Kept out of a `conftest.py` on purpose: `tests/conftest.py` is imported as the
top-level module `conftest`, and a second `conftest.py` here would replace it.
Everything talks to real servers on 127.0.0.1 over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from interop_client.sdk_servers import SdkServer  # the running SDK server (its URL, how to stop it)
from parley.agents.base import ArtifactChunk, RunContext
from parley.agents.builtin import builtin_agents
from parley.app import Parley, Settings
from parley.client import A2AClient, user_message
from parley.client.jsonrpc import StreamItem
from parley.protocol import models as m
from parley.protocol.operations import Operation
from support import Gate, UvicornThread, sdk13_agent_card, sdk13_begin

WAIT = 20.0  # the longest any single step may take before a test fails; never a pacing delay
TIMEOUT = httpx.Timeout(WAIT)
http = httpx.Client(timeout=TIMEOUT)

ECHO_TEXT = "one two three four five six seven"
ECHO_CHUNKS = ["one two three", " four five six", " seven"]
SLOW_FIRST = "first chunk"
SLOW_ARTIFACT_ID = "slow-output"

V1 = {"A2A-Version": "1.0"}

# The two HTTP+JSON bindings: the path prefix below an agent's base URL, and the headers to send.
BINDINGS = {
    "1.0": {"prefix": "", "headers": V1},
    "0.3": {"prefix": "/v1", "headers": {}},
}

TERMINAL_10 = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
TERMINAL_03 = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELLED", "TASK_STATE_REJECTED"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def uid(prefix: str = "m-") -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


# --- request bodies per binding ---------------------------------------------------------


def message_body(binding: str, text: str, *, task_id: str | None = None, context_id: str | None = None,
                 configuration: dict[str, Any] | None = None, message_id: str | None = None) -> dict[str, Any]:
    """A SendMessageRequest body in the binding's shape (1.0 `parts`, 0.3 `content`)."""
    msg: dict[str, Any] = {"messageId": message_id or uid(), "role": "ROLE_USER"}
    msg["parts" if binding == "1.0" else "content"] = [{"text": text}]
    if task_id:
        msg["taskId"] = task_id
    if context_id:
        msg["contextId"] = context_id
    body: dict[str, Any] = {"message": msg}
    if configuration is not None:
        body["configuration"] = configuration
    return body


def message_parts(binding: str, msg: dict[str, Any]) -> list[dict[str, Any]]:
    return msg["parts" if binding == "1.0" else "content"]


def text_of(binding: str, msg: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message_parts(binding, msg))


def artifact_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"])


def canceled_state(binding: str) -> str:
    return "TASK_STATE_CANCELED" if binding == "1.0" else "TASK_STATE_CANCELLED"


# --- raw HTTP and SSE ----------------------------------------------------------------------


@dataclass
class Frame:
    """One SSE frame: its id, event name and JSON data."""

    id: str | None
    event: str | None
    data: Any


def parse_sse(lines: Iterator[str]) -> Iterator[Frame]:
    """Frames from SSE lines (comments skipped), in order."""
    fid = event = None
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield Frame(fid, event, json.loads("\n".join(data)))
            fid = event = None
            data = []
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if key == "id":
            fid = value
        elif key == "event":
            event = value
        elif key == "data":
            data.append(value)
    if data:
        yield Frame(fid, event, json.loads("\n".join(data)))


@contextlib.contextmanager
def open_stream(method: str, url: str, **kwargs: Any) -> Iterator[tuple[httpx.Response, Iterator[Frame]]]:
    """An open SSE response and an iterator of its frames (read as they arrive)."""
    headers = {"Accept": "text/event-stream", **kwargs.pop("headers", {})}
    with http.stream(method, url, headers=headers, **kwargs) as resp:
        yield resp, parse_sse(resp.iter_lines())


def sse(method: str, url: str, **kwargs: Any) -> tuple[httpx.Response, list[Frame]]:
    """The whole SSE answer (until the server closes the stream)."""
    with open_stream(method, url, **kwargs) as (resp, frames):
        if not resp.headers.get("content-type", "").startswith("text/event-stream"):
            resp.read()
            return resp, []
        return resp, list(frames)


def error_reason(resp: httpx.Response) -> str:
    """The ErrorInfo reason of a google.rpc.Status error body (and a check of its shape)."""
    body = resp.json()
    err = body["error"]
    assert err["code"] == resp.status_code, body
    assert isinstance(err["status"], str) and isinstance(err["message"], str) and err["message"], body
    infos = [d for d in err["details"] if d.get("@type") == "type.googleapis.com/google.rpc.ErrorInfo"]
    assert len(infos) == 1 and infos[0]["domain"] == "a2a-protocol.org", body
    return infos[0]["reason"]


# --- a slow agent a test controls -----------------------------------------------------------


def slow_app(gate: Gate | None = None, *, push_notifications: bool = False) -> Parley:
    """`slow` (default): one artifact chunk, then waits for `gate` (or to be canceled); `mirror`; echo; interviewer."""
    gate = gate or Gate()
    settings = Settings()
    settings.card = type(settings.card)(push_notifications=push_notifications)
    app = Parley(settings=settings)

    @app.agent(id="slow", description="Emits a chunk, waits for a gate, then finishes")
    async def slow(ctx: RunContext):
        yield ArtifactChunk(
            m.Artifact(artifact_id=SLOW_ARTIFACT_ID, name="response", parts=[m.Part(text=SLOW_FIRST)]),
            append=False, last_chunk=False,
        )
        await gate.wait(120.0)  # a safety net: the task fails rather than hang a failed test
        yield ArtifactChunk(
            m.Artifact(artifact_id=SLOW_ARTIFACT_ID, name="response", parts=[m.Part(text=" second chunk")]),
            append=True, last_chunk=True,
        )

    @app.agent(id="mirror", description="Answers with an artifact holding the parts it received",
               input_modes=["*/*"], output_modes=["*/*"])
    async def mirror(ctx: RunContext):
        yield ArtifactChunk(m.Artifact(artifact_id="mirror", name="mirror", parts=list(ctx.message.parts)),
                            append=False, last_chunk=True)

    for agent in builtin_agents():
        app.add_agent(agent)
    return app


WEBHOOK = "https://203.0.113.7/hook"  # TEST-NET-3: not public, so allowed explicitly (nothing is sent there)


def push_app(*, enabled: bool = True) -> Parley:
    """The built-in agents with push notifications on (webhooks may be in 203.0.113.0/24), or off."""
    from parley.settings import PushSettings

    app = Parley(settings=Settings(push=PushSettings(enabled=enabled, allow=["203.0.113.0/24"])))
    for agent in builtin_agents():
        app.add_agent(agent)
    return app


# --- the a2a-sdk 0.3.26 virtualenv ----------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
SDK03_VERSION = "0.3.26"
SDK03_VENV = REPO / ".venv-sdk03"
SDK03_LOCK = REPO / ".venv-sdk03.lock"
SDK03_PYTHON = SDK03_VENV / "bin" / "python"
SDK03_PIP_ARGS = [f"a2a-sdk[http-server]=={SDK03_VERSION}", "uvicorn"]
DRIVER = Path(__file__).with_name("sdk03_rest_driver.py")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def _sdk03_ready() -> bool:
    if not SDK03_PYTHON.exists():
        return False
    check = f"import importlib.metadata as m; assert m.version('a2a-sdk') == {SDK03_VERSION!r}; import httpx, a2a"
    done = subprocess.run([str(SDK03_PYTHON), "-c", check], check=False, capture_output=True, timeout=120, env=_clean_env())
    return done.returncode == 0


def sdk03_unavailable(reason: str) -> None:
    """Fail under CI=true, skip (with the reason) otherwise."""
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"CI=true and the a2a-sdk {SDK03_VERSION} virtualenv could not be made: {reason}", pytrace=False)
    pytest.skip(f"a2a-sdk {SDK03_VERSION} is not available (is the network down?): {reason}")


def ensure_sdk03_python() -> Path:
    """The python of `.venv-sdk03` with a2a-sdk 0.3.26, created on first use under an fcntl lock."""
    if _sdk03_ready():
        return SDK03_PYTHON
    with open(SDK03_LOCK, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if _sdk03_ready():
                return SDK03_PYTHON
            steps = []
            if not SDK03_PYTHON.exists():
                steps.append(["python3", "-m", "venv", str(SDK03_VENV)])
            steps.append([str(SDK03_PYTHON), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                          *SDK03_PIP_ARGS])
            for cmd in steps:
                try:
                    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=900,
                                          env=_clean_env())
                except (OSError, subprocess.TimeoutExpired) as exc:
                    sdk03_unavailable(f"`{' '.join(cmd)}` failed: {exc}")
                if done.returncode != 0:
                    sdk03_unavailable(f"`{' '.join(cmd)}` exited {done.returncode}:\n{(done.stderr or done.stdout)[-2000:]}")
            if not _sdk03_ready():
                sdk03_unavailable(f"{SDK03_PYTHON} has no a2a-sdk {SDK03_VERSION} after installing")
            return SDK03_PYTHON
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def drive_sdk03(python: Path, base_url: str, scenario: str, *args: str) -> dict[str, Any]:
    """Run one driver scenario; return its `result`, failing with the SDK's traceback if it raised."""
    cmd = [str(python), str(DRIVER), base_url, scenario, *args]
    try:
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120, env=_clean_env())
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the a2a-sdk {SDK03_VERSION} REST driver did not finish {scenario!r}: {exc}")
    lines = done.stdout.strip().splitlines()
    assert lines, f"the driver printed nothing (exit {done.returncode}); stderr:\n{done.stderr}"
    out = json.loads(lines[-1])
    if "error" in out:
        err = out["error"]
        pytest.fail(f"a2a-sdk {SDK03_VERSION} raised in {scenario!r}: {err['type']} (HTTP {err['status']}): "
                    f"{err['message']}\n{err['traceback']}")
    assert done.returncode == 0, done.stderr
    assert out["sdkVersion"] == SDK03_VERSION
    return out["result"]


# --- an official a2a-sdk 1.3 server with REST routes -------------------------------------------


def build_sdk13_rest_app(base_url: str):
    """`echo` (streams the text back in three artifact chunks) and `slow` (one chunk, then waits to be canceled).

    Each agent has its own path with REST routes (1.0 at `/{agent}/...`, 0.3 at
    `/{agent}/v1/...`) and a card listing HTTP+JSON 1.0 and 0.3.
    """
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_rest_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import Part
    from starlette.applications import Starlette

    class Base(AgentExecutor):
        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    class Echo(Base):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            updater = await sdk13_begin(context, event_queue)
            await updater.start_work()
            words = context.get_user_input().split(" ")
            pieces = [" ".join(words[i:i + 3]) for i in range(0, len(words), 3)]
            for i, piece in enumerate(pieces):
                await updater.add_artifact([Part(text=piece if i == 0 else " " + piece)], artifact_id="echo",
                                           name="echo", append=i > 0, last_chunk=i == len(pieces) - 1)
            await updater.complete()

    class Slow(Base):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            updater = await sdk13_begin(context, event_queue)
            await updater.start_work()
            await updater.add_artifact([Part(text=SLOW_FIRST)], artifact_id="slow", name="slow", last_chunk=False)
            await asyncio.Event().wait()  # until canceled

    handlers = []
    card_routes: list = []
    rest_routes: list = []
    for name, executor in {"echo": Echo(), "slow": Slow()}.items():
        url = f"{base_url}/{name}"
        card = sdk13_agent_card(url, name, "HTTP+JSON")
        handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
        handlers.append(handler)
        card_routes += create_agent_card_routes(card, card_url=f"/{name}/.well-known/agent-card.json")
        rest_routes += [r for r in create_rest_routes(handler, enable_v0_3_compat=True, path_prefix=f"/{name}")
                        if getattr(r, "path", "").startswith(f"/{name}/")]

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        for handler in handlers:
            with contextlib.suppress(Exception):
                await handler.aclose()

    # Card routes first: the SDK's REST routes include a catch-all tenant mount (see spec digest, section 6).
    return Starlette(routes=card_routes + rest_routes, lifespan=lifespan)


def start_sdk13_rest_server() -> SdkServer:

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = UvicornThread(build_sdk13_rest_app(url), port, label="the a2a-sdk 1.3 REST test server",
                           timeout_graceful_shutdown=5).start(30)
    return SdkServer(url=url, label="a2a-sdk 1.3 REST", stop_fn=server.stop)


# --- schema conformance: strict ProtoJSON parsing with the official generated classes ------------


def assert_proto(binding: str, data: Any, message: str) -> None:
    """`data` parses strictly (no unknown fields) as `message` of the binding's protobuf schema.

    1.0: `lf.a2a.v1` from a2a-sdk 1.3; 0.3: the 0.3 `a2a.v1` schema the SDK ships for
    its compat layer (the same schema the 0.3.26 SDK parses with).
    """
    from google.protobuf.json_format import ParseDict

    if binding == "1.0":
        from a2a.types import a2a_pb2 as pb
    else:
        from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb
    ParseDict(data, getattr(pb, message)(), ignore_unknown_fields=False)


# --- one task over two bindings (the binding matrices of tests/rest and tests/e2e) ---------------------------------


def chunk_text(ev: m.StreamEvent) -> str:
    """The text of an artifact-update event (anything else fails the test)."""
    assert isinstance(ev, m.TaskArtifactUpdateEvent), ev
    return "".join(p.text or "" for p in ev.artifact.parts)


async def create_slow_task(creator: A2AClient) -> list[StreamItem]:
    """Create a task of `slow_app`'s slow agent over `creator`: stream until its first chunk, then hang up (the task
    keeps running). The items seen: the Task first, the first chunk last."""
    stream = creator.transport.stream(Operation.STREAM, m.SendMessageRequest(message=user_message("go slowly")))
    seen = []
    async with asyncio.timeout(WAIT):
        async for item in stream:
            seen.append(item)
            if isinstance(item.event, m.TaskArtifactUpdateEvent):
                break
    await stream.aclose()
    assert isinstance(seen[0].event, m.Task)
    assert chunk_text(seen[-1].event) == SLOW_FIRST
    return seen


async def follow_and_cancel_over(reader: A2AClient, creator: A2AClient, seen: list[StreamItem],
                                 replay_from: str) -> None:
    """The task `creator` created (`seen`: :func:`create_slow_task`) is the same over `reader` (A2A 1.0 section 3.1:
    one task, whatever the binding): GetTask shows it working with its first chunk; SubscribeToTask after the event
    `replay_from` replays the events the creator saw, then follows live; SubscribeToTask without an id starts with
    the snapshot; CancelTask over `reader` ends both subscriptions with CANCELED; the creator reads the same final
    task."""
    task = seen[0].event
    # Get over `reader`.
    got = await asyncio.wait_for(reader.get(task.id), WAIT)
    assert got.id == task.id and got.context_id == task.context_id
    assert got.status.state is m.TaskState.WORKING
    assert [x.artifact_id for x in got.artifacts] == [SLOW_ARTIFACT_ID]
    assert "".join(p.text or "" for p in got.artifacts[0].parts) == SLOW_FIRST
    assert [msg.text() for msg in got.history] == ["go slowly"]

    # Resubscribe over `reader` after the task's first entry: the same events, then live ones.
    replay = reader.resubscribe(task.id, last_event_id=replay_from)
    replayed = []
    async with asyncio.timeout(WAIT):
        async for ev in replay:
            replayed.append(ev)
            if isinstance(ev, m.TaskArtifactUpdateEvent):
                break
    assert [type(ev) for ev in replayed] == [type(item.event) for item in seen[1:]]
    assert all(ev.task_id == task.id for ev in replayed)
    assert chunk_text(replayed[-1]) == SLOW_FIRST

    # Resubscribe over `reader` without an id: the snapshot first.
    resub = reader.resubscribe(task.id)
    first = await asyncio.wait_for(anext(resub), WAIT)
    assert isinstance(first, m.Task) and first.id == task.id and first.status.state is m.TaskState.WORKING
    assert [x.artifact_id for x in first.artifacts] == [SLOW_ARTIFACT_ID]

    # Cancel over `reader`: both open streams see it and close.
    canceled = await asyncio.wait_for(reader.cancel(task.id), WAIT)
    assert canceled.id == task.id and canceled.status.state is m.TaskState.CANCELED
    async with asyncio.timeout(WAIT):
        rest = [ev async for ev in resub]
        more = [ev async for ev in replay]
    assert isinstance(rest[-1], m.TaskStatusUpdateEvent) and rest[-1].status.state is m.TaskState.CANCELED
    assert isinstance(more[-1], m.TaskStatusUpdateEvent) and more[-1].status.state is m.TaskState.CANCELED

    # And the creator sees the same final task.
    final = await asyncio.wait_for(creator.get(task.id), WAIT)
    assert final.status.state is m.TaskState.CANCELED
    assert [x.artifact_id for x in final.artifacts] == [SLOW_ARTIFACT_ID]
    assert [msg.text() for msg in final.history] == ["go slowly"]
