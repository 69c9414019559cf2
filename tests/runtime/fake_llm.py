"""A fake OpenAI-compatible model server for the runtime tests.

It speaks the real wire format (``POST /v1/chat/completions`` with ``stream: true``
answered by ``data: {chat.completion.chunk}`` SSE lines and ``data: [DONE]``) and
plays scripted replies in order: streamed text, tool calls whose arguments are
split across chunks, usage, HTTP errors with Retry-After, and "hanging" streams
that stay open until the client goes away (recorded in ``disconnected``).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import uvicorn

HANG_LIMIT = 30.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Reply:
    """One scripted answer."""

    chunks: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    hang: bool = False


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict | None = None,
           choices: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                           "model": "fake-model", "choices": []}
    if choices:
        out["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    if usage is not None:
        out["usage"] = usage
    return out


def _usage(total: int) -> dict[str, int]:
    return {"prompt_tokens": total - total // 3, "completion_tokens": total // 3, "total_tokens": total}


def text(*pieces: str, tokens: int = 12) -> Reply:
    """Stream `pieces` as content deltas, then a stop and a usage chunk."""
    chunks = [_chunk({"role": "assistant", "content": ""})]
    chunks += [_chunk({"content": p}) for p in pieces]
    chunks.append(_chunk(finish="stop"))
    chunks.append(_chunk(usage=_usage(tokens), choices=False))
    return Reply(chunks)


def tool_calls(*calls: tuple[str, str, dict[str, Any]], say: str | None = None, tokens: int = 20) -> Reply:
    """Ask for tool calls (id, name, arguments); each call's arguments arrive split over three chunks."""
    chunks = [_chunk({"role": "assistant", "content": None})]
    if say:
        chunks.append(_chunk({"content": say}))
    for index, (call_id, name, args) in enumerate(calls):
        raw = json.dumps(args)
        cut1, cut2 = len(raw) // 3, 2 * len(raw) // 3
        chunks.append(_chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                              "function": {"name": name, "arguments": raw[:cut1]}}]}))
        chunks.append(_chunk({"tool_calls": [{"index": index, "function": {"arguments": raw[cut1:cut2]}}]}))
        chunks.append(_chunk({"tool_calls": [{"index": index, "function": {"arguments": raw[cut2:]}}]}))
    chunks.append(_chunk(finish="tool_calls"))
    chunks.append(_chunk(usage=_usage(tokens), choices=False))
    return Reply(chunks)


def error(status: int, message: str = "scripted failure", retry_after: str | None = None) -> Reply:
    """An HTTP error answer (JSON body in the OpenAI error shape)."""
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    return Reply(status=status, headers=headers, error=message)


def hang(*pieces: str) -> Reply:
    """Stream `pieces`, then keep the stream open until the client disconnects."""
    reply = text(*pieces)
    reply.chunks = reply.chunks[: 1 + len(pieces)]
    reply.hang = True
    return reply


class FakeLLM:
    """The fake server: script replies, read the requests it got, see if a stream was dropped."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []  # chat calls (and anything else but the model check)
        self.checks = 0  # GET /v1/models: Parley's check, at start, that the model server answers
        self.hanging = threading.Event()
        self.disconnected = threading.Event()
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port,
                                                    log_level="warning", lifespan="off", interface="asgi3"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def script(self, *replies: Reply) -> FakeLLM:
        self.replies.extend(replies)
        return self

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat-completion requests received so far."""
        return [r["json"] for r in self.requests]

    def start(self) -> FakeLLM:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake model server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)

    async def app(self, scope: dict, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        if scope["method"] == "GET" and scope["path"] == "/v1/models":  # the server's check that the model answers
            self.checks += 1
            return await self._json(send, 200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        self.requests.append({"path": scope["path"], "headers": headers, "json": json.loads(body or b"{}")})
        if scope["path"] != "/v1/chat/completions":
            return await self._json(send, 404, {"error": {"message": f"no route {scope['path']}"}})
        reply = self.replies.popleft() if self.replies else error(500, "the fake model has no scripted reply")
        if reply.status != 200:
            return await self._json(send, reply.status, {"error": {"message": reply.error, "type": "fake"}},
                                    reply.headers)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        for chunk in reply.chunks:
            await send({"type": "http.response.body", "body": f"data: {json.dumps(chunk)}\n\n".encode(),
                        "more_body": True})
        if reply.hang:
            self.hanging.set()
            try:
                msg = await asyncio.wait_for(receive(), HANG_LIMIT)
            except TimeoutError:
                msg = {}
            if msg.get("type") == "http.disconnect":
                self.disconnected.set()
                return
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})

    @staticmethod
    async def _json(send: Any, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(payload).encode()
        hdrs = [(b"content-type", b"application/json"), *((k.encode(), v.encode()) for k, v in (headers or {}).items())]
        await send({"type": "http.response.start", "status": status, "headers": hdrs})
        await send({"type": "http.response.body", "body": raw})
