"""The inspector against an @a2a-js/sdk server the suite starts (issue 30): tests/e2e/js/a2a_js_agent.mjs, run by
node from @a2a-js/sdk 1.3.0 installed from the npm registry (tests/support.py, install_js_sdk), serves one agent
over every binding the SDK has: JSON-RPC 1.0 and 0.3, HTTP+JSON 1.0 and 0.3, gRPC 1.0. The dashboard's
inspector fetches its card and, over each interface, sends, streams, gets, lists and cancels; every answer and
every frame passes the checks of its version (A2A 1.0 sections 9, 10 and 11; 0.3 sections 3.2 and 7)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_dashboard_inspector import dashboard, each_frame, fails, sse_frames

from support import JS_SDK_SERVER, free_port, install_js_sdk

AGENT = Path(__file__).with_name("js") / "a2a_js_agent.mjs"
V1_MESSAGE = {"messageId": "j1", "role": "ROLE_USER", "parts": [{"text": "hello js"}], "metadata": {"from": "t"}}
WAIT = 30.0  # upper bound for something observable to happen; never a pacing delay
V03_MESSAGE = {"kind": "message", "messageId": "j2", "role": "user", "parts": [{"kind": "text", "text": "hello js"}]}


@pytest.fixture(scope="module")
def js_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """(base URL, gRPC port) of the running @a2a-js/sdk agent; it says "ready" once both servers listen."""
    pytest.importorskip("grpc")
    where = install_js_sdk(tmp_path_factory.mktemp("a2a-js-server"), *JS_SDK_SERVER)
    shutil.copy(AGENT, where / AGENT.name)
    http_port, grpc_port = free_port(), free_port()
    proc = subprocess.Popen(["node", AGENT.name, str(http_port), str(grpc_port)], cwd=where, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        first = proc.stdout.readline()  # blocks until the agent listens, or exits
        assert first.strip() == "ready", first + proc.stdout.read()
        # what the SDK logs afterwards (errors it answered) is drained, so that a full pipe never blocks it
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        yield f"http://127.0.0.1:{http_port}", grpc_port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def interfaces(base: str, grpc_port: int) -> dict[str, str]:
    return {"jsonrpc-1.0": f"JSONRPC 1.0 {base}/jsonrpc", "jsonrpc-0.3": f"JSONRPC 0.3 {base}/jsonrpc",
            "rest-1.0": f"HTTP+JSON 1.0 {base}/rest", "rest-0.3": f"HTTP+JSON 0.3 {base}/rest",
            "grpc-1.0": f"GRPC 1.0 127.0.0.1:{grpc_port}"}


def result_of(binding: str, body: dict) -> dict:
    """The result inside an answer: JSON-RPC wraps it in `result`, HTTP+JSON and gRPC do not."""
    return body["result"] if binding.startswith("jsonrpc") else body


async def test_the_js_sdk_card_is_read_and_every_interface_offered(js_agent) -> None:
    base, grpc_port = js_agent
    async with dashboard(["127.0.0.0/8"]) as http:
        page = await http.get("/ui/inspect", params={"url": base})
        assert page.status_code == 200 and "JS echo" in page.text and "A2A 1.0" in page.text
        assert 'class="fail"' not in page.text, page.text
        for key in interfaces(base, grpc_port).values():
            version = key.split()[1]
            assert f'<option value="{key}" data-version="{version}">' in page.text, key


@pytest.mark.parametrize("binding", ["jsonrpc-1.0", "rest-1.0", "grpc-1.0"])
async def test_the_js_sdk_answers_pass_the_1_0_checks(js_agent, binding: str) -> None:
    """SendMessage, SendStreamingMessage, GetTask and ListTasks over each 1.0 interface of the JS agent: each
    response and each stream frame passes (a2a.proto ProtoJSON, REQUIRED fields, one payload set)."""
    base, grpc_port = js_agent
    endpoint = interfaces(base, grpc_port)[binding]
    async with dashboard(["127.0.0.0/8"]) as http:

        async def call(method: str, params: dict) -> dict:
            answer = await http.post("/ui/inspect/call", json={"url": base, "endpoint": endpoint,
                                                               "method": method, "params": params})
            assert answer.status_code == 200, answer.text
            frame = answer.json()["frames"][0]
            assert frame["valid"], (method, fails(frame["checks"]), frame["body"])
            return result_of(binding, frame["body"])

        sent = await call("SendMessage", {"message": V1_MESSAGE})
        task = sent["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert task["artifacts"][0]["parts"] == [{"text": "hello js"}], task["artifacts"]
        got = await call("GetTask", {"id": task["id"]})
        assert got["id"] == task["id"]
        listed = await call("ListTasks", {})
        assert task["id"] in [t["id"] for t in listed["tasks"]]
        frames = await sse_frames(http, {"url": base, "endpoint": endpoint, "method": "SendStreamingMessage",
                                         "params": {"message": {**V1_MESSAGE, "messageId": "j3"}}})
        assert len(frames) >= 3 and all(f["valid"] for f in frames), [fails(f["checks"]) for f in frames]
        assert result_of(binding, frames[-1]["body"])["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        # errors (sections 9.5, 10.6, 11.6): an unknown task, and canceling or subscribing to a completed one
        for method in ("GetTask", "CancelTask"):
            params = {"id": "no-such-task" if method == "GetTask" else task["id"]}
            answer = (await http.post("/ui/inspect/call", json={"url": base, "endpoint": endpoint, "method": method,
                                                                "params": params})).json()
            frame = answer["frames"][0]
            assert "error" in frame["body"] and frame["valid"], (method, fails(frame["checks"]), frame["body"])
        (refusal,) = await sse_frames(http, {"url": base, "endpoint": endpoint, "method": "SubscribeToTask",
                                             "params": {"id": task["id"]}})
        assert "error" in refusal["body"] and refusal["valid"], (fails(refusal["checks"]), refusal["body"])


@pytest.mark.parametrize("binding", ["jsonrpc-0.3", "rest-0.3"])
async def test_the_js_sdk_answers_pass_the_0_3_checks(js_agent, binding: str) -> None:
    """message/send, tasks/get and message/stream over the JS agent's 0.3 interfaces (the SDK's v0.3 compat
    layer): the answers pass the 0.3 checks (JSON-RPC: the 0.3 JSON schema's kinds; HTTP+JSON: the 0.3 proto)."""
    base, grpc_port = js_agent
    endpoint = interfaces(base, grpc_port)[binding]
    async with dashboard(["127.0.0.0/8"]) as http:

        async def call(method: str, params: dict) -> dict:
            answer = await http.post("/ui/inspect/call", json={"url": base, "endpoint": endpoint,
                                                               "method": method, "params": params})
            assert answer.status_code == 200, answer.text
            frame = answer.json()["frames"][0]
            assert frame["valid"], (method, fails(frame["checks"]), frame["body"])
            return result_of(binding, frame["body"])

        sent = await call("message/send", {"message": V03_MESSAGE})
        task = sent if binding == "jsonrpc-0.3" else sent["task"]
        got = await call("tasks/get", {"id": task["id"]})
        assert got["id"] == task["id"]
        frames = await sse_frames(http, {"url": base, "endpoint": endpoint, "method": "message/stream",
                                         "params": {"message": {**V03_MESSAGE, "messageId": "j4"}}})
        assert len(frames) >= 3 and all(f["valid"] for f in frames), [fails(f["checks"]) for f in frames]
        # an unknown task: one error answer (0.3 section 8.2, TaskNotFoundError -32001), to a get and a resubscribe
        missing = (await http.post("/ui/inspect/call", json={"url": base, "endpoint": endpoint,
                                                             "method": "tasks/get", "params": {"id": "nope"}})).json()
        body = missing["frames"][0]["body"]
        assert (body["error"] if binding == "jsonrpc-0.3" else body)["code"] == -32001, body
        assert missing["frames"][0]["valid"], fails(missing["frames"][0]["checks"])
        (refusal,) = await sse_frames(http, {"url": base, "endpoint": endpoint, "method": "tasks/resubscribe",
                                             "params": {"id": "nope"}})
        assert refusal["valid"], (fails(refusal["checks"]), refusal["body"])


@pytest.mark.parametrize("binding", ["jsonrpc-1.0", "rest-1.0", "grpc-1.0"])
async def test_subscribe_and_cancel_a_working_js_sdk_task(js_agent, binding: str) -> None:
    """A2A 1.0 sections 3.1.5 and 3.1.6 over each 1.0 interface: a task of the JS agent that waits (sent with
    `returnImmediately`) is subscribed to; once the subscription's first frame has come, CancelTask answers the
    canceled Task and the subscription ends with the canceled status. Every answer and frame passes."""
    base, grpc_port = js_agent
    endpoint = interfaces(base, grpc_port)[binding]
    async with dashboard(["127.0.0.0/8"], live=True) as http:

        async def call(method: str, params: dict) -> dict:
            answer = await http.post("/ui/inspect/call", json={"url": base, "endpoint": endpoint,
                                                               "method": method, "params": params})
            frame = answer.json()["frames"][0]
            assert frame["valid"], (method, fails(frame["checks"]), frame["body"])
            return result_of(binding, frame["body"])

        sent = await call("SendMessage", {"message": {**V1_MESSAGE, "parts": [{"text": "wait"}]},
                                          "configuration": {"returnImmediately": True}})
        task_id = sent["task"]["id"]
        frames: list[dict] = []
        subscribed = asyncio.Event()

        async def subscribe() -> None:
            body = {"url": base, "endpoint": endpoint, "method": "SubscribeToTask", "params": {"id": task_id}}
            async for frame in each_frame(http, body):
                frames.append(frame)
                subscribed.set()

        reader = asyncio.create_task(subscribe())
        await asyncio.wait_for(subscribed.wait(), WAIT)
        canceled = await call("CancelTask", {"id": task_id})
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        await asyncio.wait_for(reader, WAIT)
        assert all(f["valid"] for f in frames), [fails(f["checks"]) for f in frames]
        last = result_of(binding, frames[-1]["body"])
        assert last["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED", frames
