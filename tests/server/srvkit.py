"""Helpers for the server behaviour suite: live servers, test agents, JSON-RPC and SSE clients.

Everything talks to a real uvicorn server on 127.0.0.1 over HTTP. The test
agents run on the server's event loop (in the server thread); tests control
them through thread-safe gates and observe them through thread-safe records.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from parley.agents.base import AgentError, RunContext
from parley.agents.builtin import builtin_agents
from parley.app import Parley, Settings
from parley.tasks.store import TaskStore
from support import Gate

V1 = "1.0"
WAIT = 10.0  # upper bound for waiting on an observable event; never a pacing delay
TIMEOUT = httpx.Timeout(15.0)
# One pooled client for the whole suite: building an httpx.Client per request costs more than the request.
http = httpx.Client(timeout=TIMEOUT)

TERMINAL_03 = {"completed", "failed", "canceled", "rejected"}
TERMINAL_10 = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}

_ids = itertools.count(1)


def uid(prefix: str = "") -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


# --- live servers ------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Live:
    """A uvicorn server running a Parley app in a daemon thread."""

    def __init__(self, app: Parley) -> None:
        self.parley = app
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app.asgi(), host="127.0.0.1", port=self.port, log_level="critical", lifespan="on",
            timeout_graceful_shutdown=5,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def agent_url(self, agent_id: str) -> str:
        return f"{self.url}/a2a/{agent_id}"

    def start(self) -> Live:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the Parley test server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
        assert not self.thread.is_alive(), "the test server did not stop"


@contextmanager
def live(app: Parley) -> Iterator[Live]:
    srv = Live(app).start()
    try:
        yield srv
    finally:
        srv.stop()


# --- cross-thread control of test agents ----------------------------------------------


class Lab:
    """Shared state of the test agents of one app."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gates: dict[str, Gate] = {}
        self.calls: Counter[str] = Counter()
        self.cancelled: dict[str, threading.Event] = {}
        self.cancelled_tasks: list[str] = []

    def gate(self, name: str) -> Gate:
        with self._lock:
            return self._gates.setdefault(name, Gate())

    def open(self, name: str) -> None:
        self.gate(name).open()

    def wait_reached(self, name: str) -> None:
        assert self.gate(name).reached.wait(WAIT), f"the agent never reached gate {name!r}"

    def open_all(self) -> None:
        with self._lock:
            gates = list(self._gates.values())
        for g in gates:
            g.open()

    def count(self, key: str) -> int:
        with self._lock:
            self.calls[key] += 1
            return self.calls[key]

    def calls_of(self, key: str) -> int:
        with self._lock:
            return self.calls[key]

    def cancel_event(self, key: str) -> threading.Event:
        with self._lock:
            return self.cancelled.setdefault(key, threading.Event())

    def record_cancel(self, key: str, task_id: str) -> None:
        with self._lock:
            self.cancelled_tasks.append(task_id)
        self.cancel_event(key).set()


