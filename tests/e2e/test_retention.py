"""Retention of finished tasks (docs/operations.md, "Retention"): the background job, `parley tasks prune` on a
store and through a running server's admin API, each run as users run them (real `parley serve` processes,
the CLI as a subprocess)."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import time
from pathlib import Path

import httpx
from test_serve_processes import WAIT, Launch, rpc_result, run_parley, send_params

from parley.tasks.sqlite_store import SqliteTaskStore


def send(url: str, text: str) -> str:
    """SendMessage to echo; the id of the completed task."""
    task = rpc_result(url + "/a2a/echo", "SendMessage", send_params(text))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return task["id"]


def listed(url: str) -> list[str]:
    return [t["id"] for t in rpc_result(url + "/a2a/echo", "ListTasks", {"pageSize": 100})["tasks"]]


def stored_rows(db: Path) -> dict[str, int]:
    """Rows per table of a stopped server's SQLite file."""
    con = sqlite3.connect(db)
    try:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("tasks", "entry_batches", "message_ids")}
    finally:
        con.close()


def test_the_background_job_keeps_the_configured_number_of_finished_tasks(tmp_path: Path, launch: Launch) -> None:
    """[server.retention] max_finished = 3: after six sends, the job removes the three oldest tasks (with their
    logs and idempotency keys) while the server runs; the newest three stay readable."""
    (tmp_path / "parley.toml").write_text(
        '[server]\nbuiltin_agents = true\ndb = "tasks.db"\n'
        "[server.retention]\nmax_finished = 3\ninterval_seconds = 0.2\n")
    server = launch("kept", "--config", "parley.toml")
    ids = [send(server.url, f"hello {i}") for i in range(6)]
    deadline = time.monotonic() + WAIT
    while len(listed(server.url)) > 3:  # the job runs every 0.2 s: wait for it, bounded
        assert time.monotonic() < deadline, listed(server.url)
        time.sleep(0.05)
    assert sorted(listed(server.url)) == sorted(ids[3:])
    resp = httpx.post(server.url + "/a2a/echo", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                                      "params": {"id": ids[0]}},
                      headers={"A2A-Version": "1.0"}, timeout=WAIT)
    assert resp.json()["error"]["code"] == -32001  # TaskNotFoundError (A2A 1.0 section 5.4)
    assert server.terminate() in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has stopped
    assert stored_rows(tmp_path / "tasks.db") == {"tasks": 3, "entry_batches": 3 * stored_rows_per_task(tmp_path),
                                                  "message_ids": 3}


def stored_rows_per_task(tmp_path: Path) -> int:
    con = sqlite3.connect(tmp_path / "tasks.db")
    try:
        (task_id,) = con.execute("SELECT id FROM tasks LIMIT 1").fetchone()
        return con.execute("SELECT count(*) FROM entry_batches WHERE task_id=?", (task_id,)).fetchone()[0]
    finally:
        con.close()


def test_parley_tasks_prune_on_the_database_of_a_stopped_server(tmp_path: Path, launch: Launch) -> None:
    server = launch("first", "--db", "tasks.db")
    ids = [send(server.url, f"hello {i}") for i in range(3)]
    busy = run_parley("tasks", "prune", "--db", "tasks.db", "--keep", "1", cwd=tmp_path)
    assert busy.returncode == 1 and "Traceback" not in busy.stderr
    assert "in use by another Parley process" in busy.stderr and "parley tasks prune URL" in busy.stderr
    assert server.terminate() in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has stopped

    done = run_parley("tasks", "prune", "--db", "tasks.db", "--keep", "1", cwd=tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, "removed 2 finished task(s)"), done.stderr
    assert stored_rows(tmp_path / "tasks.db")["tasks"] == 1
    again = run_parley("tasks", "prune", "--db", "tasks.db", "--keep", "1", "--json", cwd=tmp_path)
    assert again.returncode == 0 and '"removed": 0' in again.stdout
    server = launch("second", "--db", "tasks.db")
    assert listed(server.url) == [ids[-1]]  # the newest one stayed


def test_parley_tasks_prune_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    missing = run_parley("tasks", "prune", "--db", "nothing-here.db", cwd=tmp_path)
    assert missing.returncode == 1 and "no task database at nothing-here.db" in missing.stderr
    assert not (tmp_path / "nothing-here.db").exists()  # a prune never creates a database
    bad = run_parley("tasks", "prune", "--older-than", "a week", cwd=tmp_path)
    assert bad.returncode == 1 and "give a duration such as 30d, 12h or 45m" in bad.stderr


def test_parley_tasks_prune_through_a_running_server_needs_an_admin(tmp_path: Path, launch: Launch) -> None:
    """`parley tasks prune URL` asks the server (POST /admin/prune): an admin key may, no key gets 401, a key
    without the admin scope 403; the server keeps serving, and on SQLite nobody had to stop it."""
    created = run_parley("keys", "create", "*", "--name", "ops", "--scopes", "admin,a2a", "--db", "tasks.db",
                         cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    admin = created.stdout.strip()
    plain = run_parley("keys", "create", "echo", "--name", "user", "--db", "tasks.db", cwd=tmp_path).stdout.strip()
    server = launch("secured", "--db", "tasks.db")
    headers = {"A2A-Version": "1.0", "X-API-Key": plain}
    for i in range(3):
        resp = httpx.post(server.url + "/a2a/echo", headers=headers, timeout=WAIT,
                          json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send_params(f"m{i}")})
        assert resp.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    nobody = run_parley("tasks", "prune", server.url, "--keep", "0", cwd=tmp_path)
    assert nobody.returncode == 1 and "HTTP 401" in nobody.stderr and "Traceback" not in nobody.stderr
    user = run_parley("--api-key", plain, "tasks", "prune", server.url, "--keep", "0", cwd=tmp_path)
    assert user.returncode == 1 and "HTTP 403" in user.stderr and "admin scope" in user.stderr
    ops = run_parley("--api-key", admin, "tasks", "prune", server.url, "--keep", "1", cwd=tmp_path)
    assert (ops.returncode, ops.stdout.strip()) == (0, "removed 2 finished task(s)"), ops.stderr
    assert server.terminate() in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has stopped
    assert stored_rows(tmp_path / "tasks.db")["tasks"] == 1


def test_a_store_opened_by_prune_is_left_as_it_was_found(tmp_path: Path) -> None:
    """Pruning a database with nothing to remove changes nothing (no rows, and the schema stays current)."""
    asyncio.run(SqliteTaskStore(tmp_path / "t.db").close())
    done = run_parley("tasks", "prune", "--db", "t.db", cwd=tmp_path)
    assert (done.returncode, done.stdout.strip()) == (0, "removed 0 finished task(s)"), done.stderr
