"""The default server answers over real HTTP in both protocol versions."""

from support import rpc


def test_echo_over_both_versions(server):
    r = rpc(server.url, "message/send", {"message": {"kind": "message", "messageId": "a", "role": "user",
                                                    "parts": [{"kind": "text", "text": "hello there"}]}})
    task = r.json()["result"]
    assert task["kind"] == "task" and task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"] == [{"kind": "text", "text": "hello there"}]
    r = rpc(server.url, "SendMessage", {"message": {"messageId": "b", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
            version="1.0")
    assert r.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