def lab_app(lab: Lab, *, store: TaskStore | None = None, settings: Settings | None = None) -> Parley:
    """The built-in agents (echo is the default) plus controllable test agents."""
    app = Parley(store=store, settings=settings)
    for agent in builtin_agents():
        app.add_agent(agent)

    @app.agent(id="slow", description="Says it started, waits for the gate named by the text, then answers")
    async def slow(ctx: RunContext):
        key = ctx.text
        lab.count(key)
        try:
            yield ctx.say(f"started {key}")
            await lab.gate(key).wait()
            yield f"done {key}"
        except asyncio.CancelledError:
            lab.record_cancel(key, ctx.task_id)
            raise

    @app.agent(id="stepper", description="Working updates; waits for gate <text>/1 and <text>/2 between them")
    async def stepper(ctx: RunContext):
        key = ctx.text
        yield ctx.say("step 1")
        await lab.gate(f"{key}/1").wait()
        yield ctx.say("step 2")
        await lab.gate(f"{key}/2").wait()
        yield "finished"

    @app.agent(id="forever", description="Yields working updates until cancelled")
    async def forever(ctx: RunContext):
        key = ctx.text
        try:
            n = 0
            while True:
                n += 1
                yield ctx.say(f"tick {n}")
                await lab.gate(f"{key}/{n}").wait()
        except asyncio.CancelledError:
            lab.record_cancel(key, ctx.task_id)
            raise

    @app.agent(id="boom", description="Streams some text, then raises")
    async def boom(ctx: RunContext):
        yield "partial output"
        raise RuntimeError(f"kaboom {ctx.text}")

    @app.agent(id="boom-early", description="Raises before producing anything")
    async def boom_early(ctx: RunContext):
        raise ValueError(f"bad input {ctx.text}")
        yield  # pragma: no cover

    @app.agent(id="refuse", description="Fails with a message of its own wording (AgentError)")
    async def refuse(ctx: RunContext):
        yield "looked at it"
        raise AgentError(f"invoice {ctx.text} is unknown")

    @app.agent(id="stray-cancel", description="Awaits a future someone else cancelled (CancelledError escapes)")
    async def stray_cancel(ctx: RunContext):
        yield ctx.say("awaiting a cancelled future")
        fut = asyncio.get_running_loop().create_future()
        fut.cancel()
        await fut
        yield "unreachable"

    @app.agent(id="garbage", description="Yields something that is not agent output")
    async def garbage(ctx: RunContext):
        yield 42

    @app.agent(id="counter", description="Counts its invocations per message id, then echoes")
    async def counter(ctx: RunContext):
        n = lab.count(ctx.message.message_id)
        yield f"call {n}: {ctx.text}"

    return app


# --- JSON-RPC ---------------------------------------------------------------------------


def headers_for(version: str | None) -> dict[str, str]:
    return {"A2A-Version": version} if version else {}


def post(url: str, body: Any, *, version: str | None = None, raw: bytes | None = None,
         headers: dict[str, str] | None = None) -> httpx.Response:
    h = {"Content-Type": "application/json", **headers_for(version), **(headers or {})}
    content = raw if raw is not None else json.dumps(body).encode()
    return http.post(url, content=content, headers=h)


def call(url: str, method: str, params: Any = None, *, version: str | None = None,
         rid: Any = None, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """One JSON-RPC call; returns the parsed response body (asserting HTTP 200 JSON)."""
    rid = next(_ids) if rid is None else rid
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params if params is not None else {}}
    r = post(url, body, version=version, headers=headers)
    assert r.status_code == 200, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json"), r.headers["content-type"]
    data = r.json()
    assert data["jsonrpc"] == "2.0" and data["id"] == rid, data
    return data


def result(url: str, method: str, params: Any = None, *, version: str | None = None) -> Any:
    data = call(url, method, params, version=version)
    assert "error" not in data, str(data)[:600]
    return data["result"]


def error(url: str, method: str, params: Any = None, *, version: str | None = None,
          headers: dict[str, str] | None = None) -> dict[str, Any]:
    data = call(url, method, params, version=version, headers=headers)
    assert "result" not in data, str(data)[:600]
    err = data["error"]
    assert isinstance(err["code"], int) and isinstance(err["message"], str)
    return err


# --- dialect-neutral helpers ------------------------------------------------------------------


