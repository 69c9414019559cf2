"""Push-notification configs (A2A 1.0 sections 3.1.7-3.1.10, 4.3.1/4.3.2 and 13.2; docs/push.md,
"Registering a webhook").

Token and credentials are write-only (never shown by create, get or list, in any binding or version)
and, with `encryption_key_env`, encrypted at rest; a task has at most 16 configs; a deleted config
gets nothing more; with push disabled the card says so and the methods answer -32003.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from webhooks import V1, http, message_params, push_settings, seqs, uid

BINDINGS = ["jsonrpc-1.0", "jsonrpc-0.3", "rest-1.0", "rest-0.3"]


class Configs:
    """Create, get, list and delete push configs over one (binding, version); each answer's raw text."""

    def __init__(self, server, agent: str, binding: str) -> None:
        self.server, self.agent, self.binding = server, agent, binding
        self.kind, self.version = binding.split("-")

    def _rpc(self, method_10: str, method_03: str, params_10: dict, params_03: dict) -> tuple[object, str]:
        v1 = self.version == "1.0"
        resp = self.server.rpc_raw(self.agent, method_10 if v1 else method_03, params_10 if v1 else params_03,
                                   version="1.0" if v1 else None)
        assert resp.status_code == 200 and "error" not in resp.json(), resp.text
        return resp.json()["result"], resp.text

    def _rest(self, method: str, path: str, body: dict | None = None) -> tuple[object, str]:
        prefix = "" if self.version == "1.0" else "/v1"
        headers = V1 if self.version == "1.0" else {}
        resp = http.request(method, f"{self.server.agent_url(self.agent)}{prefix}{path}", json=body, headers=headers)
        assert resp.status_code == 200, resp.text
        return resp.json(), resp.text

    def create(self, task_id: str, cid: str, url: str, token: str, scheme: str, credentials: str):
        if self.kind == "jsonrpc":
            return self._rpc(
                "CreateTaskPushNotificationConfig", "tasks/pushNotificationConfig/set",
                {"taskId": task_id, "id": cid, "url": url, "token": token,
                 "authentication": {"scheme": scheme, "credentials": credentials}},
                {"taskId": task_id, "pushNotificationConfig": {
                    "id": cid, "url": url, "token": token,
                    "authentication": {"schemes": [scheme], "credentials": credentials}}})
        if self.version == "1.0":
            body = {"id": cid, "url": url, "token": token,
                    "authentication": {"scheme": scheme, "credentials": credentials}}
        else:
            body = {"name": f"tasks/{task_id}/pushNotificationConfigs/{cid}", "pushNotificationConfig": {
                "id": cid, "url": url, "token": token,
                "authentication": {"schemes": [scheme], "credentials": credentials}}}
        return self._rest("POST", f"/tasks/{task_id}/pushNotificationConfigs", body)

    def get(self, task_id: str, cid: str):
        if self.kind == "jsonrpc":
            return self._rpc("GetTaskPushNotificationConfig", "tasks/pushNotificationConfig/get",
                             {"taskId": task_id, "id": cid}, {"id": task_id, "pushNotificationConfigId": cid})
        return self._rest("GET", f"/tasks/{task_id}/pushNotificationConfigs/{cid}")

    def list(self, task_id: str):
        if self.kind == "jsonrpc":
            return self._rpc("ListTaskPushNotificationConfigs", "tasks/pushNotificationConfig/list",
                             {"taskId": task_id}, {"id": task_id})
        return self._rest("GET", f"/tasks/{task_id}/pushNotificationConfigs")

    def shown(self, answer) -> dict:
        """The config an answer shows, as (url, id, scheme, token, credentials) fields of either version."""
        inner = answer["pushNotificationConfig"] if self.version == "0.3" else answer
        auth = inner.get("authentication") or {}
        scheme = auth.get("scheme") or (auth.get("schemes") or [None])[0]
        return {"id": inner.get("id"), "url": inner.get("url"), "scheme": scheme, "token": inner.get("token"),
                "credentials": auth.get("credentials")}

    def listed(self, answer) -> list:
        return answer if self.version == "0.3" and isinstance(answer, list) else answer["configs"]


