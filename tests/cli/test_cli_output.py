"""Issue 26: the CLI's output as users read and script it, run as a real subprocess against live servers.

* tables readable at 80 columns and in a pipe: whole ids, columns that fit, no zero-width column;
* `--json` on every command that prints data: one document, or JSON lines for streams (parsed here);
* `parley tasks list BASE_URL` lists every hosted agent's tasks, with an agent column (`--agent` for one);
* `parley send --push-url` (and `A2AClient.send/stream(push=...)`) registers a webhook that is notified.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_cli import ENV, PARLEY, TIMEOUT, assert_one_error_line, ok, ok_json, parley

from parley.client import A2AClient, TaskPushNotificationConfig
from parley.client.push import read_notification
from parley.protocol import models as m
from parley.serve import default_app
from parley.settings import PushSettings, Settings
from support import LiveServer, webhook_receiver

NARROW = {**ENV, "COLUMNS": "80"}  # subprocess stdout is a pipe: never a TTY here
PIPE_ONLY = {k: v for k, v in ENV.items() if k != "COLUMNS"}


def run_with(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    """stdout of `parley ARGS` run with `env` (exit 0, no traceback)."""
    proc = subprocess.run([*PARLEY, *args], check=False, input=stdin, capture_output=True, text=True, env=env,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, f"parley {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    return proc.stdout


def json_lines(text: str) -> list[Any]:
    """Each line of `text` as one JSON document (JSON lines: every line must parse on its own)."""
    return [json.loads(line) for line in text.splitlines()]


def line_with(text: str, *values: str) -> str:
    """The one line of `text` that holds every value, each whole."""
    found = [line for line in text.splitlines() if all(v in line for v in values)]
    assert len(found) == 1, (values, text)
    return found[0]


# --- a webhook receiver on 127.0.0.1 (tests/push_e2e/receiver.py) ---------------------------------------------------


@pytest.fixture
def hook() -> Iterator[Any]:
    """A recording webhook on 127.0.0.1, answering 200."""
    with webhook_receiver().Webhook() as webhook:
        yield webhook


@pytest.fixture
def push_server(tmp_path: Path) -> Iterator[LiveServer]:
    """The built-in agents on a live server that may notify webhooks on 127.0.0.1 (docs/push.md: `allow`)."""
    settings = Settings(push=PushSettings(allow=["127.0.0.1/32"], backoff_seconds=0.05, max_backoff_seconds=0.2))
    srv = LiveServer(default_app(str(tmp_path / "parley.db"), settings=settings)).start()
    try:
        yield srv
    finally:
        srv.stop()


def completed_notice(hook: Any, task_id: str) -> Any:
    """The notification that told `hook` task `task_id` completed (A2A 1.0 or 0.3 body), waited for."""

    def completed(got: list[Any]) -> bool:
        return any(_completes(r, task_id) for r in got)

    got = hook.wait_for(completed, f"a notification that task {task_id} completed")
    return next(r for r in got if _completes(r, task_id))


def _completes(received: Any, task_id: str) -> bool:
    note = read_notification(received.body, received.content_type, received.event_id)
    state = getattr(getattr(note.event, "status", None), "state", None)
    return note.task_id == task_id and state == m.TaskState.COMPLETED


# --- 1. tables ----------------------------------------------------------------------------------------------------


def test_tasks_list_at_80_columns_in_a_pipe_shows_each_whole_id_with_its_state(server: Any) -> None:
    done = [ok_json("send", server.url, f"task number {i}")["id"] for i in range(2)]
    asked = ok_json("send", server.url + "/a2a/interviewer", "a topic", code=4)["id"]
    out = run_with(NARROW, "tasks", "list", server.url)
    header = out.splitlines()[0].split()
    assert header[:3] == ["agent", "task", "state"], out  # no zero-width column: each header is there
    for task_id in done:
        assert line_with(out, task_id).split()[:3] == ["echo", task_id, "completed"]
    assert line_with(out, asked).split()[:3] == ["interviewer", asked, "input-required"]
    assert all(len(line) <= 80 for line in out.splitlines()), out  # the columns that fit, nothing wrapped
    # In a pipe with no COLUMNS, lines are as long as they need: every column, the context id whole.
    wide = run_with(PIPE_ONLY, "tasks", "list", server.url)
    assert wide.splitlines()[0].split() == ["agent", "task", "state", "updated", "context"]
    context = ok_json("tasks", "get", server.url, done[0])["contextId"]
    assert context in line_with(wide, done[0]).split()


def test_keys_list_at_80_columns_in_a_pipe_keeps_ids_and_states_whole(tmp_path: Path) -> None:
    db = str(tmp_path / "parley.db")
    made = [json.loads(ok("keys", "create", agent, "--name", f"a rather long key name for {agent}", "--scopes",
                          "a2a,reports,billing", "--db", db, "--json")) for agent in ("echo", "interviewer")]
    ok("keys", "revoke", made[1]["id"], "--db", db)
    out = run_with(NARROW, "keys", "list", "--db", db)
    assert {"id", "agent", "state"} <= set(out.splitlines()[0].split())
    assert line_with(out, made[0]["id"]).split()[:2] == [made[0]["id"], "echo"]
    assert line_with(out, made[0]["id"]).split()[-1] == "active"
    assert line_with(out, made[1]["id"]).split()[-1] == "revoked"
    assert all(len(line) <= 80 for line in out.splitlines()), out
    assert "…" not in out  # nothing cut
    wide = run_with(PIPE_ONLY, "keys", "list", "--db", db)
    assert "a rather long key name for echo" in line_with(wide, made[0]["id"])


def test_push_log_at_80_columns_keeps_event_ids_whole(push_server: LiveServer, hook: Any) -> None:
    url = push_server.url + "/a2a/echo"
    task = ok_json("send", url, "logged", "--push-url", hook.url)
    completed_notice(hook, task["id"])
    log = ok_json("push", "log", url, task["id"])
    out = run_with(NARROW, "push", "log", url, task["id"])
    for note in log["notifications"]:
        row = line_with(out, note["eventId"] + " ").split()  # `<task>:<seq>` whole, then its config
        assert row[:2] == [note["eventId"], note["configId"]]


# --- 2. --json ----------------------------------------------------------------------------------------------------


def test_every_data_command_prints_json_that_parses(server: Any, tmp_path: Path) -> None:
    long_text = "a long message that would wrap at eighty columns " * 4
    assert json.loads(run_with(NARROW, "card", server.url, "--json"))["name"] == "Echo"
    task = json.loads(run_with(NARROW, "send", server.url, long_text, "--json"))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "".join(p["text"] for a in task["artifacts"] for p in a["parts"]) == long_text
    events = json_lines(run_with(NARROW, "send", "--stream", server.url, long_text, "--json"))
    assert events[0]["id"] and events[-1]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert json.loads(run_with(NARROW, "tasks", "get", server.url, task["id"], "--json"))["id"] == task["id"]
    page = json.loads(run_with(NARROW, "tasks", "list", server.url, "--json"))
    assert {t["id"] for t in page["tasks"]} == {task["id"], events[0]["id"]}
    hosted = json.loads(run_with(NARROW, "agents", server.url, "--json"))  # as GET /agents answers
    assert sorted(c["name"] for c in hosted["agents"]) == ["Echo", "Interviewer"]
    trace = json.loads(run_with(NARROW, "trace", server.url + "/a2a/echo", task["id"], "--json"))
    assert trace["taskId"] == task["id"]
    asked = ok_json("send", server.url + "/a2a/interviewer", "cancel me", code=4)
    canceled = json.loads(run_with(NARROW, "tasks", "cancel", server.url + "/a2a/interviewer", asked["id"], "--json"))
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    waiting = ok_json("send", server.url + "/a2a/interviewer", "watch me", code=4)
    watch = subprocess.Popen([*PARLEY, "tasks", "watch", server.url + "/a2a/interviewer", waiting["id"], "--json"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=NARROW)
    try:
        assert watch.stdout is not None
        first = json.loads(watch.stdout.readline())  # the snapshot, one line: the watch is subscribed
        assert first["id"] == waiting["id"]
        ok("send", server.url + "/a2a/interviewer", "an answer", "--task-id", waiting["id"])
        rest, errors = watch.communicate(timeout=TIMEOUT)
    finally:
        watch.kill()
    assert watch.returncode == 0, errors
    assert json_lines(rest)[-1]["status"]["state"] == "TASK_STATE_COMPLETED"
    chat = subprocess.run([*PARLEY, "chat", server.url + "/a2a/interviewer", "--json"], check=False,
                          input="chatting in json\nbecause it parses\n", capture_output=True, text=True, env=NARROW,
                          timeout=TIMEOUT)
    assert chat.returncode == 0, chat.stderr
    chatted = json_lines(chat.stdout)  # the banner and the prompts went to stderr
    assert "you>" in chat.stderr and "Interviewer" in chat.stderr
    snapshots = [e for e in chatted if "status" in e and "id" in e]  # each turn's first event: the task
    assert len(snapshots) == 2 and snapshots[0]["id"] == snapshots[1]["id"]  # the answer continued the task
    assert chatted[-1]["status"]["state"] == "TASK_STATE_COMPLETED"

    db = str(tmp_path / "keys.db")
    created = json.loads(run_with(NARROW, "keys", "create", "echo", "--name", "ci", "--db", db, "--json"))
    assert created["token"].startswith("pk_") and created["agent"] == "echo" and created["state"] == "active"
    listed = json.loads(run_with(NARROW, "keys", "list", "--db", db, "--json"))
    assert [k["id"] for k in listed] == [created["id"]] and "token" not in listed[0]
    revoked = json.loads(run_with(NARROW, "keys", "revoke", created["id"], "--db", db, "--json"))
    assert revoked["id"] == created["id"] and revoked["state"] == "revoked"
    rotated = json.loads(run_with(NARROW, "push", "rotate-key", "--db", db, "--json"))
    assert rotated["kid"] and rotated["previousPublishedSeconds"] > 0
    pruned = json.loads(run_with(NARROW, "tasks", "prune", "--db", db, "--json"))
    assert pruned["removed"] == 0


# --- 3. tasks list across agents -----------------------------------------------------------------------------------


def test_tasks_list_of_a_server_lists_every_agent_and_agent_restricts(server: Any) -> None:
    echo = ok_json("send", server.url, "for echo")["id"]
    interviewer = ok_json("send", server.url + "/a2a/interviewer", "for the interviewer", code=4)["id"]
    page = ok_json("tasks", "list", server.url)
    assert {(t["agent"], t["id"]) for t in page["tasks"]} == {("echo", echo), ("interviewer", interviewer)}
    assert page["totalSize"] == 2
    assert {a["id"]: a["totalSize"] for a in page["agents"]} == {"echo": 1, "interviewer": 1}
    out = ok("tasks", "list", server.url)
    assert line_with(out, echo).split()[0] == "echo" and line_with(out, interviewer).split()[0] == "interviewer"
    assert "2 of 2 (echo 1, interviewer 1)" in out
    only = ok_json("tasks", "list", server.url, "--agent", "interviewer")
    assert [(t["agent"], t["id"]) for t in only["tasks"]] == [("interviewer", interviewer)]
    assert only["nextPageToken"] == ""
    by_url = ok_json("tasks", "list", server.url + "/a2a/interviewer")
    assert [(t["agent"], t["id"]) for t in by_url["tasks"]] == [("interviewer", interviewer)]
    assert echo not in ok("tasks", "list", server.url + "/a2a/interviewer")


def test_tasks_list_pages_one_agent_at_a_time(server: Any) -> None:
    ids = [ok_json("send", server.url, f"page {i}")["id"] for i in range(3)]
    ok_json("send", server.url + "/a2a/interviewer", "other", code=4)
    out = ok("tasks", "list", server.url, "--page-size", "2")
    hint = line_with(out, "next page of echo")
    assert "--agent echo --page-token" in hint
    token = hint.split("--page-token", 1)[1].split()[0]
    rest = ok_json("tasks", "list", server.url, "--agent", "echo", "--page-size", "2", "--page-token", token)
    assert [t["id"] for t in rest["tasks"]] == [ids[0]]


def test_tasks_list_bad_agent_options_are_one_line(server: Any) -> None:
    line = assert_one_error_line(parley("tasks", "list", server.url, "--agent", "nobody"), "nobody")
    assert "echo, interviewer" in line
    usage = parley("tasks", "list", server.url, "--page-token", "abc")
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1 and "--agent" in usage.stderr, usage.stderr
    usage = parley("tasks", "list", server.url + "/a2a/echo", "--agent", "interviewer")
    assert usage.returncode == 2 and usage.stderr.count("\n") == 1 and "base URL" in usage.stderr, usage.stderr


# --- 4. push webhooks ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.0", "0.3"])
@pytest.mark.parametrize("streamed", [False, True], ids=["send", "stream"])
def test_send_push_url_registers_a_webhook_that_is_notified(push_server: LiveServer, hook: Any, version: str,
                                                            streamed: bool) -> None:
    args = ["send", "-V", version, push_server.url + "/a2a/echo", f"notify me in {version}",
            "--push-url", hook.url, "--push-token", "tok-" + version]
    if streamed:
        first = json_lines(ok(*args, "--stream", "--json"))[0]
        task_id = first["id"]
    else:
        task_id = ok_json(*args)["id"]
    got = completed_notice(hook, task_id)
    assert got.headers["x-a2a-notification-token"] == "tok-" + version
    assert read_notification(got.body, got.content_type).version == version


@pytest.mark.parametrize("push_url", ["ftp://hooks.example.com/a2a", "not a url", "https://", "hooks.example.com",
                                      "https://user:pw@hooks.example.com/a2a"])
def test_an_invalid_push_url_is_one_line_and_exit_2(server: Any, push_url: str) -> None:
    proc = parley("send", server.url, "never sent", "--push-url", push_url)
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --push-url") and push_url in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert ok_json("tasks", "list", server.url)["totalSize"] == 0  # nothing was sent
    alone = parley("send", server.url, "never sent", "--push-token", "t")
    assert alone.returncode == 2 and alone.stderr.startswith("error: --push-token needs --push-url"), alone.stderr


@pytest.mark.parametrize("version", ["1.0", "0.3"])
@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_client_push_parameter_on_send_and_stream(push_server: LiveServer, hook: Any, version: str,
                                                  binding: str) -> None:
    async def go() -> tuple[str, str]:
        async with await A2AClient.connect(push_server.url + "/a2a/echo", version=version,
                                           bindings=[binding]) as client:
            sent = await client.send("pushed", push=TaskPushNotificationConfig(url=hook.url, token="secret"))
            assert isinstance(sent, m.Task)
            streamed = [ev async for ev in client.stream("pushed too", push=hook.url)]
            first = streamed[0]
            assert isinstance(first, m.Task)
            return sent.id, first.id

    sent_id, streamed_id = asyncio.run(go())
    assert completed_notice(hook, sent_id).headers["x-a2a-notification-token"] == "secret"
    assert "x-a2a-notification-token" not in completed_notice(hook, streamed_id).headers
