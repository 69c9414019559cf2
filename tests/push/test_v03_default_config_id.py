"""An A2A 0.3 push config sent without an `id` is stored under its task's id, so that a 0.3 get without
`pushNotificationConfigId` finds it (issue 27, item 6).

A2A 0.3 sections 7.5-7.6.1: `tasks/pushNotificationConfig/get` takes the task id and an optional
`pushNotificationConfigId`; the official a2a-sdk 0.3 (0.3.26) stores a config that has no id under the task
id, and answers a get without the config id with that one. Parley did give such a config a random UUID and
then looked for the task id: the round trip a 0.3 client makes answered -32001. Now a 0.3 set (JSON-RPC,
HTTP+JSON `/v1/`, or inline with `message/send`) without an id gets the task id. A2A 1.0 requires the config
id in every get (section 3.1.8), so a 1.0 config without one still gets a random UUID.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import uuid
from pathlib import Path

import pytest
from webhooks import V1, http, uid

ROOT = Path(__file__).resolve().parents[2]
SDK03_PYTHON = ROOT / ".venv-sdk03" / "bin" / "python"


def test_jsonrpc_set_without_id_then_get_without_id(server, hooks):
    task = server.send("interviewer", "I want to learn Rust")
    url = hooks.url(hooks.path("v03-default"))
    made = server.rpc("interviewer", "tasks/pushNotificationConfig/set",
                      {"taskId": task["id"], "pushNotificationConfig": {"url": url}}, version=None)
    assert made["pushNotificationConfig"]["id"] == task["id"], made
    got = server.rpc("interviewer", "tasks/pushNotificationConfig/get", {"id": task["id"]}, version=None)
    assert got == made
    listed = server.rpc("interviewer", "tasks/pushNotificationConfig/list", {"id": task["id"]}, version=None)
    assert [c["pushNotificationConfig"]["id"] for c in listed] == [task["id"]]


def test_inline_config_of_message_send_without_id(server, hooks):
    """`message/send` with `configuration.pushNotificationConfig` and no id: the new task's id, found by a
    get without the config id."""
    url = hooks.url(hooks.path("v03-inline"))
    task = server.rpc("interviewer", "message/send", {
        "message": {"kind": "message", "messageId": uid("m-"), "role": "user",
                    "parts": [{"kind": "text", "text": "I want to learn Rust"}]},
        "configuration": {"pushNotificationConfig": {"url": url}}}, version=None)
    got = server.rpc("interviewer", "tasks/pushNotificationConfig/get", {"id": task["id"]}, version=None)
    assert got["pushNotificationConfig"] == {"id": task["id"], "url": url}, got


def test_rest_v03_set_without_id(server, hooks):
    """HTTP+JSON 0.3: a config posted without an id is named `tasks/{id}/pushNotificationConfigs/{id}`."""
    task = server.send("interviewer", "I want to learn Rust")
    base = f"{server.agent_url('interviewer')}/v1/tasks/{task['id']}/pushNotificationConfigs"
    url = hooks.url(hooks.path("v03-rest"))
    made = http.post(base, json={"pushNotificationConfig": {"url": url}})
    assert made.status_code == 200, made.text
    assert made.json()["name"] == f"tasks/{task['id']}/pushNotificationConfigs/{task['id']}", made.text
    got = http.get(f"{base}/{task['id']}")
    assert got.status_code == 200 and got.json() == made.json(), got.text


def test_v1_config_without_id_still_gets_a_uuid(server, hooks):
    """Section 3.1.7: 1.0 is unchanged: a config without an id gets a fresh UUID, not the task id."""
    task = server.send("interviewer", "I want to learn Rust")
    made = server.create_config("interviewer", task["id"], hooks.url(hooks.path("v10")))
    assert made["id"] != task["id"] and uuid.UUID(made["id"])
    resp = http.get(f"{server.agent_url('interviewer')}/tasks/{task['id']}/pushNotificationConfigs/{made['id']}",
                    headers=V1)
    assert resp.status_code == 200 and resp.json()["id"] == made["id"], resp.text


SDK03_DRIVER = textwrap.dedent('''
    import asyncio, json, sys, uuid
    import httpx
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types import (GetTaskPushNotificationConfigParams, Message, Part, PushNotificationConfig, Role,
                           TaskPushNotificationConfig, TextPart)

    async def main(agent_url, hook_url):
        async with httpx.AsyncClient(timeout=20) as http:
            client = await ClientFactory.connect(agent_url, client_config=ClientConfig(streaming=False,
                                                                                      httpx_client=http))
            msg = Message(message_id=str(uuid.uuid4()), role=Role.user, parts=[Part(root=TextPart(text="hi"))])
            last = None
            async for event in client.send_message(msg):
                last = event
            task, _ = last
            made = await client.set_task_callback(TaskPushNotificationConfig(
                task_id=task.id, push_notification_config=PushNotificationConfig(url=hook_url)))
            got = await client.get_task_callback(GetTaskPushNotificationConfigParams(id=task.id))
            await client.close()
        print(json.dumps({"task": task.id, "set": made.model_dump(mode="json", exclude_none=True),
                          "get": got.model_dump(mode="json", exclude_none=True)}))

    asyncio.run(main(*sys.argv[1:3]))
''')


def test_sdk03_client_round_trip(server, hooks, tmp_path):
    """The official a2a-sdk 0.3.26 client: `set_task_callback` without an id, then `get_task_callback` with the
    task id alone, answers the config it set (its id the task id)."""
    if not SDK03_PYTHON.exists():
        pytest.skip(f"{SDK03_PYTHON} is missing (a virtualenv with a2a-sdk 0.3.26)")
    driver = tmp_path / "sdk03_default_id.py"
    driver.write_text(SDK03_DRIVER)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    url = hooks.url(hooks.path("sdk03"))
    proc = subprocess.run([str(SDK03_PYTHON), str(driver), server.agent_url("interviewer"), url],
                          capture_output=True, text=True, timeout=60, env=env, check=False)
    assert proc.returncode == 0, f"the 0.3 SDK driver failed:\n{proc.stdout}\n{proc.stderr}"
    out = json.loads(proc.stdout)
    assert out["set"]["pushNotificationConfig"]["id"] == out["task"], out
    assert out["get"] == out["set"], out
