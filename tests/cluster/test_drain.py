"""A replica stopped gracefully (SIGTERM, as an orchestrator does) drains: its open streams end at once with
a resume hint (SSE `retry:`; the client resubscribes with Last-Event-ID, A2A 1.0 section 3.1.6, on another
replica and loses nothing), running tasks get `drain_seconds` to finish, and the ones still running then are
handed over: another replica resumes them from their checkpoint."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest
from replicas import replicas
from test_replicas import V1, call, start, state_of, ticks


def read_frames(url: str, body: dict, headers: dict, *, until, deadline: float) -> tuple[list[dict], bytes]:
    """Read an SSE stream frame by frame (keep-alives every second keep the deadline checked); returns the
    (id, data) frames as dicts and the raw bytes, after the stream ends or `until(frames)` says stop."""
    import json

    frames: list[dict] = []
    raw = b""
    with httpx.Client(timeout=30) as client, client.stream("POST", url, json=body, headers=headers) as response:
        assert response.status_code == 200
        buffer = b""
        for chunk in response.iter_raw():
            raw += chunk
            buffer += chunk
            while b"\n\n" in buffer:
                frame, buffer = buffer.split(b"\n\n", 1)
                fields = dict(line.split(b": ", 1) for line in frame.split(b"\n") if line.startswith((b"id: ", b"data: ")))
                if b"data" in fields:
                    frames.append({"id": int(fields[b"id"]), "result": json.loads(fields[b"data"])["result"]})
            assert time.monotonic() < deadline, "the stream did not end"
            if until(frames):
                break
    return frames, raw


@pytest.mark.parametrize("bus", ["redis", "postgres"])
def test_sigterm_ends_streams_with_a_resume_hint_and_the_task_continues_elsewhere(
        bus: str, tmp_path: Path, postgres_url: str, request: pytest.FixtureRequest) -> None:
    redis = request.getfixturevalue("redis_namespace") if bus == "redis" else None
    with replicas(tmp_path, postgres_url, redis=redis, extra="keepalive_seconds = 1.0\ndrain_seconds = 10") as (a, b):
        task = start(a, "ticker", "60")
        sub = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task["id"]}}
        deadline = time.monotonic() + 60
        seen: list[dict] = []

        def five_ticks_then_sigterm(frames: list[dict]) -> bool:
            if len(ticks([f["result"] for f in frames])) >= 5 and a.proc.poll() is None and not seen:
                seen.append({})
                a.proc.terminate()  # SIGTERM while the stream is open
            return False

        frames, raw = read_frames(f"{a.url}/a2a/ticker", sub, V1, until=five_ticks_then_sigterm, deadline=deadline)
        assert raw.endswith(b"retry: 1000\n: the server is stopping; resubscribe with Last-Event-ID to continue\n\n")
        assert a.proc.wait(timeout=60) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a clean stop
        assert "Traceback" not in a.output()
        last_id = frames[-1]["id"]
        rest, _ = read_frames(f"{b.url}/a2a/ticker", sub, {**V1, "Last-Event-ID": str(last_id)},
                              until=lambda f: False, deadline=deadline)
        before = [art["artifactId"] for art in frames[0]["result"]["task"].get("artifacts") or []]
        got = before + ticks([f["result"] for f in frames]) + ticks([f["result"] for f in rest])
        assert got == [f"tick-{i}" for i in range(60)]  # every tick once: A finished the task while draining
        assert [f["id"] for f in rest] == sorted({f["id"] for f in rest}) and rest[0]["id"] > last_id
        assert state_of(rest[-1]["result"]) == "TASK_STATE_COMPLETED"


def test_a_task_still_running_after_the_drain_is_resumed_by_another_replica(
        tmp_path: Path, postgres_url: str) -> None:
    with replicas(tmp_path, postgres_url, extra="drain_seconds = 0.5") as (a, b):
        task = start(a, "stepper", "go")
        deadline = time.monotonic() + 30
        while "step 1 done" not in str(call(a, "stepper", "GetTask", {"id": task["id"]})["status"]):
            assert time.monotonic() < deadline, "the stepper did not reach its checkpoint"
            time.sleep(0.05)  # polling a remote state, with a deadline
        assert a.stop() in (0, -signal.SIGTERM)  # SIGTERM: the drain ends, the task is handed over (lease released)
        deadline = time.monotonic() + 30
        while (done := call(b, "stepper", "GetTask", {"id": task["id"]}))["status"]["state"] != "TASK_STATE_COMPLETED":
            assert time.monotonic() < deadline, f"not taken over: {done['status']}"
            time.sleep(0.05)
        answer = done["artifacts"][-1]["parts"][0]["text"]
        assert answer == f"resumed at step 1 on pid {b.proc.pid}"


def test_readyz_says_unavailable_once_the_runtime_begins_to_stop() -> None:
    """In process: begin_stop (what SIGTERM calls) turns /readyz to 503 at once."""
    import asyncio

    from parley.agents.builtin import builtin_agents
    from parley.runtime import Runtime
    from parley.settings import Settings

    async def scenario() -> None:
        runtime = Runtime({a.id: a for a in builtin_agents()}, settings=Settings(db="memory"))
        await runtime.start()
        try:
            assert set((await runtime.readiness()).values()) == {"ok"}
            runtime.begin_stop()
            assert (await runtime.readiness())["runtime"] == "not started, or stopping"
        finally:
            await runtime.stop()

    asyncio.run(scenario())
