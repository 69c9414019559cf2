"""Helpers shared by the secured-server tests (test_keys_cli, test_serve_modes, test_auth_bindings).

- the `parley` command as a real subprocess (`cli`, `ok`, `one_error_line`), and `parley serve` as a
  subprocess whose readiness is the "Uvicorn running on" line it prints (:class:`Served`, no sleeps);
- raw requests that show the status and headers on the wire: JSON-RPC and HTTP+JSON over httpx
  (`jsonrpc`, `send_jsonrpc`), gRPC with its status code, ErrorInfo reason and trailing metadata
  (`grpc_raw`);
- `poll`: a bounded wait for something that becomes true on its own (a key the server notices
  within its documented second), never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

TESTS = Path(__file__).resolve().parents[1]
for folder in (TESTS, TESTS / "server"):  # support.py, and accesskit.py of the server suite
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import accesskit  # the live servers with gRPC of tests/server (needs the path above)

from support import grpc_error_reason, grpc_text_trailers

_SCRIPT = Path(sys.executable).with_name("parley")
PARLEY = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "parley.cli"]
# A clean environment: no credentials or pepper of the developer's shell leak into the commands.
ENV = {k: v for k, v in os.environ.items()
       if k not in ("PARLEY_API_KEY", "PARLEY_TOKEN", "PARLEY_KEY_PEPPER", "PARLEY_ADMIN_KEY")}
ENV.update({"COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"})
TIMEOUT = 60.0  # a safety net against hangs, never a pacing delay
WAIT = 15.0  # the longest one observable step may take before a test fails
TOKEN_RE = re.compile(r"pk_(?P<id>[0-9a-f]{16})_(?P<secret>[A-Za-z0-9_-]{20,})")
SECURED_RECHECK = 1.0  # the documented interval: a running server notices new/changed keys within a second

T = TypeVar("T")


def uid(prefix: str = "") -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the CLI -------------------------------------------------------------------------------------------------


def cli(*args: str, cwd: Path | str | None = None, env: dict[str, str] | None = None,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `parley ARGS` to completion (a real process)."""
    return subprocess.run([*PARLEY, *args], check=False, input=stdin, capture_output=True, text=True,
                          env={**ENV, **(env or {})}, cwd=cwd, timeout=TIMEOUT)


