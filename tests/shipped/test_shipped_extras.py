"""Each extra in an install of its own (`pip install 'parley-a2a[EXTRA] @ file:///...whl'`, docs/install.md), with
the journey its documentation gives: gRPC (`parley serve --grpc-port`, `parley send --binding grpc`), MCP (the
tool of examples/mcp_weather.py run through `parley.agents.tools.mcp`), OpenTelemetry (`parley serve --otel`), and
several replicas (`parley serve --db postgresql://... --bus redis://...`, docs/operations.md).

A dependency an extra forgets, or a module of the wheel that an extra's code path needs and the wheel lacks,
fails here: the development venv (every extra at once) never shows it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import httpx
from shipkit import REPO, Install

from support import free_port

MCP_JOURNEY = '''\
from parley.agents.llm import LLMAgent  # the README's order of imports for an LLM agent with MCP tools
from parley.agents.tools.mcp import MCPTools
import asyncio
import sys


async def main():
    weather = MCPTools.stdio(sys.executable, ["mcp_weather.py"])
    try:
        print(sorted(t.name for t in await weather.list_tools()))
        print(await weather.call("forecast", {"city": "Paris", "days": 2}))
    finally:
        await weather.aclose()

asyncio.run(main())
'''


def test_grpc_serve_and_send_over_grpc(installs: Callable[[str], Install], workdir: Path) -> None:
    """With the grpc extra, `parley serve --grpc-port` serves A2A 1.0 over gRPC too, and the installed
    `parley send --binding grpc` gets its answer over it (the README's "Bindings")."""
    grpc = installs("wheel-grpc")
    with grpc.serve("--grpc-port", str(free_port()), cwd=workdir) as served:
        sent = grpc.parley("send", "--binding", "grpc", served.url, "hello over gRPC", cwd=workdir)
        assert sent.returncode == 0 and "hello over gRPC" in sent.stdout, sent.stdout + sent.stderr


def test_mcp_tool_of_the_example_server(installs: Callable[[str], Install], workdir: Path) -> None:
    """With the mcp extra, `MCPTools.stdio` starts examples/mcp_weather.py (with the install's own python),
    lists its tool and runs it."""
    mcp = installs("wheel-mcp")
    shutil.copy(REPO / "examples" / "mcp_weather.py", workdir / "mcp_weather.py")
    done = mcp.run_python(MCP_JOURNEY, cwd=workdir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["['forecast']", "Paris: sunny for the next 2 day(s)"]


def test_otel_serve_reports_spans(installs: Callable[[str], Install], workdir: Path) -> None:
    """With the otel extra, `parley serve --otel` starts, answers a send, and writes the spans of that request to
    the console (docs/observability.md, "Turning it on")."""
    otel = installs("wheel-otel")
    with otel.serve("--otel", cwd=workdir) as served:
        sent = otel.parley("send", served.url, "hello traced", cwd=workdir)
        assert sent.returncode == 0 and "hello traced" in sent.stdout, sent.stdout + sent.stderr
    assert '"trace_id"' in served.output(), served.output()[-3000:]


def test_otel_without_the_extra_says_what_to_install(bare: Install, workdir: Path) -> None:
    """Without the extra, `parley serve --otel` stops at once with a message naming the extra."""
    done = bare.parley("serve", "--otel", "--port", str(free_port()), cwd=workdir)
    assert done.returncode != 0 and "parley-a2a[otel]" in done.stdout + done.stderr, done.stdout + done.stderr


def test_postgres_and_redis_replica_answers(installs: Callable[[str], Install], workdir: Path, postgres_url: str,
                                            redis_namespace: tuple[str, str]) -> None:
    """With the postgres and redis extras, `parley serve --db postgresql://... --bus redis://...` (a schema of
    its own) is ready with both, and answers a send whose task is then in PostgreSQL: a second replica on the
    same database reads it."""
    cluster = installs("wheel-postgres-redis")
    redis_url, _ = redis_namespace
    env = {"PARLEY_KEY_PEPPER": "the-same-secret-on-every-replica"}
    with cluster.serve("--db", postgres_url, "--bus", redis_url, cwd=workdir, env=env) as first:
        ready = httpx.get(f"{first.url}/readyz", timeout=10).json()
        assert ready["status"] == "ready", ready
        sent = cluster.parley("send", first.url, "hello replicas", cwd=workdir)
        assert sent.returncode == 0 and "hello replicas" in sent.stdout, sent.stdout + sent.stderr
        listed_on_first = cluster.parley("tasks", "list", first.url, cwd=workdir)
        with cluster.serve("--db", postgres_url, "--bus", redis_url, cwd=workdir, env=env) as second:
            listed = cluster.parley("tasks", "list", second.url, cwd=workdir)
    assert listed.returncode == 0, listed.stderr
    task_ids = [line.split()[0] for line in listed_on_first.stdout.splitlines() if "completed" in line]
    assert task_ids and task_ids[0] in listed.stdout, (listed_on_first.stdout, listed.stdout)
