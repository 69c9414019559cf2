"""Stopping `parley serve` (SIGINT, Ctrl-C; SIGTERM) closes open streams at once with a clean end the client can
resume from (an SSE `retry:` and a comment; A2A 1.0 section 3.1.6: resubscribe with Last-Event-ID), instead of
holding the shutdown until they end. One server, the default SQLite store, as a user starts it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from support import free_port, wait_until_ready

STOPPING = b"retry: 1000\n: the server is stopping; resubscribe with Last-Event-ID to continue\n\n"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_stopping_the_server_ends_an_open_subscription_with_a_resume_hint(tmp_path: Path, sig: int) -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "parley.cli", "serve", "--port", str(port), "--log-level",
                             "warning"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}/a2a/interviewer"
    try:
        wait_until_ready(proc, f"http://127.0.0.1:{port}")  # its output is read (communicate) in `finally`
        task = httpx.post(base, json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}},
            headers={"A2A-Version": "1.0"}).json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # a subscription stays open through it
        body = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task["id"]}}
        raw = b""
        with httpx.stream("POST", base, json=body, headers={"A2A-Version": "1.0"}, timeout=60) as stream:
            stop_by = time.monotonic() + 90
            for chunk in stream.iter_raw():  # keep-alives (every 15 s) keep this deadline checked
                raw += chunk
                assert time.monotonic() < stop_by, "the stream outlived the server's stop"
                if b"data: " in raw and proc.poll() is None and not raw.endswith(STOPPING):
                    proc.send_signal(sig)  # the first frame arrived: the stream is open; stop the server
        assert raw.endswith(STOPPING)  # ended by the server, with the hint (not cut off, not a timeout)
        assert proc.wait(timeout=60) in (0, -sig, 128 + sig)  # uvicorn re-raises the signal after a clean stop
    finally:
        if proc.poll() is None:
            proc.kill()
        out = proc.communicate(timeout=30)[0]
    assert "Traceback" not in out
