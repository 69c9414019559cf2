"""The agent page's last hour (docs/dashboard.md, "The last hour"): tasks per minute by final state, errors and
time to completion, counted from the task store, against a known load on a real server (A2A 1.0 section
4.1.3: the terminal states completed, failed, rejected, canceled)."""

from __future__ import annotations

import re
import uuid

import httpx

from parley.serve import default_app
from parley.settings import Settings
from parley.web.charts import AgentStats, bars
from support import rpc, running


def test_a_known_load_is_counted_and_drawn() -> None:
    """Five echo tasks completed and three of `flaky` failed: echo's page counts 5 completed and no error,
    flaky's 3 failed and 3 errors; the bars of each chart add up to those counts; the interviewer's task
    that waits for input is not counted (it has not ended)."""
    app = default_app()
    app.settings = Settings(db="memory")

    @app.agent(id="flaky", name="Flaky", description="Always fails.")
    async def flaky(ctx):
        raise RuntimeError("broken on purpose")
        yield  # an async generator

    with running(app) as server:
        for i in range(5):
            assert send(server.url, "echo", f"hello {i}")["status"]["state"] == "TASK_STATE_COMPLETED"
        for _ in range(3):
            assert send(server.url, "flaky", "go")["status"]["state"] == "TASK_STATE_FAILED"
        assert send(server.url, "interviewer", "I want to learn Rust")["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        with httpx.Client(base_url=server.url) as http:
            echo = chart(http.get("/ui/agents/echo").text)
            flaky_page = chart(http.get("/ui/agents/flaky").text)
            waiting = chart(http.get("/ui/agents/interviewer").text)
    assert echo["counts"] == {"completed": 5, "failed": 0, "canceled": 0, "rejected": 0, "errors": 0}
    assert echo["bars"] == {"completed": 5}
    assert "(5 tasks)" in echo["latency"] and "p50 " in echo["latency"] and "p95 " in echo["latency"]
    assert flaky_page["counts"] == {"completed": 0, "failed": 3, "canceled": 0, "rejected": 0, "errors": 3}
    assert flaky_page["bars"] == {"failed": 3}
    assert waiting["counts"]["completed"] == 0 and waiting["bars"] == {} and "no task ended" in waiting["latency"]


def send(base: str, agent: str, text: str) -> dict:
    """One blocking A2A 1.0 SendMessage; the task it answers."""
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    return rpc(f"{base}/a2a/{agent}", "SendMessage", {"message": message}, version="1.0").json()["result"]["task"]


def chart(html: str) -> dict:
    """The numbers of one agent page's chart section: its counts, the bars' sums per state, the latency line."""
    section = re.search(r'<section aria-labelledby="charts-title".*?</section>', html, re.DOTALL).group(0)
    counts = {k: int(v) for k, v in re.findall(r'data-(completed|failed|canceled|rejected|errors)="(\d+)"', section)}
    summed: dict[str, int] = {}
    for state, count in re.findall(r'<rect [^>]*data-state="(\w+)" data-count="(\d+)"', section):
        summed[state] = summed.get(state, 0) + int(count)
    latency = re.search(r'data-testid="latency"[^>]*>(.*?)</dd>', section, re.DOTALL).group(1)
    return {"counts": counts, "bars": summed, "latency": latency}


def test_percentiles_and_bars_of_known_numbers() -> None:
    """Nearest-rank percentiles: of 1..20 s, p50 is 10 s and p95 19 s. Two minutes of 2 and 4 tasks: the
    fuller minute's bar fills the chart's height, the other half of it."""
    stats = AgentStats(durations=[float(i) for i in range(1, 21)])
    assert stats.percentile(50) == 10.0 and stats.percentile(95) == 19.0
    stats.minutes[58] = {"completed": 2}
    stats.minutes[59] = {"completed": 3, "failed": 1}
    drawn = bars(stats)
    assert [(r["minute"], r["state"], r["height"]) for r in drawn] == [
        (58, "completed", 60.0), (59, "completed", 90.0), (59, "failed", 30.0)]
    assert AgentStats().percentile(50) is None and bars(AgentStats()) == []
