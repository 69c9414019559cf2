"""The dashboard's inspector (docs/dashboard.md, "Inspect any agent"): it fetches any agent's card through the
webhooks' SSRF guard, checks it, calls the agent and checks every response and SSE frame against the schema of
the agent's version (A2A 1.0 sections 3.2 and 9.4, JSON-RPC; section 4.4.1, the card; 13.2, SSRF).

The agents are real HTTP servers on 127.0.0.1: the official a2a-sdk 1.3 server (tests/interop_client), and a
deliberately broken agent answering wrong shapes. The dashboard is a real `Parley` app, reached in process."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from interop_client.sdk_servers import running as sdk_running
from interop_client.sdk_servers import start_sdk13_server
from parley.serve import default_app
from parley.settings import DashboardSettings, Settings
from parley.web.inspector import MAX_BYTES
from support import free_port

pytest.importorskip("a2a")


def broken_agent_app(base: str, grpc_address: str) -> Starlette:
    """A 1.0 agent that gets things wrong: its card lacks REQUIRED fields, SendMessage answers a task in an
    unknown state under another id, and its stream's second frame is not a StreamResponse. Its 0.3 HTTP+JSON
    interface answers message:send with a task in a 0.3 JSON-RPC state (`completed`, not `TASK_STATE_*`)."""

    async def card(request: Request) -> Response:
        return JSONResponse({"name": "Broken", "supportedInterfaces": [
            {"url": f"{base}/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": f"{base}/v03", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
            {"url": grpc_address, "protocolBinding": "GRPC", "protocolVersion": "1.0"}]})

    async def send_v03(request: Request) -> Response:
        return JSONResponse({"task": {"id": "t1", "contextId": "c1", "status": {"state": "completed"}}})

    async def rpc(request: Request) -> Response:
        body = await request.json()
        if body["method"] == "SendStreamingMessage":
            good = {"jsonrpc": "2.0", "id": body["id"], "result": {"task": {
                "id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_WORKING"}}}}
            bad = {"jsonrpc": "2.0", "id": body["id"], "result": {"status": "done"}}
            text = f"data: {json.dumps(good)}\n\ndata: {json.dumps(bad)}\n\n"
            return Response(text, media_type="text/event-stream")
        return JSONResponse({"jsonrpc": "2.0", "id": "not-yours", "result": {"task": {
            "id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_SLEEPY"}}}})

    return Starlette(routes=[Route("/.well-known/agent-card.json", card), Route("/rpc", rpc, methods=["POST"]),
                             Route("/v03/v1/message:send", send_v03, methods=["POST"])])


@pytest.fixture
def broken_agent() -> Iterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    app = broken_agent_app(base, f"127.0.0.1:{free_port()}")  # gRPC: served by test_a_broken_grpc_agent_is_marked
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    import threading
    import time

    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the broken agent did not start"
        time.sleep(0.01)
    yield base
    server.should_exit = True
    thread.join(timeout=20)


@asynccontextmanager
async def dashboard(allow: list[str], *, live: bool = False) -> AsyncIterator[httpx.AsyncClient]:
    """An open dashboard (loopback) whose inspector may reach `allow`, with its session cookie and CSRF token.
    In process (ASGI) by default; `live`: served on 127.0.0.1, for streams read while they last (httpx's ASGI
    transport hands over a response only once it is complete)."""
    from support import running

    app = default_app()
    app.settings = Settings(db="memory", dashboard=DashboardSettings(inspect_allow=allow))
    with ExitStack() as stack:
        if live:
            server = stack.enter_context(running(app))
            client = httpx.AsyncClient(base_url=server.url, timeout=60)
        else:
            client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app.asgi()), base_url="http://127.0.0.1:8000")
        async with client as http:
            page = await http.get("/ui/inspect")
            assert page.status_code == 200
            http.headers["X-CSRF-Token"] = re.search(r'name="csrf-token" content="([^"]+)"', page.text).group(1)
            yield http


def fails(checks: list[dict]) -> list[str]:
    return [c["what"] for c in checks if not c["ok"]]


async def test_a_private_address_is_refused_without_inspect_allow(broken_agent: str) -> None:
    """127.0.0.1 is loopback: without `[server.dashboard] inspect_allow` the inspector does not reach it, and
    the page says why and how to allow it; calls are refused the same way."""
    async with dashboard([]) as http:
        page = await http.get("/ui/inspect", params={"url": broken_agent})
        assert page.status_code == 502
        assert "resolves to 127.0.0.1, a loopback address" in page.text
        assert "[server.dashboard] inspect_allow" in page.text and "Broken" not in page.text
        call = await http.post("/ui/inspect/call", json={"url": broken_agent, "method": "SendMessage", "params": {}})
        assert call.status_code == 400 and "loopback" in call.json()["error"]


async def test_the_broken_agents_mistakes_are_marked(broken_agent: str) -> None:
    """The card's missing REQUIRED fields, the response's wrong id and unknown state, and the stream frame
    that is not a StreamResponse are each marked as failing, with the reason."""
    async with dashboard(["127.0.0.0/8"]) as http:
        page = await http.get("/ui/inspect", params={"url": broken_agent})
        assert page.status_code == 200 and "A2A 1.0" in page.text
        assert "REQUIRED field `description` is missing or empty" in page.text
        message = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
        call = await http.post("/ui/inspect/call", json={"url": broken_agent, "method": "SendMessage",
                                                         "params": message})
        assert call.status_code == 200
        frame = call.json()["frames"][0]
        assert not frame["valid"]
        problems = fails(frame["checks"])
        assert any("`id` is the request's" in p and "'not-yours'" in p for p in problems)
        assert any("TASK_STATE_SLEEPY" in p for p in problems)
        # without the CSRF token nothing is sent
        refused = await http.post("/ui/inspect/call", headers={"X-CSRF-Token": "wrong"},
                                  json={"url": broken_agent, "method": "SendMessage", "params": message})
        assert refused.status_code == 403
        frames = await sse_frames(http, {"url": broken_agent, "method": "SendStreamingMessage", "params": message})
        assert [f["valid"] for f in frames] == [True, False]
        assert fails(frames[1]["checks"]) == ["exactly one of task, message, statusUpdate, artifactUpdate is set"]
        v03 = await http.post("/ui/inspect/call", json={
            "url": broken_agent, "endpoint": f"HTTP+JSON 0.3 {broken_agent}/v03", "method": "message/send",
            "params": {"message": {"kind": "message", "messageId": "m2", "role": "user",
                                   "parts": [{"kind": "text", "text": "hi"}]}}})
        frame = v03.json()["frames"][0]
        assert not frame["valid"]
        assert any("result.task.status.state" in p and "completed" in p for p in fails(frame["checks"])), frame


async def sse_frames(http: httpx.AsyncClient, body: dict) -> list[dict]:
    """The `frame` events of an /inspect/stream answer."""
    return [frame async for frame in each_frame(http, body)]


async def each_frame(http: httpx.AsyncClient, body: dict) -> AsyncIterator[dict]:
    """The `frame` events of an /inspect/stream answer, as they come (an `error` event fails the test)."""
    async with http.stream("POST", "/ui/inspect/stream", json=body) as response:
        assert response.status_code == 200, await response.aread()
        event = None
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                assert event != "error", line
                if event == "frame":
                    yield json.loads(line[6:])


async def test_an_a2a_sdk_agent_passes_in_both_versions() -> None:
    """The official a2a-sdk 1.3 server: its card passes, SendMessage's answer and every frame of a stream
    pass the 1.0 checks, and over its 0.3 interface message/send passes the 0.3 checks; the conversation
    goes on (the interviewer's input-required task is continued with its id)."""
    with sdk_running(start_sdk13_server) as sdk:
        async with dashboard(["127.0.0.0/8"]) as http:
            url = sdk.agent_url("interviewer")
            page = await http.get("/ui/inspect", params={"url": url})
            assert page.status_code == 200 and 'class="fail"' not in page.text, page.text
            first = await http.post("/ui/inspect/call", json={"url": url, "method": "SendMessage", "params": {
                "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}],
                            "metadata": {"from": "inspector"}}}})
            frame = first.json()["frames"][0]
            assert frame["valid"], fails(frame["checks"])
            task = frame["body"]["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            frames = await sse_frames(http, {"url": url, "method": "SendStreamingMessage", "params": {
                "message": {"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "Ada"}],
                            "taskId": task["id"], "contextId": task["contextId"]}}})
            assert frames and all(f["valid"] for f in frames), [fails(f["checks"]) for f in frames]
            assert frames[-1]["body"]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
            got = await http.post("/ui/inspect/call", json={"url": url, "method": "GetTask",
                                                            "params": {"id": task["id"]}})
            assert got.json()["frames"][0]["valid"], fails(got.json()["frames"][0]["checks"])
            echo = sdk.agent_url("echo")
            v03 = await http.post("/ui/inspect/call", json={
                "url": echo, "method": "message/send", "endpoint": f"JSONRPC 0.3 {echo}", "params": {"message": {
                    "kind": "message", "messageId": "m3", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}})
            frame = v03.json()["frames"][0]
            assert frame["valid"] and frame["body"]["result"]["kind"] == "task", fails(frame["checks"])
            assert "`result.kind` is one of message, task (got 'task')" in [c["what"] for c in frame["checks"]]
            wrong = await http.post("/ui/inspect/call", json={"url": echo, "method": "message/send", "params": {}})
            assert wrong.status_code == 400 and "unknown method 'message/send' for A2A 1.0" in wrong.json()["error"]


def test_a_bad_inspect_allow_entry_is_named() -> None:
    """`[server.dashboard] inspect_allow` holds CIDRs: anything else is refused at start, naming the entry."""
    problems = Settings(dashboard=DashboardSettings(inspect_allow=["10.0.0.0/8", "intranet"])).problems()
    assert ("dashboard.inspect_allow",
            "dashboard.inspect_allow entry 'intranet' is not an IP address or CIDR network") in problems


async def test_subscribe_cancel_get_and_list_on_an_a2a_sdk_agent() -> None:
    """A2A 1.0 sections 3.1.3-3.1.6: a task of the SDK's slow agent (it works until released or canceled) is
    listed, resubscribed to (SubscribeToTask: its frames checked as StreamResponse) and canceled (CancelTask:
    a Task, checked); GetTask then says canceled. Every answer passes."""
    with sdk_running(start_sdk13_server) as sdk:
        async with dashboard(["127.0.0.0/8"]) as http:
            url = sdk.agent_url("slow")

            async def call(method: str, params: dict) -> dict:
                answer = await http.post("/ui/inspect/call", json={"url": url, "method": method, "params": params})
                frame = answer.json()["frames"][0]
                assert frame["valid"], (method, fails(frame["checks"]))
                return frame["body"]["result"]

            started = await call("SendMessage", {"message": {
                "messageId": "s1", "role": "ROLE_USER", "parts": [{"text": "work"}]},
                "configuration": {"returnImmediately": True}})
            task_id = started["task"]["id"]
            listed = await call("ListTasks", {})
            assert task_id in [t["id"] for t in listed["tasks"]]
            canceled = await call("CancelTask", {"id": task_id})
            assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
            got = await call("GetTask", {"id": task_id})
            assert got["status"]["state"] == "TASK_STATE_CANCELED"
            frames = await sse_frames(http, {"url": url, "method": "SubscribeToTask", "params": {"id": task_id}})
            # a settled task cannot be subscribed to: the SDK answers one JSON-RPC error (application/json)
            (refusal,) = frames
            assert refusal["valid"], fails(refusal["checks"])
            assert refusal["body"]["error"]["code"] == -32004


async def test_an_http_json_interface_is_called_and_checked() -> None:
    """A2A 1.0 section 11: over a Parley server's HTTP+JSON interface the inspector sends `POST
    {url}/message:send`, `GET {url}/tasks/{id}` and `POST {url}/message:stream`; the bare results and every
    SSE frame pass, and a 404 for an unknown task is checked as google.rpc.Status (section 11.6)."""
    from support import running

    app = default_app()
    app.settings = Settings(db="memory")
    with running(app) as server:
        async with dashboard(["127.0.0.0/8"]) as http:
            url = f"{server.url}/a2a/echo"
            page = await http.get("/ui/inspect", params={"url": url})
            rest = f"HTTP+JSON 1.0 {url}"
            assert f'<option value="{rest}" data-version="1.0">' in page.text

            async def call(method: str, params: dict) -> dict:
                answer = await http.post("/ui/inspect/call", json={"url": url, "endpoint": rest, "method": method,
                                                                   "params": params})
                assert answer.status_code == 200, answer.text
                return answer.json()

            sent = await call("SendMessage", {"message": {"messageId": "r1", "role": "ROLE_USER",
                                                          "parts": [{"text": "over rest"}]}})
            assert sent["request"]["method"] == "POST" and sent["request"]["url"].endswith("/message:send")
            frame = sent["frames"][0]
            assert frame["valid"], fails(frame["checks"])
            task_id = frame["body"]["task"]["id"]
            got = await call("GetTask", {"id": task_id})
            assert got["request"]["url"].endswith(f"/tasks/{task_id}") and got["frames"][0]["valid"]
            missing = await call("GetTask", {"id": "no-such-task"})
            assert missing["status"] == 404
            assert missing["frames"][0]["valid"], fails(missing["frames"][0]["checks"])
            frames = await sse_frames(http, {"url": url, "endpoint": rest, "method": "SendStreamingMessage",
                                             "params": {"message": {"messageId": "r2", "role": "ROLE_USER",
                                                                    "parts": [{"text": "stream over rest"}]}}})
            assert len(frames) >= 2 and all(f["valid"] for f in frames), [fails(f["checks"]) for f in frames]
            assert frames[-1]["body"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_grpc_interface_is_called_and_checked() -> None:
    """A2A 1.0 section 10: over a Parley server's gRPC interface (its card's GRPC `supportedInterfaces` entry,
    `host:port` with the agent as tenant) the inspector calls SendMessage, GetTask, ListTasks and
    SendStreamingMessage; each response and stream message, read as ProtoJSON, passes the 1.0 checks. A task
    that does not exist answers NOT_FOUND with the google.rpc.ErrorInfo section 10.6 requires, and the check says
    so. Without `inspect_allow`, the gRPC address (loopback) is refused like an HTTP one."""
    pytest.importorskip("grpc")
    from support import running

    app = default_app()
    app.settings = Settings(db="memory", grpc_port=free_port())
    with running(app) as server:
        url = f"{server.url}/a2a/echo"
        grpc_key = f"GRPC 1.0 127.0.0.1:{app.settings.grpc_port}"
        async with dashboard([]) as http:
            refused = await http.post("/ui/inspect/call", json={"url": url, "method": "GetTask"})
            assert refused.status_code == 400 and "loopback" in refused.json()["error"]
        async with dashboard(["127.0.0.0/8"]) as http:
            page = await http.get("/ui/inspect", params={"url": url})
            assert f'<option value="{grpc_key}" data-version="1.0">' in page.text, page.text

            async def call(method: str, params: dict) -> dict:
                answer = await http.post("/ui/inspect/call", json={"url": url, "endpoint": grpc_key,
                                                                   "method": method, "params": params})
                assert answer.status_code == 200, answer.text
                return answer.json()

            sent = await call("SendMessage", {"message": {"messageId": "g1", "role": "ROLE_USER",
                                                          "parts": [{"text": "over grpc"}],
                                                          "metadata": {"from": "inspector"}}})
            assert sent["request"]["rpc"] == "lf.a2a.v1.A2AService/SendMessage"
            assert sent["request"]["message"]["tenant"] == "echo"  # the card interface's tenant
            assert sent["status"] == "OK"
            frame = sent["frames"][0]
            assert frame["valid"], fails(frame["checks"])
            assert "parses as lf.a2a.v1.SendMessageResponse (a2a.proto, ProtoJSON)" in [
                c["what"] for c in frame["checks"]]
            task_id = frame["body"]["task"]["id"]
            got = await call("GetTask", {"id": task_id})
            assert got["frames"][0]["valid"] and got["frames"][0]["body"]["id"] == task_id
            listed = await call("ListTasks", {})
            assert listed["frames"][0]["valid"], fails(listed["frames"][0]["checks"])
            assert task_id in [t["id"] for t in listed["frames"][0]["body"]["tasks"]]
            missing = await call("GetTask", {"id": "no-such-task"})
            assert missing["status"] == "NOT_FOUND"
            assert missing["frames"][0]["valid"], fails(missing["frames"][0]["checks"])
            assert missing["frames"][0]["body"]["error"]["richStatus"]["details"][0]["reason"] == "TASK_NOT_FOUND"
            frames = await sse_frames(http, {"url": url, "endpoint": grpc_key, "method": "SendStreamingMessage",
                                             "params": {"message": {"messageId": "g2", "role": "ROLE_USER",
                                                                    "parts": [{"text": "stream over grpc"}]}}})
            assert len(frames) >= 2 and all(f["valid"] for f in frames), [fails(f["checks"]) for f in frames]
            assert frames[-1]["body"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_0_3_http_json_interface_is_called_and_checked() -> None:
    """A2A 0.3 HTTP+JSON (0.3 specification section 3.2.3; the ProtoJSON of the 0.3 a2a.proto): the console's
    0.3 params (kind-tagged parts) go out as `POST {url}/v1/message:send` with `content` parts and `ROLE_USER`;
    the answers of send, get, list, cancel and a stream are checked against the 0.3 proto's shapes and pass. A
    0.3 answer shaped like 1.0's would not: the check reads `content`, not `parts` (see the broken agent)."""
    from support import running

    app = default_app()
    app.settings = Settings(db="memory")
    with running(app) as server:
        async with dashboard(["127.0.0.0/8"]) as http:
            url = f"{server.url}/a2a/echo"
            rest = f"HTTP+JSON 0.3 {url}"
            page = await http.get("/ui/inspect", params={"url": url})
            assert f'<option value="{rest}" data-version="0.3">' in page.text

            async def call(method: str, params: dict) -> dict:
                answer = await http.post("/ui/inspect/call", json={"url": url, "endpoint": rest, "method": method,
                                                                   "params": params})
                assert answer.status_code == 200, answer.text
                return answer.json()

            message = {"kind": "message", "messageId": "o1", "role": "user",
                       "parts": [{"kind": "text", "text": "over 0.3 rest"}], "metadata": {"from": "inspector"}}
            sent = await call("message/send", {"message": message})
            assert sent["request"]["method"] == "POST" and sent["request"]["url"].endswith("/v1/message:send")
            wire = sent["request"]["body"]["message"]
            assert wire["role"] == "ROLE_USER" and wire["content"] == [{"text": "over 0.3 rest"}]
            frame = sent["frames"][0]
            assert frame["valid"], fails(frame["checks"])
            assert "exactly one of task, message is set (got task)" in [c["what"] for c in frame["checks"]]
            task_id = frame["body"]["task"]["id"]
            got = await call("tasks/get", {"id": task_id})
            assert got["request"]["url"].endswith(f"/v1/tasks/{task_id}") and got["frames"][0]["valid"]
            listed = await call("tasks/list", {})
            assert listed["frames"][0]["valid"], fails(listed["frames"][0]["checks"])
            missing = await call("tasks/get", {"id": "no-such-task"})
            assert missing["status"] == 404 and missing["frames"][0]["valid"]
            frames = await sse_frames(http, {"url": url, "endpoint": rest, "method": "message/stream",
                                             "params": {"message": {**message, "messageId": "o2"}}})
            assert len(frames) >= 2 and all(f["valid"] for f in frames), [fails(f["checks"]) for f in frames]
            assert frames[-1]["body"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
            bad = await http.post("/ui/inspect/call", json={"url": url, "endpoint": rest, "method": "message/send",
                                                            "params": {"message": {"parts": "no"}}})
            assert bad.status_code == 400 and "params are not A2A 0.3's" in bad.json()["error"]


async def test_a_broken_grpc_agent_is_marked(broken_agent: str) -> None:
    """The broken agent's gRPC interface (A2A 1.0 section 10), served here by a grpc.aio servicer that gets things
    wrong: SendMessage answers a SendMessageResponse with no payload, GetTask a Task without its REQUIRED
    `status`, CancelTask fails NOT_FOUND with no google.rpc.Status (section 10.6 requires an ErrorInfo), and
    SendStreamingMessage's second message is an empty StreamResponse. The inspector marks each, with the reason."""
    grpc_aio = pytest.importorskip("grpc.aio")
    import grpc

    from parley.grpc import a2a_pb2 as pb
    from parley.grpc import a2a_pb2_grpc

    class Broken(a2a_pb2_grpc.A2AServiceServicer):
        async def SendMessage(self, request, context):
            return pb.SendMessageResponse()

        async def GetTask(self, request, context):
            if request.id == "big":  # larger than the inspector reads (MAX_BYTES)
                return pb.Task(id="big", status=pb.TaskStatus(state=pb.TASK_STATE_WORKING, message=pb.Message(
                    message_id="m", role=pb.ROLE_AGENT, parts=[pb.Part(text="x" * (MAX_BYTES + 1))])))
            return pb.Task(id=request.id)

        async def CancelTask(self, request, context):
            await context.abort(grpc.StatusCode.NOT_FOUND, "no such task")

        async def SendStreamingMessage(self, request, context):
            yield pb.StreamResponse(task=pb.Task(id="t1", context_id="c1", status=pb.TaskStatus(
                state=pb.TASK_STATE_WORKING)))
            yield pb.StreamResponse()

    async with httpx.AsyncClient() as plain:
        card = (await plain.get(f"{broken_agent}/.well-known/agent-card.json")).json()
    address = next(i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC")
    server = grpc_aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(Broken(), server)
    assert server.add_insecure_port(address) == int(address.rsplit(":", 1)[1])
    await server.start()
    try:
        async with dashboard(["127.0.0.0/8"]) as http:
            endpoint = f"GRPC 1.0 {address}"

            async def call(method: str, params: dict) -> dict:
                answer = await http.post("/ui/inspect/call", json={"url": broken_agent, "endpoint": endpoint,
                                                                   "method": method, "params": params})
                assert answer.status_code == 200, answer.text
                return answer.json()

            message = {"message": {"messageId": "b1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
            sent = (await call("SendMessage", message))["frames"][0]
            assert fails(sent["checks"]) == ["exactly one of task, message is set"]
            got = (await call("GetTask", {"id": "t9"}))["frames"][0]
            assert fails(got["checks"]) == ["REQUIRED field `status` is missing or empty"]
            canceled = await call("CancelTask", {"id": "t9"})
            assert canceled["status"] == "NOT_FOUND"
            (problem,) = fails(canceled["frames"][0]["checks"])
            assert "section 10.6" in problem and "google.rpc.Status" in problem
            frames = await sse_frames(http, {"url": broken_agent, "endpoint": endpoint,
                                             "method": "SendStreamingMessage", "params": message})
            assert [f["valid"] for f in frames] == [True, False]
            assert fails(frames[1]["checks"]) == [
                "exactly one of task, message, statusUpdate, artifactUpdate is set"]
            bad = await http.post("/ui/inspect/call", json={"url": broken_agent, "endpoint": endpoint,
                                                            "method": "GetTask", "params": {"id": 5, "nope": 1}})
            assert bad.status_code == 400 and "is not an lf.a2a.v1.GetTaskRequest" in bad.json()["error"]
            big = await http.post("/ui/inspect/call", json={"url": broken_agent, "endpoint": endpoint,
                                                            "method": "GetTask", "params": {"id": "big"}})
            assert big.status_code == 400 and "larger than the inspector reads" in big.json()["error"], big.text
    finally:
        await server.stop(None)
    async with dashboard(["127.0.0.0/8"]) as http:  # the server is gone: said plainly
        gone = await http.post("/ui/inspect/call", json={"url": broken_agent, "endpoint": endpoint,
                                                         "method": "GetTask", "params": {"id": "t1"}})
        assert gone.status_code == 400 and f"cannot reach {address} over gRPC" in gone.json()["error"], gone.text


async def test_grpc_carries_the_credential_and_headers_as_metadata() -> None:
    """A2A 1.0 section 10.2: over gRPC the credential and the extra headers go as metadata. A secured Parley
    server refuses the call without the key (UNAUTHENTICATED, its ErrorInfo shown) and answers it with the key
    typed in the credential box; a header gRPC reserves (`grpc-timeout`) is refused by the inspector, naming it."""
    pytest.importorskip("grpc")
    from support import running, secured_app

    app, key = secured_app()
    app.settings.grpc_port = free_port()
    with running(app) as server:
        url = f"{server.url}/a2a/echo"
        grpc_key = f"GRPC 1.0 127.0.0.1:{app.settings.grpc_port}"
        async with dashboard(["127.0.0.0/8"]) as http:
            call = {"url": url, "endpoint": grpc_key, "method": "ListTasks", "params": {}}
            refused = (await http.post("/ui/inspect/call", json=call)).json()
            assert refused["status"] == "UNAUTHENTICATED", refused
            assert refused["frames"][0]["valid"], fails(refused["frames"][0]["checks"])
            allowed = (await http.post("/ui/inspect/call", json={**call, "credential": key,
                                                                 "headers": "X-Request-Note: from the test"})).json()
            assert allowed["status"] == "OK" and allowed["frames"][0]["valid"], allowed
            reserved = await http.post("/ui/inspect/call", json={**call, "credential": key,
                                                                  "headers": "grpc-timeout: 1S"})
            assert reserved.status_code == 400
            assert "grpc-timeout cannot be sent as gRPC metadata" in reserved.json()["error"]
