"""Push secrets at rest (issue 28, item 1): client input is never opened, a sealed value opens only in its own row,
and the push-signing private key never leaves the key store.

A2A 1.0 section 4.3.1 (PushNotificationConfig: `token`, `authentication.credentials`) and section 13.2 (push
notification security: the server holds credentials for the client's webhook). Before: a caller could paste a
stored ciphertext (read from a copy of the database) as its own webhook's token, and the server decrypted it and
sent another principal's token, or the signing private key, to the caller's webhook. Now every value a client
sends is sealed as it came (AES-GCM), with the row (task id, config id, owner, field) as associated data; a
sealed value copied to another row does not open, and its notification is dead-lettered with a reason naming
the field only. The tests run live servers (SQLite and PostgreSQL) and the real webhook receiver on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from cryptography.fernet import Fernet
from webhooks import make_keys, push_settings

from parley.protocol import models as m
from parley.push.secrets import LEGACY_PREFIX, PREFIX
from parley.tasks.sqlite_store import SqliteTaskStore
from parley.tasks.store import StoredPushConfig

KEY_ENV = "PARLEY_TEST_PUSH_SEAL_KEY"
ALICE_TOKEN = "alice-webhook-token-5f1c0e"
ALICE_CREDENTIALS = "alice-basic-credentials-9a7d"
_decode = msgspec.json.Decoder(m.TaskPushNotificationConfig)


@pytest.fixture
def sealing(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Push settings with `encryption_key_env` naming a variable that holds a fresh key."""
    key = Fernet.generate_key().decode()
    monkeypatch.setenv(KEY_ENV, key)
    monkeypatch.setenv("PARLEY_KEY_PEPPER", "a-pepper-for-the-postgresql-key-store")  # a PostgreSQL server wants one
    return {"key": key, "settings": push_settings(encryption_key_env=KEY_ENV)}


# --- reading and editing the rows as stored (a copy of the database, or write access to it) -------------------


class Rows:
    """The push rows of a server's database, SQLite file or PostgreSQL schema, read and written directly."""

    def __init__(self, db: str) -> None:
        self.db = db

    def _run(self, sql: str, *args: Any) -> list[tuple]:
        if self.db.startswith("postgresql://"):
            return asyncio.run(self._pg(sql.replace("?", "$%d") % tuple(range(1, sql.count("?") + 1)), *args))
        with sqlite3.connect(self.db) as conn:
            return conn.execute(sql, args).fetchall()

    async def _pg(self, sql: str, *args: Any) -> list[tuple]:
        import asyncpg

        conn = await asyncpg.connect(self.db)
        try:
            return [tuple(r) for r in await conn.fetch(sql, *args)]
        finally:
            await conn.close()

    def config(self, task_id: str, config_id: str) -> m.TaskPushNotificationConfig:
        (blob,), = self._run("SELECT config FROM push_configs WHERE task_id=? AND id=?", task_id, config_id)
        return _decode.decode(bytes(blob))

    def put_config(self, config: m.TaskPushNotificationConfig) -> None:
        blob = msgspec.json.encode(config)  # as the stores write it (parley.tasks.*_store._enc)
        self._run("UPDATE push_configs SET config=? WHERE task_id=? AND id=?", blob, config.task_id, config.id)

    def signing_keys(self) -> list[tuple[str, str]]:
        return [(kid, pem) for kid, pem in self._run("SELECT kid, private_pem FROM push_signing_keys")]


# --- (a) the paste attack over HTTP -------------------------------------------------------------------------------


