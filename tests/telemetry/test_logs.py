"""Structured logs: JSON records with the task id and the trace and span ids (in-process and `parley serve`)."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Self

import httpx
import pytest
from opentelemetry.trace import SpanKind
from otelkit import AGENT_LOGGER, hex_id, make_app

from parley.client import A2AClient
from parley.telemetry import ContextFilter, JsonFormatter, enable_log_context, logging_config
from support import free_port

ROOT = Path(__file__).resolve().parents[2]
PARLEY = [sys.executable, "-m", "parley.cli"] if not (Path(sys.executable).parent / "parley").exists() else [
    str(Path(sys.executable).parent / "parley")]


class Capture:
    """A JSON handler (with the context filter) on some loggers, at INFO, for the length of a test."""

    def __init__(self, *names: str) -> None:
        self.buffer = io.StringIO()
        self.handler = logging.StreamHandler(self.buffer)
        self.handler.setFormatter(JsonFormatter())
        self.handler.addFilter(ContextFilter())
        self.loggers = [logging.getLogger(n) for n in names]
        self.levels = [lg.level for lg in self.loggers]

    def __enter__(self) -> Self:
        for lg in self.loggers:
            lg.addHandler(self.handler)
            lg.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc: object) -> None:
        for lg, level in zip(self.loggers, self.levels):
            lg.removeHandler(self.handler)
            lg.setLevel(level)

    def records(self) -> list[dict]:
        return [json.loads(line) for line in self.buffer.getvalue().splitlines() if line.strip()]


@pytest.fixture
def log_context() -> Iterator[None]:
    enable_log_context(True)
    yield
    enable_log_context(False)


async def test_an_agent_log_record_carries_the_task_and_its_span(spans, serve, log_context):
    srv = serve(make_app())
    with Capture(AGENT_LOGGER, "uvicorn.access") as cap:
        async with await A2AClient.connect(f"{srv.url}/a2a/logs") as client:
            task = await client.send("the ledger")
        records = cap.records()
    agent = [r for r in records if r["logger"] == AGENT_LOGGER]
    assert len(agent) == 1
    record = agent[0]
    assert record["message"] == "working on the ledger" and record["level"] == "INFO"
    assert record["task_id"] == task.id and record["context_id"] == task.context_id
    assert record["agent_id"] == "logs" and record["a2a_method"] == "SendMessage"
    task_span = spans.one("a2a task logs")
    assert record["trace_id"] == hex_id(task_span.context.trace_id)
    assert record["span_id"] == hex_id(task_span.context.span_id, 16)  # logged inside the run: the task's span
    access = [r for r in records if r["logger"] == "uvicorn.access" and "POST /a2a/logs" in r["message"]]
    server = spans.one("a2a SendMessage", SpanKind.SERVER)
    assert access and access[0]["task_id"] == task.id
    assert access[0]["trace_id"] == hex_id(server.context.trace_id)
    assert access[0]["span_id"] == hex_id(server.context.span_id, 16)


def test_the_formatter_keeps_extras_and_exceptions():
    record = logging.LogRecord("parley.x", logging.ERROR, __file__, 1, "failed %s", ("twice",), None)
    record.attempt = 2
    try:
        raise ValueError("boom")
    except ValueError:
        record.exc_info = sys.exc_info()
    ContextFilter().filter(record)
    out = json.loads(JsonFormatter().format(record))
    assert out["message"] == "failed twice" and out["level"] == "ERROR" and out["logger"] == "parley.x"
    assert out["attempt"] == 2 and "ValueError: boom" in out["exception"]
    assert "task_id" not in out and "trace_id" not in out  # nothing is known outside a request


def test_the_logging_config_routes_uvicorn_through_the_json_handler():
    config = logging_config("json", "warning")
    assert config["root"] == {"handlers": ["parley"], "level": "WARNING"}
    assert config["handlers"]["parley"]["filters"] == ["parley_context"]
    assert config["formatters"]["parley"]["()"].endswith("JsonFormatter")
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        assert config["loggers"][name]["handlers"] == [] and config["loggers"][name]["propagate"] is True
    with pytest.raises(ValueError):
        logging_config("xml")


def _serve(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str, list[str]]:
    """Start `parley serve` and read its stderr up to the line saying it listens (no polling)."""
    port = free_port()
    proc = subprocess.Popen([*PARLEY, "serve", "--memory", "--port", str(port), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    seen: list[str] = []
    assert proc.stderr is not None
    for line in proc.stderr:
        seen.append(line)
        if "Uvicorn running on" in line:
            return proc, f"http://127.0.0.1:{port}", seen
    proc.wait(timeout=20)
    raise AssertionError("parley serve did not start:\n" + "".join(seen))


def test_parley_serve_log_format_json_with_otel():
    proc, url, seen = _serve("--otel", "--log-format", "json", "--log-level", "info",
                             env={"OTEL_TRACES_EXPORTER": "none", "OTEL_SERVICE_NAME": "json-logs"})
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}
        resp = httpx.post(f"{url}/a2a/echo", json=body, headers={"A2A-Version": "1.0"}, timeout=30)
        task_id = resp.json()["result"]["task"]["id"]
    finally:
        proc.terminate()
        _, rest = proc.communicate(timeout=20)
    lines = [line for line in [*seen, *rest.splitlines()] if line.strip().startswith("{")]
    records = [json.loads(line) for line in lines]
    assert any(r["logger"] == "uvicorn.error" and "startup complete" in r["message"] for r in records)
    access = [r for r in records if r["logger"] == "uvicorn.access" and "POST /a2a/echo" in r["message"]]
    assert access, "no access log line:\n" + "".join(seen) + rest
    assert access[0]["task_id"] == task_id and access[0]["agent_id"] == "echo"
    assert access[0]["a2a_method"] == "SendMessage"
    assert len(access[0]["trace_id"]) == 32 and len(access[0]["span_id"]) == 16
    assert "OpenTelemetry on: service json-logs" in "".join(seen)


def _sent_and_stopped(*args: str) -> str:
    """What `parley serve --memory ARGS` logged for one SendMessage, up to its exit."""
    proc, url, seen = _serve("--log-level", "info", *args)
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}
        resp = httpx.post(f"{url}/a2a/echo", json=body, headers={"A2A-Version": "1.0"}, timeout=30)
        assert resp.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        proc.terminate()
        out, rest = proc.communicate(timeout=20)
    return "".join(seen) + rest + out  # uvicorn writes its access lines to stdout


def test_parley_serve_logs_each_request_unless_told_not_to():
    """docs/operations.md, "Performance": the access log is on by default; `--no-access-log` turns it off
    and leaves the server's other lines (start-up, shutdown) as they were."""
    with_log = _sent_and_stopped()
    assert '"POST /a2a/echo HTTP/1.1" 200' in with_log, with_log
    without = _sent_and_stopped("--no-access-log")
    assert "POST /a2a/echo" not in without, without
    assert "Application startup complete" in without and "Finished server process" in without, without
