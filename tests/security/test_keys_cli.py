"""`parley keys create / list / revoke` as real subprocesses, against real `parley serve` processes.

A key is made once and shown once (stdout; the notice on stderr), stored only as a keyed hash (neither the
SQLite file nor the pepper file holds the secret), listed without its secret, and revoked or expired keys
stop working on a running server (which rechecks its keys at most a second late). The commands work on
a server's `--db` (or the db its `--config` names, resolved as `parley serve` resolves it) whether or not
the server runs. Keys that share a `--principal` share their tasks; keys with their default principals
do not.

A2A 1.0 section 7.4 (the server authenticates every request; rejected credentials get the binding's
authentication error: HTTP 401 / JSON-RPC -31401 here) and section 7.5 (authorization on the authenticated
identity: which tasks a principal sees), with section 3.3.2 (a task that is not accessible is
TaskNotFoundError, never revealed).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from .secured import (
    SECURED_RECHECK,
    Served,
    cli,
    create_key,
    error_of,
    jsonrpc,
    keys_json,
    ok,
    one_error_line,
    poll,
    result_of,
    send_jsonrpc,
    served,
    uid,
)

UNAUTHENTICATED = -31401
TASK_NOT_FOUND = -32001
COLUMNS = {"id", "agent", "name", "scopes", "principal", "created", "last used", "expires", "state"}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    """One `parley serve --db DB` shared by the tests that only add keys of their own to DB.

    A first key exists before it starts, so it is secured from its first request."""
    db = tmp_path_factory.mktemp("keys-live") / "parley.db"
    create_key("echo", "--name", "bootstrap", "--db", str(db))
    with served("--db", str(db)) as srv:
        yield srv, db


def status_with(url: str, token: str | None) -> int:
    return send_jsonrpc(url, "ping", token=token).status_code


def assert_refused(resp) -> None:
    """HTTP 401 with a challenge and the JSON-RPC Unauthenticated error."""
    assert resp.status_code == 401, (resp.status_code, resp.text)
    assert "www-authenticate" in resp.headers
    assert error_of(resp)["code"] == UNAUTHENTICATED


# --- create ----------------------------------------------------------------------------------------------------


def test_create_prints_the_key_once_on_stdout_and_the_notice_on_stderr(tmp_path: Path) -> None:
    """Section 7.3 (credentials are acquired out of band): `keys create` writes exactly the key to stdout
    (`pk_<id>_<secret>`, so `KEY=$(parley keys create ...)` works) and the human notice (id, agent, scopes,
    principal, "shown once") to stderr, which never repeats the secret. Each key is new."""
    db = str(tmp_path / "parley.db")
    proc = ok("keys", "create", "echo", "--db", db)
    key = create_key("echo", "--db", db)  # a second one, parsed by the helper
    token = proc.stdout.strip()
    assert proc.stdout == token + "\n", repr(proc.stdout)
    assert token.startswith("pk_") and token != key.token
    key_id = token.split("_")[1]
    notice = proc.stderr
    assert key_id in notice and "echo" in notice and "a2a" in notice and f"key:{key_id}" in notice
    assert "shown once" in notice
    assert token not in notice and token.split("_", 2)[2] not in notice
    assert key.id in key.notice and key.secret not in key.notice


def test_list_shows_every_field_and_never_the_secret(tmp_path: Path) -> None:
    """Section 7.3: the operator can see what keys exist (id, agent, name, scopes, principal, expiry, last
    use, state) in a table and as JSON, never a secret; `keys list AGENT` shows only that agent's keys."""
    db = str(tmp_path / "parley.db")
    name = uid("ci-")
    made_at = datetime.now(UTC)
    key = create_key("echo", "--db", db, "--name", name, "--scopes", "a2a,reports", "--expires", "30d",
                     "--principal", "team-blue")
    other = create_key("interviewer", "--db", db)

    table = ok("keys", "list", "--db", db).stdout
    for header in ("id", "agent", "name", "scopes", "principal", "last used", "expires", "state"):
        assert header in table, (header, table)
    row = next(line for line in table.splitlines() if key.id in line)
    for value in ("echo", name, "a2a reports", "team-blue", "active"):
        assert value in row, (value, row)
    assert other.id in table

    rows = keys_json("--db", db)
    assert [r["id"] for r in rows] == [key.id, other.id]
    mine = rows[0]
    assert set(mine) == COLUMNS
    assert mine["agent"] == "echo" and mine["name"] == name and mine["scopes"] == "a2a reports"
    assert mine["principal"] == "team-blue" and mine["state"] == "active" and mine["last used"] == "-"
    expected = {(made_at + timedelta(days=30, minutes=d)).strftime("%Y-%m-%d %H:%M") for d in (-1, 0, 1)}
    assert mine["expires"] in expected, (mine["expires"], expected)
    assert rows[1]["principal"] == f"key:{other.id}" and rows[1]["expires"] == "-"

    json_text = ok("keys", "list", "--db", db, "--json").stdout
    for k in (key, other):
        assert k.secret not in table and k.secret not in json_text
        assert k.token not in table and k.token not in json_text
    assert [r["id"] for r in keys_json("interviewer", "--db", db)] == [other.id]


