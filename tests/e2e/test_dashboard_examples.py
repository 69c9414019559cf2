"""The dashboard's "Call it" snippets (parley.web.examples) work when pasted: run against a real `parley serve`.

The agent page of the dashboard shows three snippets for each agent: curl in A2A 1.0 (JSON-RPC SendMessage,
`A2A-Version: 1.0`), curl in A2A 0.3 (JSON-RPC message/send, no version header) and Python with
parley.client. An operator copies one into a shell or a Python file and expects the agent's answer. Here each
snippet is taken from the agent page itself (the HTML the operator copies from, unescaped), checked to be what
`parley.web.examples.examples` makes for that agent's URL, and run as a subprocess: `sh -c` (curl is
/usr/bin/curl) or the venv's Python `-c`. The agent is the built-in echo, which completes a task whose artifact
is the text sent ("hello").

An open server's snippets carry no credentials. A secured server's (`[server.auth] admin_key_env`) send
`X-API-Key: $PARLEY_KEY`: with PARLEY_KEY set to a key of the agent (made through `POST /admin/keys`) they
complete; with a wrong key or without one the server refuses them (A2A 1.0 section 7.4: every request is
authenticated; Parley's UnauthenticatedError, JSON-RPC -31401, HTTP 401).

Each snippet runs on its own server: all three send messageId "m-1", and a second send of the same message by
the same principal is answered from the first (idempotency), which would hide a snippet that does not work.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_serve_processes import WAIT, Launch, Server

from parley.web.examples import KEY_VARIABLE, examples

ADMIN_ENV = "PARLEY_ADMIN_KEY"
ADMIN_KEY = "adm_examples-test-key-0123456789"
TITLES = ["curl, A2A 1.0 (JSON-RPC)", "curl, A2A 0.3 (JSON-RPC)", "Python (parley.client)"]
EXAMPLE = re.compile(r'<figure class="example" data-language="(?P<language>[a-z]+)">\s*<figcaption>(?P<title>.*?) '
                     r'<button.*?</figcaption>\s*<pre><code>(?P<text>.*?)</code></pre>', re.DOTALL)
SECURED_CONFIG = f"""
[server]
builtin_agents = true
db = "memory"
[server.auth]
admin_key_env = "{ADMIN_ENV}"
"""


def page_examples(page: str) -> list[tuple[str, str, str]]:
    """(title, language, text) of each snippet on an agent page, as the operator copies it."""
    return [(html.unescape(m["title"]), m["language"], html.unescape(m["text"])) for m in EXAMPLE.finditer(page)]


def snippets_on(http: httpx.Client, agent_url: str, *, secured: bool) -> list[tuple[str, str, str]]:
    """The snippets of the echo agent's dashboard page; they are what parley.web.examples makes for its URL."""
    resp = http.get("/ui/agents/echo")
    assert resp.status_code == 200, resp.text
    shown = page_examples(resp.text)
    assert [s[0] for s in shown] == TITLES
    assert shown == [(e.title, e.language, e.text) for e in examples(agent_url, secured=secured)]
    return shown


def run(language: str, text: str, *, key: str | None) -> subprocess.CompletedProcess[str]:
    """Paste a snippet into a shell (sh) or run it with this venv's Python; PARLEY_KEY set to `key`, or unset."""
    env = {k: v for k, v in os.environ.items() if k != KEY_VARIABLE}
    if key is not None:
        env[KEY_VARIABLE] = key
    cmd = ["sh", "-c", text] if language == "sh" else [sys.executable, "-c", text]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=WAIT, check=False)


def answer_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"])


