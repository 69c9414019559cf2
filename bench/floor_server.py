"""The floor for bench/targets.py: the least a Python server can do to answer an A2A 1.0 SendMessage.

A bare ASGI callable (no framework, no store, no agent) under uvicorn with uvloop and httptools, one
process: a POST is decoded with msgspec and answered with a fresh completed Task echoing the text, shaped
like Parley's echo agent's answer; anything else is 404. In-memory Parley is measured against this.

    python bench/floor_server.py --port 9003 [--host 127.0.0.1]
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

INVALID = msgspec.json.encode({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}})


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


def answer(body: bytes) -> bytes:
    """The JSON-RPC response to a request carrying `params.message` (the method is not looked at)."""
    try:
        request = msgspec.json.decode(body)
        task = completed_task(request["params"]["message"])
    except (msgspec.DecodeError, KeyError, TypeError, AttributeError):
        return INVALID
    return msgspec.json.encode({"jsonrpc": "2.0", "id": request.get("id"), "result": {"task": task}})


async def read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """ASGI (HTTP only; run with lifespan off): POST -> completed task, anything else -> 404."""
    if scope["method"] != "POST":
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    body = answer(await read_body(receive))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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
