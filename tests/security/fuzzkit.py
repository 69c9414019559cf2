"""Shared kit of the hostile-input and fuzzing suites (tests/security/test_hostile_input.py,
tests/security/test_fuzz_bindings.py): a secured live server, what a principal owns on it, the
server's log, generators of malformed and hostile requests for every binding, the judge of answers,
and the precise expectations of the hostile-input tests.

The server is a real uvicorn server on 127.0.0.1 (and its gRPC port), with a SQLite task store in a
temporary directory and API keys made before it starts (as `parley keys create` would): principal P1
owns tasks (two completed, one waiting in input-required), principal P2 is the one who attacks, P3's
key opens another agent only, and a revoked key of P2's. Made keys make the server *secured*: a request
without a valid key is refused (401 / UNAUTHENTICATED). The server runs in a thread of the test process
(:class:`LogRecorder` sees its log records, :class:`Observer` when it is done with a request), or in a
process of its own (:class:`ChildServer`, for the fuzzing campaigns: its log is a file of JSON lines).

The generators are plain functions of a `random.Random` (seeded: every run sends the same requests),
drawing replacement values from pools of JSON values, texts and bytes that Hypothesis generates once per
process (:func:`hypothesis_pools`, derandomized) and from hand-written hostile values.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import random
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes

import httpx

from parley.agents.base import FunctionAgent, RunContext
from parley.app import Parley, Settings
from parley.security.keys import open_keys
from parley.settings import LimitSettings
from support import LiveServer, free_port

try:  # the gRPC binding needs the parley[grpc] extra (installed by the dev extra)
    import grpc
    import grpc.aio

    from parley.grpc import a2a_pb2 as pb

    HAVE_GRPC = True
except ImportError:  # pragma: no cover - depends on the environment
    HAVE_GRPC = False

AGENT = "vault"  # the default agent: both keys open it
OTHER_AGENT = "other"  # a second agent: the keys do not open it (403)
ASK = "ASK-" + uuid.uuid4().hex  # a message starting with this asks a question (input-required)
SECRET = "p1-secret-" + uuid.uuid4().hex  # in every text P1 sends: must never reach anybody else
V1 = {"A2A-Version": "1.0"}
GRPC_SERVICE = "/lf.a2a.v1.A2AService/"
GRPC_STREAMING = ["SendStreamingMessage", "SubscribeToTask"]


# --- the agents ----------------------------------------------------------------------------------


async def vault(ctx: RunContext):
    """Echoes the message, and every text of the task and its context it can see (so that a message that
    reached another principal's task or context would show that principal's texts in the answer).
    A message starting with ASK asks a question first (input-required)."""
    if ctx.text.startswith(ASK) and ctx.turn == 1:
        yield ctx.ask(f"question about {ctx.text[:200]}")
        return
    seen = [msg.text() for msg in [*ctx.context_history, *ctx.history]]
    yield "echo: " + ctx.text[:2000] + " | seen: " + " / ".join(t[:200] for t in seen)


async def other(ctx: RunContext):
    yield "other: " + ctx.text[:100]


def fuzz_app(db: str, *, grpc_port: int | None, limits: LimitSettings | None = None,
             max_body_bytes: int | None = None) -> Parley:
    settings = Settings(db=db, grpc_port=grpc_port, limits=limits or LimitSettings())
    # Thousands of wrong credentials come from 127.0.0.1 on purpose: throttling them (429 for everything from that
    # address, parley.security.failures) would hide what authentication does with each; tested on its own in
    # test_dashboard_logins.
    settings.limits.auth_failures = None
    if max_body_bytes is not None:
        settings.max_body_bytes = max_body_bytes
    app = Parley(settings=settings)
    app.add_agent(FunctionAgent(vault, id=AGENT, name="Vault"), default=True)
    app.add_agent(FunctionAgent(other, id=OTHER_AGENT, name="Other"))
    return app


# --- the server's log ------------------------------------------------------------------------------


class LogRecorder(logging.Handler):
    """Every record of WARNING or above any logger of the process emits (uvicorn's loggers do not
    propagate to the root logger: attached to them too)."""

    LOGGERS = ("", "uvicorn", "uvicorn.error", "grpc", "parley")

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.records: list[logging.LogRecord] = []
        self._seen: set[int] = set()
        self._mutex = threading.Lock()  # not `lock`: logging.Handler's own (reentrant) lock
        self._attached: list[logging.Logger] = []

    def emit(self, record: logging.LogRecord) -> None:
        with self._mutex:
            if id(record) not in self._seen:  # a record reaches several of the loggers it is attached to
                self._seen.add(id(record))
                self.records.append(record)

    @contextmanager
    def isolated(self) -> Iterator[None]:
        """Within the block, the server's records reach this recorder only: not the root logger's other
        handlers (pytest's log capture would otherwise print thousands of tracebacks of a failing run),
        nor uvicorn's stderr handler; and no other handler handles a record of another thread than the
        main one. So no handler formats a traceback in the server's thread: on Python 3.11 that parses
        source with `ast` (the caret lines), which is not thread-safe and breaks pytest's own formatting
        of a failure at the same moment (SystemError: AST constructor recursion depth mismatch)."""
        loggers = [logging.getLogger(name) for name in ("parley", "grpc")]
        saved = [logger.propagate for logger in loggers]
        guarded = [h for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access", "asyncio")
                   for h in logging.getLogger(name).handlers if h is not self]
        for logger in loggers:
            logger.propagate = False
        for handler in guarded:
            handler.addFilter(_main_thread_only)
        try:
            yield
        finally:
            for logger, flag in zip(loggers, saved):
                logger.propagate = flag
            for handler in guarded:
                handler.removeFilter(_main_thread_only)

    def attach(self) -> LogRecorder:
        for name in self.LOGGERS:
            logger = logging.getLogger(name)
            logger.addHandler(self)
            self._attached.append(logger)
        return self

    def detach(self) -> None:
        for logger in self._attached:
            logger.removeHandler(self)
        self._attached.clear()

    def clear(self) -> None:
        with self._mutex:
            self.records.clear()
            self._seen.clear()

    def bad(self) -> list[logging.LogRecord]:
        """Records that say something went wrong in the server: ERROR or worse, a traceback, or
        "unexpected" in the message."""
        with self._mutex:
            records = list(self.records)
        return [r for r in records
                if r.levelno >= logging.ERROR or r.exc_info or "unexpected" in r.getMessage().lower()]

    @staticmethod
    def describe(records: list[logging.LogRecord], limit: int = 5) -> str:
        fmt = logging.Formatter("%(levelname)s %(name)s: %(message)s")
        return "\n---\n".join(fmt.format(r) for r in records[:limit])


def _main_thread_only(record: logging.LogRecord) -> bool:
    return record.thread == threading.main_thread().ident


# --- a secured live server ---------------------------------------------------------------------------


class Observer:
    """ASGI middleware: notes every HTTP request the app finished (by its query string), and whether the
    app raised, so that a test can wait for the server to be done with a request whose client left."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.started: set[str] = set()  # query strings of the requests the app was called for
        self.finished: dict[str, str | None] = {}  # query string -> the exception the app raised, or None
        self.cond = threading.Condition()

    def __getattr__(self, name: str) -> Any:  # `.state` etc. of the wrapped Starlette app
        return getattr(self.inner, name)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        raised: str | None = None
        query = scope.get("query_string", b"").decode("latin-1")
        with self.cond:
            self.started.add(query)
            self.cond.notify_all()
        try:
            await self.inner(scope, receive, send)
        except BaseException as exc:
            raised = repr(exc)
            raise
        finally:
            with self.cond:
                self.finished[query] = raised
                self.cond.notify_all()

    def wait_started(self, query: str, timeout: float = 15.0) -> bool:
        """Whether the app was called for the request with this query string (within `timeout`)."""
        with self.cond:
            return self.cond.wait_for(lambda: query in self.started, timeout)

    def wait(self, query: str, timeout: float = 15.0) -> tuple[bool, str | None]:
        """(whether the app finished the request with this query string in time, what it raised)."""
        with self.cond:
            done = self.cond.wait_for(lambda: query in self.finished, timeout)
            return done, self.finished.get(query)


@dataclass
class Secured:
    """A live secured server: its URLs, the keys of P1 and P2, and what P1 owns."""

    live: Any  # LiveServer (a thread of this process) or ChildServer (a process of its own)
    tmp: Path
    grpc_port: int | None
    p1_key: str
    p2_key: str
    other_key: str  # a valid key of a third principal that opens only OTHER_AGENT
    revoked_key: str
    log: Any  # LogRecorder, or ChildLog for a ChildServer
    observer: Observer | None
    p1_tasks: list[dict[str, Any]] = field(default_factory=list)  # as P1 got them (1.0 JSON)
    p2_tasks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.live.url

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def p1_task_ids(self) -> list[str]:
        return [t["id"] for t in self.p1_tasks]

    @property
    def p1_context_ids(self) -> list[str]:
        return [t["contextId"] for t in self.p1_tasks]

    @property
    def p2_task_ids(self) -> list[str]:
        return [t["id"] for t in self.p2_tasks]



def _make_keys(db: str) -> tuple[str, str, str, str]:
    """Keys made before the server starts, as `parley keys create` would (the key store is in the db file)."""
    import asyncio

    async def make() -> tuple[str, str, str, str]:
        store = open_keys(db)
        try:
            _, p1 = await store.create(AGENT, principal="P1", name="p1")
            _, p2 = await store.create(AGENT, principal="P2", name="p2")
            _, p3 = await store.create(OTHER_AGENT, principal="P3", name="p3")
            rec, revoked = await store.create(AGENT, principal="P2", name="revoked")
            await store.revoke(rec.id)
            return p1, p2, p3, revoked
        finally:
            await store.close()

    return asyncio.run(make())


@contextmanager
def secured_server(*, grpc: bool = True, limits: LimitSettings | None = None, max_body_bytes: int | None = None,
                   p1_tasks: bool = True, child: bool = False) -> Iterator[Secured]:
    """A secured live server where P1 owns two completed tasks and one waiting for input (and P2 one).

    `child`: run the server in a process of its own (the fuzzing campaigns: client and server then use
    two cores instead of sharing one interpreter); its log is read from a file (:class:`ChildLog`).
    """
    with tempfile.TemporaryDirectory(prefix="parley-fuzz-") as tmp:
        db = str(Path(tmp) / "parley.db")
        keys = _make_keys(db)
        port = free_port() if grpc and HAVE_GRPC else None
        if child:
            server = ChildServer(Path(tmp), db, port, limits, max_body_bytes).start()
            srv = Secured(server, Path(tmp), port, *keys, log=server.log, observer=None)
            try:
                if p1_tasks:
                    seed_tasks(srv)
                yield srv
            finally:
                server.stop()
            return
        app = fuzz_app(db, grpc_port=port, limits=limits, max_body_bytes=max_body_bytes)
        build = app.asgi
        observers: list[Observer] = []

        def observed(settings: Any = None) -> Any:
            observers.append(Observer(build(settings)))
            return observers[-1]

        app.asgi = observed  # type: ignore[method-assign]
        recorder = LogRecorder()
        live = LiveServer(app)
        recorder.attach()  # after uvicorn configured its loggers (in LiveServer's Config)
        live.start()
        srv = Secured(live, Path(tmp), port, *keys, log=recorder, observer=observers[0])
        try:
            if p1_tasks:
                seed_tasks(srv)
            yield srv
        finally:
            live.stop()
            recorder.detach()


class ChildLog:
    """The log of a ChildServer: JSON lines (level, logger, message, traceback) in a file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def clear(self) -> None:
        self.offset = self.path.stat().st_size if self.path.exists() else 0

    def records(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as f:
            f.seek(self.offset)
            return [json.loads(line) for line in f.read().splitlines() if line.strip()]

    def bad(self) -> list[dict[str, Any]]:
        return [r for r in self.records()
                if r["level"] >= logging.ERROR or r["exc"] or "unexpected" in r["message"].lower()]

    @staticmethod
    def describe(records: list[dict[str, Any]], limit: int = 5) -> str:
        return "\n---\n".join(f"{r['levelname']} {r['name']}: {r['message']}" + (f"\n{r['exc']}" if r["exc"] else "")
                               for r in records[:limit])

    @contextmanager
    def isolated(self) -> Iterator[None]:
        yield


class _JsonLines(logging.Handler):
    def __init__(self, path: str) -> None:
        super().__init__(level=logging.WARNING)
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the life of the process

    def emit(self, record: logging.LogRecord) -> None:
        exc = logging.Formatter().formatException(record.exc_info) if record.exc_info else None
        self.file.write(json.dumps({"level": record.levelno, "levelname": record.levelname, "name": record.name,
                                    "message": record.getMessage(), "exc": exc}) + "\n")
        self.file.flush()


def serve_child() -> None:
    """The body of a ChildServer's process: the fuzzing app on the given ports, logging to a file."""
    import os

    import msgspec
    import uvicorn

    global ASK, SECRET
    conf = json.loads(os.environ["PARLEY_FUZZ_CHILD"])
    ASK, SECRET = conf["ask"], conf["secret"]  # the agent of this process knows the parent's markers
    root = logging.getLogger()
    root.setLevel(logging.WARNING)
    root.addHandler(_JsonLines(conf["log"]))
    limits = msgspec.convert(conf["limits"], LimitSettings) if conf["limits"] is not None else None
    app = fuzz_app(conf["db"], grpc_port=conf["grpc_port"], limits=limits, max_body_bytes=conf["max_body_bytes"])
    config = uvicorn.Config(app.asgi(), host="127.0.0.1", port=conf["port"], log_config=None, log_level="warning",
                            access_log=False, lifespan="on", timeout_graceful_shutdown=5)
    uvicorn.Server(config).run()


class ChildServer:
    """The fuzzing app served by a process of its own (started and stopped by this object only)."""

    def __init__(self, tmp: Path, db: str, grpc_port: int | None, limits: LimitSettings | None,
                 max_body_bytes: int | None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.tmp = tmp
        self.log = ChildLog(tmp / "server-log.jsonl")
        import msgspec

        self.conf = {"db": db, "port": self.port, "grpc_port": grpc_port, "max_body_bytes": max_body_bytes,
                     "limits": msgspec.to_builtins(limits) if limits is not None else None, "ask": ASK,
                     "secret": SECRET, "log": str(self.log.path)}
        self.proc: Any = None

    def start(self) -> ChildServer:
        import os
        import subprocess
        import sys

        here = Path(__file__).resolve().parent
        code = (f"import sys; sys.path[:0] = [{str(here.parent)!r}, {str(here)!r}]; "
                "import fuzzkit; fuzzkit.serve_child()")
        env = {**os.environ, "PARLEY_FUZZ_CHILD": json.dumps(self.conf)}
        self.output = (self.tmp / "server-output.txt").open("wb")
        self.proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=self.output,
                                     stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:  # ready when it answers (the lifespan has started the gRPC server by then)
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the fuzzing server did not start: "
                                   + (self.tmp / "server-output.txt").read_text(errors="replace")[-3000:])
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.05)

    def stop(self) -> None:
        import subprocess

        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # the process this object started, by its pid
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.output.close()


