"""Media types and required extensions: refused with -32005 / -32008, accepted when declared."""

import httpx
import pytest

from parley.app import Parley
from parley.client import A2AClient
from parley.protocol import models as m
from parley.protocol.errors import InvalidAgentResponseError
from support import rpc

EXT = "https://example.com/ext/client-tools/v1"


def make_app() -> Parley:
    app = Parley()

    @app.agent(id="texty")
    async def texty(ctx):
        yield "ok"

    @app.agent(id="anything", input_modes=["*/*"], output_modes=["application/json"])
    async def anything(ctx):
        yield "ok"

    @app.agent(id="needs-ext", extensions=[m.AgentExtension(uri=EXT, required=True)])
    async def needs_ext(ctx):
        yield "ok"

    return app


def send(url, parts, version="1.0", headers=None, **conf):
    body = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage",
            "params": {"message": {"messageId": f"m-{id(parts)}-{len(conf)}", "role": "ROLE_USER", "parts": parts}}}
    if conf:
        body["params"]["configuration"] = conf
    return httpx.post(url, json=body, headers={"A2A-Version": version, **(headers or {})}, timeout=30).json()


def test_data_part_to_text_only_agent_is_content_type_not_supported(serve):
    srv = serve(make_app())
    out = send(f"{srv.url}/a2a/texty", [{"data": {"a": 1}}])
    assert out["error"]["code"] == -32005
    assert "application/json" in out["error"]["message"] and "text/plain" in out["error"]["message"]
    assert out["error"]["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    # nothing was created
    listed = rpc(f"{srv.url}/a2a/texty", "ListTasks", {}, version="1.0").json()["result"]
    assert listed["tasks"] == []


def test_wildcard_input_modes_accept_files_and_output_modes_are_negotiated(serve):
    srv = serve(make_app())
    ok = send(f"{srv.url}/a2a/anything", [{"raw": "aGVsbG8=", "mediaType": "image/png"}])
    assert ok["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    refused = send(f"{srv.url}/a2a/anything", [{"text": "hi"}], acceptedOutputModes=["text/plain"])
    assert refused["error"]["code"] == -32005
    accepted = send(f"{srv.url}/a2a/anything", [{"text": "hi"}], acceptedOutputModes=["application/*"])
    assert "result" in accepted


def test_required_extension_must_be_activated(serve):
    srv = serve(make_app())
    out = send(f"{srv.url}/a2a/needs-ext", [{"text": "hi"}])
    assert out["error"]["code"] == -32008 and EXT in out["error"]["message"]
    ok = send(f"{srv.url}/a2a/needs-ext", [{"text": "hi"}], headers={"A2A-Extensions": f"urn:other, {EXT}"})
    assert ok["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    card = httpx.get(f"{srv.url}/a2a/needs-ext/.well-known/agent-card.json", headers={"A2A-Version": "1.0"}).json()
    assert card["capabilities"]["extensions"] == [{"uri": EXT, "required": True}]


async def test_client_reports_invalid_agent_response(serve):
    """A server whose result does not validate gives the client -32006, not a crash."""
    import threading
    import time

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from support import free_port

    card = {"name": "bad", "description": "bad", "version": "1", "capabilities": {}, "defaultInputModes": [],
            "defaultOutputModes": [], "skills": []}

    async def card_ep(request):
        return JSONResponse({**card, "supportedInterfaces": [
            {"url": str(request.base_url), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]})

    async def rpc_ep(request):
        body = await request.json()
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": {"task": {"id": 5}}})

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=[
        Route("/.well-known/agent-card.json", card_ep), Route("/", rpc_ep, methods=["POST"])]),
        host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        async with await A2AClient.connect(f"http://127.0.0.1:{port}") as client:
            with pytest.raises(InvalidAgentResponseError) as info:
                await client.send("hi")
        assert info.value.code == -32006
        assert "sent an invalid result" in info.value.message and "Expected `str`, got `int`" in info.value.message
    finally:
        server.should_exit = True
        thread.join(10)
