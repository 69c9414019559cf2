"""A2A 1.1 (dev-1.1, 28491879) section 3.2.7 across two `parley serve` replicas on one PostgreSQL schema: the
generation a task reaches on one replica is the one the other reports, a GetTask long-poll on one replica ends
when the other commits a change, and a replay on the other replica carries the same numbers."""

from __future__ import annotations

import json
import time
import uuid

import httpx
from replicas import replicas

from services import require_postgres

V11 = {"A2A-Version": "1.1"}
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}


def call(url: str, method: str, params: dict) -> dict:
    r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, headers=V11,
                   timeout=60)
    body = r.json()
    assert "result" in body, body
    return body["result"]


def test_generation_across_replicas(tmp_path, postgres_url) -> None:
    """The ticker runs on replica A; replica B long-polls GetTask(currentGeneration) in a chain, each answer
    strictly past the last, until the task completes; A and B then report one generation, and B's replay of
    the log (SubscribeToTask from Last-Event-ID 1) numbers the events 2, 3, ... up to it, exactly +1 each."""
    require_postgres()
    with replicas(tmp_path, postgres_url) as (a, b):
        task = call(f"{a.url}/a2a/ticker", "SendMessage", {
            "message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "12"}]},
            "configuration": {"returnImmediately": True}})["task"]
        seen, state = task["generation"], task["status"]["state"]
        deadline = time.monotonic() + 120
        while state not in TERMINAL:
            assert time.monotonic() < deadline, "the task did not finish"
            got = call(f"{b.url}/a2a/ticker", "GetTask", {"id": task["id"], "currentGeneration": seen})
            assert got["generation"] > seen or got["status"]["state"] in TERMINAL, (seen, got)
            seen, state = got["generation"], got["status"]["state"]
        on_a = call(f"{a.url}/a2a/ticker", "GetTask", {"id": task["id"]})
        assert on_a["generation"] == seen >= 14, (on_a, seen)
        body = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task["id"]}}
        gens = []
        with httpx.stream("POST", f"{b.url}/a2a/ticker", json=body, headers={**V11, "Last-Event-ID": "1"},
                          timeout=60) as r:
            for line in r.iter_lines():
                if line.startswith("data:"):
                    result = json.loads(line[5:])["result"]
                    update = result.get("statusUpdate") or result.get("artifactUpdate")
                    if update is not None:
                        gens.append(update["generation"])
        assert gens == list(range(2, seen + 1)), gens
