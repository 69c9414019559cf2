"""Support of the push-notification tests: a real webhook receiver, and live Parley servers to point at it.

The receiver (:class:`Webhooks`) is a Starlette app under uvicorn on 127.0.0.1, in a thread. Every
request is recorded (path, headers, raw body, arrival time) the moment it arrives, before it is
answered. Each path is programmed with what to answer: a sequence of :class:`Reply` (a status, extra
headers such as `Retry-After` or `Location`, and optionally a :class:`Hold` that keeps the request
open until the test releases it); once the sequence is used up its last reply repeats. An
unprogrammed path answers 200. Tests wait for "N requests received at PATH" with
:meth:`Webhooks.wait_for`, a `threading.Condition` with a deadline: never a fixed sleep.

The Parley side (:class:`PushServer`): the built-in agents plus `steps` (status changes the test
releases one at a time) on a live server whose push settings allow exactly 127.0.0.1/32 (docs/push.md:
"The test suite allows 127.0.0.1 only"), with JSON-RPC helpers, the push log (a bounded poll: it is
written after each answer) and a replay of the task's log (SubscribeToTask with Last-Event-ID: 0).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from parley.agents.base import RunContext
from parley.agents.builtin import builtin_agents
from parley.app import Parley
from parley.security.keys import MemoryKeyStore
from parley.settings import PushSettings, Settings
from support import LiveServer

WAIT = 15.0  # the longest one observable step may take before a test fails; never a pacing delay


class Hold:
    """Keeps the requests answered with it open until :meth:`release` (callable from any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._released = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []

    def release(self) -> None:
        with self._lock:
            self._released = True
            waiters, self._waiters = self._waiters, []
        for loop, fut in waiters:
            loop.call_soon_threadsafe(lambda f=fut: f.done() or f.set_result(None))

    @property
    def released(self) -> bool:
        return self._released

    async def wait(self) -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._lock:
            if self._released:
                return
            self._waiters.append((loop, fut))
        await fut


@dataclass(frozen=True)
class Reply:
    """One answer of a webhook path."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    hold: Hold | None = None  # answer only once this is released
    endless: bool = False  # a body that never ends (chunks of 16 KiB until the client goes away)


@dataclass(frozen=True)
class Received:
    """One request the receiver got."""

    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    at: float  # time.time() on arrival

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def seq(self) -> int:
        return int(self.headers["parley-event-seq"])

    @property
    def event_id(self) -> str:
        return self.headers["parley-event-id"]

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Webhooks:
    """The receiver. `url(path)` is what a push config registers."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._cond = threading.Condition()
        self._got: dict[str, list[Received]] = {}
        self._plans: dict[str, list[Reply]] = {}
        self._served: dict[str, int] = {}
        self._holds: list[Hold] = []
        app = Starlette(routes=[Route("/{rest:path}", self._handle, methods=["POST", "GET", "PUT"])])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="critical", lifespan="off",
                                timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True, name="webhooks")

    # --- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> Webhooks:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:  # uvicorn offers no event for this; a bounded start-up wait
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the webhook receiver did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self.release_all()
        self._server.should_exit = True
        self._thread.join(timeout=20)

    # --- programming -------------------------------------------------------------------------------

    def path(self, name: str = "hook") -> str:
        """A fresh path no other test uses."""
        return f"/{name}/{uuid.uuid4().hex[:10]}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def hold(self) -> Hold:
        """A new Hold, released at the latest when the receiver stops."""
        h = Hold()
        with self._cond:
            self._holds.append(h)
        return h

    def program(self, path: str, *replies: int | Reply) -> None:
        """Answer the requests to `path` with `replies` in turn; the last one repeats."""
        plan = [r if isinstance(r, Reply) else Reply(r) for r in replies]
        assert plan, "program at least one reply"
        with self._cond:
            self._plans[path] = plan

    def release_all(self) -> None:
        with self._cond:
            holds = list(self._holds)
        for h in holds:
            h.release()

    # --- observing ---------------------------------------------------------------------------------

    def requests(self, path: str) -> list[Received]:
        with self._cond:
            return list(self._got.get(path, []))

    def count(self, path: str) -> int:
        with self._cond:
            return len(self._got.get(path, []))

    def wait_for(self, path: str, n: int, timeout: float = WAIT) -> list[Received]:
        """The first `n` (or more) requests to `path`, waiting at most `timeout` seconds for them."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._got.get(path, [])) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    got = self._got.get(path, [])
                    raise AssertionError(f"{path}: {len(got)} request(s) within {timeout:g} s, expected {n}; "
                                         f"seqs {[r.headers.get('parley-event-seq') for r in got]}")
                self._cond.wait(left)
            return list(self._got[path])

    def wait_until(self, path: str, predicate, timeout: float = WAIT) -> list[Received]:
        """The requests to `path` once `predicate(requests)` holds (checked on every arrival)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(list(self._got.get(path, []))):
                left = deadline - time.monotonic()
                if left <= 0:
                    got = self._got.get(path, [])
                    raise AssertionError(f"{path}: condition not met within {timeout:g} s; "
                                         f"{len(got)} request(s), seqs "
                                         f"{[r.headers.get('parley-event-seq') for r in got]}")
                self._cond.wait(left)
            return list(self._got[path])

    # --- the app -----------------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        body = await request.body()
        path = request.url.path
        got = Received(path, {k.lower(): v for k, v in request.headers.items()}, body, time.time())
        with self._cond:
            self._got.setdefault(path, []).append(got)
            n = self._served.get(path, 0)
            self._served[path] = n + 1
            plan = self._plans.get(path) or [Reply(200)]
            reply = plan[min(n, len(plan) - 1)]
            self._cond.notify_all()
        if reply.hold is not None:
            await reply.hold.wait()
        if reply.endless:
            return StreamingResponse(_endless(), status_code=reply.status, headers=reply.headers,
                                     media_type="application/octet-stream")
        return Response(status_code=reply.status, headers=reply.headers)