@dataclass(frozen=True)
class Dialect:
    """Method names and shapes of one protocol version."""

    version: str | None  # header value; None for 0.3

    @property
    def v1(self) -> bool:
        return self.version == V1

    def method(self, op: str) -> str:
        names = {
            "send": ("message/send", "SendMessage"),
            "stream": ("message/stream", "SendStreamingMessage"),
            "get": ("tasks/get", "GetTask"),
            "list": ("tasks/list", "ListTasks"),
            "cancel": ("tasks/cancel", "CancelTask"),
            "subscribe": ("tasks/resubscribe", "SubscribeToTask"),
        }
        return names[op][1 if self.v1 else 0]

    def state(self, short: str) -> str:
        """'completed' -> 'completed' (0.3) or 'TASK_STATE_COMPLETED' (1.0)."""
        return "TASK_STATE_" + short.upper().replace("-", "_") if self.v1 else short

    def role(self, short: str) -> str:
        return f"ROLE_{short.upper()}" if self.v1 else short

    def message(self, text: str, *, message_id: str | None = None, task_id: str | None = None,
                context_id: str | None = None, role: str = "user") -> dict[str, Any]:
        msg: dict[str, Any] = {"messageId": message_id or uid("m-"), "role": self.role(role)}
        if self.v1:
            msg["parts"] = [{"text": text}]
        else:
            msg["kind"] = "message"
            msg["parts"] = [{"kind": "text", "text": text}]
        if task_id is not None:
            msg["taskId"] = task_id
        if context_id is not None:
            msg["contextId"] = context_id
        return msg

    def send_params(self, text: str, *, wait: bool = True, **kw: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"message": self.message(text, **kw)}
        if not wait:
            params["configuration"] = {"returnImmediately": True} if self.v1 else {"blocking": False}
        return params

    def call(self, url: str, op: str, params: Any = None, **kw: Any) -> dict[str, Any]:
        return call(url, self.method(op), params, version=self.version, **kw)

    def result(self, url: str, op: str, params: Any = None) -> Any:
        return result(url, self.method(op), params, version=self.version)

    def error(self, url: str, op: str, params: Any = None, **kw: Any) -> dict[str, Any]:
        return error(url, self.method(op), params, version=self.version, **kw)

    def send(self, url: str, text: str, **kw: Any) -> dict[str, Any]:
        """message/send | SendMessage; returns the task (unwrapped in 1.0)."""
        res = self.result(url, "send", self.send_params(text, **kw))
        return self.task_of(res)

    def task_of(self, res: dict[str, Any]) -> dict[str, Any]:
        if self.v1:
            assert set(res) == {"task"}, res
            return res["task"]
        assert res["kind"] == "task", res
        return res

    def get(self, url: str, task_id: str, **params: Any) -> dict[str, Any]:
        return self.result(url, "get", {"id": task_id, **params})

    def list(self, url: str, **params: Any) -> dict[str, Any]:
        return self.result(url, "list", params)

    def wait_state(self, url: str, task_id: str, states: set[str]) -> dict[str, Any]:
        """Poll GetTask (bounded) until the task is in one of `states` (short names)."""
        want = {self.state(s) for s in states}
        deadline = time.monotonic() + WAIT
        while True:
            task = self.get(url, task_id)
            if task["status"]["state"] in want:
                return task
            assert time.monotonic() < deadline, f"task {task_id} stuck in {task['status']['state']}"
            time.sleep(0.005)

    # stream events
    def event_kind(self, payload: dict[str, Any]) -> str:
        """task | message | status | artifact, from a stream `result`."""
        if self.v1:
            assert len(payload) == 1, payload
            key = next(iter(payload))
            return {"task": "task", "message": "message", "statusUpdate": "status", "artifactUpdate": "artifact"}[key]
        return {"task": "task", "message": "message", "status-update": "status", "artifact-update": "artifact"}[
            payload["kind"]
        ]

    def event_body(self, payload: dict[str, Any]) -> dict[str, Any]:
        return next(iter(payload.values())) if self.v1 else payload


D03 = Dialect(None)
D10 = Dialect(V1)
DIALECTS = [D03, D10]


def increasing(ids: list) -> bool:
    """Whether SSE ids are strictly increasing integers."""
    return all(isinstance(i, int) for i in ids) and all(a < b for a, b in itertools.pairwise(ids))


