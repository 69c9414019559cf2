"""Push tracing (issue 29): a span per webhook delivery attempt, in the task's trace, and the W3C trace context
on the webhook request (docs/push.md, "Tracing"; docs/observability.md).

A2A 1.0 section 4.3.3 (the server POSTs notifications to the client's webhook) and W3C Trace Context
(`traceparent`, `tracestate`). Real parts: the OpenTelemetry SDK with its in-memory exporter, a live Parley
server and a recording webhook receiver on 127.0.0.1 (tests/push_e2e/receiver.py).
"""

from __future__ import annotations

import httpx
import msgspec
from opentelemetry.trace import SpanKind, StatusCode
from otelkit import Otel, hex_id

from parley.app import Parley, Settings
from parley.settings import PushSettings
from parley.tasks.memory_store import MemoryTaskStore
from support import settled_push_log, webhook_receiver

WAIT = 30.0


def test_each_delivery_attempt_is_a_span_of_the_tasks_trace_and_the_webhook_gets_its_context(spans: Otel,
                                                                                              serve) -> None:
    """The webhook answers the first request 503, then 200. Every attempt (the retried one too) is an
    `a2a push echo` CLIENT span whose parent is the task's span (`a2a task echo`, same trace); the failed one
    has status ERROR and http.response.status_code 503. Every request the webhook received carries a
    `traceparent` naming the trace and the span of its own attempt."""
    app = Parley(store=MemoryTaskStore(), settings=Settings(push=PushSettings(
        allow=["127.0.0.1/32"], backoff_seconds=0.01, max_backoff_seconds=0.02)))

    @app.agent(id="echo", default=True)
    async def echo(ctx):
        yield ctx.text

    srv = serve(app)
    agent = f"{srv.url}/a2a/echo"
    with webhook_receiver().Webhook(answers=[503]) as hook:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": "m-push-trace", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": {"taskPushNotificationConfig": {"url": hook.url, "token": "t"}}}}
        answer = httpx.post(agent, json=body, headers={"A2A-Version": "1.0"}, timeout=WAIT).json()
        task_id = answer["result"]["task"]["id"]
        log = settled_push_log(agent, task_id)
        tries = [t for n in log["notifications"] for t in n["tries"]]
        got = hook.received()
    assert [t["status"] for t in tries][:1] == [503] and len(got) == len(tries)

    task_span = spans.one("a2a task echo", SpanKind.INTERNAL, a2a__task_id=task_id)
    pushes = spans.named("a2a push echo", SpanKind.CLIENT, a2a__task_id=task_id)
    assert len(pushes) == len(tries), [dict(s.attributes or {}) for s in pushes]
    for span in pushes:
        assert span.context.trace_id == task_span.context.trace_id
        assert span.parent is not None and span.parent.span_id == task_span.context.span_id
        assert span.attributes["http.request.method"] == "POST" and span.attributes["server.address"] == "127.0.0.1"
    failed = [s for s in pushes if s.attributes.get("http.response.status_code") == 503]
    assert len(failed) == 1 and failed[0].status.status_code is StatusCode.ERROR
    assert failed[0].attributes["parley.push.attempt"] == 1
    assert all(s.status.status_code is not StatusCode.ERROR for s in pushes if s is not failed[0])

    trace_hex = hex_id(task_span.context.trace_id)
    sent = {}
    for request in got:
        version, trace_id, span_id, flags = request.headers["traceparent"].split("-")
        assert version == "00" and trace_id == trace_hex and int(flags, 16) & 1, request.headers["traceparent"]  # sampled
        sent[span_id] = request
    assert set(sent) == {hex_id(s.context.span_id, 16) for s in pushes}  # one request per attempt span


def test_an_attempt_refused_before_sending_is_an_error_span(spans: Otel, serve, monkeypatch) -> None:
    """A config whose sealed token was copied from another config (it does not open there: issue 28 item 1)
    is refused without a request: its attempt is still a span of the task's trace, an error with error.type
    `refused` and a description naming `token`, never the token; the webhook receives nothing."""
    import asyncio

    from cryptography.fernet import Fernet

    from parley.tasks.store import StoredPushConfig

    monkeypatch.setenv("PARLEY_TEST_TRACE_PUSH_KEY", Fernet.generate_key().decode())
    store = MemoryTaskStore()
    app = Parley(store=store, settings=Settings(push=PushSettings(
        allow=["127.0.0.1/32"], encryption_key_env="PARLEY_TEST_TRACE_PUSH_KEY")))

    @app.agent(id="ask", default=True)
    async def ask(ctx):
        if ctx.turn == 1:
            yield ctx.ask("What is your name?")
            return
        yield f"Hello, {ctx.text}!"

    srv = serve(app)
    agent = f"{srv.url}/a2a/ask"

    def send(text: str, task_id: str | None = None, push: dict | None = None) -> dict:
        message = {"messageId": f"m-{text}-{task_id}", "role": "ROLE_USER", "parts": [{"text": text}]}
        params: dict = {"message": {**message, "taskId": task_id} if task_id else message}
        if push:
            params["configuration"] = {"taskPushNotificationConfig": push}
        answer = httpx.post(agent, json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params},
                            headers={"A2A-Version": "1.0"}, timeout=WAIT).json()
        return answer["result"]["task"]

    with webhook_receiver().Webhook() as hook:
        task_id = send("hi", push={"url": hook.url, "id": "own", "token": "the-own-token"})["id"]
        settled_push_log(agent, task_id)
        before = len(hook.received())
        own = asyncio.run(store.push_target(task_id, "own"))
        copied = StoredPushConfig(msgspec.structs.replace(own.config, id="copy"), created_at=own.created_at)
        asyncio.run(store.put_push_config(copied))  # its sealed token, in another row
        spans.exporter.clear()
        send("Ada", task_id=task_id)
        log = settled_push_log(agent, task_id)
        got = hook.received()[before:]
    refused = [n for n in log["notifications"] if n["configId"] == "copy"]
    own_notes = [n for n in log["notifications"] if n["configId"] == "own"]
    assert refused and all(n["state"] == "dead" for n in refused)
    assert len(got) == len(own_notes) - before  # the copied config's notifications were never sent
    task_span = spans.one("a2a task ask", SpanKind.INTERNAL, a2a__task_id=task_id)
    failed = spans.named("a2a push ask", SpanKind.CLIENT, a2a__task_id=task_id, parley__push__config_id="copy")
    assert len(failed) == len(refused)
    for span in failed:
        assert span.parent is not None and span.parent.span_id == task_span.context.span_id
        assert span.status.status_code is StatusCode.ERROR and span.attributes["error.type"] == "refused"
        assert "`token`" in span.status.description and "the-own-token" not in span.status.description
    assert all(r.headers["x-a2a-notification-token"] == "the-own-token" for r in got)
