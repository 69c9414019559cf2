"""Webhook secrets that are no HTTP header values (issue 28, item 11): refused at registration, never shown.

A config's `token` and `authentication.credentials` are sent as header values. One with CR/LF (header
injection), NUL, another control character or non-ASCII text used to be stored, and its delivery then failed
with the HTTP library's error quoting the value: in clear in `pushLog`, on the dashboard's task page and in the
server's log. Now:

- registration refuses it: -32602 naming the field (`token`, `authentication.credentials`,
  `authentication.scheme`), never quoting the value, over JSON-RPC (1.0 and 0.3), HTTP+JSON and inline in a
  SendMessage; nothing is stored, nothing is sent;
- a config stored before that rule (written into the SQLite file directly, as an older Parley would have) is
  dead-lettered when delivered with a reason that names the field only: pushLog, the dashboard's push log and
  the log records never hold the secret.
"""

from __future__ import annotations

import asyncio
import logging
import secrets as pysecrets
from pathlib import Path

import httpx
import msgspec
import pytest
from cryptography.fernet import Fernet
from webhooks import V1, http, push_settings, uid

from parley.protocol import models as m
from parley.push.log import push_log_json
from parley.push.secrets import LEGACY_PREFIX, Binding, SecretBox, SecretError
from parley.tasks.sqlite_store import SqliteTaskStore
from parley.tasks.store import DeliveryAttempt, Notification, StoredPushConfig

INVALID_PARAMS = -32602
MARK = "s3cr3t-MARK"  # in every bad value: the answers and logs must never contain it
BAD_VALUES = [f"{MARK}\r\nX-Injected: 1", f"{MARK}\n", f"{MARK}\x00", f"{MARK}\x1b[31m", f"{MARK}\x7f",
              f"{MARK}-é", f"{MARK}\t"]


def jsonrpc_config(task_id: str, url: str, **fields) -> dict:
    return {"taskId": task_id, "id": "bad", "url": url, **fields}