def text_of(message: dict[str, Any] | None) -> str:
    if not message:
        return ""
    return "".join(p.get("text", "") for p in message.get("parts", []))


# --- SSE ----------------------------------------------------------------------------------------


@dataclass
class Frame:
    id: int | None
    event: str | None
    data: Any

    @property
    def result(self) -> Any:
        return self.data["result"]


def sse_lines(response: httpx.Response) -> Iterator[str]:
    """Lines of an SSE body, split only on CRLF, CR or LF as the SSE spec says.

    (httpx's iter_lines() also splits on U+0085, U+2028 ..., which JSON may carry unescaped.)
    """
    buf = ""
    for text in response.iter_text():
        buf += text
        while True:
            cut = min((i for i in (buf.find("\r"), buf.find("\n")) if i >= 0), default=-1)
            if cut < 0 or (buf[cut] == "\r" and cut == len(buf) - 1):
                break  # no complete line yet (a trailing CR may be half of a CRLF)
            line, rest = buf[:cut], buf[cut + 1 :]
            if buf[cut] == "\r" and rest.startswith("\n"):
                rest = rest[1:]
            yield line
            buf = rest
    if buf:
        yield buf.rstrip("\r")


class SSE:
    """Reads SSE frames from an open httpx streaming response."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = sse_lines(response)
        self.keepalives = 0

    def next(self) -> Frame | None:
        """The next frame, or None when the server closed the stream."""
        fid: int | None = None
        event: str | None = None
        data: list[str] = []
        for line in self._lines:
            if line == "":
                if data:
                    return Frame(fid, event, json.loads("\n".join(data)))
                fid, event = None, None
                continue
            if line.startswith(":"):
                self.keepalives += 1
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "id":
                fid = int(value)
            elif name == "event":
                event = value
            elif name == "data":
                data.append(value)
        assert not data, "the stream ended in the middle of a frame"
        return None

    def keepalive(self) -> str:
        """Read the next line, which must be an SSE comment (a keep-alive), and return it."""
        for line in self._lines:
            if line == "":
                continue
            assert line.startswith(":"), f"expected a keep-alive comment, got {line!r}"
            self.keepalives += 1
            return line
        raise AssertionError("the stream closed while waiting for a keep-alive")

    def until(self, pred) -> list[Frame]:
        """Frames up to and including the first one matching `pred` (asserts one comes)."""
        out = []
        while True:
            f = self.next()
            assert f is not None, f"the stream closed before the awaited event; got {[x.data for x in out]}"
            out.append(f)
            if pred(f):
                return out

    def rest(self) -> list[Frame]:
        """All remaining frames until the server closes the stream."""
        out = []
        while (f := self.next()) is not None:
            out.append(f)
        return out


@contextmanager
def stream(url: str, method: str, params: Any, *, version: str | None = None, rid: Any = 1,
           headers: dict[str, str] | None = None) -> Iterator[SSE]:
    """POST a streaming JSON-RPC request and read its SSE answer."""
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
    h = {"Content-Type": "application/json", "Accept": "text/event-stream", **headers_for(version), **(headers or {})}
    with http.stream("POST", url, content=json.dumps(body).encode(), headers=h) as r:
        assert r.status_code == 200, r.status_code
        ctype = r.headers["content-type"]
        if not ctype.startswith("text/event-stream"):
            r.read()
            raise AssertionError(f"expected an SSE stream, got {ctype}: {r.text}")
        yield SSE(r)


def status_text(d: Dialect, frame: Frame) -> str:
    body = d.event_body(frame.result)
    return text_of(body["status"].get("message"))


def is_status(d: Dialect, frame: Frame, text: str | None = None, state: str | None = None) -> bool:
    if frame.event is not None or "result" not in frame.data:
        return False
    if d.event_kind(frame.result) != "status":
        return False
    body = d.event_body(frame.result)
    if state is not None and body["status"]["state"] != d.state(state):
        return False
    return text is None or status_text(d, frame) == text