def send_v1(srv: Secured, key: str, text: str, *, task_id: str | None = None,
            context_id: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id:
        msg["taskId"] = task_id
    if context_id:
        msg["contextId"] = context_id
    resp = httpx.post(srv.url + "/", headers={**V1, "X-API-Key": key},
                      json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": msg}},
                      timeout=15)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert "result" in body, body
    return body["result"]["task"]


def seed_tasks(srv: Secured) -> None:
    """P1: two completed tasks (the second in the first one's context) and one in input-required;
    P2: one completed task of its own (a target P2 may legitimately touch)."""
    first = send_v1(srv, srv.p1_key, f"{SECRET} first")
    second = send_v1(srv, srv.p1_key, f"{SECRET} second", context_id=first["contextId"])
    asking = send_v1(srv, srv.p1_key, f"{ASK} {SECRET} asking")
    assert first["status"]["state"] == second["status"]["state"] == "TASK_STATE_COMPLETED", (first, second)
    assert asking["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asking
    srv.p1_tasks = [first, second, asking]
    srv.p2_tasks = [send_v1(srv, srv.p2_key, "p2 own task")]


def p1_snapshot(srv: Secured) -> list[bytes]:
    """Everything P1 can read about its tasks, as the bytes the server sends (1.0 JSON-RPC and
    0.3 REST, full history and artifacts)."""
    out = []
    with httpx.Client(base_url=srv.url, timeout=15, headers={"X-API-Key": srv.p1_key}) as http:
        for tid in srv.p1_task_ids:
            resp = http.post("/", headers=V1, json={"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                                   "params": {"id": tid, "historyLength": 1000}})
            out.append(resp.content)
            out.append(http.get(f"/v1/tasks/{tid}", params={"historyLength": 1000}).content)
        resp = http.post("/", headers=V1, json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks",
                                               "params": {"includeArtifacts": True, "pageSize": 100}})
        out.append(resp.content)
    return out


# --- hostile values ------------------------------------------------------------------------------------


def deep_list(depth: int, leaf: Any = 0) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def deep_object(depth: int, leaf: Any = 0) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


HOSTILE_STRINGS: list[str] = [
    "", " ", "\x00", "a\x00b", "\t\n\r", "\x7f", "\x1b[31mred", "\u202egnp.exe", "\ufeff", "\uffff", "\U0010ffff",
    "😀" * 50, "é" * 300, "\ud800", "x\udfffy",  # lone surrogates: escaped by json.dumps, CESU-8 bytes raw
    "../../etc/passwd", "..", ".", "/", ":", "tasks/", "tasks/x/pushNotificationConfigs/y", "%00", "%2e%2e%2f",
    "' OR '1'='1", '"; DROP TABLE tasks; --', "<script>alert(1)</script>", "${jndi:ldap://127.0.0.1/a}",
    "{{7*7}}", "\r\nX-Injected: 1", "null", "true", "0", "-1", "1e400", "NaN", "Infinity", "[]", "{}",
    "ROLE_USER", "ROLE_AGENT", "ROLE_UNSPECIFIED", "user", "agent", "TASK_STATE_COMPLETED", "completed",
    "TASK_STATE_INPUT_REQUIRED", "input-required", "text/plain", "*/*", "pk_", "pk_x_y", "Bearer x", "*", "?", "#",
    "\\", "a" * 1025, "b" * 5000,
]

HOSTILE_NUMBERS: list[Any] = [
    0, -1, 1, -0.0, 0.5, 1.5, 2**31 - 1, 2**31, -(2**31) - 1, 2**53 + 1, 2**63, 2**64, -(2**63) - 1, 10**30,
    10**400, 1e308, -1e308, 5e-324, float("nan"), float("inf"), float("-inf"),
]

HOSTILE_STRUCTURES: list[Any] = [
    None, True, False, [], {}, [[]], {"": ""}, [None] * 100, deep_list(20), deep_object(20), deep_list(70),
    deep_object(70), {"__proto__": {"admin": True}}, {"constructor": {"prototype": {"admin": True}}},
    {"owner": "P1", "principal": "P1"}, list(range(200)), {str(i): i for i in range(300)},
]

# Names of request fields of both versions (and some that are not): what a mutation adds or renames.
FIELD_NAMES: list[str] = [
    "id", "taskId", "task_id", "contextId", "context_id", "messageId", "message_id", "role", "parts", "content",
    "kind", "text", "raw", "url", "data", "file", "bytes", "uri", "fileWithUri", "fileWithBytes", "mimeType",
    "mediaType", "filename", "metadata", "configuration", "historyLength", "history_length", "pageSize",
    "pageToken", "status", "statusTimestampAfter", "includeArtifacts", "tenant", "name", "parent", "config",
    "configId", "pushNotificationConfig", "pushNotificationConfigId", "taskPushNotificationConfig",
    "acceptedOutputModes", "blocking", "returnImmediately", "extensions", "referenceTaskIds", "jsonrpc",
    "method", "params", "result", "error", "owner", "principal", "agentId", "agent_id", "history", "artifacts",
    "__proto__", "",
]


@dataclass
class Pools:
    """Values Hypothesis generated (derandomized: the same every run), drawn from by the mutators."""

    values: list[Any]  # JSON values (nested objects and arrays, any unicode)
    texts: list[str]  # strings with any code point, lone surrogates included
    blobs: list[bytes]  # random byte strings


_POOLS: Pools | None = None


def hypothesis_pools(values: int = 1200, texts: int = 600, blobs: int = 400) -> Pools:
    """Generate the pools once per process with Hypothesis (derandomize=True: a fixed seed)."""
    global _POOLS
    if _POOLS is not None:
        return _POOLS
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())  # surrogates too
    scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-(2**70), max_value=2**70)
               | st.floats() | st.text(max_size=40) | st.text(any_char, max_size=20))
    json_values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
        max_leaves=25,
    )
    out = Pools([], [], [])

    def collect(strategy: Any, sink: list[Any], count: int) -> None:
        @settings(max_examples=count, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def run(value: Any) -> None:
            sink.append(value)

        run()

    collect(json_values, out.values, values)
    collect(st.text(any_char, max_size=60), out.texts, texts)
    collect(st.binary(max_size=300), out.blobs, blobs)
    _POOLS = out
    return out


# --- what an attacker aims at ------------------------------------------------------------------------------


@dataclass
class Targets:
    """Ids the generators use: P1's (the victim's), P2's own, unknown ones and hostile strings."""

    p1_tasks: list[str]
    p1_contexts: list[str]
    p2_tasks: list[str]
    p2_contexts: list[str]

    @classmethod
    def of(cls, srv: Secured) -> Targets:
        return cls(srv.p1_task_ids, srv.p1_context_ids, srv.p2_task_ids, [t["contextId"] for t in srv.p2_tasks])

    def task_id(self, rng: random.Random) -> str:
        roll = rng.random()
        if roll < 0.35 and self.p1_tasks:
            return rng.choice(self.p1_tasks)
        if roll < 0.55 and self.p2_tasks:
            return rng.choice(self.p2_tasks)
        if roll < 0.75:
            return str(uuid.UUID(int=rng.getrandbits(128)))
        return rng.choice(HOSTILE_STRINGS)

    def context_id(self, rng: random.Random) -> str:
        roll = rng.random()
        if roll < 0.3 and self.p1_contexts:
            return rng.choice(self.p1_contexts)
        if roll < 0.45 and self.p2_contexts:
            return rng.choice(self.p2_contexts)
        if roll < 0.85:
            return str(uuid.UUID(int=rng.getrandbits(128)))
        return rng.choice(HOSTILE_STRINGS)


class Mutator:
    """Mutations of JSON values and bytes, with one seeded random generator."""

    def __init__(self, rng: random.Random, pools: Pools, targets: Targets) -> None:
        self.rng = rng
        self.pools = pools
        self.targets = targets

    # values -------------------------------------------------------------------------------------

    def value(self) -> Any:
        """A replacement value: Hypothesis' JSON, hostile numbers, strings and structures, or an id."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.4:
            return _copy(rng.choice(self.pools.values))
        if roll < 0.55:
            return rng.choice(HOSTILE_NUMBERS)
        if roll < 0.75:
            return rng.choice(HOSTILE_STRINGS)
        if roll < 0.85:
            return _copy(rng.choice(HOSTILE_STRUCTURES))
        if roll < 0.9:
            return rng.choice(self.pools.texts)
        return self.targets.task_id(rng) if rng.random() < 0.7 else self.targets.context_id(rng)

    def retype(self, value: Any) -> Any:
        """The same content as another JSON type."""
        rng = self.rng
        if isinstance(value, str):
            return rng.choice([[value], {"value": value}, len(value), value == "", None, value.encode("utf-8",
                              "surrogatepass").hex()])
        if isinstance(value, bool):
            return rng.choice([str(value).lower(), int(value), [value], None])
        if isinstance(value, (int, float)):
            return rng.choice([str(value), [value], {"n": value}, bool(value), None,
                               0 if isinstance(value, float) and math.isnan(value) else -value])
        if isinstance(value, list):
            return rng.choice([{str(i): v for i, v in enumerate(value)}, json.dumps(value)[:200], len(value),
                               value[0] if value else None])
        if isinstance(value, dict):
            return rng.choice([list(value.values()), list(value.keys()), json.dumps(value)[:200], len(value), True])
        return rng.choice(["null", 0, [], {}])

    def mutate_tree(self, value: Any, count: int | None = None) -> tuple[Any, str]:
        """Apply 1-3 structural mutations at random places of (a copy of) `value`; the names of the mutations."""
        rng = self.rng
        value = _copy(value)
        names = []
        for _ in range(count or rng.choice([1, 1, 1, 2, 2, 3])):
            nodes = _nodes(value)
            op = rng.choice(["drop", "drop", "replace", "replace", "replace", "retype", "retype", "add", "null",
                             "grow", "nest", "rename"])
            if op == "add":
                dicts = [value] if isinstance(value, dict) else []
                dicts += [p[k] for p, k in nodes if isinstance(p[k], dict)]
                if dicts:
                    key = rng.choice(FIELD_NAMES) if rng.random() < 0.7 else rng.choice(self.pools.texts)
                    rng.choice(dicts)[key] = self.value()
                    names.append(op)
                continue
            if not nodes:
                value = self.value()
                names.append("root")
                continue
            parent, key = rng.choice(nodes)
            current = parent[key]
            if op == "drop":
                if isinstance(parent, dict):
                    del parent[key]
                else:
                    parent.pop(key)
            elif op == "replace":
                parent[key] = self.value()
            elif op == "retype":
                parent[key] = self.retype(current)
            elif op == "null":
                parent[key] = None
            elif op == "grow":
                parent[key] = self.grow(current)
            elif op == "nest":
                depth = rng.choice([2, 10, 17, 40, 63, 65, 100, 300])
                parent[key] = deep_list(depth, current) if rng.random() < 0.5 else deep_object(depth, current)
            elif op == "rename" and isinstance(parent, dict):
                del parent[key]
                parent[rng.choice(FIELD_NAMES)] = current
            names.append(op)
        return value, "+".join(names)

    def grow(self, value: Any) -> Any:
        rng = self.rng
        if isinstance(value, str):
            value = value or "x"
            return value * max(1, rng.choice([2_000, 20_000, 120_000]) // len(value))
        if isinstance(value, list):
            return (value or [None]) * rng.choice([65, 100, 500])
        if isinstance(value, dict):
            grown = dict(value)
            for i in range(rng.choice([100, 2000])):
                grown[f"k{i}"] = i
            return grown
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return rng.choice([10**30, 10**400, 2**64, -(2**63) - 1, 1e308])
        return value

    # bytes --------------------------------------------------------------------------------------

    def encode(self, value: Any) -> bytes:
        """JSON text of `value`: ASCII with escapes, or raw UTF-8 (lone surrogates as CESU-8 bytes)."""
        if self.rng.random() < 0.5:
            return json.dumps(value, ensure_ascii=True).encode("ascii")
        return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")

    def corrupt(self, raw: bytes) -> tuple[bytes, str]:
        """One byte-level corruption of a JSON body; its name."""
        rng = self.rng
        op = rng.choice(["truncate", "truncate", "flip", "insert", "delete", "bad-utf8", "bad-utf8", "nul",
                         "surrogate", "duplicate-key", "duplicate-key", "number", "number", "bom", "trailing",
                         "concat", "comment", "single-quotes", "whitespace", "deep"])
        n = len(raw)
        pos = rng.randrange(n + 1) if n else 0
        if op == "truncate":
            return raw[: rng.randrange(n) if n else 0], op
        if op == "flip" and n:
            i = rng.randrange(n)
            return raw[:i] + bytes([raw[i] ^ (1 << rng.randrange(8))]) + raw[i + 1:], op
        if op == "insert":
            return raw[:pos] + bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 8))) + raw[pos:], op
        if op == "delete" and n:
            j = min(n, pos + rng.randint(1, 8))
            return raw[:pos] + raw[j:], op
        if op in ("bad-utf8", "nul", "surrogate"):
            inside = _string_position(raw, rng)
            junk = {
                "bad-utf8": rng.choice([b"\xff", b"\xfe\xff", b"\xc3", b"\xc0\xaf", b"\xe0\x80\x80", b"\xed\xa0\x80",
                                        b"\xf4\x90\x80\x80", b"\x80", b"\xf8\x88\x80\x80\x80"]),
                "nul": rng.choice([b"\x00", b"\\u0000", b"\x01\x02\x1f"]),
                "surrogate": rng.choice([b"\\ud800", b"\\udfff", b"\\udc00\\ud800", b"\\ud83d", b"\\uDBFF\\u0041"]),
            }[op]
            return raw[:inside] + junk + raw[inside:], op
        if op == "duplicate-key" and raw.startswith(b"{") and len(raw) > 2:
            key = rng.choice(FIELD_NAMES[:40])
            extra = json.dumps({key: self.value()})[1:-1].encode("utf-8", "surrogatepass")
            if rng.random() < 0.5:
                return b"{" + extra + b"," + raw[1:], op
            return raw[:-1] + b"," + extra + b"}", op
        if op == "number":
            literal = rng.choice([b"1e999999", b"-1e400", b"9" * 400, b"-" + b"9" * 5000, b"NaN", b"Infinity",
                                  b"-Infinity", b"0x10", b"01", b"1.", b".5", b"+1", b"1e", b"-", b"1_000",
                                  b"123456789012345678901234567890", b"4.9e-325", b"1E+2147483648"])
            return _replace_number(raw, literal, rng), op
        if op == "bom":
            return b"\xef\xbb\xbf" + raw, op
        if op == "trailing":
            return raw + rng.choice([b"}", b"]", b",", b"\x00", b" garbage", b"{}", b"\n\n\n"]), op
        if op == "concat":
            return raw + raw, op
        if op == "comment":
            return b"/* c */" + raw + b"// c", op
        if op == "single-quotes":
            return raw.replace(b'"', b"'"), op
        if op == "whitespace":
            return rng.choice([b"", b" ", b"\n", b"\t\r\n ", b"\x0b\x0c"]), op
        if op == "deep":
            depth = rng.choice([65, 100, 1000, 5000, 100_000])
            opener, closer = (b"[", b"]") if rng.random() < 0.5 else (b'{"a":', b"}")
            inner = opener * depth + b"1" + closer * depth
            if rng.random() < 0.3:
                inner = opener * depth  # unterminated
            return inner if rng.random() < 0.5 else raw[:1] + b'"x":' + inner + b"," + raw[1:], op
        return raw, "none"

    def blob(self) -> bytes:
        rng = self.rng
        if rng.random() < 0.6:
            return rng.choice(self.pools.blobs)
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 400)))


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _nodes(value: Any, limit: int = 400) -> list[tuple[Any, Any]]:
    """(container, key) of every value below the root (breadth first, at most `limit`)."""
    out: list[tuple[Any, Any]] = []
    queue = [value]
    while queue and len(out) < limit:
        node = queue.pop(0)
        if isinstance(node, dict):
            for k, v in node.items():
                out.append((node, k))
                queue.append(v)
        elif isinstance(node, list):
            for i, v in enumerate(node[:50]):
                out.append((node, i))
                queue.append(v)
    return out


def _string_position(raw: bytes, rng: random.Random) -> int:
    """A position just inside a string literal of `raw` (after an opening quote), else anywhere."""
    quotes = [i + 1 for i, b in enumerate(raw) if b == 0x22]
    return rng.choice(quotes) if quotes else rng.randrange(len(raw) + 1)


def _replace_number(raw: bytes, literal: bytes, rng: random.Random) -> bytes:
    """Put `literal` where a value starts (after a colon), else append it as a member value."""
    colons = [i + 1 for i, b in enumerate(raw) if b == 0x3A]
    if not colons:
        return literal
    i = rng.choice(colons)
    end = i
    while end < len(raw) and raw[end] not in b",}]":
        end += 1
    if end < len(raw) and raw[i:i + 1] in (b"{", b"["):  # a nested value: insert before it instead
        return raw[:i] + literal + b"," + raw[i:]
    return raw[:i] + literal + raw[end:]


# --- valid requests of every operation (the templates the mutators start from) -------------------------------


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def message_10(rng: random.Random, t: Targets) -> dict[str, Any]:
    part = rng.choice([
        {"text": "fuzz " + uuid.UUID(int=rng.getrandbits(128)).hex[:8]},
        {"text": "hi", "metadata": {"k": "v"}},
        {"raw": _b64("hello"), "mediaType": "text/plain", "filename": "a.txt"},
        {"url": "https://example.com/a.txt", "mediaType": "text/plain"},
        {"data": {"a": 1, "b": [1, 2]}, "mediaType": "application/json"},
    ])
    msg: dict[str, Any] = {"messageId": uuid.UUID(int=rng.getrandbits(128)).hex, "role": "ROLE_USER", "parts": [part]}
    roll = rng.random()
    if roll < 0.25:
        msg["taskId"] = t.task_id(rng)
    elif roll < 0.45:
        msg["contextId"] = t.context_id(rng)
    if rng.random() < 0.2:
        msg["metadata"] = {"trace": "x"}
    if rng.random() < 0.1:
        msg["referenceTaskIds"] = [t.task_id(rng)]
    return msg


def message_03(rng: random.Random, t: Targets) -> dict[str, Any]:
    part = rng.choice([
        {"kind": "text", "text": "fuzz " + uuid.UUID(int=rng.getrandbits(128)).hex[:8]},
        {"kind": "text", "text": "hi", "metadata": {"k": "v"}},
        {"kind": "file", "file": {"bytes": _b64("hello"), "mimeType": "text/plain", "name": "a.txt"}},
        {"kind": "file", "file": {"uri": "https://example.com/a.txt", "mimeType": "text/plain"}},
        {"kind": "data", "data": {"a": 1}},
    ])
    msg: dict[str, Any] = {"kind": "message", "messageId": uuid.UUID(int=rng.getrandbits(128)).hex, "role": "user",
                           "parts": [part]}
    roll = rng.random()
    if roll < 0.25:
        msg["taskId"] = t.task_id(rng)
    elif roll < 0.45:
        msg["contextId"] = t.context_id(rng)
    if rng.random() < 0.2:
        msg["metadata"] = {"trace": "x"}
    return msg


def message_03_rest(rng: random.Random, t: Targets) -> dict[str, Any]:
    part = rng.choice([
        {"text": "fuzz " + uuid.UUID(int=rng.getrandbits(128)).hex[:8]},
        {"file": {"fileWithUri": "https://example.com/a.txt", "mimeType": "text/plain"}},
        {"file": {"fileWithBytes": _b64(_b64("hello")), "mimeType": "text/plain"}},
        {"data": {"data": {"a": 1}}},
    ])
    msg: dict[str, Any] = {"messageId": uuid.UUID(int=rng.getrandbits(128)).hex, "role": "ROLE_USER",
                           "content": [part]}
    roll = rng.random()
    if roll < 0.25:
        msg["taskId"] = t.task_id(rng)
    elif roll < 0.45:
        msg["contextId"] = t.context_id(rng)
    if rng.random() < 0.2:
        msg["metadata"] = {"trace": "x"}
    return msg


def params_10(op: str, rng: random.Random, t: Targets) -> dict[str, Any]:
    """Valid params of a 1.0 method (the JSON-RPC params, and the REST bodies and queries)."""
    if op in ("SendMessage", "SendStreamingMessage"):
        body: dict[str, Any] = {"message": message_10(rng, t)}
        if rng.random() < 0.4:
            body["configuration"] = rng.choice([
                {"acceptedOutputModes": ["text/plain"], "historyLength": 2},
                {"returnImmediately": True},
                {"taskPushNotificationConfig": {"url": "https://example.com/hook", "token": "t"}},
            ])
        if rng.random() < 0.15:
            body["metadata"] = {"m": 1}
        return body
    if op == "GetTask":
        return {"id": t.task_id(rng), "historyLength": rng.choice([0, 1, 10])}
    if op == "ListTasks":
        q: dict[str, Any] = {}
        for key, make in [("contextId", lambda: t.context_id(rng)), ("status", lambda: "TASK_STATE_COMPLETED"),
                          ("pageSize", lambda: rng.choice([1, 10, 100])), ("historyLength", lambda: 1),
                          ("includeArtifacts", lambda: True), ("statusTimestampAfter", lambda: "2020-01-01T00:00:00Z")]:
            if rng.random() < 0.35:
                q[key] = make()
        return q
    if op in ("CancelTask", "SubscribeToTask"):
        return {"id": t.task_id(rng)}
    if op == "CreateTaskPushNotificationConfig":
        return {"taskId": t.task_id(rng), "url": "https://example.com/hook", "token": "tok",
                "authentication": {"scheme": "Bearer", "credentials": "c"}}
    if op in ("GetTaskPushNotificationConfig", "DeleteTaskPushNotificationConfig"):
        return {"taskId": t.task_id(rng), "id": "cfg1"}
    if op == "ListTaskPushNotificationConfigs":
        return {"taskId": t.task_id(rng), "pageSize": 10}
    return {}


def params_03(method: str, rng: random.Random, t: Targets) -> dict[str, Any]:
    """Valid params of a 0.3 JSON-RPC method."""
    if method in ("message/send", "message/stream"):
        body: dict[str, Any] = {"message": message_03(rng, t)}
        if rng.random() < 0.4:
            body["configuration"] = rng.choice([
                {"acceptedOutputModes": ["text/plain"], "historyLength": 2, "blocking": True},
                {"blocking": False},
                {"pushNotificationConfig": {"url": "https://example.com/hook"}},
            ])
        return body
    if method == "tasks/get":
        return {"id": t.task_id(rng), "historyLength": rng.choice([0, 1, 10])}
    if method == "tasks/list":
        q: dict[str, Any] = {}
        if rng.random() < 0.5:
            q["contextId"] = t.context_id(rng)
        if rng.random() < 0.3:
            q["pageSize"] = 10
        return q
    if method in ("tasks/cancel", "tasks/resubscribe"):
        return {"id": t.task_id(rng)}
    if method == "tasks/pushNotificationConfig/set":
        return {"taskId": t.task_id(rng), "pushNotificationConfig": {"url": "https://example.com/hook", "token": "t",
                "authentication": {"schemes": ["Bearer"], "credentials": "c"}}}
    if method in ("tasks/pushNotificationConfig/get", "tasks/pushNotificationConfig/delete"):
        return {"id": t.task_id(rng), "pushNotificationConfigId": "cfg1"}
    if method == "tasks/pushNotificationConfig/list":
        return {"id": t.task_id(rng)}
    return {}


METHODS_10 = ["SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask",
              "CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
              "DeleteTaskPushNotificationConfig", "GetExtendedAgentCard"]
METHODS_03 = ["message/send", "message/stream", "tasks/get", "tasks/list", "tasks/cancel", "tasks/resubscribe",
              "tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get",
              "tasks/pushNotificationConfig/list", "tasks/pushNotificationConfig/delete",
              "agent/getAuthenticatedExtendedCard"]
# More weight on the operations with the richest inputs.
_WEIGHTS = [6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1]


# --- HTTP requests -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class HttpCase:
    """One HTTP request of a fuzzing run."""

    binding: str
    auth: bool  # sent with P2's valid key
    family: str  # what kind of hostility
    method: str
    target: str  # path and query, ASCII, already percent-encoded
    headers: list[tuple[str, str]]
    body: bytes
    credential: str = "none"  # p2 | none | bad | other (a valid key of P3 for the other agent)

    def describe(self, limit: int = 300) -> str:
        shown = [(k, v if k.lower() not in ("x-api-key", "authorization") else v[:12] + "...") for k, v in self.headers]
        return f"{self.method} {self.target[:limit]} headers={shown} body={self.body[:limit]!r}" + (
            f"... ({len(self.body)} bytes)" if len(self.body) > limit else "")


CONTENT_TYPES_OK = ["application/json", "application/a2a+json", "application/json; charset=utf-8",
                    "application/json;charset=UTF-8", "application/vnd.example+json", "APPLICATION/JSON"]
CONTENT_TYPES_BAD = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                     "application/json; charset=latin-1", "application/json; charset=utf-16", "json", "",
                     "(((", "application/xml", "text/json; charset=\"ebcdic\"", "*/*", "application/"]
VERSIONS_JUNK = ["", " ", "2.0", "0.2", "abc", "1.x", "1.0.0.0", "99999999999999999999", "-1", " 1.0 ", "1", "0",
                 "0.3.0", "１.０", "1.0,0.3", "%00"]


FUZZ_BODY_LIMIT = 256 * 1024  # the fuzzing server's max_body_bytes
MAX_FUZZ_BODY = FUZZ_BODY_LIMIT + 64 * 1024  # no generated body is longer


class HttpFuzzer:
    """Malformed and hostile HTTP requests of one binding ("JSONRPC-1.0", "JSONRPC-0.3", "HTTP+JSON-1.0",
    "HTTP+JSON-0.3"), half of them with P2's key."""

    def __init__(self, binding: str, rng: random.Random, pools: Pools, targets: Targets, keys: dict[str, str]) -> None:
        self.binding = binding
        self.rest = binding.startswith("HTTP+JSON")
        self.version = binding.rsplit("-", 1)[1]
        self.rng = rng
        self.mut = Mutator(rng, pools, targets)
        self.targets = targets
        self.keys = keys  # p2 (P2's), other (P3's, for the other agent), revoked (P2's, revoked)

    def case(self, auth: bool) -> HttpCase:
        case = self._rest_case() if self.rest else self._rpc_case()
        if len(case.body) > MAX_FUZZ_BODY:  # a mutation grew it too far: what is left is an oversize, cut body
            case.body, case.family = case.body[:MAX_FUZZ_BODY], case.family + "+cut"
        case.auth = auth
        credentials = self._credentials(auth)
        case.headers = credentials + case.headers
        case.credential = _credential_kind(auth, credentials, self.keys)
        return case

    # credentials and headers --------------------------------------------------------------------------

    def _credentials(self, auth: bool) -> list[tuple[str, str]]:
        rng = self.rng
        if auth:
            return [("X-API-Key", self.keys["p2"])] if rng.random() < 0.8 else [("Authorization",
                                                                              "Bearer " + self.keys["p2"])]
        return rng.choice([
            [], [], [], [("X-API-Key", "")], [("X-API-Key", "pk_0000000000000000_" + "A" * 43)],
            [("X-API-Key", self.keys["revoked"])], [("X-API-Key", self.keys["p2"][:-3] + "xyz")],
            [("Authorization", "Bearer not-a-key")], [("Authorization", "Basic dXNlcjpwYXNz")],
            [("Authorization", "Bearer")], [("X-API-Key", "pk_" + "_" * 20)], [("X-API-Key", "pk_\xff_\xfe")],
            [("X-API-Key", self.keys["other"])],  # a valid key of another agent: 403 here
        ])

    def _headers(self, with_body: bool) -> list[tuple[str, str]]:
        rng = self.rng
        out: list[tuple[str, str]] = []
        if with_body:
            out.append(("Content-Type", rng.choice(CONTENT_TYPES_OK)))
        if self.version == "1.0":
            out.append(("A2A-Version", "1.0"))
        elif rng.random() < 0.2:
            out.append(("A2A-Version", "0.3"))
        if rng.random() < 0.05:
            out.append(("A2A-Extensions", rng.choice(["https://x/ext", ",,,", "a" * 2000, "%00"])))
        if rng.random() < 0.03:
            out.append(("Last-Event-ID", rng.choice(["abc", "-1", "99999999999999999999", "²", "1"])))
        if rng.random() < 0.04:  # the server trusts forwarded headers from 127.0.0.1 (forwarded_allow_ips)
            host = rng.choice(["evil.example", "a" * 500, "[::1", "a]b", "[zz]", "x:99999999", "[::1]:abc", ""])
            out.append(rng.choice([("X-Forwarded-Host", host), ("Forwarded", f'host="{host}";proto=https'),
                                   ("X-Forwarded-Prefix", "/" + host), ("X-Forwarded-Proto", host or "gopher")]))
        return out

    def _mutate_headers(self, headers: list[tuple[str, str]], has_body: bool) -> tuple[list[tuple[str, str]], str]:
        rng = self.rng
        roll = rng.random()
        plain = [(k, v) for k, v in headers if k.lower() != "content-type"]
        if roll < 0.45 and has_body:
            return plain + [("Content-Type", rng.choice(CONTENT_TYPES_BAD))], "content-type"
        if roll < 0.6 and has_body:
            return plain, "no-content-type"
        plain = [(k, v) for k, v in headers if k.lower() != "a2a-version"]
        version = rng.choice(VERSIONS_JUNK + ["0.3", "1.0"])
        return plain + [("A2A-Version", _ascii(version))], "version"

    # JSON-RPC ----------------------------------------------------------------------------------------------

    def _rpc_path(self) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.6:
            return "/"
        if roll < 0.85:
            return rng.choice([f"/a2a/{AGENT}", f"/a2a/{AGENT}/"])
        return rng.choice([f"/a2a/{OTHER_AGENT}", "/a2a/nope", "/a2a/%00", "/a2a/" + "x" * 3000,
                           f"/?A2A-Version={rng.choice(['2.0', 'x', '1.0', '0.3'])}", "/a2a/%2e%2e"])

    def _rpc_envelope(self) -> dict[str, Any]:
        rng = self.rng
        methods = METHODS_10 if self.version == "1.0" else METHODS_03
        method = rng.choices(methods, _WEIGHTS)[0]
        params = (params_10(method, rng, self.targets) if self.version == "1.0"
                  else params_03(method, rng, self.targets))
        rid = uuid.UUID(int=rng.getrandbits(128)).hex
        return {"jsonrpc": "2.0", "id": rng.choice([1, "a", rid, 0, None]), "method": method, "params": params}

    def _rpc_case(self) -> HttpCase:
        rng = self.rng
        mut = self.mut
        envelope = self._rpc_envelope()
        headers = self._headers(True)
        roll = rng.random()
        if roll < 0.45:
            body, family = self._json_mutation(envelope["params"], envelope)
        elif roll < 0.55:
            value, _ = mut.mutate_tree(envelope)  # mutations anywhere, the envelope included
            body, family = mut.encode(value), "envelope"
        elif roll < 0.63:
            envelope["method"] = self._bad_method(envelope["method"])
            body, family = mut.encode(envelope), "method"
        elif roll < 0.75:
            body, family = mut.corrupt(mut.encode(envelope))
            family = "bytes:" + family
        elif roll < 0.8:
            body, family = mut.blob(), "random-bytes"
        elif roll < 0.85:
            body, family = mut.encode(rng.choice(mut.pools.values) if rng.random() < 0.7 else mut.value()), "any-json"
        elif roll < 0.93:
            headers, family = self._mutate_headers(headers, True)
            if rng.random() < 0.5:
                envelope, _ = mut.mutate_tree(envelope, 1)
            body = mut.encode(envelope)
        elif roll < 0.94:
            body, family = mut.encode(envelope) + b" " * (300 * 1024), "oversize"
        else:
            body, family = mut.encode(envelope), "valid-targeted"  # P1's ids, unmodified requests
        return HttpCase(self.binding, False, family, "POST", self._rpc_path(), headers, body)

    def _json_mutation(self, params: Any, envelope: dict[str, Any]) -> tuple[bytes, str]:
        mut = self.mut
        value, names = mut.mutate_tree(params)
        envelope = dict(envelope)
        envelope["params"] = value
        body = mut.encode(envelope)
        if self.rng.random() < 0.25:
            body, how = mut.corrupt(body)
            return body, f"params:{names}+bytes:{how}"
        return body, f"params:{names}"

    def _bad_method(self, method: str) -> Any:
        rng = self.rng
        other = METHODS_03 if self.version == "1.0" else METHODS_10
        return rng.choice([rng.choice(other), method.lower(), method.upper(), method + " ", "", "rpc.discover",
                           "message/sendx", "tasks/get/", "SendMessage\x00", rng.choice(self.mut.pools.texts), 42,
                           None, [method], {"name": method}, "a" * 10_000])

    # REST --------------------------------------------------------------------------------------------------

    def _rest_route(self) -> tuple[str, str, str]:
        """(verb, path below the agent's base URL, operation) of a valid route."""
        rng = self.rng
        tid = self._path_id(self.targets.task_id(rng))
        routes = [
            ("POST", "message:send", "SendMessage"), ("POST", "message:send", "SendMessage"),
            ("POST", "message:stream", "SendStreamingMessage"),
            ("GET", f"tasks/{tid}", "GetTask"), ("GET", f"tasks/{tid}", "GetTask"), ("GET", "tasks", "ListTasks"),
            ("POST", f"tasks/{tid}:cancel", "CancelTask"),
            (rng.choice(["GET", "POST"]), f"tasks/{tid}:subscribe", "SubscribeToTask"),
            ("POST", f"tasks/{tid}/pushNotificationConfigs", "CreateTaskPushNotificationConfig"),
            ("GET", f"tasks/{tid}/pushNotificationConfigs", "ListTaskPushNotificationConfigs"),
            ("GET", f"tasks/{tid}/pushNotificationConfigs/cfg1", "GetTaskPushNotificationConfig"),
            ("DELETE", f"tasks/{tid}/pushNotificationConfigs/cfg1", "DeleteTaskPushNotificationConfig"),
            ("GET", "card" if self.version == "0.3" else "extendedAgentCard", "GetExtendedAgentCard"),
        ]
        if self.version == "1.0" and rng.random() < 0.05:  # the public card and the agent list, where they are
            return rng.choice([("GET", ".well-known/agent-card.json", "Card"), ("GET", ".well-known/agent.json",
                               "Card"), ("GET", "agents", "Agents")])
        return rng.choice(routes)

    def _path_id(self, raw: str) -> str:
        from urllib.parse import quote

        if self.rng.random() < 0.85:
            return quote(raw.encode("utf-8", "surrogatepass"), safe="")
        return _ascii(raw) or "x"

    def _rest_base(self) -> str:
        rng = self.rng
        roll = rng.random()
        base = "" if roll < 0.6 else f"/a2a/{AGENT}" if roll < 0.8 else f"/{AGENT}" if roll < 0.9 else rng.choice(
            [f"/a2a/{OTHER_AGENT}", "/a2a/nope", f"/{OTHER_AGENT}", "/a2a/%00"])
        return base + ("/v1" if self.version == "0.3" else "")

    def _rest_body(self, op: str, path: str) -> Any:
        rng = self.rng
        t = self.targets
        if op in ("SendMessage", "SendStreamingMessage"):
            if self.version == "1.0":
                return params_10(op, rng, t)
            body: dict[str, Any] = {"message": message_03_rest(rng, t)}
            if rng.random() < 0.4:
                body["configuration"] = rng.choice([{"acceptedOutputModes": ["text/plain"], "historyLength": 2},
                                                    {"blocking": False},
                                                    {"pushNotification": {"url": "https://example.com/h"}}])
            return body
        if op == "CancelTask":
            return rng.choice([{}, {"metadata": {"why": "x"}}]) if self.version == "1.0" else {}
        if op == "CreateTaskPushNotificationConfig":
            if self.version == "1.0":
                return {"url": "https://example.com/hook", "token": "t"}
            return {"configId": "cfg1", "config": {"pushNotificationConfig": {"url": "https://example.com/hook",
                    "authentication": {"schemes": ["Bearer"], "credentials": "c"}}}}
        if op == "SubscribeToTask":
            return {}
        return None

    def _rest_query(self, op: str) -> list[tuple[str, str]]:
        rng = self.rng
        if op == "GetTask":
            return [("historyLength", str(rng.choice([0, 1, 5])))] if rng.random() < 0.5 else []
        if op == "ListTasks":
            q = []
            if rng.random() < 0.4:
                q.append(("contextId", self.targets.context_id(rng)))
            if rng.random() < 0.3:
                q.append(("pageSize", str(rng.choice([1, 10, 100]))))
            if rng.random() < 0.2:
                q.append(("status", "TASK_STATE_COMPLETED"))
            if rng.random() < 0.2:
                q.append(("includeArtifacts", "true"))
            return q
        if op == "ListTaskPushNotificationConfigs" and rng.random() < 0.3:
            return [("pageSize", "5")]
        return []

    def _bad_query(self, query: list[tuple[str, str]]) -> list[tuple[str, str]]:
        rng = self.rng
        names = ["historyLength", "history_length", "pageSize", "page_size", "pageToken", "status", "contextId",
                 "includeArtifacts", "statusTimestampAfter", "returnImmediately", "A2A-Version", "id", "taskId",
                 "tenant", "owner", "", "x"]
        values = ["abc", "-1", "0", "1e3", "99999999999999999999", "1.5", "", "true", "TRUE", "maybe",
                  "TASK_STATE_BOGUS", "completed", "TASK_STATE_CANCELLED", "yesterday", "2020-13-45T99:99:99Z",
                  "not-a-token", "²", "0x10", " 5", "\x00", "a" * 3000, *(_ascii(s) for s in HOSTILE_STRINGS[:30])]
        out = list(query)
        for _ in range(rng.randint(1, 4)):
            out.append((rng.choice(names), rng.choice(values)))
        if rng.random() < 0.3:
            out += [(rng.choice(names), rng.choice(values))] * rng.randint(2, 20)
        return out

    def _rest_case(self) -> HttpCase:

        rng = self.rng
        mut = self.mut
        verb, path, op = self._rest_route()
        body_value = self._rest_body(op, path)
        query = self._rest_query(op)
        family = "valid-targeted"
        roll = rng.random() if body_value is not None else rng.uniform(0.5, 1.0)  # GET, DELETE: no body to mutate
        body: bytes | None = mut.encode(body_value) if body_value is not None else None
        if roll < 0.4 and body_value is not None:
            value, names = mut.mutate_tree(body_value)
            body, family = mut.encode(value), f"body:{names}"
            if rng.random() < 0.2:
                body, how = mut.corrupt(body)
                family += f"+bytes:{how}"
        elif roll < 0.5:
            if body is None:
                body = mut.encode(mut.value())
            body, how = mut.corrupt(body)
            family = f"bytes:{how}"
        elif roll < 0.6:
            query, family = self._bad_query(query), "query"
        elif roll < 0.68:
            verb, family = rng.choice(["GET", "POST", "PUT", "DELETE", "PATCH"]), "verb"
            if body is None and verb in ("POST", "PUT", "PATCH") and rng.random() < 0.5:
                body = mut.encode(mut.value())
        elif roll < 0.78:
            path, family = self._bad_path(path), "path"
        elif roll < 0.82:
            body, family = mut.blob(), "random-bytes"
            verb = "POST" if verb == "GET" and rng.random() < 0.7 else verb
        elif roll < 0.9:
            family = "headers"
        elif roll < 0.91:
            body, family, verb = (body or b"{}") + b" " * (300 * 1024), "oversize", "POST"
        headers = self._headers(body is not None)
        if family == "headers":
            headers, family = self._mutate_headers(headers, body is not None)
        target = self._rest_base() + "/" + path
        if query:
            target += "?" + "&".join(f"{_quote(k)}={_quote(v)}" for k, v in query)
        if rng.random() < 0.03:
            target += rng.choice(["?%zz", "?&&&=", "?a=%", "?a=%23frag", "?A2A-Version=2.0", "?a=1?b=2"])
        target = target.replace("#", "%23").replace(" ", "%20")  # a fragment is not sent; a space ends the target
        return HttpCase(self.binding, False, family, verb, target, headers, body or b"")

    def _bad_path(self, path: str) -> str:
        from urllib.parse import quote

        rng = self.rng
        segments = path.split("/")
        op = rng.choice(["extra", "swap", "action", "junk", "long", "double", "dots", "encoded", "empty"])
        if op == "extra":
            text = rng.choice(self.mut.pools.texts).encode("utf-8", "surrogatepass")
            segments.insert(rng.randrange(len(segments) + 1), quote(text, safe="") or "x")
        elif op == "swap":
            segments[rng.randrange(len(segments))] = _ascii(rng.choice(HOSTILE_STRINGS)) or "."
        elif op == "action":
            segments[-1] += rng.choice([":cancel", ":subscribe", ":bogus", ":", "::", ":send", ":stream"])
        elif op == "junk":
            return rng.choice(["", "v1", "v2/message:send", "v1/v1/message:send", "message", "tasks/", "tasks//x",
                               "%00", "tasks/%00:cancel", "tasks/%2F:cancel", "tasks/x%2Fy", "tasks/%ff%fe",
                               "message:send/", "MESSAGE:SEND", "message%3Asend", "tasks/x/pushNotificationConfigs/",
                               ".well-known/agent-card.json/x"])
        elif op == "long":
            segments[-1] = "t" * rng.choice([1025, 5000, 12_000])
        elif op == "double":
            return path.replace("/", "//")
        elif op == "dots":
            return "../" + path if rng.random() < 0.5 else path + "/../../" + path
        elif op == "encoded":
            return "".join(f"%{b:02X}" if rng.random() < 0.3 else chr(b) for b in path.encode())
        elif op == "empty":
            return path.replace("cfg1", "").replace("tasks/", "tasks/ ".strip() + "/")
        return "/".join(segments)


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def _ascii(text: str) -> str:
    """`text` reduced to printable ASCII (what can travel in a request line or header unencoded)."""
    return "".join(c for c in text if " " < c < "\x7f")


# --- gRPC requests -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class GrpcCase:
    """One gRPC call of a fuzzing run: raw request bytes to a method of lf.a2a.v1.A2AService."""

    binding: str
    auth: bool
    family: str
    method: str
    payload: bytes
    metadata: list[tuple[str, str | bytes]]
    credential: str = "none"

    @property
    def streaming(self) -> bool:
        return self.method in GRPC_STREAMING

    def describe(self, limit: int = 300) -> str:
        shown = [(k, v[:12] + "..." if k in ("x-api-key", "authorization") and isinstance(v, str) else v)
                 for k, v in self.metadata]
        return f"{GRPC_SERVICE}{self.method} metadata={shown} payload={self.payload[:limit]!r}" + (
            f"... ({len(self.payload)} bytes)" if len(self.payload) > limit else "")


def _credential_kind(auth: bool, credentials: list[tuple[str, Any]], keys: dict[str, str]) -> str:
    if auth:
        return "p2"
    if not credentials:
        return "none"
    return "other" if credentials[0][1] == keys.get("other") else "bad"


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint((number << 3) | wire)


def _len_field(number: int, data: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(data)) + data


def deep_value_bytes(depth: int) -> bytes:
    """A google.protobuf.Value nesting `depth` list values (built as bytes: the Python runtime refuses to
    build messages nested that deep)."""
    value = _tag(1, 0) + _varint(0)  # null_value
    for _ in range(depth):
        value = _len_field(6, _len_field(1, value))  # Value.list_value { values: value }
    return value


def deep_send_bytes(depth: int, tenant: str = "") -> bytes:
    """A SendMessageRequest whose one data part nests `depth` levels deep."""
    part = _len_field(4, deep_value_bytes(depth))  # Part.data
    message = _len_field(1, b"deep-" + str(depth).encode()) + _tag(4, 0) + _varint(1) + _len_field(5, part)
    return (_len_field(1, tenant.encode()) if tenant else b"") + _len_field(2, message)


GRPC_STRING_JUNK = [s for s in HOSTILE_STRINGS if not any(0xD800 <= ord(c) <= 0xDFFF for c in s)]


class GrpcFuzzer:
    """Malformed and hostile gRPC calls: random and mutated protobuf bytes, and well-formed messages with
    bad field values; half of them with P2's key."""

    binding = "GRPC-1.0"

    def __init__(self, rng: random.Random, pools: Pools, targets: Targets, keys: dict[str, str]) -> None:
        self.rng = rng
        self.mut = Mutator(rng, pools, targets)
        self.targets = targets
        self.keys = keys
        self.requests = {method: getattr(pb, name) for method, name in GRPC_REQUESTS.items()}

    def valid(self, method: str) -> Any:
        """A well-formed request message of `method`, aimed at P1's, P2's or unknown tasks."""
        from google.protobuf import json_format

        rng = self.rng
        cls = self.requests[method]
        params = params_10(method, rng, self.targets)
        roll = rng.random()
        params["tenant"] = "" if roll < 0.6 else AGENT if roll < 0.9 else rng.choice([OTHER_AGENT, "nope", "..", "*"])
        try:
            return json_format.ParseDict(params, cls())
        except (json_format.ParseError, ValueError, TypeError):  # a hostile id protobuf cannot hold (surrogates)
            return cls(tenant="")

    def case(self, auth: bool) -> GrpcCase:
        rng = self.rng
        method = rng.choices(METHODS_10, _WEIGHTS)[0]
        msg = self.valid(method)
        roll = rng.random()
        if roll < 0.15:
            payload, family = self.mut.blob(), "random-bytes"
        elif roll < 0.35:
            payload, family = self.corrupt_wire(msg)
            family = "wire:" + family
        elif roll < 0.72:
            names = [self.mutate_fields(msg) for _ in range(rng.choice([1, 1, 2, 3]))]
            payload, family = msg.SerializeToString(), "fields:" + "+".join(names)
        elif roll < 0.84:
            payload, family = msg.SerializeToString(), "valid-targeted"
        elif roll < 0.92:
            payload, family = msg.SerializeToString(), "metadata"
        elif roll < 0.96:
            depth = rng.choice([17, 50, 99, 101, 200, 1000])
            payload, family, method = deep_send_bytes(depth), f"deep-{depth}", rng.choice(
                ["SendMessage", "SendStreamingMessage"])
        elif roll < 0.98:
            payload, family = msg.SerializeToString(), "unknown-method"
            method = rng.choice(["Bogus", "sendMessage", "SendMessage/", "GetTask ", "lf.a2a.v1.A2AService/GetTask",
                                 "message/send", "", "GetAgentCard", "TaskSubscription"])
        else:
            payload, family = msg.SerializeToString() + _len_field(15, b"z" * (300 * 1024)), "oversize"
        metadata = self._credentials(auth)
        credential = _credential_kind(auth, metadata, self.keys)
        if family == "metadata" or rng.random() < 0.05:
            metadata += self._junk_metadata()
        return GrpcCase(self.binding, auth, family, method, payload, metadata, credential)

    def _credentials(self, auth: bool) -> list[tuple[str, str | bytes]]:
        rng = self.rng
        if auth:
            return [("x-api-key", self.keys["p2"])] if rng.random() < 0.8 else [("authorization",
                                                                              "Bearer " + self.keys["p2"])]
        return rng.choice([
            [], [], [], [("x-api-key", "")], [("x-api-key", "pk_0000000000000000_" + "A" * 43)],
            [("x-api-key", self.keys["revoked"])], [("x-api-key", self.keys["p2"][:-3] + "xyz")],
            [("authorization", "Bearer not-a-key")], [("authorization", "Basic dXNlcjpwYXNz")],
            [("x-api-key-bin", self.keys["p2"].encode())], [("x-api-key", self.keys["other"])],
        ])

    def _junk_metadata(self) -> list[tuple[str, str | bytes]]:
        rng = self.rng
        out: list[tuple[str, str | bytes]] = []
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(["a2a-version", "a2a-version", "a2a-extensions", "last-event-id", "x-a2a-extensions",
                              "x-forwarded-host", "x-test-user", "grpc-junk-bin", "authorization"])
            if key.endswith("-bin"):
                out.append((key, self.mut.blob()))
            else:
                out.append((key, _ascii(rng.choice(VERSIONS_JUNK + GRPC_STRING_JUNK[:40] + ["99999999999999999999"]))
                            .replace("  ", " ").strip() or "x"))
        return out

    # wire-level corruption ---------------------------------------------------------------------------------

    def corrupt_wire(self, msg: Any) -> tuple[bytes, str]:
        rng = self.rng
        raw = msg.SerializeToString()
        op = rng.choice(["truncate", "flip", "insert", "unknown-field", "bad-utf8", "bad-utf8", "length-overflow",
                         "wrong-wire-type", "group", "long-varint", "zero-tag"])
        n = len(raw)
        if op == "truncate" and n:
            return raw[: rng.randrange(n)], op
        if op == "flip" and n:
            i = rng.randrange(n)
            return raw[:i] + bytes([raw[i] ^ (1 << rng.randrange(8))]) + raw[i + 1:], op
        if op == "insert":
            i = rng.randrange(n + 1)
            return raw[:i] + bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 6))) + raw[i:], op
        if op == "unknown-field":
            number = rng.choice([9, 99, 1000, 2**29 - 1])
            wire = rng.choice([0, 1, 2, 5])
            data = {0: _varint(rng.getrandbits(64)), 1: bytes(8), 2: _varint(3) + b"abc", 5: bytes(4)}[wire]
            return raw + _tag(number, wire) + data, op
        if op == "bad-utf8":
            strings = [f.number for f in msg.DESCRIPTOR.fields if f.type == f.TYPE_STRING]
            if msg.DESCRIPTOR.name == "SendMessageRequest":  # inside the message: its message_id
                bad = _len_field(1, rng.choice([b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"ok\xc0\xaf"]))
                return raw + _len_field(2, bad + _tag(4, 0) + _varint(1)), op
            if strings:
                return raw + _len_field(rng.choice(strings), rng.choice([b"\xff\xfe", b"\xc3", b"\xed\xa0\x80"])), op
            return raw + _len_field(1, b"\xff"), op
        if op == "length-overflow":
            return raw + _tag(rng.choice([1, 2, 3]), 2) + _varint(rng.choice([2**31, 2**63, 1000])) + b"x", op
        if op == "wrong-wire-type" and msg.DESCRIPTOR.fields:
            field = rng.choice(msg.DESCRIPTOR.fields)
            wire = rng.choice([0, 1, 2, 5])
            data = {0: _varint(1), 1: bytes(8), 2: _varint(2) + b"\x08\x01", 5: bytes(4)}[wire]
            return raw + _tag(field.number, wire) + data, op
        if op == "group":
            return raw + _tag(rng.choice([1, 2, 30]), rng.choice([3, 4])), op
        if op == "long-varint":
            return raw + _tag(rng.choice([3, 4, 6, 30]), 0) + b"\xff" * 11, op
        if op == "zero-tag":
            return raw + b"\x00\x00", op
        return raw, "none"

    # well-formed messages with bad values --------------------------------------------------------------------

    def mutate_fields(self, msg: Any) -> str:
        """Set one field somewhere in `msg` to a bad value of the right protobuf type; the field's name."""
        rng = self.rng
        places = _proto_fields(msg)
        if not places:
            return "none"
        owner, field = rng.choice(places)
        if field.name == "tenant" and len(places) > 1 and rng.random() < 0.8:  # mostly: the agent is found
            owner, field = rng.choice(places)
        try:
            self._set_bad(owner, field)
        except (ValueError, TypeError, OverflowError, UnicodeError):
            return f"{field.name}(unset)"
        return field.name

    def _set_bad(self, owner: Any, field: Any) -> None:
        rng = self.rng
        repeated = _is_repeated(field)
        if field.type == field.TYPE_MESSAGE:
            full = field.message_type.full_name
            if repeated:
                items = getattr(owner, field.name)
                if full.endswith("Part") and len(items) and rng.random() < 0.5:
                    for _ in range(rng.choice([64, 65, 200])):
                        items.add().CopyFrom(items[0])
                elif rng.random() < 0.5:
                    owner.ClearField(field.name)
                else:
                    item = items.add()
                    if rng.random() < 0.5:
                        self.mutate_fields(item)
                return
            sub = getattr(owner, field.name)
            if full == "google.protobuf.Struct":
                sub.Clear()
                sub.update(_struct_safe(self._struct_value()))
            elif full == "google.protobuf.Value":
                sub.Clear()
                sub.MergeFromString(deep_value_bytes(rng.choice([0, 3, 17, 40])) if rng.random() < 0.3
                                    else _value_bytes(rng.choice([float("nan"), float("inf"), 1e308, -0.0, "x", True])))
            elif full == "google.protobuf.Timestamp":
                sub.seconds = rng.choice([-(2**62), -62135596801, 253402300800, 2**62, 0, -1])
                sub.nanos = rng.choice([0, -1, 10**9, 2**31 - 1, 999_999_999])
            elif rng.random() < 0.3:
                owner.ClearField(field.name)
            else:
                sub.SetInParent()
                self.mutate_fields(sub)
            return
        value = self._scalar(field)
        if repeated:
            items = getattr(owner, field.name)
            if rng.random() < 0.3:
                items.extend([value] * rng.choice([65, 200]))
            else:
                items.append(value)
        else:
            setattr(owner, field.name, value)

    def _scalar(self, field: Any) -> Any:
        rng = self.rng
        t = field.type
        if t == field.TYPE_STRING:
            roll = rng.random()
            if roll < 0.5:
                return rng.choice(GRPC_STRING_JUNK)
            if roll < 0.7:
                return self.targets.task_id(rng) if rng.random() < 0.7 else self.targets.context_id(rng)
            text = rng.choice(self.mut.pools.texts)
            return text.encode("utf-8", "replace").decode("utf-8") if not _has_surrogate(text) else "x"
        if t == field.TYPE_BYTES:
            return self.mut.blob()
        if t == field.TYPE_BOOL:
            return rng.random() < 0.5
        if t == field.TYPE_ENUM:
            return rng.choice([-1, 0, 1, 2, 3, 5, 6, 8, 9, 99, 2**31 - 1, -(2**31)])
        if t in (field.TYPE_DOUBLE, field.TYPE_FLOAT):
            return rng.choice([float("nan"), float("inf"), float("-inf"), 1e308, -0.0, 5e-324])
        if t in (field.TYPE_INT64, field.TYPE_SINT64, field.TYPE_SFIXED64):
            return rng.choice([-(2**63), 2**63 - 1, -1, 0, 10**12])
        if t in (field.TYPE_UINT32, field.TYPE_FIXED32):
            return rng.choice([0, 2**32 - 1, 1])
        if t in (field.TYPE_UINT64, field.TYPE_FIXED64):
            return rng.choice([0, 2**64 - 1, 1])
        return rng.choice([-(2**31), -1, 0, 1, 101, 1001, 2**31 - 1])

    def _struct_value(self) -> dict[str, Any]:
        rng = self.rng
        value = rng.choice([rng.choice(self.mut.pools.values), deep_object(rng.choice([5, 17, 30])),
                            {"n": rng.choice([float("nan"), float("inf"), 1e308])}, {"s": "x" * 70_000},
                            {str(i): i for i in range(rng.choice([10, 500]))}])
        return value if isinstance(value, dict) else {"v": value}