@pytest.mark.parametrize("binding", BINDINGS)
def test_get_and_list_never_return_token_or_credentials(server, hooks, binding):
    """Sections 3.1.7-3.1.9, 4.3.1/4.3.2 and 13.2 ("Authentication tokens ... SHOULD be treated as
    secrets"); docs/push.md: token and credentials are write-only: create, get and list show the URL,
    the id and the scheme but never the token or the credentials (1.0 and 0.3 shapes), while the
    webhook does receive them."""
    api = Configs(server, "interviewer", binding)
    task = server.send("interviewer", "I want to learn Rust")
    task_id = task["id"]
    path = hooks.path("secret")
    token, credentials = uid("tok-secret-"), uid("cred-secret-")
    made, made_text = api.create(task_id, "cfg", hooks.url(path), token, "Bearer", credentials)
    got, got_text = api.get(task_id, "cfg")
    listed, listed_text = api.list(task_id)
    for text in (made_text, got_text, listed_text):
        assert token not in text and credentials not in text, text
    for answer in (made, got, *api.listed(listed)):
        shown = api.shown(answer)
        assert shown == {"id": "cfg", "url": hooks.url(path), "scheme": "Bearer", "token": None,
                         "credentials": None}, answer

    server.send("interviewer", "because it is fast", task_id=task_id)
    server.wait_settled_log("interviewer", task_id)
    received = hooks.requests(path)
    assert received
    assert all(r.headers["x-a2a-notification-token"] == token for r in received)
    assert all(r.headers["authorization"] == f"Bearer {credentials}" for r in received)