def test_the_database_and_the_pepper_never_hold_the_secret(tmp_path: Path) -> None:
    """Section 7.4 (the server checks credentials; it need not keep them): the store keeps a keyed hash.
    No file beside the database (the SQLite file, its WAL and shared-memory files, `<db>.pepper`) contains
    the secret or the whole key; the pepper is private to its owner (mode 0600)."""
    db = tmp_path / "parley.db"
    keys = [create_key("echo", "--db", str(db)) for _ in range(2)]
    pepper = Path(str(db) + ".pepper")
    assert pepper.exists()
    assert pepper.stat().st_mode & 0o777 == 0o600
    files = [p for p in tmp_path.iterdir() if p.name.startswith("parley.db")]
    assert db in files and pepper in files
    for path in files:
        data = path.read_bytes()
        for key in keys:
            assert key.secret.encode() not in data, path
            assert key.token.encode() not in data, path
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, digest FROM api_keys ORDER BY created_at").fetchall()
    assert [r[0] for r in rows] == [k.id for k in keys]
    assert all(digest not in (k.secret, k.token) for (_, digest), k in zip(rows, keys, strict=True))


# --- errors of create -------------------------------------------------------------------------------------------


def _config(tmp_path: Path, db: str = "data/cfg.db") -> Path:
    cfg = tmp_path / "parley.toml"
    cfg.write_text(f'[server]\ndb = "{db}"\nbuiltin_agents = true\n')
    return cfg


def test_an_unknown_agent_with_config_is_a_precise_error(tmp_path: Path) -> None:
    """Section 7.3 (credentials are acquired out of band, here from the operator's CLI): a key for an agent the
    config does not declare could never be used, so it is refused with one error line naming the agent and the
    agents there are, a non-zero exit, and no key made."""
    _config(tmp_path)
    proc = cli("keys", "create", "no-such-agent", "--config", "parley.toml", cwd=tmp_path)
    one_error_line(proc, "no-such-agent", "echo", "interviewer")
    assert proc.stdout == ""
    assert keys_json("--config", "parley.toml", cwd=tmp_path) == []


def test_an_expiry_in_the_past_is_a_precise_error(tmp_path: Path) -> None:
    """Sections 7.3 and 3.3.2 ("expired API key"): a key that is born expired is refused at creation with a
    precise message (and so is an expiry that is neither a duration nor a date); no key is made, nothing is
    printed on stdout."""
    db = str(tmp_path / "parley.db")
    past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    proc = cli("keys", "create", "echo", "--db", db, "--expires", past)
    one_error_line(proc, "expiry", "future")
    assert proc.stdout == ""
    proc = cli("keys", "create", "echo", "--db", db, "--expires", "next tuesday")
    one_error_line(proc, "--expires", "next tuesday")
    assert proc.stdout == ""
    assert keys_json("--db", db) == []


# --- the keys of a running server ----------------------------------------------------------------------------------