def _is_repeated(field: Any) -> bool:
    flag = getattr(field, "is_repeated", None)
    if flag is not None:
        return bool(flag)
    return field.label == field.LABEL_REPEATED


def _proto_fields(msg: Any, depth: int = 0) -> list[tuple[Any, Any]]:
    """(message, field) of every field of `msg` and of its set submessages (not into well-known types)."""
    out = []
    for fd in msg.DESCRIPTOR.fields:
        out.append((msg, fd))
        if depth < 4 and fd.type == fd.TYPE_MESSAGE and not fd.message_type.full_name.startswith(
                "google.protobuf.") and not (fd.message_type.GetOptions().map_entry):
            if _is_repeated(fd):
                for item in list(getattr(msg, fd.name))[:3]:
                    out.extend(_proto_fields(item, depth + 1))
            elif msg.HasField(fd.name):
                out.extend(_proto_fields(getattr(msg, fd.name), depth + 1))
    return out


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def _struct_safe(value: Any) -> Any:
    """A JSON value Struct.update takes: no lone surrogates, integers as floats that fit."""
    if isinstance(value, dict):
        return {(k if not _has_surrogate(k) else "k"): _struct_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_struct_safe(v) for v in value]
    if isinstance(value, str):
        return value if not _has_surrogate(value) else "s"
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return float(value) if abs(value) < 1e308 else 1e308
    return value