def test_a_pasted_ciphertext_is_delivered_as_text_never_opened(start_server, hooks, sealing, tmp_path: Path, caplog):
    """Mallory pastes Alice's stored (sealed) token, and the sealed signing key, as the tokens of her own webhooks
    (CreateTaskPushNotificationConfig and a SendMessage's inline config). Her webhooks receive exactly the text she
    sent; Alice's token and the private key appear in no answer, pushLog, log record or webhook request."""
    db = tmp_path / "parley.db"
    keys, (alice, mallory) = make_keys("interviewer", "alice", "mallory")
    server = start_server(sealing["settings"], db=db, keys=keys)
    alice_path = hooks.path("alice")
    task = server.send("interviewer", "I want to learn Rust", key=alice,
                       push={"url": hooks.url(alice_path), "id": "a", "token": ALICE_TOKEN,
                             "authentication": {"scheme": "Basic", "credentials": ALICE_CREDENTIALS}})
    got = hooks.wait_for(alice_path, 1)
    assert got[0].headers["x-a2a-notification-token"] == ALICE_TOKEN  # the control: her own webhook gets it
    assert got[0].headers["authorization"] == f"Basic {ALICE_CREDENTIALS}"

    rows = Rows(str(db))
    stored = rows.config(task["id"], "a")
    assert stored.token.startswith(PREFIX) and ALICE_TOKEN not in stored.token  # sealed at rest
    [(_kid, sealed_key)] = rows.signing_keys()
    assert sealed_key.startswith(PREFIX) and "PRIVATE KEY" not in sealed_key
    pasted = {"token": stored.token, "cred": stored.authentication.credentials, "key": sealed_key}

    caplog.set_level(logging.DEBUG)
    theirs = server.send("interviewer", "I want to learn Rust", key=mallory)
    paths = {name: hooks.path(f"mallory-{name}") for name in pasted}
    for name, value in pasted.items():
        fields: dict[str, Any] = {"token": value} if name != "cred" else {
            "authentication": {"scheme": "Basic", "credentials": value}}
        answer = server.create_config("interviewer", theirs["id"], hooks.url(paths[name]), id=name, key=mallory,
                                      **fields)
        assert "token" not in answer and value not in json.dumps(answer)
    inline_path = hooks.path("mallory-inline")
    inline = server.send("interviewer", "I want to learn Rust", key=mallory,
                         push={"url": hooks.url(inline_path), "id": "inline", "token": stored.token})
    server.send("interviewer", "because it is fast", task_id=theirs["id"], key=mallory)

    received = {name: hooks.wait_for(path, 1) for name, path in paths.items()}
    received["inline"] = hooks.wait_for(inline_path, 1)
    assert all(r.headers["x-a2a-notification-token"] == pasted["token"] for r in received["token"])
    assert all(r.headers["x-a2a-notification-token"] == pasted["key"] for r in received["key"])
    assert all(r.headers["authorization"] == f"Basic {pasted['cred']}" for r in received["cred"])
    assert all(r.headers["x-a2a-notification-token"] == pasted["token"] for r in received["inline"])

    seen = [json.dumps(server.wait_settled_log("interviewer", t, key=mallory)) for t in (theirs["id"], inline["id"])]
    seen += [json.dumps(r.headers) for rs in received.values() for r in rs]
    seen += [httpx.get(f"{server.url}/.well-known/jwks.json").text]
    seen += [r.getMessage() + (r.exc_text or "") for r in caplog.records]
    everything = "\n".join(seen)
    for secret in (ALICE_TOKEN, ALICE_CREDENTIALS, "PRIVATE KEY"):
        assert secret not in everything, secret


def test_the_signing_key_is_on_no_page_of_an_open_server(start_server, hooks, sealing, tmp_path: Path):
    """(c) The sealed signing key pasted as a token on an open (development) server: the webhook gets the pasted
    text, and no private key material is in the answers, pushLog, the dashboard's task page or the JWKS."""
    db = tmp_path / "parley.db"
    server = start_server(sealing["settings"], db=db)
    first = hooks.path("first")
    server.send("echo", "hello", push={"url": hooks.url(first)})
    hooks.wait_for(first, 1)  # a notification was signed: the key exists
    [(_kid, sealed_key)] = Rows(str(db)).signing_keys()
    path = hooks.path("pasted-key")
    task = server.send("echo", "hello", push={"url": hooks.url(path), "id": "k", "token": sealed_key})
    log = server.wait_settled_log("echo", task["id"])
    got = hooks.wait_for(path, len(log["notifications"]))
    assert {r.headers["x-a2a-notification-token"] for r in got} == {sealed_key}
    config = server.rpc("echo", "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "k"})
    page = httpx.get(f"{server.url}/ui/tasks/{task['id']}")
    assert page.status_code == 200
    jwks = httpx.get(f"{server.url}/.well-known/jwks.json").json()
    assert jwks["keys"] and all("d" not in k for k in jwks["keys"])  # public keys only
    for text in (json.dumps(log), json.dumps(config), page.text, json.dumps(jwks)):
        assert "PRIVATE KEY" not in text and sealed_key not in text


# --- (b) a sealed value copied to another row in the database ----------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_sealed_value_copied_to_another_row_does_not_open(backend, start_server, hooks, sealing, tmp_path,
                                                            request):
    """Alice's sealed token written into another config's row (another task; SQLite and PostgreSQL): that
    config's notifications are dead-lettered with a reason naming `token`, its webhook receives nothing, and
    the token appears nowhere; the row it came from still delivers it."""
    db = str(tmp_path / "parley.db") if backend == "sqlite" else request.getfixturevalue("postgres_url")
    server = start_server(sealing["settings"], db=db)
    rows = Rows(db)
    mine, other = hooks.path("mine"), hooks.path("other")
    first = server.send("interviewer", "I want to learn Rust", push={"url": hooks.url(mine), "id": "a",
                                                                       "token": ALICE_TOKEN})
    second = server.send("interviewer", "I want to learn Rust", push={"url": hooks.url(other), "id": "b",
                                                                        "token": "the-other-token"})
    settled = {t["id"]: server.wait_settled_log("interviewer", t["id"]) for t in (first, second)}
    before = {n["eventId"] for n in settled[second["id"]]["notifications"]}
    assert hooks.count(other) == len(before)
    copied = rows.config(second["id"], "b")
    copied.token = rows.config(first["id"], "a").token
    rows.put_config(copied)

    server.send("interviewer", "because it is fast", task_id=second["id"])
    log = server.wait_settled_log("interviewer", second["id"], len(before) + 1)
    later = [n for n in log["notifications"] if n["eventId"] not in before]
    assert later and all(n["state"] == "dead" and "`token`" in n["lastError"] for n in later), log
    assert hooks.count(other) == len(before)  # nothing after the copy
    assert ALICE_TOKEN not in json.dumps(log)

    server.send("interviewer", "because it is fast", task_id=first["id"])  # the control: its own row opens
    got = hooks.wait_until(mine, lambda rs: len(rs) > len(settled[first["id"]]["notifications"]))
    assert {r.headers["x-a2a-notification-token"] for r in got} == {ALICE_TOKEN}