def test_revoke_stops_a_key_on_a_running_server_within_a_second(live: tuple[Served, Path]) -> None:
    """Section 7.4: a revoked key is rejected (HTTP 401, WWW-Authenticate, -31401) by the running server
    within the documented second, while the other keys keep working; `keys list` says `revoked`."""
    srv, db = live
    url = srv.agent_url("echo")
    doomed = create_key("echo", "--db", str(db), "--name", "doomed")
    kept = create_key("echo", "--db", str(db), "--name", "kept")
    assert status_with(url, doomed.token) == 200
    assert status_with(url, kept.token) == 200

    out = ok("keys", "revoke", doomed.id, "--db", str(db)).stdout
    assert doomed.id in out and "revoked" in out
    resp, took = poll(lambda: r if (r := send_jsonrpc(url, "after", token=doomed.token)).status_code != 200 else None,
                      within=SECURED_RECHECK + 5, what="the revoked key is refused")
    assert_refused(resp)
    assert took <= SECURED_RECHECK + 1.0, f"the revoked key worked for {took:.2f}s"
    assert status_with(url, kept.token) == 200
    states = {r["id"]: r["state"] for r in keys_json("--db", str(db))}
    assert states[doomed.id] == "revoked" and states[kept.id] == "active"
    one_error_line(cli("keys", "revoke", "0123456789abcdef", "--db", str(db)), "0123456789abcdef")


def test_an_expired_key_is_refused(live: tuple[Served, Path]) -> None:
    """Section 3.3.2 ("expired API key" is an authentication error) and 7.4: a key made with `--expires` a
    few seconds ahead works until then and is refused (401, -31401) once it has expired; `keys list` says
    `expired`. (The wait is the key's own lifetime, polled with a deadline.)"""
    srv, db = live
    url = srv.agent_url("echo")
    lifetime = 4.0
    expires = datetime.now(UTC) + timedelta(seconds=lifetime)
    key = create_key("echo", "--db", str(db), "--expires", expires.isoformat())
    assert status_with(url, key.token) == 200, "the key must work before it expires"
    assert {r["id"]: r["state"] for r in keys_json("--db", str(db))}[key.id] == "active"
    resp, _ = poll(lambda: r if (r := send_jsonrpc(url, "late", token=key.token)).status_code != 200 else None,
                   within=lifetime + 10, what="the expired key is refused")
    assert datetime.now(UTC) >= expires - timedelta(seconds=0.5), "refused before its expiry"
    assert_refused(resp)
    assert {r["id"]: r["state"] for r in keys_json("--db", str(db))}[key.id] == "expired"