def _value_bytes(value: Any) -> bytes:
    if isinstance(value, bool):
        return _tag(4, 0) + _varint(int(value))
    if isinstance(value, float):
        import struct

        return _tag(2, 1) + struct.pack("<d", value)
    return _len_field(3, str(value).encode())


# --- running a fuzzing campaign and judging every answer --------------------------------------------------------


INTERNAL_GRPC = ("INTERNAL", "UNKNOWN")
PUBLIC_PATHS = ("/v1/card", "/.well-known/agent-card.json", "/.well-known/agent.json", "/agents")  # public reads


@dataclass
class Campaign:
    """The outcome of one binding's run: counts per outcome (auth and not), per family, and violations."""

    binding: str
    sent: int = 0
    outcomes: dict[bool, Counter] = field(default_factory=lambda: {True: Counter(), False: Counter()})
    families: Counter = field(default_factory=Counter)
    violations: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)  # the first few requests of each violation
    first: dict[str, str] = field(default_factory=dict)  # the first request of each outcome
    seconds: float = 0.0

    def record(self, auth: bool, family: str, outcome: str, problems: list[str], describe: Callable[[], str]) -> None:
        self.sent += 1
        self.outcomes[auth][outcome] += 1
        self.families[family.split(":")[0].split("+")[0]] += 1
        if outcome not in self.first:
            self.first[outcome] = f"{'P2' if auth else 'no key'}: {describe()}"
        for problem in problems:
            self.violations[problem] += 1
            shown = self.examples.setdefault(problem, [])
            if len(shown) < 3:
                shown.append(f"[{outcome}] {describe()}")

    def first_of_each(self) -> str:
        """The first request of each outcome (PARLEY_FUZZ_VERBOSE=1 prints them)."""
        return "\n".join(f"  [{k}] {v[:600]}" for k, v in sorted(self.first.items()))

    def table(self) -> str:
        lines = [(f"{self.binding}: {self.sent} requests in {self.seconds:.1f}s "
                  f"({sum(self.outcomes[False].values())} unauthenticated, {sum(self.outcomes[True].values())} "
                  f"with P2's key)")]
        for auth in (False, True):
            who = "P2's key" if auth else "no valid key"
            lines.append(f"  {who}: " + ", ".join(f"{k}: {v}" for k, v in sorted(self.outcomes[auth].items())))
        lines.append("  families: " + ", ".join(f"{k}: {v}" for k, v in self.families.most_common()))
        if self.violations:
            lines.append("  VIOLATIONS: " + ", ".join(f"{k}: {v}" for k, v in self.violations.most_common()))
            for kind, shown in self.examples.items():
                for example in shown:
                    lines.append(f"    {kind}: {example}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {"binding": self.binding, "sent": self.sent, "seconds": round(self.seconds, 1),
                "unauthenticated": dict(sorted(self.outcomes[False].items())),
                "authenticated": dict(sorted(self.outcomes[True].items())),
                "families": dict(self.families.most_common()), "violations": dict(self.violations),
                "examples": self.examples}


