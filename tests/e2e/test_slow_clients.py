"""Slow and idle clients are closed, and everyone else keeps being served (docs/operations.md, "Slow and idle
clients"; issue "bounded resources": 100 slowloris connections used to be held open indefinitely).

Real `parley serve --app bulky:app` processes (tests/e2e/apps/bulky.py: 1 s header and stall timeouts) and
raw sockets. Each test waits for an observable event (the socket closed by the server, the server's log line),
with WAIT as a failure detector only; nothing asserts a duration.
"""

from __future__ import annotations

import json
import socket
import time

import httpx
from test_serve_processes import WAIT, Server

from support import closed_by_peer

SLOW_CONNECTIONS = 20


def send_message(url: str, text: str) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": f"m-{time.monotonic_ns()}", "role": "ROLE_USER",
                                   "parts": [{"text": text}]}}}
    resp = httpx.post(url + "/a2a/flood", json=body, headers={"A2A-Version": "1.0"}, timeout=WAIT)
    assert resp.status_code == 200, resp.text
    return resp.json()["result"]["task"]


def test_slowloris_connections_are_closed_while_other_clients_are_served(bulky_server: Server) -> None:
    """Connections that trickle their request headers a byte at a time, and one that sends nothing at all,
    are closed by the server; meanwhile ordinary requests are answered."""
    slow = [socket.create_connection(("127.0.0.1", bulky_server.port)) for _ in range(SLOW_CONNECTIONS)]
    silent = socket.create_connection(("127.0.0.1", bulky_server.port))
    try:
        for sock in slow:
            sock.sendall(b"POST /a2a/flood HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        open_ = set(range(SLOW_CONNECTIONS))
        served = 0
        deadline = time.monotonic() + WAIT
        while open_ or not closed_by_peer(silent):
            assert time.monotonic() < deadline, (f"{len(open_)} of {SLOW_CONNECTIONS} trickling connections "
                                                 f"still open after {WAIT} s")
            for i in list(open_):
                try:
                    slow[i].sendall(b"a")  # one more byte of a header that never ends
                except (BrokenPipeError, ConnectionResetError):
                    open_.discard(i)
                    continue
                if closed_by_peer(slow[i]):
                    open_.discard(i)
            assert send_message(bulky_server.url, "1")["status"]["state"] == "TASK_STATE_COMPLETED"
            served += 1
            time.sleep(0.2)  # the trickle's pace (a byte per connection every 0.2 s), not a wait for an outcome
        assert served >= 1
        assert "its request headers did not arrive within 1 s" in bulky_server.output()
    finally:
        for sock in [*slow, silent]:
            sock.close()


def test_a_kept_alive_connection_whose_next_request_trickles_is_closed(bulky_server: Server) -> None:
    """The header timeout holds for every request of a keep-alive connection, not only its first: after one
    request is answered, a second whose headers never end gets the connection closed."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}).encode()
    with socket.create_connection(("127.0.0.1", bulky_server.port)) as sock:
        sock.sendall(b"POST /a2a/flood HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"A2A-Version: 1.0\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        answer = b""
        while b"TaskNotFound" not in answer and b"not found" not in answer:
            chunk = sock.recv(65536)
            assert chunk, f"closed before the first answer: {answer!r}"
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200"), answer
        sock.sendall(b"POST /a2a/flood HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        deadline = time.monotonic() + WAIT
        while not closed_by_peer(sock):
            assert time.monotonic() < deadline, f"the trickling second request was still open after {WAIT} s"
            try:
                sock.sendall(b"a")
            except (BrokenPipeError, ConnectionResetError):
                break
            time.sleep(0.2)  # the trickle's pace, not a wait for an outcome
    assert "its request headers did not arrive within 1 s" in bulky_server.output()


def test_a_client_that_stops_reading_a_stream_is_disconnected(bulky_server: Server) -> None:
    """A subscriber that reads nothing of a large stream does not make the server buffer the stream for it:
    once the socket buffers are full for STALL seconds, the server drops the connection (the client would
    resume with Last-Event-ID), and it keeps serving others."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # small: the server's writes back up quickly
    sock.connect(("127.0.0.1", bulky_server.port))
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                       "params": {"message": {"messageId": "m-stall", "role": "ROLE_USER",
                                              "parts": [{"text": "400"}]}}}).encode()
    sock.sendall(b"POST /a2a/flood HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"A2A-Version: 1.0\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    try:
        deadline = time.monotonic() + WAIT
        while "it read nothing of the response for 1 s" not in bulky_server.output():  # the server's own account
            assert time.monotonic() < deadline, bulky_server.output()
            time.sleep(0.05)
        received = b""
        sock.settimeout(WAIT)
        while True:  # what the kernel buffered before the server gave up, then the end of the connection
            try:
                chunk = sock.recv(1 << 20)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
        assert received.startswith(b"HTTP/1.1 200")
        assert b"TASK_STATE_COMPLETED" not in received  # cut off: far from all of the 25 MiB stream arrived
        assert len(received) < 400 * 65536
        assert send_message(bulky_server.url, "1")["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        sock.close()
