"""Push-notification metrics: attempts by outcome (delivered, retry, dead) and delivery latency (docs/push.md,
"The delivery log"; issue: metrics of delivered, retried, dead-lettered notifications and latency)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from otelkit import Otel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from parley.app import Parley, Settings
from parley.settings import PushSettings
from parley.tasks.memory_store import MemoryTaskStore
from support import free_port, settled_push_log

WAIT = 30.0


@pytest.fixture
def webhook() -> Iterator[tuple[str, dict[str, list[int]]]]:
    """A receiver on 127.0.0.1: /flaky answers 503 once then 204, /refuses always 400."""
    answers: dict[str, list[int]] = {"/flaky": [503]}

    async def hook(request: Request) -> Response:
        await request.body()
        if request.url.path == "/refuses":
            return Response(status_code=400)
        queue = answers.get(request.url.path, [])
        return Response(status_code=queue.pop(0) if queue else 204)

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/{name}", hook, methods=["POST"])]),
                                           host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the webhook receiver did not start"
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}", answers
    server.should_exit = True
    thread.join(timeout=10)


def attempts(otel: Otel, outcome: str) -> int:
    return otel.value("a2a.server.push.attempts", outcome=outcome, a2a__agent__id="echo") or 0


def test_push_attempts_are_counted_by_outcome_with_latency(otel: Otel, serve, webhook) -> None:
    base, _ = webhook
    app = Parley(store=MemoryTaskStore(), settings=Settings(push=PushSettings(
        allow=["127.0.0.1/32"], backoff_seconds=0.01, max_backoff_seconds=0.02)))

    @app.agent(id="echo", default=True)
    async def echo(ctx):
        yield ctx.text

    srv = serve(app)
    before = {o: attempts(otel, o) for o in ("delivered", "retry", "dead")}
    latency_before = otel.value("a2a.server.push.latency", a2a__agent__id="echo") or 0
    agent = f"{srv.url}/a2a/echo"
    tasks = []
    for path in ("/flaky", "/refuses"):
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": f"m{path}", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": {"taskPushNotificationConfig": {"url": base + path}}}}
        answer = httpx.post(agent, json=body, headers={"A2A-Version": "1.0"}, timeout=WAIT).json()
        tasks.append(answer["result"]["task"]["id"])
    logs = [settled_push_log(agent, t) for t in tasks]
    flaky, refused = ([(n["state"], [t["outcome"] for t in n["tries"]]) for n in log["notifications"]]
                      for log in logs)
    # flaky: its first notification is retried once (503), every notification then delivered
    assert flaky[0] == ("delivered", ["retry", "delivered"]) and all(s == "delivered" for s, _ in flaky[1:])
    # refuses: 400 is final, each notification dead at its first attempt
    assert refused and all(n == ("dead", ["dead"]) for n in refused)
    delivered = len(flaky)
    assert attempts(otel, "retry") - before["retry"] == 1
    assert attempts(otel, "delivered") - before["delivered"] == delivered
    assert attempts(otel, "dead") - before["dead"] == len(refused)
    latency = otel.value("a2a.server.push.latency", a2a__agent__id="echo")
    assert latency - latency_before == delivered  # one latency point per delivered notification