# --- upgrade: rows sealed by an older Parley ---------------------------------------------------------------------


def test_a_config_sealed_by_an_older_parley_still_delivers(start_server, hooks, sealing, tmp_path: Path):
    """Configs whose tokens an older Parley sealed with Fernet (`enc:v1:`, no binding), written into the SQLite
    file directly: one sealed when its row was stored is still delivered with its token after the upgrade; one
    sealed an hour before its row was stored (an older Parley stored a pasted ciphertext as it came) is refused,
    dead-lettered naming `token`, and its webhook receives nothing."""
    db = tmp_path / "parley.db"
    server = start_server(sealing["settings"], db=db)
    task = server.send("interviewer", "I want to learn Rust")
    server.stop()
    path, pasted_path = hooks.path("legacy"), hooks.path("legacy-pasted")
    now = time.time()
    fernet = Fernet(sealing["key"])
    legacy = LEGACY_PREFIX + fernet.encrypt_at_time(b"legacy-token", int(now)).decode()
    pasted = LEGACY_PREFIX + fernet.encrypt_at_time(b"someone-elses-token", int(now) - 3600).decode()

    async def plant() -> None:
        store = SqliteTaskStore(str(db))
        await store.open()
        try:
            for config_id, url, token in (("old", hooks.url(path), legacy), ("pasted", hooks.url(pasted_path), pasted)):
                config = m.TaskPushNotificationConfig(task_id=task["id"], id=config_id, url=url, token=token)
                await store.put_push_config(StoredPushConfig(config, version="1.0", created_at=now))
        finally:
            await store.close()

    asyncio.run(plant())
    server = start_server(sealing["settings"], db=db)
    server.send("interviewer", "because it is fast", task_id=task["id"])
    got = hooks.wait_for(path, 1)
    assert got[0].headers["x-a2a-notification-token"] == "legacy-token"
    log = server.wait_settled_log("interviewer", task["id"])
    refused = [n for n in log["notifications"] if n["configId"] == "pasted"]
    assert refused and all(n["state"] == "dead" and "`token`" in n["lastError"] for n in refused), log
    assert hooks.count(pasted_path) == 0 and "someone-elses-token" not in json.dumps(log)


# --- the signing keys: bound to their kid (SQLite here; PostgreSQL in tests/cluster/test_pg_signing_keys.py) -----


async def test_a_sealed_signing_key_copied_to_another_kid_does_not_open(tmp_path: Path):
    """A push-signing private key is sealed bound to its kid: its row copied under another kid (or a config's
    sealed token put in its place) does not open (SecretError naming no key material); its own row does."""
    from parley.push.secrets import SecretBox, SecretError
    from parley.push.signing import SqliteSigningKeys

    box = SecretBox(Fernet.generate_key())
    db = str(tmp_path / "keys.db")
    keys = SqliteSigningKeys(db, seal=box.seal_key, open_=box.open_key)
    try:
        key = await keys.active(now=1_700_000_000.0)
        with sqlite3.connect(db) as conn:
            (stored,), = conn.execute("SELECT private_pem FROM push_signing_keys WHERE kid=?", (key.kid,)).fetchall()
            assert stored.startswith(PREFIX) and "PRIVATE KEY" not in stored
            conn.execute("UPDATE push_signing_keys SET kid='parley-intruder', retired_at=1 WHERE kid=?", (key.kid,))
        with pytest.raises(SecretError) as refused:
            await keys.published(3600.0, now=1_700_000_001.0)
        assert "PRIVATE KEY" not in str(refused.value) and stored not in str(refused.value)
        with sqlite3.connect(db) as conn:  # back under its own kid: it opens again
            conn.execute("UPDATE push_signing_keys SET kid=?, retired_at=NULL", (key.kid,))
        assert (await keys.active()).private_pem == key.private_pem
        assert "private_pem" not in repr(key) and "PRIVATE KEY" not in repr(key)
    finally:
        await keys.close()


