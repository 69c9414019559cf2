"""Drive a Parley server with the official a2a-sdk 0.3.26 client; print one JSON object.

Runs in its own virtualenv (a2a-sdk 0.3.x cannot be installed beside 1.x), so it
imports nothing from Parley or pytest:

    .venv-sdk03/bin/python tests/interop/sdk03_driver.py BASE_URL SCENARIO [--agent PATH]

BASE_URL is the server root (e.g. http://127.0.0.1:8000); --agent is the agent's
path below it ("" for the default agent, "/a2a/interviewer", ...). The client
resolves the agent card at AGENT_URL/.well-known/agent-card.json with no
A2A-Version header, exactly like a 0.3 client in the wild.

The single JSON object on stdout holds what the SDK returned (states in their 0.3
spelling, texts, ids, the order of streamed events). On an exception it holds
`error` {type, message, code, traceback} and the exit status is 1.

Scenarios: card, send, legacy_send, stream, slow_stream, get, multiturn, multiturn_stream,
cancel, resubscribe, nonblocking_resubscribe, errors. `cancel` and the two
resubscribe scenarios need an agent that emits one artifact chunk and then waits;
the resubscribe scenarios release it by sending a message to the agent at
--release (a path below BASE_URL).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import warnings
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientJSONRPCError
from a2a.types import (
    Message,
    MessageSendParams,
    SendMessageRequest,
    SendStreamingMessageRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskQueryParams,
    TaskStatusUpdateEvent,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for sdk03_driving (this runs as a script)
from sdk03_driving import WAIT, bounded, error_of, next_event, parts_text, raw, report, user_message

ECHO_TEXT = "one two three four five six seven"


# --- helpers ---------------------------------------------------------------------


def task_view(task: Task) -> dict[str, Any]:
    status_text = parts_text(task.status.message.parts) if task.status.message else None
    return {
        "id": task.id,
        "contextId": task.context_id,
        "state": task.status.state.value,
        "statusText": status_text,
        "artifactText": "".join(parts_text(a.parts) for a in task.artifacts or []),
        "artifactIds": [a.artifact_id for a in task.artifacts or []],
        "history": [[m.role.value, parts_text(m.parts), m.task_id, m.context_id] for m in task.history or []],
    }


def event_view(update: Any) -> dict[str, Any]:
    """A 0.3 streamed object (Task / status-update / artifact-update / Message) as a small dict."""
    if isinstance(update, Task):
        return {"kind": "task", "taskId": update.id, "contextId": update.context_id, "state": update.status.state.value}
    if isinstance(update, TaskStatusUpdateEvent):
        out = {"kind": "status", "taskId": update.task_id, "contextId": update.context_id,
               "state": update.status.state.value, "final": update.final}
        if update.status.message is not None:
            out["text"] = parts_text(update.status.message.parts)
        return out
    if isinstance(update, TaskArtifactUpdateEvent):
        return {"kind": "artifact", "taskId": update.task_id, "contextId": update.context_id,
                "artifactId": update.artifact.artifact_id, "text": parts_text(update.artifact.parts),
                "append": bool(update.append), "lastChunk": bool(update.last_chunk)}
    if isinstance(update, Message):
        return {"kind": "message", "text": parts_text(update.parts)}
    return {"kind": type(update).__name__}


def client_event_view(event: Any) -> dict[str, Any]:
    """What `Client.send_message` / `resubscribe` yields: (Task, update | None) or a Message."""
    if isinstance(event, Message):
        return event_view(event)
    task, update = event
    view = event_view(task if update is None else update)
    view["aggregate"] = task_view(task)  # the SDK's ClientTaskManager view after this event
    return view


async def drain(stream: AsyncIterator[Any], view: Any = client_event_view) -> list[Any]:
    """The remaining events until the server closes the stream, each viewed as it arrives.

    (The SDK's aggregate Task is mutated in place by later events, so it is read at once.)
    """
    async with asyncio.timeout(WAIT):
        return [view(ev) async for ev in stream]


def jsonrpc_error(exc: A2AClientJSONRPCError) -> dict[str, Any]:
    err = exc.error
    return {"code": err.code, "message": err.message}


class Run:
    """One scenario run: the base URL, the agent URL and a client factory."""

    def __init__(self, base: str, agent: str, release: str | None) -> None:
        self.base = base.rstrip("/")
        self.agent_url = self.base + agent
        self.release_url = self.base + release if release is not None else None
        self.http = httpx.AsyncClient(timeout=WAIT)

    async def card(self, url: str | None = None):
        return await A2ACardResolver(self.http, url or self.agent_url).get_agent_card()

    @asynccontextmanager
    async def client(self, *, streaming: bool, url: str | None = None, polling: bool = False):
        """`ClientFactory.connect`: resolves the card at URL/.well-known/agent-card.json, picks a transport."""
        config = ClientConfig(streaming=streaming, polling=polling, httpx_client=self.http)
        client = await bounded(ClientFactory.connect(url or self.agent_url, client_config=config))
        yield client  # shared httpx client: closed once in main()


# --- scenarios ----------------------------------------------------------------------


async def scenario_card(run: Run) -> dict[str, Any]:
    card = await run.card()
    return {
        "name": card.name,
        "url": card.url,
        "preferredTransport": card.preferred_transport,
        "protocolVersion": card.protocol_version,
        "additionalInterfaces": [[i.transport, i.url] for i in card.additional_interfaces or []],
        "streaming": card.capabilities.streaming,
        "skills": [s.id for s in card.skills],
    }


async def scenario_send(run: Run) -> dict[str, Any]:
    async with run.client(streaming=False) as client:
        events = await drain(client.send_message(user_message(ECHO_TEXT)), view=raw)
    out: dict[str, Any] = {"count": len(events)}
    first = events[0]
    if isinstance(first, Message):
        out["message"] = parts_text(first.parts)
    else:
        task, update = first
        out["task"] = task_view(task)
        out["update"] = None if update is None else event_view(update)
    return out


async def scenario_legacy_send(run: Run) -> dict[str, Any]:
    """The deprecated `A2AClient`: one message/send and one message/stream."""
    from a2a.client import A2AClient

    card = await run.card()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        client = A2AClient(run.http, agent_card=card)
    response = await bounded(client.send_message(
        SendMessageRequest(id="legacy-1", params=MessageSendParams(message=user_message(ECHO_TEXT)))
    ))
    root = response.root
    out: dict[str, Any] = {"responseId": root.id}
    out["send"] = task_view(root.result) if isinstance(root.result, Task) else event_view(root.result)
    stream = client.send_message_streaming(
        SendStreamingMessageRequest(id="legacy-2", params=MessageSendParams(message=user_message(ECHO_TEXT)))
    )
    async with aclosing(stream):
        frames = await drain(stream, view=lambda frame: (frame.root.id, event_view(frame.root.result)))
    out["streamIds"] = sorted({frame_id for frame_id, _ in frames})
    out["stream"] = [event for _, event in frames]
    return out


async def scenario_stream(run: Run) -> dict[str, Any]:
    async with run.client(streaming=True) as client:
        events = await drain(client.send_message(user_message(ECHO_TEXT)))
    return {"events": events}


async def scenario_slow_stream(run: Run) -> dict[str, Any]:
    """A streaming send to the agent at --agent that takes a while (e.g. behind keep-alive comments)."""
    async with run.client(streaming=True) as client:
        events = await drain(client.send_message(user_message("go slowly")))
    return {"events": events}


async def scenario_get(run: Run) -> dict[str, Any]:
    async with run.client(streaming=False) as client:
        task, _ = (await drain(client.send_message(user_message(ECHO_TEXT)), view=raw))[0]
        got = await bounded(client.get_task(TaskQueryParams(id=task.id)))
        last = await bounded(client.get_task(TaskQueryParams(id=task.id, history_length=1)))
    return {"sent": task_view(task), "got": task_view(got), "historyLength1": task_view(last)}


async def scenario_multiturn(run: Run) -> dict[str, Any]:
    first_text, second_text = "I want to learn Rust", "it is fast and safe"
    async with run.client(streaming=False) as client:
        t1, _ = (await drain(client.send_message(user_message(first_text)), view=raw))[0]
        follow_up = user_message(second_text, task_id=t1.id, context_id=t1.context_id)
        t2, _ = (await drain(client.send_message(follow_up), view=raw))[0]
        got = await bounded(client.get_task(TaskQueryParams(id=t1.id)))
    return {"first": first_text, "second": second_text, "turn1": task_view(t1), "turn2": task_view(t2),
            "got": task_view(got)}


async def scenario_multiturn_stream(run: Run) -> dict[str, Any]:
    first_text, second_text = "I want to learn Rust", "it is fast and safe"
    async with run.client(streaming=True) as client:
        turn1 = await drain(client.send_message(user_message(first_text)))
        task_id, ctx = turn1[0]["taskId"], turn1[0]["contextId"]
        follow_up = user_message(second_text, task_id=task_id, context_id=ctx)
        turn2 = await drain(client.send_message(follow_up))
    return {"first": first_text, "second": second_text, "turn1": turn1, "turn2": turn2}


async def _start_slow_stream(client: Any) -> tuple[AsyncIterator[Any], list[dict[str, Any]]]:
    stream = client.send_message(user_message("go slowly"))
    seen = [client_event_view(await next_event(stream))]
    while seen[-1]["kind"] not in ("artifact", "message") and len(seen) < 10:
        seen.append(client_event_view(await next_event(stream)))
    return stream, seen


async def scenario_cancel(run: Run) -> dict[str, Any]:
    async with run.client(streaming=True) as client:
        stream, before = await _start_slow_stream(client)
        async with aclosing(stream):
            task_id = before[0]["taskId"]
            running = await bounded(client.get_task(TaskQueryParams(id=task_id)))
            canceled = await bounded(client.cancel_task(TaskIdParams(id=task_id)))
            after = await drain(stream)
        got = await bounded(client.get_task(TaskQueryParams(id=task_id)))
        try:
            await bounded(client.cancel_task(TaskIdParams(id=task_id)))
            second_cancel = None
        except A2AClientJSONRPCError as exc:
            second_cancel = jsonrpc_error(exc)
    return {"before": before, "running": task_view(running), "canceled": task_view(canceled), "after": after,
            "got": task_view(got),
            "secondCancel": second_cancel}


async def scenario_resubscribe(run: Run) -> dict[str, Any]:
    if run.release_url is None:
        raise SystemExit("resubscribe needs --release PATH (an agent that opens the gate)")
    async with run.client(streaming=True) as client:
        stream, before = await _start_slow_stream(client)
        await stream.aclose()  # disconnect; the task keeps running
        task_id = before[0]["taskId"]
        resub = client.resubscribe(TaskIdParams(id=task_id))
        async with aclosing(resub):
            first = client_event_view(await next_event(resub))
            # Release the slow agent over A2A, through the release agent.
            async with run.client(streaming=False, url=run.release_url) as releaser:
                released = await drain(releaser.send_message(user_message("release")), view=raw)
            rest = await drain(resub)
        got = await bounded(client.get_task(TaskQueryParams(id=task_id)))
    release_task = released[0][0] if isinstance(released[0], tuple) else None
    return {"before": before, "first": first, "rest": rest, "got": task_view(got),
            "release": task_view(release_task) if release_task else None}


async def scenario_nonblocking_resubscribe(run: Run) -> dict[str, Any]:
    """`polling=True` (blocking: false) returns the task at once; tasks/resubscribe follows it to the end."""
    if run.release_url is None:
        raise SystemExit("nonblocking_resubscribe needs --release PATH (an agent that opens the gate)")
    async with run.client(streaming=False, polling=True) as sender:
        sent = await drain(sender.send_message(user_message("go slowly")), view=raw)
    task = sent[0][0]
    async with run.client(streaming=True) as client:
        resub = client.resubscribe(TaskIdParams(id=task.id))
        async with aclosing(resub):
            first = client_event_view(await next_event(resub))
            async with run.client(streaming=False, url=run.release_url) as releaser:
                await drain(releaser.send_message(user_message("release")), view=raw)
            rest = await drain(resub)
    return {"sent": task_view(task), "sentCount": len(sent), "first": first, "rest": rest}


async def scenario_errors(run: Run) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with run.client(streaming=False) as client:
        out["getUnknown"] = await error_of(client.get_task(TaskQueryParams(id="no-such-task")),
                                           A2AClientJSONRPCError, jsonrpc_error)
        task, _ = (await drain(client.send_message(user_message("x")), view=raw))[0]
        out["cancelFinished"] = await error_of(client.cancel_task(TaskIdParams(id=task.id)),
                                               A2AClientJSONRPCError, jsonrpc_error)
        more = user_message("more", task_id=task.id, context_id=task.context_id)
        out["sendToFinished"] = await error_of(drain(client.send_message(more), view=raw),
                                               A2AClientJSONRPCError, jsonrpc_error)
    return out


SCENARIOS = {
    name.removeprefix("scenario_"): fn for name, fn in globals().items() if name.startswith("scenario_")
}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    run = Run(args.base_url, args.agent, args.release)
    try:
        result = await SCENARIOS[args.scenario](run)
    finally:
        await run.http.aclose()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base_url")
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--agent", default="", help="agent path below BASE_URL ('' = default agent)")
    parser.add_argument("--release", default=None, help="path of the agent that releases the slow agent")
    args = parser.parse_args()
    return report(lambda: main_async(args), {"scenario": args.scenario})


if __name__ == "__main__":
    sys.exit(main())