async def _endless():
    chunk = b"x" * 16384
    while True:
        yield chunk
        await asyncio.sleep(0)  # let the server notice a disconnect


# --- the Parley side: live servers with push settings, and how tests talk to them -----------------

ALLOW = ["127.0.0.1/32"]  # the webhook receiver, and nothing else
V1 = {"A2A-Version": "1.0"}
TIMEOUT = httpx.Timeout(30.0)
http = httpx.Client(timeout=TIMEOUT)

_SCRIPT = Path(sys.executable).with_name("parley")
PARLEY = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "parley.cli"]
CLI_ENV = {k: v for k, v in os.environ.items()
           if k not in ("PARLEY_API_KEY", "PARLEY_TOKEN", "PARLEY_KEY_PEPPER", "PARLEY_ADMIN_KEY")}
CLI_ENV.update({"COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"})


def uid(prefix: str = "") -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


def push_settings(**overrides: Any) -> PushSettings:
    """Push settings for tests: the receiver allowlisted, backoffs small so retries are quick."""
    values: dict[str, Any] = {"allow": list(ALLOW), "backoff_seconds": 0.05, "max_backoff_seconds": 0.2,
                              "timeout_seconds": 10.0}
    values.update(overrides)
    return PushSettings(**values)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`parley ARGS` as a real process."""
    return subprocess.run([*PARLEY, *args], check=False, capture_output=True, text=True,
                          env={**CLI_ENV, **(env or {})}, timeout=60)


# --- agents the tests control -------------------------------------------------------------------


class Gates:
    """Named one-shot latches: opened by the test thread, awaited by agents on the server's loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[str] = set()
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future]]] = {}

    def open(self, name: str) -> None:
        with self._lock:
            self._open.add(name)
            waiters = self._waiters.pop(name, [])
        for loop, fut in waiters:
            loop.call_soon_threadsafe(lambda f=fut: f.done() or f.set_result(None))

    def open_all(self) -> None:
        with self._lock:
            names = list(self._waiters)
        for name in names:
            self.open(name)

    async def wait(self, name: str) -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._lock:
            if name in self._open:
                return
            self._waiters.setdefault(name, []).append((loop, fut))
        await fut


