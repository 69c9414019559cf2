"""A webhook receiver for push-notification tests: a real HTTP server on 127.0.0.1 that records every request.

    with Webhook(answers=[503, 503], hold=1) as hook:     # uvicorn in a daemon thread, on a free port
        ...register hook.url with a server...
        hook.wait_for(lambda got: len(got) >= 1, "the first notification")
        hook.release()                                     # answer the held request(s)
        notes = hook.received()                            # [Received(...)], in arrival order

What it does with a POST to `/hook` (any path below it too):

* records it at once, on arrival, before answering: headers (lower-cased names), the exact body bytes,
  the arrival index (0, 1, ...);
* asks `judge(request)` (an async callable, optional) first: a status it returns is the answer (a receiver
  that verifies what it gets, e.g. 401 when Parley's PushVerifier refuses a request);
* holds the first `hold` requests without answering until `release()` is called (the sender sees a
  request in flight: the way to SIGKILL a server mid-delivery);
* answers request number i with `answers[i]` (an HTTP status, e.g. 503) while i < len(answers), and
  with `default` (200) after that; a `Retry-After` header only when `retry_after` is set.

`GET /gate/{name}` is a latch for agents running in another process: the request is answered (200)
once the test calls `open_gate(name)`, at once if it already has; arrivals are counted
(`gate_calls(name)`), so a test can wait until an agent has reached its gate.

Waiting is event-driven (a condition variable notified on every arrival): `wait_for(predicate)` returns
as soon as the predicate holds over the requests recorded so far and fails the test after `timeout`
seconds, showing what did arrive. No sleeps.

The receiver can also run on its own, for a test that wants it in a subprocess:
`python receiver.py PORT [--answers 503,503] [--hold 1]` prints one JSON object per request on stdout
(`{"index", "path", "headers", "body"}`), and "ready PORT" on stderr once it listens; closing its stdin
releases held requests and opens every gate.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

WAIT = 30.0  # default upper bound of one wait: a failure detector only


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Received:
    """One request the webhook received."""

    index: int  # arrival order, from 0
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    answered: int | None = None  # the status it was answered with (None: held, not answered yet)
    verdict: str | None = None  # what `judge` said of it (None: no judge, or it found nothing wrong)
    judged: bool = False  # `judge` has returned (or there is none)
    at: float = field(default_factory=time.monotonic)

    @property
    def event_id(self) -> str | None:
        return self.headers.get("parley-event-id")

    @property
    def seq(self) -> int | None:
        value = self.headers.get("parley-event-seq")
        return int(value) if value is not None else None

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    def json(self) -> object:
        return json.loads(self.body)

    def brief(self) -> str:
        return (f"#{self.index} {self.path} seq={self.seq} id={self.event_id} answered={self.answered} "
                f"{'verdict=' + repr(self.verdict) + ' ' if self.verdict else ''}{self.body[:160]!r}")


class _Latch:
    """A thread-safe one-shot latch awaited on the receiver's event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def open(self) -> None:
        with self._lock:
            self._open = True
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            loop.call_soon_threadsafe(event.set)

    async def wait(self) -> None:
        event = asyncio.Event()
        with self._lock:
            if self._open:
                return
            self._waiters.append((asyncio.get_running_loop(), event))
        await event.wait()


