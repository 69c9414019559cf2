"""The floor for bench/targets.py and bench/llm_stream.py: the least a Python server can do to answer an A2A 1.0
SendMessage, and to relay an LLM's tokens over SendStreamingMessage.

A bare ASGI callable (no framework, no store, no agent) under uvicorn with uvloop and httptools, one
process: a POST is decoded with msgspec and answered with a fresh completed Task echoing the text, shaped
like Parley's echo agent's answer; a `SendStreamingMessage` is answered as Parley answers the LLM-shaped agent
of bench/llm_agents.py (the request's text "N INTERVAL_MS", bench/llm_tokens.py): SSE events shaped like Parley's
(the submitted task, working, N artifact updates of one artifact on a fixed schedule, the last marked
`lastChunk`, completed), each JSON-RPC envelope encoded with msgspec as the token comes; GET of the agent card
path answers a minimal card (bench/compare.ServerProc waits for it); anything else is 404. Parley is measured
against this: what it spends beyond it is the cost of being an A2A server with tasks, a store and subscribers.

    python bench/floor_server.py --port 9003 [--host 127.0.0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import msgspec
from llm_tokens import parse, token_text

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

INVALID = msgspec.json.encode({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}})
CARD = msgspec.json.encode({"name": "floor", "description": "bench/floor_server.py", "version": "0",
                            "supportedInterfaces": [{"url": "http://127.0.0.1/", "protocolBinding": "JSONRPC",
                                                     "protocolVersion": "1.0"}],
                            "capabilities": {"streaming": True}, "defaultInputModes": ["text/plain"],
                            "defaultOutputModes": ["text/plain"], "skills": []})
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")]


def now_iso() -> str:
    """UTC now as Parley writes it: 2026-01-02T03:04:05.678Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def completed_task(message: dict[str, Any]) -> dict[str, Any]:
    """A new completed task for the user's `message`: its text echoed as one artifact, the message as history."""
    task_id = str(uuid.uuid4())
    context_id = message.get("contextId") or str(uuid.uuid4())
    text = "\n".join(p["text"] for p in message.get("parts", ()) if "text" in p) or "(your message had no text)"
    return {
        "id": task_id,
        "contextId": context_id,
        "status": {"state": "TASK_STATE_COMPLETED", "timestamp": now_iso()},
        "artifacts": [{"artifactId": str(uuid.uuid4()), "parts": [{"text": text}], "name": "response"}],
        "history": [{**message, "contextId": context_id, "taskId": task_id}],
    }


def answer(request: Any) -> bytes:
    """The JSON-RPC response to a decoded request carrying `params.message` (the method is not looked at)."""
    try:
        task = completed_task(request["params"]["message"])
    except (KeyError, TypeError, AttributeError):
        return INVALID
    return msgspec.json.encode({"jsonrpc": "2.0", "id": request.get("id"), "result": {"task": task}})


async def read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def stream(request: dict[str, Any], send: Send) -> None:
    """SendStreamingMessage: the LLM-shaped answer (see the module docstring), one SSE event per `send`."""
    message = request["params"]["message"]
    n, interval = parse("\n".join(p["text"] for p in message.get("parts", ()) if "text" in p))
    rid, task_id, context_id, artifact_id = request.get("id"), str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    event_id = 0

    async def event(result: dict[str, Any], more: bool = True) -> None:
        nonlocal event_id
        event_id += 1
        data = msgspec.json.encode({"jsonrpc": "2.0", "id": rid, "result": result})
        frame = b"id: %d\ndata: %s\n\n" % (event_id, data)
        await send({"type": "http.response.body", "body": frame, "more_body": more})

    def status(state: str) -> dict[str, Any]:
        return {"statusUpdate": {"taskId": task_id, "contextId": context_id,
                                 "status": {"state": state, "timestamp": now_iso()}}}

    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    history = [{**message, "contextId": context_id, "taskId": task_id}]
    await event({"task": {"id": task_id, "contextId": context_id,
                          "status": {"state": "TASK_STATE_SUBMITTED", "timestamp": now_iso()}, "history": history}})
    await event(status("TASK_STATE_WORKING"))
    start = time.monotonic()
    for i in range(n):
        wait = start + i * interval - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)  # the model thinking: the workload
        update: dict[str, Any] = {"taskId": task_id, "contextId": context_id, "artifact": {
            "artifactId": artifact_id, "parts": [{"text": token_text(i)}], "name": "response"}}
        if i:
            update["append"] = True
        if i == n - 1:
            update["lastChunk"] = True
        await event({"artifactUpdate": update})
    await event(status("TASK_STATE_COMPLETED"), more=False)


async def respond(send: Send, status: int, body: bytes, content_type: bytes = b"application/json") -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """ASGI (HTTP only; run with lifespan off): POST SendStreamingMessage -> the LLM-shaped stream, any other POST
    -> completed task, GET of the agent card -> a minimal card, anything else -> 404."""
    if scope["method"] == "GET" and scope["path"] == "/.well-known/agent-card.json":
        await respond(send, 200, CARD)
        return
    if scope["method"] != "POST":
        await respond(send, 404, b"", b"text/plain")
        return
    try:
        request = msgspec.json.decode(await read_body(receive))
    except msgspec.DecodeError:
        await respond(send, 200, INVALID)
        return
    try:
        streaming = request.get("method") == "SendStreamingMessage" and isinstance(request["params"]["message"], dict)
    except (KeyError, TypeError, AttributeError):
        streaming = False
    await (stream(request, send) if streaming else respond(send, 200, answer(request)))


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9003)
    ap.add_argument("--log-level", default="warning")
    args = ap.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, loop="uvloop", http="httptools", lifespan="off",
                access_log=False, log_level=args.log_level)


if __name__ == "__main__":
    main()
