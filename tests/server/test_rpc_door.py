"""The JSON-RPC front door (parley.server.rpc_door): which POSTs it serves, and that it serves them as the
routes it replaced did, also behind a path prefix (ASGI `root_path`).

A2A spec, section 9 (JSON-RPC binding): requests are POSTed to the agent's URL, the `url` of its card.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest
import uvicorn

from parley.agents.builtin import builtin_agents
from parley.app import Parley
from parley.server.rpc_door import route_path, rpc_agent_of
from support import free_port

SEND = {"message": {"role": "ROLE_USER", "messageId": "door-1", "parts": [{"text": "through the door"}]}}


@pytest.mark.parametrize(("path", "agent"), [
    ("/", ""),
    ("/a2a/echo", "echo"),
    ("/a2a/echo/", "echo"),
    ("/a2a/", None),
    ("/a2a//", None),
    ("/a2a/echo/message:send", None),  # HTTP+JSON: Starlette's routes
    ("/a2a/echo/tasks/t1", None),
    ("/echo", None),
    ("/a2a", None),
    ("", None),
])
def test_the_door_takes_only_json_rpc_paths(path: str, agent: str | None) -> None:
    assert rpc_agent_of(path) == agent


@pytest.mark.parametrize(("path", "root", "routed"), [
    ("/a2a/echo", "", "/a2a/echo"),
    ("/parley/a2a/echo", "/parley", "/a2a/echo"),
    ("/parley/", "/parley", "/"),
    ("/parley", "/parley", ""),
    ("/parleyx/a2a/echo", "/parley", "/parleyx/a2a/echo"),  # not below the prefix
    ("/a2a/echo", "/parley", "/a2a/echo"),  # a server that did not add its prefix to the path
])
def test_paths_are_routed_below_the_root_path(path: str, root: str, routed: str) -> None:
    assert route_path({"path": path, "root_path": root}) == routed


@pytest.fixture(scope="module")
def behind_a_prefix():
    """The built-in agents under uvicorn with `root_path="/parley"`: a proxy serves it at /parley/..."""
    port = free_port()
    app = Parley()
    for agent in builtin_agents():  # echo (the default) and interviewer, as `parley serve` hosts them
        app.add_agent(agent)
    config = uvicorn.Config(app.asgi(), host="127.0.0.1", port=port, log_level="warning", lifespan="on",
                            root_path="/parley")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=20)


def _send(url: str, message_id: str) -> httpx.Response:
    params = {"message": {**SEND["message"], "messageId": message_id}}
    return httpx.post(url, json={"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": params},
                      headers={"A2A-Version": "1.0"}, timeout=30)


def test_a_send_to_an_agent_and_to_the_default_agent_behind_a_prefix(behind_a_prefix: str) -> None:
    for path, message_id in (("/a2a/echo", "door-a"), ("/a2a/echo/", "door-b"), ("/", "door-c")):
        reply = _send(behind_a_prefix + path, message_id)
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["id"] == 7
        task = body["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"][0]["text"] == "through the door"


def test_an_unknown_agent_is_a_404_naming_the_hosted_ones(behind_a_prefix: str) -> None:
    reply = _send(behind_a_prefix + "/a2a/nobody", "door-d")
    assert reply.status_code == 404
    assert "No agent 'nobody'" in reply.json()["error"]["message"]
    assert "echo" in reply.json()["error"]["message"]


def test_other_routes_still_reach_starlette(behind_a_prefix: str) -> None:
    """The card (GET) and HTTP+JSON (POST below an agent) pass through the door; the card's url carries the
    prefix, so a client posts JSON-RPC where the door is."""
    card = httpx.get(behind_a_prefix + "/a2a/echo/.well-known/agent-card.json",
                     headers={"A2A-Version": "1.0"}, timeout=30).json()
    url = card["supportedInterfaces"][0]["url"]
    assert url.endswith("/parley/a2a/echo"), card["supportedInterfaces"]
    rest = httpx.post(behind_a_prefix + "/a2a/echo/message:send", json=SEND, headers={"A2A-Version": "1.0"},
                      timeout=30)
    assert rest.status_code == 200, rest.text
    assert rest.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert httpx.get(behind_a_prefix + "/a2a/echo", timeout=30).status_code in (404, 405)