class Webhook:
    """A recording webhook on 127.0.0.1 (see the module docs).

    Args:
        answers: statuses for the first len(answers) requests, in arrival order.
        default: the status of every later request.
        hold: how many of the first requests are held (not answered) until `release()`.
        retry_after: a `Retry-After` value sent with non-2xx answers.
        judge: `async judge(received) -> status | None`, asked on arrival (before any hold); a status it
            returns is the answer (the scripted one otherwise); it may note why in `received.verdict`.
        path: the webhook's path.
    """

    def __init__(self, *, answers: Sequence[int] = (), default: int = 200, hold: int = 0,
                 retry_after: str | None = None, judge: Callable[[Received], Awaitable[int | None]] | None = None,
                 path: str = "/hook", port: int | None = None) -> None:
        self.answers = list(answers)
        self.default = default
        self.hold = hold
        self.retry_after = retry_after
        self.judge = judge
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = self.base + path
        self._path = path
        self._cond = threading.Condition()
        self._requests: list[Received] = []
        self._released = _Latch()
        self._gates: dict[str, _Latch] = {}
        self._gate_calls: dict[str, int] = {}
        self.on_request: Callable[[Received], None] | None = None  # called (receiver thread) on each arrival
        app = Starlette(routes=[
            Route(path, self._hook, methods=["POST"]),
            Route(path + "/{rest:path}", self._hook, methods=["POST"]),
            Route("/gate/{name}", self._gate, methods=["GET"]),
        ])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off",
                                timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"webhook-{self.port}", daemon=True)

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        self._thread.start()
        deadline = time.monotonic() + WAIT
        while not self._server.started:  # bounded start-up wait, as tests/support.py does
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the webhook receiver did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.release()
        for latch in list(self._gates.values()):
            latch.open()
        self._server.should_exit = True
        self._thread.join(timeout=WAIT)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- control -----------------------------------------------------------------------------

    def release(self) -> None:
        """Answer the held requests (and hold no more)."""
        self._released.open()

    def gate_url(self, name: str) -> str:
        return f"{self.base}/gate/{name}"

    def open_gate(self, name: str) -> None:
        self._gate_latch(name).open()

    def gate_calls(self, name: str) -> int:
        with self._cond:
            return self._gate_calls.get(name, 0)

    # --- what arrived ------------------------------------------------------------------------

    def received(self) -> list[Received]:
        """The requests so far, in arrival order (a snapshot)."""
        with self._cond:
            return list(self._requests)

    def wait_for(self, predicate: Callable[[list[Received]], bool], what: str, timeout: float = WAIT,
                 ) -> list[Received]:
        """Block until `predicate(requests so far)` holds; AssertionError after `timeout` seconds."""
        with self._cond:
            ok = self._cond.wait_for(lambda: predicate(list(self._requests)), timeout)
            got = list(self._requests)
        if not ok:
            shown = "\n".join(r.brief() for r in got) or "(nothing)"
            raise AssertionError(f"the webhook did not receive {what} within {timeout:g} s; it received:\n{shown}")
        return got

    def wait_for_gate(self, name: str, calls: int = 1, timeout: float = WAIT) -> None:
        """Block until GET /gate/{name} has arrived `calls` times."""
        with self._cond:
            ok = self._cond.wait_for(lambda: self._gate_calls.get(name, 0) >= calls, timeout)
        if not ok:
            raise AssertionError(f"no agent reached gate {name!r} within {timeout:g} s")

    # --- the endpoints -----------------------------------------------------------------------

    def _gate_latch(self, name: str) -> _Latch:
        with self._cond:
            return self._gates.setdefault(name, _Latch())

    async def _gate(self, request: Request) -> Response:
        name = request.path_params["name"]
        latch = self._gate_latch(name)
        with self._cond:
            self._gate_calls[name] = self._gate_calls.get(name, 0) + 1
            self._cond.notify_all()
        await latch.wait()
        return Response("open", status_code=200)

    async def _hook(self, request: Request) -> Response:
        body = await request.body()
        with self._cond:
            index = len(self._requests)
            rec = Received(index, request.url.path, {k.lower(): v for k, v in request.headers.items()}, body)
            self._requests.append(rec)
            self._cond.notify_all()
        if self.on_request is not None:
            self.on_request(rec)
        verdict = await self.judge(rec) if self.judge is not None else None
        with self._cond:
            rec.judged = True
            self._cond.notify_all()
        if index < self.hold:
            await self._released.wait()
        status = self.answers[index] if index < len(self.answers) else self.default
        if verdict is not None:
            status = verdict
        headers = {"Retry-After": self.retry_after} if self.retry_after and not 200 <= status < 300 else None
        with self._cond:
            rec.answered = status
            self._cond.notify_all()
        return Response(status_code=status, headers=headers)


def main(argv: list[str]) -> None:
    """Run a receiver on its own (see the module docs)."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--answers", default="", help="comma-separated statuses of the first requests")
    parser.add_argument("--hold", type=int, default=0)
    args = parser.parse_args(argv)
    answers = [int(a) for a in args.answers.split(",") if a.strip()]
    lock = threading.Lock()

    def show(rec: Received) -> None:
        line = json.dumps({"index": rec.index, "path": rec.path, "headers": rec.headers,
                           "body": rec.body.decode("utf-8", "replace")})
        with lock:
            print(line, flush=True)

    hook = Webhook(answers=answers, hold=args.hold, port=args.port)
    hook.on_request = show
    with hook:
        print(f"ready {hook.port}", file=sys.stderr, flush=True)
        sys.stdin.read()  # until the parent closes our stdin
        hook.release()


if __name__ == "__main__":
    main(sys.argv[1:])


__all__ = ["WAIT", "Received", "Webhook", "free_port"]