class Judge:
    """What no answer may contain or be: an internal error, a 5xx, P1's tasks, texts or contexts
    (unless the request itself named the id), success without valid credentials."""

    def __init__(self, srv: Secured) -> None:
        self.secret = SECRET.encode()
        self.task_ids = set(srv.p1_task_ids)
        self.markers = [i.encode() for i in [*srv.p1_task_ids, *srv.p1_context_ids]]

    def leaks(self, answer: bytes, docs: list[Any], request: bytes, auth: bool) -> list[str]:
        """What of P1's an answer shows.

        P1's texts (SECRET is in every message P1 sent) must never show. P1's tasks must not show as
        objects: a task, a status or artifact update, a history message or a push config of one of P1's
        tasks. P1's ids as plain strings are not judged in answers to P2: P2 may put them into its own
        tasks (a contextId of P1's starts a task of P2's in a context of that name, referenceTaskIds and
        texts are free), and errors name the id the request gave. A stranger's answer must not hold any
        of P1's ids that its request did not hold.
        """
        problems = []
        if self.secret in answer:
            problems.append("leak: P1's text")
        if any(self._p1_object(doc) for doc in docs):
            problems.append("leak: P1's task")
        if not auth and any(marker in answer and marker not in request for marker in self.markers):
            problems.append("leak: P1's id to a stranger")
        return problems

    def _p1_object(self, doc: Any) -> bool:
        stack = [doc]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                ident, task_id = node.get("id"), node.get("taskId")  # any JSON value: echoed metadata, say
                if isinstance(ident, str) and ident in self.task_ids and ("status" in node or "contextId" in node):
                    return True
                if isinstance(task_id, str) and task_id in self.task_ids and any(
                        k in node for k in ("status", "artifact", "role", "messageId", "url")):
                    return True
                name = node.get("name")
                if isinstance(name, str) and name.startswith("tasks/") and name.split("/")[1] in self.task_ids:
                    return True
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
        return False

    def http(self, case: HttpCase, status: int, ctype: str, body: bytes) -> tuple[str, list[str]]:
        """The outcome bucket of one HTTP answer, and what is wrong with it."""
        rest = case.binding.startswith("HTTP+JSON")
        problems = []
        if status >= 500:
            problems.append(f"HTTP {status}")
        sse = ctype.startswith("text/event-stream")
        docs: list[Any] = []
        if sse:
            for line in body.split(b"\n"):
                if line.startswith(b"data:"):
                    docs.append(_json_or_none(line[5:]))
        else:
            docs.append(_json_or_none(body))
        problems += self.leaks(body, docs, unquote_to_bytes(case.target) + case.target.encode() + case.body,
                               case.auth)
        errors = [_error_of(doc, rest) for doc in docs]
        for err in errors:
            if err is not None and err[1]:
                problems.append("internal error (-32603)" if not rest else "internal error (INTERNAL)")
        success = status < 300 and any(err is None and doc is not None for err, doc in zip(errors, docs))
        path = unquote_to_bytes(case.target.split("?")[0]).decode("utf-8", "replace").rstrip("/")
        other_agent = case.credential == "other" and (path == f"/a2a/{OTHER_AGENT}" or path.startswith(
            (f"/a2a/{OTHER_AGENT}/", f"/{OTHER_AGENT}/")))
        if success and not case.auth and not path.endswith(PUBLIC_PATHS) and not other_agent:
            problems.append("success without credentials")
        if sse:
            outcome = f"{status} stream" + ("" if success else " error")
        elif docs[0] is None:
            outcome = f"{status} not-json"
        elif errors[0] is not None:
            outcome = f"{status} {errors[0][0]}"
        else:
            outcome = f"{status} ok" if status < 300 else f"{status} json"
        return outcome, problems

    def grpc(self, case: GrpcCase, code: str, messages: list[bytes], error: bytes) -> tuple[str, list[str]]:
        problems = []
        if code in INTERNAL_GRPC:
            problems.append(f"gRPC {code}")
        if code == "DEADLINE_EXCEEDED":
            problems.append("timeout")
        if code == "OK" and not case.auth and not (case.credential == "other"
                                                   and _grpc_tenant(case) == OTHER_AGENT):
            problems.append("success without credentials")
        docs = [_grpc_doc(case.method, raw) for raw in messages]
        problems += self.leaks(b"".join(messages) + error, docs, case.payload, case.auth)
        return code, problems


