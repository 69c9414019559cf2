"""bench/floor_server.py, the floor bench/llm_stream.py measures Parley against (`--servers ...,floor`), run as the
bench runs it: a subprocess on 127.0.0.1. Its LLM-shaped stream must be the stream Parley sends for the same request
(bench/llm_agents.py): the same events in the same order with the same fields (A2A 1.0 section 3.1.2,
SendStreamingMessage: the task, then its status and artifact updates), the tokens in order, `lastChunk` on the last
one only. Otherwise the floor would measure a different amount of work and the bench's ratio would mean nothing.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from support import free_port, running, stop_process

BENCH = Path(__file__).resolve().parents[2] / "bench"
TOKEN = re.compile(r"^ t(\d+):(\d{19})$")  # bench/llm_tokens.token_text
REQUEST = {"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage",
           "params": {"message": {"role": "ROLE_USER", "parts": [{"text": "4 5"}], "messageId": "floor-1"}}}


@pytest.fixture
def floor() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(BENCH / "floor_server.py"), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    try:
        while True:  # a starting process is polled (bench/compare.ServerProc waits for the same card)
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            try:
                if httpx.get(url + ".well-known/agent-card.json", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the floor did not answer within 30 s"
            time.sleep(0.05)
        yield url
    finally:
        stop_process(proc)


def stream(url: str) -> list[dict[str, Any]]:
    """The JSON-RPC results of one SendStreamingMessage over SSE, in order."""
    out = []
    with httpx.stream("POST", url, json=REQUEST, headers={"A2A-Version": "1.0"}, timeout=30) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                envelope = msgspec.json.decode(line[6:])
                assert envelope["jsonrpc"] == "2.0" and envelope["id"] == 7
                out.append(envelope["result"])
    return out


def shape(value: Any) -> Any:
    """`value` with its ids, times and texts replaced by their types (states and flags kept)."""
    if isinstance(value, dict):
        return {k: v if k == "state" else shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return value if isinstance(value, bool) else type(value).__name__


def tokens(results: list[dict[str, Any]]) -> list[tuple[int, bool, bool]]:
    """(index, append, lastChunk) of each artifact update's token, checking its text is a stamped token."""
    out = []
    for r in results:
        if "artifactUpdate" in r:
            u = r["artifactUpdate"]
            match = TOKEN.match(u["artifact"]["parts"][0]["text"])
            assert match is not None, u
            out.append((int(match.group(1)), u.get("append", False), u.get("lastChunk", False)))
    return out


def test_the_floor_streams_what_parley_streams_for_the_same_request(floor: str, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    from llm_agents import app

    got = stream(floor)
    with running(app) as server:
        parley = stream(server.url + "/")
    assert [shape(r) for r in got] == [shape(r) for r in parley]
    assert tokens(got) == tokens(parley) == [(0, False, False), (1, True, False), (2, True, False), (3, True, True)]
    assert got[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert got[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    ids = {got[0]["task"]["id"]} | {r[k]["taskId"] for r in got[1:] for k in r}
    assert len(ids) == 1  # one task throughout


def test_the_floor_still_answers_a_unary_send_and_refuses_garbage(floor: str) -> None:
    unary = {**REQUEST, "method": "SendMessage"}
    answer = httpx.post(floor, json=unary, timeout=10).json()
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert answer["result"]["task"]["artifacts"][0]["parts"] == [{"text": "4 5"}]
    bad = httpx.post(floor, content=b"{not json", timeout=10).json()
    assert bad["error"]["code"] == -32600
    assert httpx.get(floor + "elsewhere", timeout=10).status_code == 404