def test_inline_config_listed_without_secrets(server, hooks):
    """Sections 3.1.1/6.6 (inline config) and 3.1.9; docs/push.md: the config a SendMessage registers is
    listed like any other, without its token and credentials."""
    token, credentials = uid("tok-inline-"), uid("cred-inline-")
    url = hooks.url(hooks.path("inline-secret"))
    task = server.send("interviewer", "hello", push={"url": url, "id": "inline", "token": token,
                                                     "authentication": {"scheme": "Basic",
                                                                        "credentials": credentials}})
    resp = server.rpc_raw("interviewer", "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
    assert token not in resp.text and credentials not in resp.text
    [config] = resp.json()["result"]["configs"]
    assert config == {"taskId": task["id"], "id": "inline", "url": url, "authentication": {"scheme": "Basic"}}


def _files_contain(folder: Path, needle: bytes) -> list[str]:
    return [p.name for p in folder.iterdir() if p.is_file() and needle in p.read_bytes()]


@pytest.mark.parametrize("encrypted", [True, False], ids=["encrypted", "plain-control"])
def test_secrets_encrypted_at_rest(start_server, hooks, monkeypatch, tmp_path, encrypted):
    """Section 13.2 ("Agents SHOULD securely store push notification configurations and credentials")
    and docs/push.md: with `encryption_key_env` naming a variable holding a Fernet key, the SQLite file
    holds neither the token nor the credentials, yet the webhook receives them; the signing key kept
    beside the tasks is sealed with the same key (parley.push.signing). The control run without a key
    shows that the scan finds them when they are stored in clear."""
    folder = tmp_path / "db"
    folder.mkdir()
    if encrypted:
        monkeypatch.setenv("PARLEY_TEST_PUSH_KEY", Fernet.generate_key().decode())
    server = start_server(push_settings(encryption_key_env="PARLEY_TEST_PUSH_KEY" if encrypted else None),
                          db=folder / "parley.db")
    token, credentials = uid("tok-at-rest-"), uid("cred-at-rest-")
    path = hooks.path("at-rest")
    task = server.send("interviewer", "I want to learn Rust")
    server.create_config("interviewer", task["id"], hooks.url(path), id="rest", token=token,
                         authentication={"scheme": "Bearer", "credentials": credentials})
    server.send("interviewer", "because it is fast", task_id=task["id"])
    server.wait_settled_log("interviewer", task["id"])
    received = hooks.requests(path)
    assert received and all(r.headers["x-a2a-notification-token"] == token for r in received)
    assert all(r.headers["authorization"] == f"Bearer {credentials}" for r in received)
    server.stop()  # everything written and closed

    found = _files_contain(folder, token.encode()) + _files_contain(folder, credentials.encode())
    private_key = _files_contain(folder, b"PRIVATE KEY")
    if encrypted:
        assert found == [], f"secrets in clear in {found}"
        assert private_key == [], f"the signing key in clear in {private_key}"
    else:
        assert len(found) == 2, "the control found nothing: the scan cannot see stored secrets"
        assert private_key


def test_seventeenth_config_is_refused(server, hooks):
    """Section 3.1.7 and docs/push.md ("A task may have up to 16 configs"): the 17th config of a task is
    -32602; replacing one of the 16 (same id) is still accepted; the task keeps 16."""
    task = server.send("interviewer", "many webhooks")
    task_id = task["id"]
    for i in range(16):
        server.create_config("interviewer", task_id, hooks.url(hooks.path(f"c{i}")), id=f"c{i}")
    err = server.rpc_error("interviewer", "CreateTaskPushNotificationConfig",
                           {"taskId": task_id, "id": "c16", "url": hooks.url(hooks.path("c16"))})
    assert err.code == -32602, err.error
    replaced = server.create_config("interviewer", task_id, hooks.url("/replaced"), id="c3")
    assert replaced["url"] == hooks.url("/replaced")
    configs = server.rpc("interviewer", "ListTaskPushNotificationConfigs", {"taskId": task_id})["configs"]
    assert sorted(c["id"] for c in configs) == sorted(f"c{i}" for i in range(16))


def test_seventeenth_config_inline_with_a_message_is_refused(server, hooks):
    """Sections 3.1.1 (inline `taskPushNotificationConfig` of a message continuing a task) and 3.1.7;
    docs/push.md ("A task may have up to 16 configs"): a message that continues a task with 16 configs
    and registers a 17th inline is refused with -32602, like CreateTaskPushNotificationConfig; the task
    keeps 16 configs."""
    task = server.send("interviewer", "many webhooks")
    task_id = task["id"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    for i in range(16):
        server.create_config("interviewer", task_id, hooks.url(hooks.path(f"c{i}")), id=f"c{i}")
    params = message_params("because", task_id=task_id,
                            push={"url": hooks.url(hooks.path("c16")), "id": "c16"})
    resp = server.rpc_raw("interviewer", "SendMessage", params)
    configs = server.rpc("interviewer", "ListTaskPushNotificationConfigs", {"taskId": task_id})["configs"]
    assert len(configs) == 16, f"the task has {len(configs)} push configs"
    assert resp.json().get("error", {}).get("code") == -32602, resp.text


def test_delete_stops_notifications_for_that_config(server, hooks):
    """Section 3.1.10 (Delete) and docs/push.md ("get, list and delete work on them by id"): after
    DeleteTaskPushNotificationConfig the deleted webhook gets nothing more, the other config of the
    task still gets every change, and the deleted config is not found any more."""
    key = uid("del-")
    kept, deleted = hooks.path("kept"), hooks.path("deleted")
    task = server.send("steps", key, wait=False)
    task_id = task["id"]
    server.create_config("steps", task_id, hooks.url(kept), id="kept")
    server.create_config("steps", task_id, hooks.url(deleted), id="deleted")

    def says(text: str):
        def check(got) -> bool:
            return any(text in str(r.json()) for r in got)
        return check

    server.gates.open(f"{key}/1")
    hooks.wait_until(kept, says(f"{key}: step 2"))
    before = hooks.wait_until(deleted, says(f"{key}: step 2"))
    server.wait_log("steps", task_id, lambda log: all(n["state"] != "pending" for n in log["notifications"]))
    assert server.rpc("steps", "DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "deleted"}) in (None, {})

    server.gates.open(f"{key}/2")
    final = hooks.wait_until(kept, lambda got: any(
        r.json()["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED" for r in got))
    log = server.wait_log("steps", task_id, lambda log: all(n["state"] != "pending" for n in log["notifications"]))
    assert hooks.requests(deleted) == before, "the deleted webhook got another notification"
    completed_seq = final[-1].seq
    assert max(seqs(before)) < completed_seq
    assert all(n["seq"] < completed_seq for n in log["notifications"] if n["configId"] == "deleted")
    err = server.rpc_error("steps", "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "deleted"})
    assert err.code == -32001
    listed = server.rpc("steps", "ListTaskPushNotificationConfigs", {"taskId": task_id})["configs"]
    assert [c["id"] for c in listed] == ["kept"]


def _card(server, agent: str, version: str | None) -> dict:
    headers = {"A2A-Version": version} if version else {}
    resp = http.get(f"{server.agent_url(agent)}/.well-known/agent-card.json", headers=headers)
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.mark.parametrize("version", [None, "1.0"], ids=["card-0.3", "card-1.0"])
def test_card_says_push_notifications_when_enabled(server, version):
    """Sections 4.4.3 (AgentCapabilities.pushNotifications) and 3.5.1 ("Requires
    AgentCard.capabilities.pushNotifications to be true"); docs/push.md: Parley's cards say
    `pushNotifications: true` by default."""
    assert _card(server, "echo", version)["capabilities"]["pushNotifications"] is True


def test_push_disabled(start_server, hooks):
    """Sections 3.1.7-3.1.10 (PushNotificationNotSupportedError), 4.4.3 and docs/push.md (`[push]
    enabled = false` turns it off: the card says `pushNotifications: false`, the methods answer -32003,
    over JSON-RPC 1.0 and 0.3, an inline config too; HTTP+JSON answers PUSH_NOTIFICATION_NOT_SUPPORTED)."""
    server = start_server(push_settings(enabled=False))
    for version in (None, "1.0"):
        assert not _card(server, "echo", version)["capabilities"].get("pushNotifications")
    task = server.send("echo", "no push here")
    task_id = task["id"]
    url = hooks.url(hooks.path("disabled"))
    for method, params in [("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": url}),
                           ("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "x"}),
                           ("ListTaskPushNotificationConfigs", {"taskId": task_id}),
                           ("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "x"})]:
        assert server.rpc_error("echo", method, params).code == -32003, method
    for method, params in [("tasks/pushNotificationConfig/set",
                            {"taskId": task_id, "pushNotificationConfig": {"url": url}}),
                           ("tasks/pushNotificationConfig/get", {"id": task_id, "pushNotificationConfigId": "x"}),
                           ("tasks/pushNotificationConfig/list", {"id": task_id}),
                           ("tasks/pushNotificationConfig/delete", {"id": task_id, "pushNotificationConfigId": "x"})]:
        assert server.rpc_error("echo", method, params, version=None).code == -32003, method
    inline = server.rpc_error("echo", "SendMessage", {
        "message": {"messageId": uid("m-"), "role": "ROLE_USER", "parts": [{"text": "push me"}]},
        "configuration": {"taskPushNotificationConfig": {"url": url}}})
    assert inline.code == -32003
    resp = http.post(f"{server.agent_url('echo')}/tasks/{task_id}/pushNotificationConfigs", json={"url": url},
                     headers=V1)
    assert resp.status_code == 400 and "PUSH_NOTIFICATION_NOT_SUPPORTED" in resp.text, resp.text
    assert http.get(f"{server.url}/.well-known/jwks.json").json() == {"keys": []}
