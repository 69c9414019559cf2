"""A retried send registers the webhook it carries (issue 27, item 7).

The same message sent again (same messageId, same content) is a retry and is answered with the task it
went to (docs/protocol.md, idempotency). A retry may carry a push config the first send did not (1.0
`configuration.taskPushNotificationConfig`, 0.3 `configuration.pushNotificationConfig`; A2A 1.0 section
3.1.1 and 4.3.1): a client whose first answer was lost asks again, this time wanting to be told. Parley
answered with the task and dropped the config silently, so the webhook never heard of the task. Now the
config is stored for that task before the answer, and the webhook receives the task's later changes.
"""

from __future__ import annotations

import pytest
from webhooks import notifications_of, uid


def _send_10(server, mid: str, text: str, push: dict | None) -> dict:
    params: dict = {"message": {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": text}]}}
    if push is not None:
        params["configuration"] = {"taskPushNotificationConfig": push}
    return server.rpc("interviewer", "SendMessage", params)["task"]


def _send_03(server, mid: str, text: str, push: dict | None) -> dict:
    params: dict = {"message": {"kind": "message", "messageId": mid, "role": "user",
                                "parts": [{"kind": "text", "text": text}]}}
    if push is not None:
        params["configuration"] = {"pushNotificationConfig": push}
    return server.rpc("interviewer", "message/send", params, version=None)


@pytest.mark.parametrize("send", [_send_10, _send_03], ids=["1.0", "0.3"])
def test_retry_with_a_push_config_registers_it(server, hooks, send):
    """First send without a webhook (the task waits for input); the retry, with a webhook, gets the same
    task and the config is listed; the task's next changes reach that webhook."""
    mid = uid("m-")
    first = send(server, mid, "I want to learn Rust", None)
    path = hooks.path("retry")
    again = send(server, mid, "I want to learn Rust", {"url": hooks.url(path), "id": "from-retry"})
    assert again["id"] == first["id"], "a retry is answered with the task it went to"
    listed = server.rpc("interviewer", "ListTaskPushNotificationConfigs", {"taskId": first["id"]})["configs"]
    assert [c["id"] for c in listed] == ["from-retry"]

    done = server.send("interviewer", "because it is fast", task_id=first["id"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    log = server.wait_settled_log("interviewer", first["id"])
    mine = notifications_of(log, "from-retry")
    assert mine and {n["state"] for n in mine} == {"delivered"}, log
    got = hooks.wait_for(path, len(mine))
    assert got[-1].headers["parley-event-id"].startswith(first["id"] + ":")


def test_retry_without_a_config_changes_nothing(server, hooks):
    """A plain retry stores nothing: the task keeps the configs it had."""
    mid = uid("m-")
    path = hooks.path("kept")
    first = _send_10(server, mid, "I want to learn Rust", {"url": hooks.url(path), "id": "kept"})
    again = _send_10(server, mid, "I want to learn Rust", None)
    assert again["id"] == first["id"]
    listed = server.rpc("interviewer", "ListTaskPushNotificationConfigs", {"taskId": first["id"]})["configs"]
    assert [c["id"] for c in listed] == ["kept"]


def test_the_same_retry_twice_registers_its_webhook_once(server, hooks):
    """A config without an id, sent with every retry of one message: one config for the task (a second would
    have the webhook told of every change twice), and each change reaches the webhook once."""
    mid = uid("m-")
    path = hooks.path("twice")
    push = {"url": hooks.url(path)}
    first = _send_10(server, mid, "I want to learn Rust", None)
    for _ in range(3):
        assert _send_10(server, mid, "I want to learn Rust", push)["id"] == first["id"]
    listed = server.rpc("interviewer", "ListTaskPushNotificationConfigs", {"taskId": first["id"]})["configs"]
    assert len(listed) == 1 and listed[0]["url"] == push["url"], listed
    server.send("interviewer", "because it is fast", task_id=first["id"])
    log = server.wait_settled_log("interviewer", first["id"])
    assert {n["state"] for n in log["notifications"]} == {"delivered"}, log
    got = hooks.wait_for(path, len(log["notifications"]))
    assert len({r.event_id for r in got}) == len(got), "a change reached the webhook twice"
