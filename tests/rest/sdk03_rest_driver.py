"""Drive a Parley server with the official a2a-sdk 0.3.26 client over HTTP+JSON; print one JSON object.

Runs in its own virtualenv (a2a-sdk 0.3.x cannot be installed beside 1.x), so it
imports nothing from Parley or pytest:

    .venv-sdk03/bin/python tests/rest/sdk03_rest_driver.py BASE_URL SCENARIO [--agent PATH] [--as-served]

The client is `ClientFactory` with `supported_transports=["HTTP+JSON"]`, i.e. the
SDK's `RestTransport` (`/v1/message:send`, ProtoJSON of the 0.3 proto). The card is
resolved at AGENT_URL/.well-known/agent-card.json with no A2A-Version header, like
a 0.3 client in the wild. Without --as-served the driver adds an HTTP+JSON entry
for the agent URL to the card's `additionalInterfaces` if the card lacks one; with
--as-served it uses the card exactly as served (so it fails if the card does not
list HTTP+JSON).

Prints {"sdkVersion", "scenario", "result"} or, if the SDK raised, {"error": {type,
message, status, traceback}} with exit status 1.

Scenarios: card, send, stream, get, multiturn, multiturn_stream, cancel, resubscribe,
errors, file. `cancel` and `resubscribe` need an agent that emits one artifact chunk
and then waits until it is canceled.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientHTTPError
from a2a.types import (
    AgentInterface,
    FilePart,
    FileWithBytes,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskQueryParams,
    TaskStatusUpdateEvent,
    TextPart,
    TransportProtocol,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for sdk03_driving (this runs as a script)
from sdk03_driving import WAIT, bounded, error_of, next_event, parts_text, raw, report, user_message

ECHO_TEXT = "one two three four five six seven"


def task_view(task: Task) -> dict[str, Any]:
    status_text = parts_text(task.status.message.parts) if task.status.message else None
    return {
        "id": task.id,
        "contextId": task.context_id,
        "state": task.status.state.value,
        "statusText": status_text or None,
        "artifactText": "".join(parts_text(a.parts) for a in task.artifacts or []),
        "artifactIds": [a.artifact_id for a in task.artifacts or []],
        "history": [[m.role.value, parts_text(m.parts)] for m in task.history or []],
    }


def event_view(update: Any) -> dict[str, Any]:
    if isinstance(update, Task):
        return {"kind": "task", "taskId": update.id, "contextId": update.context_id, "state": update.status.state.value}
    if isinstance(update, TaskStatusUpdateEvent):
        out = {"kind": "status", "taskId": update.task_id, "contextId": update.context_id,
               "state": update.status.state.value, "final": update.final}
        text = parts_text(update.status.message.parts) if update.status.message else ""
        if text:
            out["text"] = text
        return out
    if isinstance(update, TaskArtifactUpdateEvent):
        return {"kind": "artifact", "taskId": update.task_id, "contextId": update.context_id,
                "artifactId": update.artifact.artifact_id, "text": parts_text(update.artifact.parts),
                "append": bool(update.append), "lastChunk": bool(update.last_chunk)}
    if isinstance(update, Message):
        return {"kind": "message", "text": parts_text(update.parts)}
    return {"kind": type(update).__name__}


def client_event_view(event: Any) -> dict[str, Any]:
    if isinstance(event, Message):
        return event_view(event)
    task, update = event
    return event_view(task if update is None else update)


async def drain(stream: AsyncIterator[Any], view: Any = client_event_view) -> list[Any]:
    async with asyncio.timeout(WAIT):
        return [view(ev) async for ev in stream]


def http_error(exc: A2AClientHTTPError) -> dict[str, Any]:
    return {"status": exc.status_code, "message": exc.message}


class Run:
    def __init__(self, base: str, agent: str, as_served: bool) -> None:
        self.base = base.rstrip("/")
        self.agent_url = self.base + agent
        self.as_served = as_served
        self.http = httpx.AsyncClient(timeout=WAIT)
        self.card_obj = None

    async def card(self):
        if self.card_obj is None:
            card = await A2ACardResolver(self.http, self.agent_url).get_agent_card()
            listed = any(i.transport == TransportProtocol.http_json for i in card.additional_interfaces or [])
            if not listed and card.preferred_transport != TransportProtocol.http_json and not self.as_served:
                extra = AgentInterface(transport=TransportProtocol.http_json, url=card.url)
                card.additional_interfaces = [*(card.additional_interfaces or []), extra]
            self.card_obj = card
        return self.card_obj

    async def client(self, *, streaming: bool):
        config = ClientConfig(streaming=streaming, httpx_client=self.http,
                              supported_transports=[TransportProtocol.http_json])
        return ClientFactory(config).create(await self.card())


async def scenario_card(run: Run) -> dict[str, Any]:
    card = await run.card()
    client = await run.client(streaming=False)
    transport = client._transport
    return {
        "name": card.name,
        "url": card.url,
        "preferredTransport": card.preferred_transport,
        "additionalInterfaces": [[i.transport, i.url] for i in card.additional_interfaces or []],
        "transport": type(transport).__name__,
        "transportUrl": transport.url,
    }


async def scenario_send(run: Run) -> dict[str, Any]:
    client = await run.client(streaming=False)
    events = await drain(client.send_message(user_message(ECHO_TEXT)), view=raw)
    task, update = events[0]
    return {"count": len(events), "task": task_view(task), "update": None if update is None else event_view(update)}


async def scenario_stream(run: Run) -> dict[str, Any]:
    client = await run.client(streaming=True)
    return {"events": await drain(client.send_message(user_message(ECHO_TEXT)))}


async def scenario_get(run: Run) -> dict[str, Any]:
    client = await run.client(streaming=False)
    task, _ = (await drain(client.send_message(user_message(ECHO_TEXT)), view=raw))[0]
    got = await bounded(client.get_task(TaskQueryParams(id=task.id)))
    last = await bounded(client.get_task(TaskQueryParams(id=task.id, history_length=1)))
    return {"sent": task_view(task), "got": task_view(got), "historyLength1": task_view(last)}


async def scenario_multiturn(run: Run) -> dict[str, Any]:
    first, second = "I want to learn Rust", "it is fast and safe"
    client = await run.client(streaming=False)
    t1, _ = (await drain(client.send_message(user_message(first)), view=raw))[0]
    t2, _ = (await drain(client.send_message(user_message(second, task_id=t1.id, context_id=t1.context_id)),
                         view=raw))[0]
    got = await bounded(client.get_task(TaskQueryParams(id=t1.id)))
    return {"first": first, "second": second, "turn1": task_view(t1), "turn2": task_view(t2), "got": task_view(got)}


async def scenario_multiturn_stream(run: Run) -> dict[str, Any]:
    first, second = "I want to learn Rust", "it is fast and safe"
    client = await run.client(streaming=True)
    turn1 = await drain(client.send_message(user_message(first)))
    task_id, ctx = turn1[0]["taskId"], turn1[0]["contextId"]
    turn2 = await drain(client.send_message(user_message(second, task_id=task_id, context_id=ctx)))
    return {"first": first, "second": second, "turn1": turn1, "turn2": turn2}


async def _start_slow_stream(client: Any) -> tuple[AsyncIterator[Any], list[dict[str, Any]]]:
    stream = client.send_message(user_message("go slowly"))
    seen = [client_event_view(await next_event(stream))]
    while seen[-1]["kind"] != "artifact" and len(seen) < 10:
        seen.append(client_event_view(await next_event(stream)))
    return stream, seen


async def scenario_cancel(run: Run) -> dict[str, Any]:
    client = await run.client(streaming=True)
    stream, before = await _start_slow_stream(client)
    async with aclosing(stream):
        task_id = before[0]["taskId"]
        canceled = await bounded(client.cancel_task(TaskIdParams(id=task_id)))
        after = await drain(stream)
    got = await bounded(client.get_task(TaskQueryParams(id=task_id)))
    try:
        await bounded(client.cancel_task(TaskIdParams(id=task_id)))
        second_cancel = None
    except A2AClientHTTPError as exc:
        second_cancel = http_error(exc)
    return {"before": before, "canceled": task_view(canceled), "after": after, "got": task_view(got),
            "secondCancel": second_cancel}


async def scenario_resubscribe(run: Run) -> dict[str, Any]:
    client = await run.client(streaming=True)
    stream, before = await _start_slow_stream(client)
    await stream.aclose()  # disconnect; the task keeps running
    task_id = before[0]["taskId"]
    resub = client.resubscribe(TaskIdParams(id=task_id))
    async with aclosing(resub):
        first = client_event_view(await next_event(resub))
        canceled = await bounded(client.cancel_task(TaskIdParams(id=task_id)))
        rest = await drain(resub)
    return {"before": before, "first": first, "canceled": task_view(canceled), "rest": rest}


async def scenario_errors(run: Run) -> dict[str, Any]:
    out: dict[str, Any] = {}
    client = await run.client(streaming=False)
    out["getUnknown"] = await error_of(client.get_task(TaskQueryParams(id="no-such-task")), A2AClientHTTPError,
                                       http_error)
    task, _ = (await drain(client.send_message(user_message("x")), view=raw))[0]
    out["cancelFinished"] = await error_of(client.cancel_task(TaskIdParams(id=task.id)), A2AClientHTTPError,
                                           http_error)
    more = user_message("more", task_id=task.id, context_id=task.context_id)
    out["sendToFinished"] = await error_of(drain(client.send_message(more), view=raw), A2AClientHTTPError,
                                           http_error)
    return out


async def scenario_file(run: Run) -> dict[str, Any]:
    """A file part with bytes, sent and read back (the SDK's base64-in-bytes encoding)."""
    content = b"\x00\x01binary \xff payload"
    client = await run.client(streaming=False)
    msg = Message(message_id=str(uuid.uuid4()), role=Role.user, parts=[
        Part(root=TextPart(text="with a file")),
        Part(root=FilePart(file=FileWithBytes(bytes=base64.b64encode(content).decode(), mime_type="application/x-test",
                                              name="blob.bin"))),
    ])
    task, _ = (await drain(client.send_message(msg), view=raw))[0]
    got = await bounded(client.get_task(TaskQueryParams(id=task.id)))

    def files(parts: list[Part]) -> list[dict[str, Any]]:
        return [{"bytes": p.root.file.bytes, "mimeType": p.root.file.mime_type, "name": p.root.file.name}
                for p in parts if isinstance(p.root, FilePart)]

    return {"state": got.status.state.value,
            "history": [f for m in got.history or [] for f in files(m.parts)],
            "artifacts": [f for a in got.artifacts or [] for f in files(a.parts)],
            "expected": base64.b64encode(content).decode()}


SCENARIOS = {name.removeprefix("scenario_"): fn for name, fn in globals().items() if name.startswith("scenario_")}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    run = Run(args.base_url, args.agent, args.as_served)
    try:
        return await SCENARIOS[args.scenario](run)
    finally:
        await run.http.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url")
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--agent", default="", help="agent path below BASE_URL ('' = default agent)")
    parser.add_argument("--as-served", action="store_true", help="use the card exactly as served")
    args = parser.parse_args()
    return report(lambda: main_async(args), {"scenario": args.scenario})


if __name__ == "__main__":
    sys.exit(main())