@pytest.mark.parametrize("value", BAD_VALUES, ids=repr)
@pytest.mark.parametrize("field", ["token", "authentication.credentials"])
def test_a_secret_that_is_no_header_value_is_refused_when_registered(server, hooks, field, value):
    """CreateTaskPushNotificationConfig (1.0 JSON-RPC) with such a token or credentials: -32602 naming the field,
    the value nowhere in the answer, no config stored."""
    task = server.send("interviewer", "I want to learn Rust")
    url = hooks.url(hooks.path("bad"))
    fields = {"token": value} if field == "token" else {"authentication": {"scheme": "Bearer", "credentials": value}}
    resp = server.rpc_raw("interviewer", "CreateTaskPushNotificationConfig", jsonrpc_config(task["id"], url, **fields))
    error = resp.json()["error"]
    assert error["code"] == INVALID_PARAMS and f"`{field}`" in error["message"], error
    assert MARK not in resp.text
    listed = server.rpc("interviewer", "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
    assert listed.get("configs", []) == []


def test_every_binding_and_the_inline_config_refuse_it(server, hooks):
    """The same refusal over JSON-RPC 0.3, HTTP+JSON 1.0 and 0.3, and for the config inline in a SendMessage
    (no task is made), and for an authentication scheme that is no HTTP token."""
    task = server.send("interviewer", "I want to learn Rust")
    url = hooks.url(hooks.path("bad-bindings"))
    bad = f"{MARK}\r\nX-Injected: 1"
    v03 = server.rpc_raw("interviewer", "tasks/pushNotificationConfig/set",
                         {"taskId": task["id"], "pushNotificationConfig": {"id": "b", "url": url, "token": bad}},
                         version=None)
    assert v03.json()["error"]["code"] == INVALID_PARAMS and "`token`" in v03.json()["error"]["message"]
    rest = http.post(f"{server.agent_url('interviewer')}/tasks/{task['id']}/pushNotificationConfigs",
                     json={"id": "b", "url": url, "authentication": {"scheme": "Bearer", "credentials": bad}},
                     headers=V1)
    assert rest.status_code == 400 and "`authentication.credentials`" in rest.text, rest.text
    rest03 = http.post(f"{server.agent_url('interviewer')}/v1/tasks/{task['id']}/pushNotificationConfigs",
                       json={"name": f"tasks/{task['id']}/pushNotificationConfigs/b",
                             "pushNotificationConfig": {"id": "b", "url": url, "token": bad}})
    assert rest03.status_code == 400 and "`token`" in rest03.text, rest03.text
    scheme = server.rpc_raw("interviewer", "CreateTaskPushNotificationConfig",
                            jsonrpc_config(task["id"], url, authentication={"scheme": f"Bearer\r\n{MARK}",
                                                                            "credentials": "fine"}))
    assert "`authentication.scheme`" in scheme.json()["error"]["message"]
    inline = server.rpc_raw("interviewer", "SendMessage", {
        "message": {"messageId": uid("m-"), "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        "configuration": {"taskPushNotificationConfig": {"url": url, "token": bad}}})
    assert inline.json()["error"]["code"] == INVALID_PARAMS and "`token`" in inline.json()["error"]["message"]
    for resp in (v03, rest, rest03, scheme, inline):
        assert MARK not in resp.text


def test_printable_secrets_still_work(server, hooks):
    """The control: printable ASCII (spaces and punctuation included) is registered and delivered as it is."""
    token = "tok " + pysecrets.token_urlsafe(16) + " !#$%&'()*+,-./:;<=>?@[]^_`{|}~"
    path = hooks.path("fine")
    task = server.send("interviewer", "I want to learn Rust")
    server.create_config("interviewer", task["id"], hooks.url(path), id="fine", token=token)
    server.send("interviewer", "because it is fast", task_id=task["id"])
    server.wait_settled_log("interviewer", task["id"])
    assert all(r.headers["x-a2a-notification-token"] == token for r in hooks.requests(path))


def test_a_bad_secret_stored_by_an_older_parley_is_never_shown(start_server, hooks, tmp_path: Path, caplog):
    """A config with a CR/LF token written straight into the SQLite file (what registration accepted before):
    its notification is dead-lettered, and pushLog, the dashboard's push log and the log records name the field,
    never the token."""
    db = tmp_path / "parley.db"
    server = start_server(push_settings(), db=db)
    task = server.send("interviewer", "I want to learn Rust")
    server.stop()
    bad = f"{MARK}\r\nX-Injected: 1"
    url = hooks.url(hooks.path("old"))

    async def plant() -> None:
        store = SqliteTaskStore(str(db))
        await store.open()
        try:
            config = m.TaskPushNotificationConfig(task_id=task["id"], id="old", url=url, token=bad)
            await store.put_push_config(StoredPushConfig(config, version="1.0"))
        finally:
            await store.close()

    asyncio.run(plant())
    caplog.set_level(logging.INFO)
    server = start_server(push_settings(), db=db)
    server.send("interviewer", "because it is fast", task_id=task["id"])
    log = server.wait_settled_log("interviewer", task["id"])
    text = httpx.get(f"{server.agent_url('interviewer')}/tasks/{task['id']}/pushLog").text
    assert MARK not in text and "X-Injected" not in text
    page = httpx.get(f"{server.url}/ui/tasks/{task['id']}")  # an open server's dashboard, on loopback
    assert page.status_code == 200 and "`token`" in page.text and MARK not in page.text
    assert all(n["state"] == "dead" and "`token`" in n["lastError"] for n in log["notifications"]), log
    assert hooks.count(hooks.path("old")) == 0
    records = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert MARK not in records


def test_the_box_refuses_to_open_a_stored_bad_secret():
    """SecretBox.open (what the dispatcher delivers with) names the field only, encrypted or not."""
    config = m.TaskPushNotificationConfig(task_id="t", id="c", url="https://example.com/h",
                                          authentication=m.AuthenticationInfo(scheme="Bearer",
                                                                              credentials=f"{MARK}\n"))
    where = Binding("t", "c", "alice")
    key = Fernet.generate_key()
    legacy = LEGACY_PREFIX + Fernet(key).encrypt(MARK.encode() + b"\n").decode()  # an older Parley's form
    for box, credentials in ((SecretBox(), f"{MARK}\n"), (SecretBox(key), legacy),
                             (SecretBox(key), SecretBox(key).seal_text(f"{MARK}\n",
                                                                        where.context("authentication.credentials")))):
        stored = msgspec.structs.replace(config, authentication=m.AuthenticationInfo(scheme="Bearer",
                                                                                    credentials=credentials))
        with pytest.raises(SecretError, match="authentication.credentials") as refused:
            box.open(stored, where)
        assert MARK not in str(refused.value)


def test_the_push_log_redacts_quoted_header_values():
    """Errors recorded before (an HTTP library quoting the header value it refused) are shown redacted."""
    from parley.push.log import shown_error

    recorded = f"Illegal header value b'{MARK}\\r\\nX-Injected: 1'"
    assert MARK not in shown_error(recorded) and shown_error(recorded).startswith("Illegal header value")
    assert shown_error("HTTP 503") == "HTTP 503" and shown_error(None) is None
    n = Notification(id=1, task_id="t", config_id="c", seq=1, kind="status", state="dead", attempts=1,
                     next_at=0.0, last_status=None, last_error=recorded, created_at=0.0, done_at=1.0)
    a = DeliveryAttempt(1, 1, 0.0, None, recorded, 0.1, "dead", None)
    assert MARK not in str(push_log_json("t", [n], [a]))