def test_the_last_use_appears_after_use(live: tuple[Served, Path]) -> None:
    """Section 7.4 (operators audit the credentials in use): `last used` is `-` until the key is used, then
    the time of that use (UTC, to the minute)."""
    srv, db = live
    key = create_key("echo", "--db", str(db))
    assert {r["id"]: r["last used"] for r in keys_json("--db", str(db))}[key.id] == "-"
    before = datetime.now(UTC).replace(second=0, microsecond=0)
    assert status_with(srv.agent_url("echo"), key.token) == 200
    after = datetime.now(UTC)
    used = {r["id"]: r["last used"] for r in keys_json("--db", str(db))}[key.id]
    assert used != "-"
    when = datetime.strptime(used, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
    assert before <= when <= after, (before, used, after)
    table = ok("keys", "list", "--db", str(db)).stdout
    assert used in next(line for line in table.splitlines() if key.id in line)


def _task_ids(url: str, token: str) -> list[str]:
    return [t["id"] for t in result_of(jsonrpc(url, "ListTasks", {}, token=token))["tasks"]]


def test_keys_sharing_a_principal_share_their_tasks(live: tuple[Served, Path]) -> None:
    """Section 7.5: tasks belong to the principal; two keys made with the same `--principal` are the same
    principal, so each gets and lists the other's tasks."""
    srv, db = live
    url = srv.agent_url("echo")
    team = uid("team-")
    first = create_key("echo", "--db", str(db), "--principal", team)
    second = create_key("echo", "--db", str(db), "--principal", team)
    task = result_of(send_jsonrpc(url, "shared work", token=first.token))["task"]
    got = result_of(jsonrpc(url, "GetTask", {"id": task["id"]}, token=second.token))
    assert got["id"] == task["id"] and got["status"]["state"] == "TASK_STATE_COMPLETED"
    assert _task_ids(url, second.token) == [task["id"]]
    assert _task_ids(url, first.token) == [task["id"]]


def test_keys_with_default_principals_do_not_see_each_others_tasks(live: tuple[Served, Path]) -> None:
    """Sections 7.5 and 3.3.2: each key is its own principal by default (`key:<id>`); another key's task
    is TaskNotFound (-32001, not revealed) and absent from the list."""
    srv, db = live
    url = srv.agent_url("echo")
    first = create_key("echo", "--db", str(db))
    second = create_key("echo", "--db", str(db))
    task = result_of(send_jsonrpc(url, "private work", token=first.token))["task"]
    resp = jsonrpc(url, "GetTask", {"id": task["id"]}, token=second.token)
    assert resp.status_code == 200 and error_of(resp)["code"] == TASK_NOT_FOUND
    assert _task_ids(url, second.token) == []
    assert _task_ids(url, first.token) == [task["id"]]


# --- with and without a running server ---------------------------------------------------------------------------


def test_create_list_revoke_work_with_the_server_running_and_stopped(tmp_path: Path) -> None:
    """Section 7.4: keys are managed on the server's database whether it runs or not. A key made while it is
    stopped works once it runs; a key made while it runs works at once (within the documented second);
    a key revoked while it runs is refused; a key revoked while it is stopped is refused after a restart."""
    db = str(tmp_path / "parley.db")
    offline = create_key("echo", "--db", db, "--name", "offline")
    with served("--db", db) as srv:
        url = srv.agent_url("echo")
        assert status_with(url, offline.token) == 200
        assert status_with(url, None) == 401
        online = create_key("echo", "--db", db, "--name", "online")
        _, took = poll(lambda: True if status_with(url, online.token) == 200 else None,
                       within=SECURED_RECHECK + 5, what="the key made while the server runs works")
        assert took <= SECURED_RECHECK + 1.0
        assert {r["name"] for r in keys_json("--db", db)} == {"offline", "online"}
        ok("keys", "revoke", online.id, "--db", db)
        poll(lambda: True if status_with(url, online.token) == 401 else None,
             within=SECURED_RECHECK + 5, what="the key revoked while the server runs is refused")
        assert status_with(url, offline.token) == 200
    assert srv.proc.returncode is not None

    ok("keys", "revoke", offline.id, "--db", db)
    later = create_key("echo", "--db", db, "--name", "later")
    assert {r["name"]: r["state"] for r in keys_json("--db", db)} == {
        "offline": "revoked", "online": "revoked", "later": "active"}
    with served("--db", db) as srv:
        url = srv.agent_url("echo")
        assert_refused(send_jsonrpc(url, "x", token=offline.token))
        assert_refused(send_jsonrpc(url, "x", token=online.token))
        assert status_with(url, later.token) == 200


def test_config_resolves_the_same_db_as_serve(tmp_path: Path) -> None:
    """Section 7.4: `parley keys ... --config parley.toml` works on the database `parley serve --config parley.toml` uses
    (its `[server] db`, relative to the same working directory): a key made through the config secures the
    server started from it and is accepted there; `keys list --db` of that file shows it."""
    _config(tmp_path)
    key = create_key("echo", "--config", "parley.toml", cwd=tmp_path)
    assert (tmp_path / "data" / "cfg.db").exists()
    with served("--config", "parley.toml", cwd=tmp_path) as srv:
        url = srv.agent_url("echo")
        assert_refused(send_jsonrpc(url, "who?"))
        assert result_of(send_jsonrpc(url, "it is me", token=key.token))["task"]["status"]["state"] == \
            "TASK_STATE_COMPLETED"
        second = create_key("interviewer", "--config", "parley.toml", cwd=tmp_path)
        poll(lambda: True if status_with(srv.agent_url("interviewer"), second.token) == 200 else None,
             within=SECURED_RECHECK + 5, what="a key made through --config while the server runs works")
    listed = keys_json("--db", str(tmp_path / "data" / "cfg.db"))
    assert [r["id"] for r in listed] == [key.id, second.id]
    assert [r["id"] for r in keys_json("--config", "parley.toml", cwd=tmp_path)] == [key.id, second.id]