GRPC_REQUESTS = {
    "SendMessage": "SendMessageRequest", "SendStreamingMessage": "SendMessageRequest", "GetTask": "GetTaskRequest",
    "ListTasks": "ListTasksRequest", "CancelTask": "CancelTaskRequest", "SubscribeToTask": "SubscribeToTaskRequest",
    "CreateTaskPushNotificationConfig": "TaskPushNotificationConfig",
    "GetTaskPushNotificationConfig": "GetTaskPushNotificationConfigRequest",
    "ListTaskPushNotificationConfigs": "ListTaskPushNotificationConfigsRequest",
    "DeleteTaskPushNotificationConfig": "DeleteTaskPushNotificationConfigRequest",
    "GetExtendedAgentCard": "GetExtendedAgentCardRequest",
}
GRPC_RESPONSES = {
    "SendMessage": "SendMessageResponse", "GetTask": "Task", "ListTasks": "ListTasksResponse", "CancelTask": "Task",
    "CreateTaskPushNotificationConfig": "TaskPushNotificationConfig",
    "GetTaskPushNotificationConfig": "TaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs": "ListTaskPushNotificationConfigsResponse", "GetExtendedAgentCard": "AgentCard",
    "SendStreamingMessage": "StreamResponse", "SubscribeToTask": "StreamResponse",
}