async def test_a_card_signing_key_copied_into_the_push_keys_does_not_open(tmp_path: Path):
    """The agent-card keys (table card_signing_keys) are sealed for their purpose as well as their kid: a card
    key's row copied, kid and all, into the push-signing table does not open there (nor the reverse)."""
    from parley.push.secrets import SecretBox, SecretError
    from parley.push.signing import SqliteSigningKeys

    box = SecretBox(Fernet.generate_key())
    db = str(tmp_path / "keys.db")
    cards = SqliteSigningKeys(db, seal=box.seal_card_key, open_=box.open_card_key, table="card_signing_keys")
    pushes = SqliteSigningKeys(db, seal=box.seal_key, open_=box.open_key)
    try:
        card_key = await cards.active(now=1_700_000_000.0)
        with sqlite3.connect(db) as conn:
            conn.execute("INSERT INTO push_signing_keys SELECT * FROM card_signing_keys")
        with pytest.raises(SecretError):
            await pushes.published(3600.0, now=1_700_000_001.0)
        assert (await cards.active()).private_pem == card_key.private_pem  # where it belongs, it opens
    finally:
        await cards.close()
        await pushes.close()


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_a_retried_send_seals_its_webhook_for_the_task_it_went_to(backend, start_server, hooks, sealing,
                                                                  tmp_path: Path):
    """A retried send (same messageId) carrying a webhook registers it for the task the first send made (issue 27
    item 7); its token is sealed for that task's row, so it opens there and is delivered (A2A 1.0 section 4.3.1)."""
    server = start_server(sealing["settings"], db=tmp_path / "parley.db" if backend == "sqlite" else None)
    mid = f"m-retry-{backend}"
    params: dict[str, Any] = {"message": {"messageId": mid, "role": "ROLE_USER",
                                          "parts": [{"text": "I want to learn Rust"}]}}
    first = server.rpc("interviewer", "SendMessage", params)["task"]
    path = hooks.path("retried")
    again = server.rpc("interviewer", "SendMessage", {**params, "configuration": {"taskPushNotificationConfig": {
        "url": hooks.url(path), "id": "from-retry", "token": ALICE_TOKEN}}})["task"]
    assert again["id"] == first["id"]
    server.send("interviewer", "because it is fast", task_id=first["id"])
    log = server.wait_settled_log("interviewer", first["id"])
    assert log["notifications"] and {n["state"] for n in log["notifications"]} == {"delivered"}, log
    got = hooks.wait_for(path, len(log["notifications"]))
    assert {r.headers["x-a2a-notification-token"] for r in got} == {ALICE_TOKEN}


async def test_a_config_bound_again_to_another_task_is_sealed_for_that_one():
    """A send's webhook is sealed when it is bound to its task; a send that turns out to be a retry at the store
    (the engine bound it to the task it was about to make) is bound again to the task the first send made: its
    secrets are then sealed, as sent, for that task's row, and open there only (parley.tasks.engine.bind_push)."""
    from parley.push.configs import PushConfigs
    from parley.push.secrets import Binding, SecretBox, SecretError
    from parley.push.ssrf import UrlGuard, parse_allow
    from parley.tasks.engine import bind_push

    box = SecretBox(Fernet.generate_key())
    configs = PushConfigs(push_settings(), UrlGuard(parse_allow(["127.0.0.1/32"])), box)
    sent = m.TaskPushNotificationConfig(url="http://127.0.0.1:9/hook", id="c", token=ALICE_TOKEN)
    push = await configs.prepare(sent, "1.0", "echo", "alice")
    assert push.config.token == ALICE_TOKEN and sent.token == ALICE_TOKEN  # not sealed before it has its row
    bind_push(push, "t-about-to-be-made")
    bind_push(push, "t-first")
    assert push.config.token.startswith(PREFIX)
    assert box.open(push.config, Binding("t-first", "c", "alice")).token == ALICE_TOKEN
    with pytest.raises(SecretError, match="`token`"):
        box.open(push.config, Binding("t-about-to-be-made", "c", "alice"))
