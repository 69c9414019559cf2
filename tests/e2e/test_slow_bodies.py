"""A request body that never finishes is cut; a slow but steady one is not (issue 27, item 3; docs/operations.md,
"Slow and idle clients").

A client that sends complete headers and then part of its body (or none of it) used to hold its connection
open forever, with nothing logged. The body must now arrive within `body_timeout_seconds` of its headers, plus
one second per `body_min_rate` bytes received. A real `parley serve --app bulky:app` process (tests/e2e/apps/
bulky.py: 1 s, 1000 bytes/s) and raw sockets. The cut is observed (the socket closed by the server, the
server's log line) with a deadline; the one duration asserted is the bound the settings promise, with slack
for a loaded machine.
"""

from __future__ import annotations

import json
import socket
import time

import pytest
from bulky import BODY_MIN_RATE, BODY_SECONDS
from test_serve_processes import WAIT, Server

from support import closed_by_peer

SLACK = 3.0  # seconds a loaded machine may add to the server's timer


def request_head(length: int) -> bytes:
    return (b"POST /a2a/flood HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"A2A-Version: 1.0\r\nContent-Length: %d\r\n\r\n" % length)


def body_of(length: int) -> bytes:
    """A GetTask request padded with spaces (valid JSON) to `length` bytes."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}).encode()
    return body + b" " * (length - len(body))


def wait_closed(sock: socket.socket, started: float, *, trickle: bytes = b"", pace: float = 0.1) -> float:
    """Seconds from `started` until the server closes `sock` (sending `trickle` every `pace` s meanwhile)."""
    deadline = started + WAIT
    while not closed_by_peer(sock):
        assert time.monotonic() < deadline, f"the connection was still open after {WAIT} s"
        if trickle:
            try:
                sock.sendall(trickle)
            except (BrokenPipeError, ConnectionResetError):
                break
        time.sleep(pace)  # the poll's (and the trickle's) pace, not a wait for an outcome
    return time.monotonic() - started


@pytest.mark.parametrize("sent", [0, 100], ids=["no-body", "partial-body"])
def test_a_body_that_stops_is_cut(bulky_server: Server, sent: int) -> None:
    """Headers announce 5000 bytes; `sent` of them come, then nothing: the server closes the connection within
    BODY_SECONDS + sent / BODY_MIN_RATE (plus slack), and says why in its log."""
    with socket.create_connection(("127.0.0.1", bulky_server.port)) as sock:
        sock.sendall(request_head(5000) + body_of(5000)[:sent])
        started = time.monotonic()
        took = wait_closed(sock, started)
    assert took < BODY_SECONDS + sent / BODY_MIN_RATE + SLACK, took
    assert "its request body did not arrive within 1 s" in bulky_server.output()


def test_a_body_trickled_below_the_minimum_rate_is_cut(bulky_server: Server) -> None:
    """10 bytes every 0.1 s (100 bytes/s, a tenth of BODY_MIN_RATE) of a 100 kB body: cut long before it ends."""
    with socket.create_connection(("127.0.0.1", bulky_server.port)) as sock:
        sock.sendall(request_head(100_000))
        started = time.monotonic()
        took = wait_closed(sock, started, trickle=b" " * 10)
    assert took < BODY_SECONDS * 2 + SLACK, took
    assert "its request body did not arrive" in bulky_server.output()


def test_a_slow_but_steady_body_is_served(bulky_server: Server) -> None:
    """A 6000-byte body sent at about 2000 bytes/s (twice BODY_MIN_RATE) takes three times BODY_SECONDS and is
    answered: the connection is not cut and the request is served."""
    length = 6000
    body = body_of(length)
    with socket.create_connection(("127.0.0.1", bulky_server.port)) as sock:
        sock.sendall(request_head(length))
        for i in range(0, length, 200):
            sock.sendall(body[i:i + 200])
            time.sleep(0.1)  # the upload's pace (200 bytes every 0.1 s), not a wait for an outcome
        sock.settimeout(WAIT)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk, f"closed before the answer: {answer!r}\n{bulky_server.output()}"
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer
    assert b"not found" in answer.lower() or b"TaskNotFound" in answer, answer
    assert "request body did not arrive" not in bulky_server.output()