def _grpc_tenant(case: GrpcCase) -> str | None:
    """The tenant (the agent) a gRPC request names, if its bytes decode as the method's request."""
    name = GRPC_REQUESTS.get(case.method)
    if name is None:
        return None
    try:
        msg = getattr(pb, name)()
        msg.ParseFromString(case.payload)
        return msg.tenant
    except Exception:  # noqa: BLE001 - bytes that do not decode name no tenant
        return None


def _grpc_doc(method: str, raw: bytes) -> Any:
    """A gRPC response message as its ProtoJSON (None if it does not decode)."""
    from google.protobuf import json_format

    name = GRPC_RESPONSES.get(method)
    if name is None:
        return None
    try:
        msg = getattr(pb, name)()
        msg.ParseFromString(raw)
        return json_format.MessageToDict(msg)
    except Exception:  # noqa: BLE001 - whatever does not decode is judged by its bytes only
        return None


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _error_of(doc: Any, rest: bool) -> tuple[str, bool] | None:
    """(error code or reason, is it an internal error) of a JSON-RPC or google.rpc.Status document."""
    if not isinstance(doc, dict):
        return None
    err = doc.get("error")
    if not isinstance(err, dict):
        return None
    if "jsonrpc" not in doc and (rest or "status" in err):
        details = err.get("details") or [{}]
        reason = details[0].get("reason", "?") if isinstance(details[0], dict) else "?"
        internal = err.get("status") in INTERNAL_GRPC or reason == "INTERNAL_ERROR" or (err.get("code") or 0) >= 500
        return str(reason), internal
    code = err.get("code")
    return str(code), code == -32603


