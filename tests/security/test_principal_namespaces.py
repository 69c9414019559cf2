"""Tokens and API keys do not share the server's own principal names (issue 28, item 17), over HTTP.

A live server on 127.0.0.1 accepts API keys (made through the admin API), the environment's admin key, and
HS256 tokens of one issuer. A token signed by that issuer with `sub = key:<id>` (or `admin`) is a valid token,
but of the principal `token:key:<id>` (`token:admin`): it gets TaskNotFound for the key's tasks, and does not
list them. The documented sharing still holds: a key made with `--principal alice` and a token whose subject
is `alice` are the same caller and see each other's tasks.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest

from parley.serve import default_app
from parley.settings import AuthSettings, JwtSettings, Settings
from support import LiveServer

ADMIN_ENV = "PARLEY_TEST_NAMESPACES_ADMIN_KEY"
SECRET_ENV = "PARLEY_TEST_NAMESPACES_JWT_SECRET"
ADMIN_KEY = "adm-" + secrets.token_urlsafe(32)
SECRET = secrets.token_urlsafe(48)
ISSUER = "https://idp.example"
TASK_NOT_FOUND = -32001
WAIT = 15.0


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    monkeypatch.setenv(ADMIN_ENV, ADMIN_KEY)
    monkeypatch.setenv(SECRET_ENV, SECRET)
    app = default_app()
    app.settings = Settings(db="memory", auth=AuthSettings(
        admin_key_env=ADMIN_ENV, jwt=JwtSettings(secret_env=SECRET_ENV, issuer=ISSUER)))
    srv = LiveServer(app).start()
    try:
        yield srv
    finally:
        srv.stop()


def token(subject: str) -> str:
    now = int(time.time())
    return jwt.encode({"iss": ISSUER, "sub": subject, "scope": "a2a", "iat": now, "exp": now + 600}, SECRET,
                      algorithm="HS256")


def call(srv: LiveServer, method: str, params: dict[str, Any], *, key: str | None = None,
         bearer: str | None = None) -> dict[str, Any]:
    headers = {"A2A-Version": "1.0"}
    if key is not None:
        headers["X-API-Key"] = key
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    resp = httpx.post(f"{srv.url}/a2a/echo", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                      headers=headers, timeout=WAIT)
    assert resp.status_code in (200, 404), (resp.status_code, resp.text)
    return resp.json()


def send(srv: LiveServer, text: str, **who: str) -> str:
    """SendMessage to echo as `who`; the task's id."""
    body = call(srv, "SendMessage", {"message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                                                 "parts": [{"text": text}]}}, **who)
    return body["result"]["task"]["id"]


def make_key(srv: LiveServer, **extra: str) -> tuple[str, str]:
    """(key id, key token) of a new key for echo, made through the admin API."""
    resp = httpx.post(f"{srv.url}/admin/keys", json={"agent": "echo", "name": "ns", **extra},
                      headers={"X-API-Key": ADMIN_KEY}, timeout=WAIT)
    assert resp.status_code == 201, resp.text
    return resp.json()["key"]["id"], resp.json()["token"]


def listed(srv: LiveServer, **who: str) -> set[str]:
    return {t["id"] for t in call(srv, "ListTasks", {}, **who)["result"]["tasks"]}


def test_a_token_named_after_a_key_cannot_read_its_tasks(server: LiveServer) -> None:
    """A token with `sub = key:<id>` is authenticated, but as `token:key:<id>`: GetTask of the key's task is
    TaskNotFound, ListTasks does not show it, and its own tasks stay out of the key's sight too."""
    key_id, key = make_key(server)
    task = send(server, "the key's secret plan", key=key)
    impostor = token(f"key:{key_id}")
    got = call(server, "GetTask", {"id": task}, bearer=impostor)
    assert got.get("error", {}).get("code") == TASK_NOT_FOUND, got
    assert task not in listed(server, bearer=impostor)
    own = send(server, "mine", bearer=impostor)
    assert own not in listed(server, key=key)
    assert call(server, "GetTask", {"id": task}, key=key)["result"]["id"] == task  # the key itself still can


def test_a_token_named_admin_cannot_read_the_admin_keys_tasks(server: LiveServer) -> None:
    """`admin` is the environment admin key's principal: a token whose subject is `admin` is another caller."""
    task = send(server, "admin's", key=ADMIN_KEY)
    got = call(server, "GetTask", {"id": task}, bearer=token("admin"))
    assert got.get("error", {}).get("code") == TASK_NOT_FOUND, got


def test_a_shared_principal_name_still_shares(server: LiveServer) -> None:
    """The documented sharing: a key made with principal `alice` and a token whose `sub` is `alice` are the same
    caller, both ways."""
    _, key = make_key(server, principal="alice")
    by_key = send(server, "from the key", key=key)
    by_token = send(server, "from the token", bearer=token("alice"))
    assert call(server, "GetTask", {"id": by_key}, bearer=token("alice"))["result"]["id"] == by_key
    assert call(server, "GetTask", {"id": by_token}, key=key)["result"]["id"] == by_token
    assert {by_key, by_token} <= listed(server, key=key)


def test_token_principals_are_one_to_one_and_never_a_servers_own_name() -> None:
    """token_principal maps distinct subjects to distinct principals, none of them `key:...`, `admin` or
    `anonymous`; ordinary subjects are kept as they are (the sharing above)."""
    from parley.security.authenticate import token_principal

    subjects = ["alice", "key:0123456789abcdef", "token:key:0123456789abcdef", "admin", "token:admin", "anonymous",
                "token:", "key:", "Admin", "keys:x", "token:alice"]
    principals = [token_principal(s) for s in subjects]
    assert len(set(principals)) == len(subjects), principals
    assert not any(p.startswith("key:") or p in ("admin", "anonymous") for p in principals), principals
    assert token_principal("alice") == "alice" and token_principal("Admin") == "Admin"