def assert_completed_echo(title: str, done: subprocess.CompletedProcess[str]) -> None:
    """The snippet's output is the completed echo task (its answer "hello"), in the form of its protocol."""
    assert done.returncode == 0, (done.stdout, done.stderr)
    if title == TITLES[0]:  # A2A 1.0 section 3.1.1: SendMessage's result holds the task
        task = json.loads(done.stdout)["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["history"][0]["parts"] == [{"text": "hello"}]
    elif title == TITLES[1]:  # 0.3 (specification/json/a2a.json, SendMessageResponse): the result is the Task
        task = json.loads(done.stdout)["result"]
        assert task["kind"] == "task" and task["status"]["state"] == "completed"
        assert all(p["kind"] == "text" for a in task["artifacts"] for p in a["parts"])
    else:  # the Python snippet prints the task's state and its artifacts
        assert done.stdout.startswith("TaskState.COMPLETED ["), done.stdout
        assert "text='hello'" in done.stdout and done.stderr == ""
        return
    assert answer_text(task) == "hello"


def assert_refused(title: str, done: subprocess.CompletedProcess[str], reason: str) -> None:
    """The server refused the snippet's call for want of a valid key, and the snippet shows why."""
    if title in TITLES[:2]:  # curl -s prints the JSON-RPC error body
        assert done.returncode == 0, done.stderr
        error = json.loads(done.stdout)["error"]
        assert error["code"] == -31401 and error["message"] == reason, error
    else:
        assert done.returncode == 1 and done.stdout == ""
        assert f"parley.protocol.errors.UnauthenticatedError: {reason}" in done.stderr, done.stderr


def secured_snippets(server: Server) -> dict[str, tuple[str, str]]:
    """title -> (language, text) of the echo page's snippets, seen by an admin logged in to the dashboard (a
    browser session: the login page's CSRF token and cookie, then the admin key)."""
    with httpx.Client(base_url=server.url, timeout=WAIT) as http:
        admin_login(http)
        return {title: (language, text) for title, language, text in
                snippets_on(http, f"{server.url}/a2a/echo", secured=True)}


def admin_login(http: httpx.Client) -> None:
    page = http.get("/ui/login")
    assert page.status_code == 200, page.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None, page.text
    done = http.post("/ui/login", data={"credential": ADMIN_KEY, "csrf": html.unescape(csrf[1]), "next": "/"})
    assert done.status_code == 303, done.text


def agent_key(server: Server) -> str:
    """A key of the echo agent, made through the admin API (the token is shown once)."""
    resp = httpx.post(f"{server.url}/admin/keys", json={"agent": "echo"}, headers={"X-API-Key": ADMIN_KEY},
                      timeout=WAIT)
    assert resp.status_code == 201, resp.text
    return resp.json()["token"]


@pytest.fixture
def secured(tmp_path: Path, launch: Launch) -> Server:
    """`parley serve --config parley.toml --memory` with an admin key from the environment: every call needs a key."""
    (tmp_path / "parley.toml").write_text(SECURED_CONFIG)
    return launch("secured", "--config", "parley.toml", "--memory", env={ADMIN_ENV: ADMIN_KEY})


@pytest.mark.parametrize("which", TITLES)
def test_each_snippet_of_an_open_server_returns_the_completed_task(which: str, launch: Launch) -> None:
    """On an open server (no credentials configured) the snippet, pasted as shown on the agent page, sends
    "hello" to echo and prints the completed task with "hello" as its answer; it carries no key."""
    server = launch("open", "--memory")
    with httpx.Client(base_url=server.url, timeout=WAIT) as http:
        shown = {title: (language, text) for title, language, text in
                 snippets_on(http, f"{server.url}/a2a/echo", secured=False)}
    language, text = shown[which]
    assert KEY_VARIABLE not in text and "X-API-Key" not in text
    assert_completed_echo(which, run(language, text, key=None))


@pytest.mark.parametrize("which", TITLES)
def test_each_snippet_of_a_secured_server_works_with_a_key_of_the_agent(which: str, secured: Server) -> None:
    """On a secured server the agent page's snippet reads the key from $PARLEY_KEY: with a key of echo
    (`POST /admin/keys`) it prints the completed task; A2A 1.0 section 7.4 (the request is authenticated)."""
    language, text = secured_snippets(secured)[which]
    assert KEY_VARIABLE in text
    assert_completed_echo(which, run(language, text, key=agent_key(secured)))


@pytest.mark.parametrize("which", TITLES)
def test_a_secured_snippet_without_a_valid_key_is_refused(which: str, secured: Server) -> None:
    """A secured server's snippet run with a wrong PARLEY_KEY, or with none, gets no answer from the agent:
    the server refuses it as unauthenticated (A2A 1.0 section 7.4; -31401, HTTP 401), and the output says why.
    Without the variable the Python snippet stops before calling (KeyError: 'PARLEY_KEY')."""
    language, text = secured_snippets(secured)[which]
    assert_refused(which, run(language, text, key="pk_0123456789abcdef_not-a-real-secret"),
                   "The API key is not valid: unknown, revoked or expired")
    unset = run(language, text, key=None)
    if language == "sh":  # the header goes out empty
        assert_refused(which, unset, "Authentication required: send an API key (X-API-Key) or a bearer token")
    else:
        assert unset.returncode == 1 and unset.stderr.rstrip().endswith(f"KeyError: '{KEY_VARIABLE}'"), unset.stderr
    raw = httpx.post(f"{secured.url}/a2a/echo", json={"jsonrpc": "2.0", "id": 1, "method": "message/send",
                                                      "params": {}}, timeout=WAIT)
    assert raw.status_code == 401  # what curl received (curl -s prints the body only)


@pytest.mark.parametrize("which", TITLES[:2])
def test_a_curl_snippet_run_twice_makes_two_tasks(which: str, launch: Launch) -> None:
    """Each run of a curl snippet sends a new messageId, so pasting it again is a new message and a new task,
    not the first task again (a repeated id is the same message: A2A 1.0 section 3.1.1, idempotent retries)."""
    server = launch("twice", "--memory")
    with httpx.Client(base_url=server.url, timeout=WAIT) as http:
        shown = {title: (language, text) for title, language, text in
                 snippets_on(http, f"{server.url}/a2a/echo", secured=False)}
    language, text = shown[which]
    ids = set()
    for _ in range(2):
        done = run(language, text, key=None)
        assert_completed_echo(which, done)
        result = json.loads(done.stdout)["result"]
        ids.add((result.get("task") or result)["id"])
    assert len(ids) == 2