async def run_http(srv: Secured, cases: Iterator[HttpCase], campaign: Campaign, *, concurrency: int = 16,
                   timeout: float = 30.0, cap: int = 1 << 20) -> None:
    """Send every case over one pooled HTTP client, `concurrency` at a time; judge every answer."""
    import asyncio

    judge = Judge(srv)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    started = time.monotonic()
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(timeout)) as client:

        async def one(case: HttpCase) -> None:
            url = httpx.URL(scheme="http", host="127.0.0.1", port=srv.live.port, raw_path=case.target.encode())
            headers = [(k, v.encode("utf-8")) for k, v in case.headers]  # non-ASCII values as UTF-8 octets
            request = client.build_request(case.method, url, headers=headers, content=case.body)
            try:
                async with asyncio.timeout(timeout):
                    resp = await client.send(request, stream=True)
                    try:
                        chunks, size = [], 0
                        async for chunk in resp.aiter_raw():
                            chunks.append(chunk)
                            size += len(chunk)
                            if size >= cap:
                                break
                    finally:
                        await resp.aclose()
            except TimeoutError:
                campaign.record(case.auth, case.family, "timeout", ["timeout"], case.describe)
                return
            except httpx.TransportError as exc:  # the server closed the connection without an answer
                campaign.record(case.auth, case.family, f"no answer ({type(exc).__name__})",
                                [f"no answer ({type(exc).__name__})"], case.describe)
                return
            outcome, problems = judge.http(case, resp.status_code, resp.headers.get("content-type", ""),
                                           b"".join(chunks))
            campaign.record(case.auth, case.family, outcome, problems, case.describe)

        async def worker() -> None:
            for case in cases:
                await one(case)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    campaign.seconds = time.monotonic() - started


async def run_grpc(srv: Secured, cases: Iterator[GrpcCase], campaign: Campaign, *, concurrency: int = 16,
                   timeout: float = 30.0) -> None:
    """Call every case over one gRPC channel with identity (de)serializers, `concurrency` at a time."""
    import asyncio

    judge = Judge(srv)
    started = time.monotonic()
    options = [("grpc.max_send_message_length", 16 << 20), ("grpc.max_receive_message_length", 16 << 20)]
    async with grpc.aio.insecure_channel(srv.grpc_target, options=options) as channel:

        def ident(raw: bytes) -> bytes:
            return raw

        async def one(case: GrpcCase) -> None:
            path = GRPC_SERVICE + case.method
            messages: list[bytes] = []
            error = b""
            try:
                if case.streaming:
                    call = channel.unary_stream(path, request_serializer=ident, response_deserializer=ident)
                    stream = call(case.payload, metadata=case.metadata, timeout=timeout)
                    async for item in stream:
                        messages.append(item)
                        if len(messages) >= 200:
                            stream.cancel()
                            break
                else:
                    call = channel.unary_unary(path, request_serializer=ident, response_deserializer=ident)
                    messages.append(await call(case.payload, metadata=case.metadata, timeout=timeout))
                code = "OK"
            except grpc.aio.AioRpcError as exc:
                code = exc.code().name
                error += (exc.details() or "").encode("utf-8", "replace")
                for _key, value in exc.trailing_metadata() or ():
                    error += value if isinstance(value, bytes) else value.encode("utf-8", "replace")
            except asyncio.CancelledError:
                code = "CANCELLED"
            outcome, problems = judge.grpc(case, code, messages, error)
            campaign.record(case.auth, case.family, outcome, problems, case.describe)

        async def worker() -> None:
            for case in cases:
                await one(case)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    campaign.seconds = time.monotonic() - started


def alternating(make: Callable[[bool], Any], count: int) -> Iterator[Any]:
    """`count` cases, every other one with P2's key (an iterator the workers share)."""
    for i in range(count):
        yield make(i % 2 == 1)


# --- precise expectations (the hostile-input tests) -------------------------------------------------------------

HTTP_BINDINGS = ["JSONRPC-1.0", "JSONRPC-0.3", "HTTP+JSON-1.0", "HTTP+JSON-0.3"]

# kind -> (JSON-RPC HTTP status, JSON-RPC code, REST HTTP status, REST ErrorInfo reason, REST google.rpc status,
#          gRPC status)
KINDS: dict[str, tuple[int, int, int, str, str, str]] = {
    "parse": (200, -32700, 400, "PARSE_ERROR", "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
    "invalid_request": (200, -32600, 400, "INVALID_REQUEST", "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
    "invalid_params": (200, -32602, 400, "INVALID_PARAMS", "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
    "task_not_found": (200, -32001, 404, "TASK_NOT_FOUND", "NOT_FOUND", "NOT_FOUND"),
    "unsupported_media": (415, -32600, 415, "UNSUPPORTED_MEDIA_TYPE", "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
    "too_large": (413, -32600, 413, "INVALID_REQUEST", "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED"),
    "unauthenticated": (401, -31401, 401, "UNAUTHENTICATED", "UNAUTHENTICATED", "UNAUTHENTICATED"),
}


def headers_for(binding: str, key: str | None, **extra: str) -> dict[str, str]:
    """The headers of a request of `binding` (JSON body, the version header of 1.0), with `key` if given."""
    out = {"Content-Type": "application/json"}
    if binding.endswith("1.0"):
        out.update(V1)
    if key:
        out["X-API-Key"] = key
    out.update(extra)
    return {k: v for k, v in out.items() if v is not None}


def send_request(binding: str, text: bytes = b'"hello"', *, message_extra: bytes = b"", params_extra: bytes = b"",
                 parts: bytes | None = None) -> tuple[str, bytes]:
    """(path, body) of a SendMessage of `binding` whose text part is the raw JSON `text`, with raw members
    added to the message (`message_extra`, starting with a comma) and to the params (`params_extra`)."""
    mid = uuid.uuid4().hex.encode()
    if binding == "JSONRPC-1.0":
        parts = parts if parts is not None else b'[{"text":' + text + b"}]"
        msg = b'{"messageId":"' + mid + b'","role":"ROLE_USER","parts":' + parts + message_extra + b"}"
        return "/", b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":' + msg + params_extra + b"}}"
    if binding == "JSONRPC-0.3":
        parts = parts if parts is not None else b'[{"kind":"text","text":' + text + b"}]"
        msg = b'{"kind":"message","messageId":"' + mid + b'","role":"user","parts":' + parts + message_extra + b"}"
        return "/", b'{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":' + msg + params_extra + b"}}"
    if binding == "HTTP+JSON-1.0":
        parts = parts if parts is not None else b'[{"text":' + text + b"}]"
        msg = b'{"messageId":"' + mid + b'","role":"ROLE_USER","parts":' + parts + message_extra + b"}"
        return "/message:send", b'{"message":' + msg + params_extra + b"}"
    parts = parts if parts is not None else b'[{"text":' + text + b"}]"
    msg = b'{"messageId":"' + mid + b'","role":"ROLE_USER","content":' + parts + message_extra + b"}"
    return "/v1/message:send", b'{"message":' + msg + params_extra + b"}"


def text_parts(binding: str, count: int, text: str = "x") -> bytes:
    """`count` text parts in the binding's shape."""
    one = {"kind": "text", "text": text} if binding == "JSONRPC-0.3" else {"text": text}
    return json.dumps([one] * count).encode()


def data_part(binding: str, data: Any) -> bytes:
    """One data part in the binding's shape."""
    if binding == "JSONRPC-0.3":
        one = {"kind": "data", "data": data}
    elif binding == "HTTP+JSON-0.3":
        one = {"data": {"data": data}}
    else:
        one = {"data": data, "mediaType": "application/json"}
    return json.dumps([one]).encode()


def error_of(resp: httpx.Response, binding: str) -> tuple[Any, str]:
    """(code or ErrorInfo reason, message) of an error answer of `binding` (AssertionError if it is none)."""
    try:
        body = resp.json()
    except ValueError:
        raise AssertionError(f"not JSON: {resp.status_code} {resp.text[:300]!r}") from None
    err = body.get("error") if isinstance(body, dict) else None
    assert isinstance(err, dict), f"not an error: {resp.status_code} {resp.text[:300]}"
    if binding.startswith("JSONRPC"):
        return err.get("code"), str(err.get("message"))
    details = err.get("details") or [{}]
    return details[0].get("reason"), str(err.get("message"))


def expect(resp: httpx.Response, binding: str, kind: str, *fragments: str) -> str:
    """Assert the precise answer of `kind` on `binding` (status, JSON-RPC code or ErrorInfo reason, words of
    the message); its message."""
    rpc_status, rpc_code, rest_status, reason, rpc_status_name, _ = KINDS[kind]
    rpc = binding.startswith("JSONRPC")
    status, code = (rpc_status, rpc_code) if rpc else (rest_status, reason)
    got, message = error_of(resp, binding)
    assert (resp.status_code, got) == (status, code), (
        f"{binding}: expected {status} {code} ({kind}), got {resp.status_code} {got}: {resp.text[:400]}")
    if not rpc:
        assert resp.json()["error"].get("status") == rpc_status_name, resp.text[:300]
    for fragment in fragments:
        assert fragment in message, f"{binding}: {fragment!r} not in {message[:300]!r}"
    return message


def expect_or_unauthenticated(resp: httpx.Response, binding: str, kind: str, *fragments: str) -> str:
    """Without a valid key: 401 (authentication comes first), or the precise answer of `kind`."""
    if resp.status_code == 401:
        return expect(resp, binding, "unauthenticated")
    return expect(resp, binding, kind, *fragments)


def result_of(resp: httpx.Response, binding: str) -> dict[str, Any]:
    """The result of a successful answer (JSON-RPC `result`, or the REST body)."""
    assert resp.status_code == 200, f"{binding}: {resp.status_code} {resp.text[:400]}"
    body = resp.json()
    if binding.startswith("JSONRPC"):
        assert "result" in body, f"{binding}: {resp.text[:400]}"
        return body["result"]
    return body


def task_of(result: dict[str, Any]) -> dict[str, Any]:
    """The task of a SendMessage result, whatever the version's shape."""
    return result.get("task", result)


def grpc_call(target: str, method: str, payload: bytes, metadata: list[tuple[str, Any]] | None = None,
              timeout: float = 15.0) -> tuple[str, str, list[bytes]]:
    """One raw gRPC call (identity serializers): (status code name, details, response messages)."""
    def ident(raw: bytes) -> bytes:
        return raw

    with grpc.insecure_channel(target, options=[("grpc.max_send_message_length", 64 << 20)]) as channel:
        try:
            if method in GRPC_STREAMING:
                call = channel.unary_stream(GRPC_SERVICE + method, request_serializer=ident,
                                            response_deserializer=ident)
                return "OK", "", list(call(payload, metadata=metadata or [], timeout=timeout))
            call = channel.unary_unary(GRPC_SERVICE + method, request_serializer=ident, response_deserializer=ident)
            return "OK", "", [call(payload, metadata=metadata or [], timeout=timeout)]
        except grpc.RpcError as exc:
            return exc.code().name, exc.details() or "", []