def push_app(settings: Settings, gates: Gates) -> Parley:
    """The built-in agents (echo, interviewer) and `steps`: says "<text>: step 1", waits for gate
    <text>/1, says "<text>: step 2", waits for gate <text>/2, then completes."""
    app = Parley(settings=settings)
    for agent in builtin_agents():
        app.add_agent(agent)

    @app.agent(id="steps", description="Two progress messages, each after a gate the test opens")
    async def steps(ctx: RunContext):
        key = ctx.text
        yield ctx.say(f"{key}: step 1")
        await gates.wait(f"{key}/1")
        yield ctx.say(f"{key}: step 2")
        await gates.wait(f"{key}/2")
        yield f"{key}: done"

    return app


# --- a live server and how tests talk to it -----------------------------------------------------


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message", "")
        self.error = error


@dataclass
class PushServer:
    live: LiveServer
    gates: Gates
    settings: Settings

    @property
    def url(self) -> str:
        return self.live.url

    def agent_url(self, agent: str) -> str:
        return f"{self.live.url}/a2a/{agent}"

    def stop(self) -> None:
        self.gates.open_all()
        self.live.stop()

    # JSON-RPC
    def rpc_raw(self, agent: str, method: str, params: dict[str, Any], *, version: str | None = "1.0",
                key: str | None = None) -> httpx.Response:
        headers = {"A2A-Version": version} if version else {}
        if key:
            headers["X-API-Key"] = key
        body = {"jsonrpc": "2.0", "id": uid(), "method": method, "params": params}
        return http.post(self.agent_url(agent), json=body, headers=headers)

    def rpc(self, agent: str, method: str, params: dict[str, Any], *, version: str | None = "1.0",
            key: str | None = None) -> Any:
        """The result of a JSON-RPC call; RpcError for an error answer."""
        resp = self.rpc_raw(agent, method, params, version=version, key=key)
        assert resp.status_code == 200, (resp.status_code, resp.text)
        data = resp.json()
        if "error" in data:
            raise RpcError(data["error"])
        return data["result"]

    def rpc_error(self, agent: str, method: str, params: dict[str, Any], *, version: str | None = "1.0",
                  key: str | None = None) -> RpcError:
        try:
            result = self.rpc(agent, method, params, version=version, key=key)
        except RpcError as exc:
            return exc
        raise AssertionError(f"{method} succeeded, expected an error: {str(result)[:500]}")

    # A2A 1.0
    def send(self, agent: str, text: str, *, push: dict[str, Any] | None = None, task_id: str | None = None,
             wait: bool = True, key: str | None = None) -> dict[str, Any]:
        """SendMessage (JSON-RPC, 1.0); returns the task."""
        params = message_params(text, push=push, task_id=task_id, wait=wait)
        result = self.rpc(agent, "SendMessage", params, key=key)
        assert set(result) == {"task"}, result
        return result["task"]

    def create_config(self, agent: str, task_id: str, url: str, *, key: str | None = None,
                      **fields: Any) -> dict[str, Any]:
        """CreateTaskPushNotificationConfig (JSON-RPC, 1.0)."""
        return self.rpc(agent, "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": url, **fields},
                        key=key)

    def get_task(self, agent: str, task_id: str, key: str | None = None) -> dict[str, Any]:
        return self.rpc(agent, "GetTask", {"id": task_id}, key=key)

    # the push log
    def push_log_raw(self, agent: str, task_id: str, key: str | None = None) -> httpx.Response:
        headers = {"X-API-Key": key} if key else {}
        return http.get(f"{self.agent_url(agent)}/tasks/{task_id}/pushLog", headers=headers)

    def push_log(self, agent: str, task_id: str, key: str | None = None) -> dict[str, Any]:
        resp = self.push_log_raw(agent, task_id, key)
        assert resp.status_code == 200, (resp.status_code, resp.text)
        return resp.json()

    def wait_log(self, agent: str, task_id: str, predicate: Callable[[dict[str, Any]], bool], *,
                 key: str | None = None, timeout: float = WAIT) -> dict[str, Any]:
        """The push log once `predicate(log)` holds (a bounded poll: the log is written after each answer)."""
        deadline = time.monotonic() + timeout
        while True:
            log = self.push_log(agent, task_id, key)
            if predicate(log):
                return log
            if time.monotonic() > deadline:
                raise AssertionError(f"push log condition not met within {timeout:g} s: "
                                     f"{json.dumps(log, indent=1)[:4000]}")
            time.sleep(0.02)

    def wait_settled_log(self, agent: str, task_id: str, count: int | None = None, *,
                         key: str | None = None, timeout: float = WAIT) -> dict[str, Any]:
        """The push log once it has (at least `count`) notifications and none is pending."""
        def settled(log: dict[str, Any]) -> bool:
            ns = log["notifications"]
            return bool(ns) and (count is None or len(ns) >= count) and all(n["state"] != "pending" for n in ns)

        return self.wait_log(agent, task_id, settled, key=key, timeout=timeout)

    # the task's log, as a replay of SubscribeToTask from the start (Last-Event-ID: 0)
    def replay(self, agent: str, task_id: str, key: str | None = None) -> list[tuple[int, dict[str, Any]]]:
        """(seq, StreamResponse) of every entry of a finished task's log, in order."""
        headers = {**V1, "Accept": "text/event-stream", "Last-Event-ID": "0"}
        if key:
            headers["X-API-Key"] = key
        body = {"jsonrpc": "2.0", "id": uid(), "method": "SubscribeToTask", "params": {"id": task_id}}
        out: list[tuple[int, dict[str, Any]]] = []
        with http.stream("POST", self.agent_url(agent), json=body, headers=headers) as resp:
            assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream"), \
                resp.read()
            fid: str | None = None
            for line in resp.iter_lines():
                if line.startswith("id:"):
                    fid = line[3:].strip()
                elif line.startswith("data:"):
                    data = json.loads(line[5:].strip())
                    assert "result" in data, data
                    out.append((int(fid), data["result"]))  # type: ignore[arg-type]
                    fid = None
        return out

    def replay_changes(self, agent: str, task_id: str, *, artifacts: bool = False) -> list[tuple[int, dict]]:
        """(seq, StreamResponse) of the status changes (and artifact updates) of a finished task."""
        kinds = {"statusUpdate", "artifactUpdate"} if artifacts else {"statusUpdate"}
        return [(seq, ev) for seq, ev in self.replay(agent, task_id) if next(iter(ev)) in kinds]