def ok(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run `parley ARGS`; it must exit 0 without a traceback."""
    proc = cli(*args, **kw)
    assert proc.returncode == 0, f"parley {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    return proc


def one_error_line(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """A failed command: non-zero exit, one `error:` line on stderr naming every fragment, no traceback."""
    assert proc.returncode != 0, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error:"), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@dataclass
class Key:
    """A key as `parley keys create` printed it."""

    token: str
    id: str
    secret: str
    notice: str  # what went to stderr


def create_key(agent: str, *args: str, cwd: Path | str | None = None) -> Key:
    """`parley keys create AGENT ARGS`: the key from stdout (checked to be the only thing there)."""
    proc = ok("keys", "create", agent, *args, cwd=cwd)
    token = proc.stdout.strip()
    found = TOKEN_RE.fullmatch(token)
    assert found is not None, f"stdout is not exactly one key: {proc.stdout!r}"
    return Key(token, found["id"], found["secret"], proc.stderr)


def keys_json(*args: str, cwd: Path | str | None = None) -> list[dict[str, Any]]:
    import json

    return json.loads(ok("keys", "list", *args, "--json", cwd=cwd).stdout)


# --- `parley serve` as a subprocess ---------------------------------------------------------------------------


class Served:
    """`parley serve ARGS` in a process of its own. Its stderr is read line by line in a thread;
    it is ready when uvicorn says "Uvicorn running on" (or it has exited: then it never will be)."""

    def __init__(self, *args: str, port: int | None = None, cwd: Path | str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = ["serve", "--port", str(self.port), "--log-level", "info", *args]
        self.proc = subprocess.Popen([*PARLEY, *self.args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**ENV, **(env or {})}, cwd=cwd)
        self._lock = threading.Lock()
        self._err: list[str] = []
        self._out: list[str] = []
        self._news: queue.Queue[str | None] = queue.Queue()
        self._threads = [threading.Thread(target=self._pump, args=(self.proc.stderr, self._err, True), daemon=True),
                         threading.Thread(target=self._pump, args=(self.proc.stdout, self._out, False), daemon=True)]
        for t in self._threads:
            t.start()

    def _pump(self, stream: Any, into: list[str], signal: bool) -> None:
        for line in stream:
            with self._lock:
                into.append(line)
            if signal:
                self._news.put(line)
        if signal:
            self._news.put(None)  # EOF: the process is gone

    @property
    def stderr(self) -> str:
        with self._lock:
            return "".join(self._err)

    @property
    def stdout(self) -> str:
        with self._lock:
            return "".join(self._out)

    def wait_ready(self) -> Served:
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                line = self._news.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"parley {' '.join(self.args)} did not start within {TIMEOUT}s:\n{self.stderr}")
            if line is None:
                self.proc.wait(TIMEOUT)
                pytest.fail(f"parley {' '.join(self.args)} exited with {self.proc.returncode}:\n{self.stderr}")
            if "Uvicorn running on" in line:
                return self

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            code = self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(TIMEOUT)
        for t in self._threads:
            t.join(TIMEOUT)
        return code

    def agent_url(self, agent: str) -> str:
        return f"{self.url}/a2a/{agent}"


@contextmanager
def served(*args: str, **kw: Any) -> Iterator[Served]:
    """A ready `parley serve` for the duration of the block."""
    srv = Served(*args, **kw)
    try:
        yield srv.wait_ready()
    finally:
        srv.stop()


# --- raw requests ------------------------------------------------------------------------------------------------


def auth_headers(token: str | None, how: str = "x-api-key") -> dict[str, str]:
    if token is None:
        return {}
    if how == "bearer":
        return {"Authorization": f"Bearer {token}"}
    return {"X-API-Key": token}


def jsonrpc(url: str, method: str, params: dict[str, Any] | None = None, *, token: str | None = None,
            how: str = "x-api-key", version: str | None = "1.0", rid: int | str = 1) -> httpx.Response:
    """POST one JSON-RPC request (sync)."""
    headers = auth_headers(token, how)
    if version:
        headers["A2A-Version"] = version
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}
    return httpx.post(url, json=body, headers=headers, timeout=WAIT)


def message_v1(text: str, *, task_id: str | None = None, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"messageId": uid("m-"), "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id is not None:
        msg["taskId"] = task_id
    if metadata is not None:
        msg["metadata"] = metadata
    return msg


def send_jsonrpc(url: str, text: str, *, token: str | None = None, how: str = "x-api-key") -> httpx.Response:
    """SendMessage (A2A 1.0 JSON-RPC) of one text."""
    return jsonrpc(url, "SendMessage", {"message": message_v1(text)}, token=token, how=how)


def result_of(resp: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC result of a successful call (asserting it is one)."""
    assert resp.status_code == 200, (resp.status_code, resp.text)
    body = resp.json()
    assert "result" in body, body
    return body["result"]


def error_of(resp: httpx.Response) -> dict[str, Any]:
    body = resp.json()
    assert "error" in body, (resp.status_code, body)
    return body["error"]


def poll(check: Callable[[], T | None], *, within: float, what: str) -> tuple[T, float]:
    """Call `check` until it returns something other than None; (that, seconds it took). Fails after
    `within` seconds. For things the server does on its own clock (a key noticed within a second)."""
    start = time.monotonic()
    while True:
        value = check()
        elapsed = time.monotonic() - start
        if value is not None:
            return value, elapsed
        if elapsed > within:
            pytest.fail(f"{what}: not within {within}s")
        time.sleep(0.02)  # the interval between two polls; the bound is `within`


def non_loopback_ip() -> str | None:
    """An address of this machine that is not loopback (the interface of the default route), if any."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent, the kernel only picks the route
            ip = s.getsockname()[0]
    except OSError:
        return None
    return None if ip.startswith("127.") or ip == "0.0.0.0" else ip


# RFC 9651 (Structured Fields): an item with a String bare item and parameters whose values are Integers, the shape
# of every RateLimit field (draft-ietf-httpapi-ratelimit-headers).
_SF_KEY = r"[a-z*][a-z0-9_\-.*]*"
_SF_INTEGER = r"-?[0-9]{1,15}"
_SF_STRING = r'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"'
_SF_ITEM = re.compile(rf"({_SF_STRING})((?:;{_SF_KEY}={_SF_INTEGER})*)")


def sf_item(value: str | None) -> tuple[str, dict[str, int]]:
    """Parse a field value that must be exactly one sf-item `"name";k=int;...` (else the test fails): (the name, the
    parameters)."""
    assert value is not None, "the field is missing"
    found = _SF_ITEM.fullmatch(value)
    assert found is not None, f"not a Structured Field item of a String with Integer parameters: {value!r}"
    params: dict[str, int] = {}
    for param in found.group(2).split(";")[1:]:
        key, _, number = param.partition("=")
        assert key not in params, f"parameter {key} twice in {value!r}"
        params[key] = int(number)
    return json.loads(found.group(1)), params


class Sse:
    """An SSE response read one JSON event at a time, each read bounded by WAIT (a failure detector only)."""

    def __init__(self, resp: httpx.Response) -> None:
        self.resp = resp
        self.lines = resp.aiter_lines()

    async def next(self) -> dict[str, Any] | None:
        """The next event's JSON, or None once the server has closed the stream."""
        async def read() -> dict[str, Any] | None:
            data: list[str] = []
            async for line in self.lines:
                if line.startswith("data:"):
                    data.append(line[5:].strip())
                elif not line and data:
                    return json.loads("".join(data))
            return None

        try:
            return await asyncio.wait_for(read(), WAIT)
        except TimeoutError:
            raise AssertionError(f"no SSE event within {WAIT}s") from None

    async def rest(self) -> list[dict[str, Any]]:
        """The events left until the server closes the stream."""
        out = []
        while (event := await self.next()) is not None:
            out.append(event)
        return out


# --- gRPC ---------------------------------------------------------------------------------------------------------


@dataclass
class GrpcOutcome:
    code: str  # "OK" or the status code name
    reason: str | None = None  # the ErrorInfo reason
    trailers: dict[str, str] | None = None
    result: Any = None


async def grpc_raw(target: str, op: Any, request: Any, agent: str, metadata: list[tuple[str, str]]) -> GrpcOutcome:
    """One gRPC call of `op` (a parley Operation) with `request` (canonical) for `agent`."""
    import grpc
    import grpc.aio

    from parley.grpc import a2a_pb2_grpc, convert

    md = [("a2a-version", "1.0"), *metadata]
    async with grpc.aio.insecure_channel(target) as channel:
        rpc = getattr(a2a_pb2_grpc.A2AServiceStub(channel), convert.RPCS[op])
        try:
            call = rpc(convert.encode_request(op, request, agent), metadata=md, timeout=WAIT)
            if op.streams:
                items = [item async for item in call]
                return GrpcOutcome("OK", result=items)
            return GrpcOutcome("OK", result=await call)
        except grpc.aio.AioRpcError as exc:
            return GrpcOutcome(exc.code().name, grpc_error_reason(exc), grpc_text_trailers(exc))


__all__ = [
    "ENV",
    "PARLEY",
    "SECURED_RECHECK",
    "TIMEOUT",
    "TOKEN_RE",
    "WAIT",
    "GrpcOutcome",
    "Key",
    "Served",
    "Sse",
    "accesskit",
    "auth_headers",
    "cli",
    "create_key",
    "error_of",
    "free_port",
    "grpc_raw",
    "jsonrpc",
    "keys_json",
    "message_v1",
    "non_loopback_ip",
    "ok",
    "one_error_line",
    "poll",
    "result_of",
    "send_jsonrpc",
    "served",
    "sf_item",
    "uid",
]
