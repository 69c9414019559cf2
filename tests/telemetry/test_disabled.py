"""Telemetry off, or OpenTelemetry not installed at all: Parley works the same and records nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from otelkit import Otel, make_app

from parley.client import A2AClient
from parley.protocol import models as m
from parley.telemetry import (
    TelemetryUnavailable,
    configure_telemetry,
    current,
    disable_telemetry,
    env_wants_telemetry,
    shutdown_telemetry,
)
from parley.telemetry.requests import RequestMiddleware

ROOT = Path(__file__).resolve().parents[2]


async def test_a_server_built_while_telemetry_is_off_records_nothing(serve):
    kit = Otel.configure()
    disable_telemetry()  # providers exist, but Parley does not report to them
    try:
        srv = serve(make_app())
        starlette = srv.server.config.app
        server = starlette.state.parley
        assert not any(mw.cls is RequestMiddleware for mw in starlette.user_middleware)
        assert server.engine.listeners == [] and server.engine.observers == []
        async with await A2AClient.connect(f"{srv.url}/a2a/echo") as client:
            task = await client.send("quiet")
            events = [ev async for ev in client.stream("still quiet")]
        async with await A2AClient.connect(f"{srv.url}/a2a/echo", bindings=["HTTP+JSON"]) as client:
            assert (await client.get(task.id)).status.state is m.TaskState.COMPLETED
        assert task.status.state is m.TaskState.COMPLETED and events[-1].status.state is m.TaskState.COMPLETED
        assert kit.finished() == []
        assert kit.points("a2a.server.requests") == []
    finally:
        kit.close()


def test_configure_reads_the_otel_environment():
    assert env_wants_telemetry({}) is False
    assert env_wants_telemetry({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}) is True
    assert env_wants_telemetry({"OTEL_TRACES_EXPORTER": "console"}) is True
    assert env_wants_telemetry({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"}) is False
    assert env_wants_telemetry({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}) is False
    try:
        tel = configure_telemetry("svc", exporter="none", set_global=False, env={})
        assert (tel.exporter, tel.service_name, tel.owns_providers) == ("none", "svc", True)
        assert current() is tel
        tel = configure_telemetry("svc", set_global=False, env={"OTEL_TRACES_EXPORTER": "console",
                                                                "OTEL_SERVICE_NAME": "from-env"})
        assert (tel.exporter, tel.service_name) == ("console", "from-env")
        from parley.telemetry.setup import _otlp_available

        if not _otlp_available({}):
            with pytest.raises(TelemetryUnavailable, match="opentelemetry-exporter-otlp"):
                configure_telemetry(exporter="otlp", set_global=False, env={})
            tel = configure_telemetry(set_global=False, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
            assert tel.exporter == "console"  # an endpoint without the OTLP package: the console instead
        with pytest.raises(ValueError, match="unknown span exporter"):
            configure_telemetry(exporter="carrier-pigeon", set_global=False, env={})
    finally:
        shutdown_telemetry()
    assert current() is None


BLOCK_OTEL = textwrap.dedent('''
    import importlib.abc, sys

    class NoOpenTelemetry(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ImportError(f"No module named {name!r} (blocked by the test)")
            return None

    sys.meta_path.insert(0, NoOpenTelemetry())
    for name in [n for n in sys.modules if n.startswith("opentelemetry")]:
        del sys.modules[name]
''')

WITHOUT_OTEL = BLOCK_OTEL + textwrap.dedent('''
    import asyncio, io, json, logging
    sys.path[:0] = ["tests", "tests/telemetry"]
    from support import LiveServer
    from otelkit_plain import plain_app

    from parley import telemetry
    from parley.client import A2AClient

    out = {"available": telemetry.otel_available()}
    try:
        telemetry.configure_telemetry()
    except telemetry.TelemetryUnavailable as exc:
        out["configure"] = str(exc)
    telemetry.enable_log_context()  # structured logs work without OpenTelemetry
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(telemetry.JsonFormatter())
    handler.addFilter(telemetry.ContextFilter())
    logging.getLogger("plain.agent").addHandler(handler)
    logging.getLogger("plain.agent").setLevel(logging.INFO)

    srv = LiveServer(plain_app()).start()

    async def main():
        async with await A2AClient.connect(srv.url + "/a2a/logs") as client:
            task = await client.send("hello")
            out["task"] = task.id
            out["state"] = task.status.state.value
            out["stream"] = [type(ev).__name__ for ev in [e async for e in client.stream("again")]][-1]
        async with await A2AClient.connect(srv.url + "/a2a/logs", bindings=["HTTP+JSON"]) as client:
            out["rest"] = (await client.get(task.id)).status.state.value

    asyncio.run(main())
    srv.stop()
    out["logs"] = [json.loads(line) for line in buf.getvalue().splitlines()]
    out["otel_modules"] = sorted(n for n in sys.modules if n.startswith("opentelemetry"))
    print(json.dumps(out))
''')

PLAIN_APP = textwrap.dedent('''
    import logging
    from parley.app import Parley

    def plain_app():
        app = Parley()

        @app.agent(id="logs")
        async def logs(ctx):
            logging.getLogger("plain.agent").info("run %s", ctx.text)
            yield "ok"

        return app
''')


def test_parley_works_without_opentelemetry_installed(tmp_path):
    (tmp_path / "otelkit_plain.py").write_text(PLAIN_APP)
    done = subprocess.run([sys.executable, "-c", WITHOUT_OTEL], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False, env={"PYTHONPATH": str(tmp_path), "PATH": ""})
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["available"] is False and "pip install 'parley-a2a[otel]'" in out["configure"]
    assert out["state"] == "TASK_STATE_COMPLETED" and out["rest"] == "TASK_STATE_COMPLETED"
    assert out["stream"] == "TaskStatusUpdateEvent"
    assert out["otel_modules"] == []
    first = out["logs"][0]
    assert first["message"] == "run hello" and first["task_id"] == out["task"] and first["agent_id"] == "logs"
    assert "trace_id" not in first
    assert "Traceback" not in done.stderr


def test_parley_serve_otel_without_opentelemetry_says_so():
    script = BLOCK_OTEL + textwrap.dedent('''
        from parley.cli import main
        sys.argv = ["parley", "serve", "--memory", "--port", "1", "--otel"]
        main()
    ''')
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "error: --otel:" in done.stderr and "parley-a2a[otel]" in done.stderr


def test_the_otel_environment_without_opentelemetry_only_warns(tmp_path):
    script = BLOCK_OTEL + textwrap.dedent('''
        from parley import cli
        log_config, on = cli._observability(None, "text", "info")
        print(json.dumps([log_config, on]))
    ''').replace("from parley import cli", "import json\nfrom parley import cli")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "PATH": ""})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [None, False]
    assert "OpenTelemetry is not installed" in " ".join(done.stderr.split())


def test_hooks_are_no_ops_while_off():
    from parley.protocol.operations import Operation
    from parley.telemetry import hooks

    assert current() is None and not hooks.enabled()
    assert dict(hooks.trace_headers()) == {}
    hooks.a2a_request("JSONRPC", "echo")  # no request scope: nothing happens
    hooks.a2a_method(Operation.SEND, "1.0")
    assert hooks.grpc_call(None, Operation.SEND, None, None).__enter__() is None
    events = object()
    assert hooks.stream_events(events) is events  # type: ignore[arg-type]