def message_params(text: str, *, push: dict[str, Any] | None = None, task_id: str | None = None,
                   wait: bool = True) -> dict[str, Any]:
    """SendMessage params (A2A 1.0 JSON shape)."""
    msg: dict[str, Any] = {"messageId": uid("m-"), "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id:
        msg["taskId"] = task_id
    params: dict[str, Any] = {"message": msg}
    conf: dict[str, Any] = {}
    if push is not None:
        conf["taskPushNotificationConfig"] = push
    if not wait:
        conf["returnImmediately"] = True
    if conf:
        params["configuration"] = conf
    return params


def notifications_of(log: dict[str, Any], config_id: str | None = None) -> list[dict[str, Any]]:
    return [n for n in log["notifications"] if config_id is None or n["configId"] == config_id]


def make_keys(agent: str, *principals: str) -> tuple[MemoryKeyStore, list[str]]:
    """An in-memory key store with one key per principal for `agent` (what `parley keys create` makes)."""
    store = MemoryKeyStore()

    async def make() -> list[str]:
        return [(await store.create(agent, principal=p, name=p))[1] for p in principals]

    return store, asyncio.run(make())


def b64url_sha256(body: bytes) -> str:
    """base64url (no padding) SHA-256 of a body: what the `body_sha256` claim must be."""
    return base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()


def seqs(requests: Iterable[Received]) -> list[int]:
    return [r.seq for r in requests]


def strictly_increasing(values: list[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(values))


__all__ = ["ALLOW", "V1", "WAIT", "Gates", "Hold", "PushServer", "Received", "Reply", "RpcError", "Webhooks",
           "b64url_sha256", "cli", "http", "make_keys", "message_params", "notifications_of", "push_app",
           "push_settings", "seqs", "strictly_increasing", "uid"]
