"""No traceback reaches a user: `parley card` and `parley send` pointed at something that is not an A2A agent
(other JSON, HTML, a 404) say in one line what they got; `parley serve --app` with a module that fails while it
is imported (a mistake in the user's code, an agent that is not an async generator) says in one line what and
where. Run as users run them: the real console script, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import http.server
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli import ENV, PARLEY, TIMEOUT, assert_one_error_line

from support import free_port

PAGES = {
    "/other.json": ("application/json", b'{"hello": 1, "items": [1, 2]}'),
    "/page.json": ("text/html", b"<html><body>not a card</body></html>"),
    "/list.json": ("application/json", b"[1, 2, 3]"),
}


class Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        kind, body = PAGES.get(self.path, ("text/plain", b"missing"))
        self.send_response(200 if self.path in PAGES else 404)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join()


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PARLEY, *args], capture_output=True, text=True, env=ENV, timeout=TIMEOUT, cwd=cwd,
                          check=False)


@pytest.mark.parametrize("command", [["card"], ["send"]])
@pytest.mark.parametrize("path,fragments", [
    ("/other.json", ["this is not an agent card", "it has hello, items"]),
    ("/page.json", ["did not return an agent card but text/html", "not JSON"]),
    ("/list.json", ["the agent card is not a JSON object"]),
    ("/missing", ["/missing/.well-known/agent-card.json answered HTTP 404"]),
])
def test_not_an_agent_is_one_line(site: str, command: list[str], path: str, fragments: list[str]) -> None:
    args = [*command, site + path] + (["hello"] if command == ["send"] else [])
    proc = run(*args)
    assert proc.returncode == 1
    assert_one_error_line(proc, *fragments)


def test_an_app_that_fails_at_import_is_one_line_naming_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("from parley import Parley\napp = Parley()\nraise RuntimeError('oops')\n")
    proc = run("serve", "--app", "broken:app", "--memory", "--port", str(free_port()), cwd=tmp_path)
    assert proc.returncode == 1
    assert_one_error_line(proc, "importing 'broken' failed: RuntimeError: oops", "broken.py, line 3")


def test_an_agent_that_is_not_an_async_generator_is_named_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text(
        "from parley import Parley\napp = Parley()\n\n@app.agent('greeter')\ndef greeter(ctx):\n    return 'hi'\n")
    proc = run("serve", "--app", "plain:app", "--memory", "--port", str(free_port()), cwd=tmp_path)
    assert proc.returncode == 1
    assert_one_error_line(proc, "agent 'greeter'", "must be an async generator function (async def + yield)",
                          "plain.py, line 4")


def test_an_app_whose_dashboard_path_names_one_of_its_agents_is_one_line(tmp_path: Path) -> None:
    """The dashboard at /console beside an agent called `console` would take that agent's HTTP+JSON paths
    (/console/tasks/...). parley.toml has refused this since the dashboard came; an app declared in Python is
    refused the same way, before anything is served."""
    (tmp_path / "clash.py").write_text(
        "from parley import Parley\n"
        "from parley.settings import DashboardSettings, Settings\n"
        "app = Parley(settings=Settings(dashboard=DashboardSettings(path='/console')))\n\n"
        "@app.agent('console')\nasync def console(ctx):\n    yield 'hi'\n")
    proc = run("serve", "--app", "clash:app", "--memory", "--port", str(free_port()), cwd=tmp_path)
    assert proc.returncode == 1
    assert_one_error_line(proc, "dashboard.path '/console'", "/console is also the agent 'console'",
                          "choose another path or agent id")


def test_an_unknown_agent_names_the_hosted_ones_and_the_command_that_lists_them() -> None:
    from parley.serve import default_app
    from support import running

    with running(default_app(None)) as srv:
        proc = run("send", f"{srv.url}/a2a/nope", "hello")
    assert_one_error_line(proc, "No agent 'nope' is hosted here (the agents are: echo, interviewer)",
                          "`parley agents` lists them")


def test_watching_a_finished_task_suggests_the_commands_not_the_protocol_methods() -> None:
    import httpx

    from parley.serve import default_app
    from support import running

    with running(default_app(None)) as srv:
        done = httpx.post(f"{srv.url}/a2a/echo", json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}},
            headers={"A2A-Version": "1.0"}).json()["result"]["task"]
        proc = run("tasks", "watch", f"{srv.url}/a2a/echo", done["id"], "--version", "1.0")
    line = assert_one_error_line(proc, "is already finished", "see it with `parley tasks get`",
                                 "`parley tasks watch --last-event-id 0`")
    assert "GetTask" not in line
