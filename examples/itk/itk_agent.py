"""A Parley agent that follows the a2a-itk kit's instructions (the official cross-SDK interop kit).

Each message carries a nested `Instruction` (protobuf bytes in a raw/file part, or base64 text). The agent
returns a response, runs a series of steps and joins their answers, or calls another agent through its card on
the transport the instruction names (JSONRPC, HTTP+JSON or GRPC) with Parley's own client: a send, a stream, a
send that registers a webhook, or a stream it leaves and resubscribes to. Its answer is the completed task's
status message, as the kit's agents answer.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import uuid
from collections.abc import AsyncIterator
from typing import Any

from google.protobuf.message import DecodeError
from instruction import Instruction

from parley import Parley
from parley.agents.base import RunContext, Status
from parley.client import A2AClient
from parley.protocol import models as m

BINDINGS = {"JSONRPC": "JSONRPC", "HTTP_JSON": "HTTP+JSON", "HTTP+JSON": "HTTP+JSON", "REST": "HTTP+JSON",
            "GRPC": "GRPC"}
FINISHED = "task-finished"  # the marker the kit looks for in a held task's message
HOLD_UPDATES, HOLD_INTERVAL = 5, 2.0  # a held task says it is alive this often, then completes (as the kit's agents)


def instruction_of(message: m.Message) -> Any | None:
    """The instruction a message carries, or None."""
    for part in message.parts:
        if part.raw is not None and (part.media_type == "application/x-protobuf" or part.filename == "instruction.bin"):
            candidates = [part.raw]
        elif part.text:
            try:
                candidates = [base64.b64decode(part.text, validate=True)]
            except (binascii.Error, ValueError):
                continue
        else:
            continue
        for raw in candidates:
            inst = Instruction()
            try:
                inst.ParseFromString(raw)
            except DecodeError:
                continue
            if inst.WhichOneof("step"):
                return inst
    return None


def holds(inst: Any) -> bool:
    """Whether any step asks to hold the task in `working` (the kit's resubscribe scenario)."""
    step = inst.WhichOneof("step")
    if step == "return_response":
        return bool(inst.return_response.hold_task)
    if step == "steps":
        return any(holds(s) for s in inst.steps.instructions)
    return False


async def perform(inst: Any) -> list[str]:
    """Carry out an instruction; the texts it answers with."""
    step = inst.WhichOneof("step")
    if step == "return_response":
        return [inst.return_response.response]
    if step == "steps":
        texts: list[str] = []
        for sub in inst.steps.instructions:
            texts.extend(await perform(sub))
        return texts
    if step == "call_agent":
        return await call_agent(inst.call_agent)
    raise ValueError("the instruction names no step")


def texts_of(event: Any) -> list[str]:
    """The agent-message texts an answer or stream event carries (the kit reads status messages)."""
    message = None
    if isinstance(event, m.Message):
        message = event
    elif isinstance(event, m.Task | m.TaskStatusUpdateEvent):
        message = event.status.message
    if message is None:
        return []
    return [p.text for p in message.parts if p.text]


def outgoing(inst: Any) -> m.Message:
    """The nested instruction as the kit's agents send it: protobuf bytes in a raw part."""
    return m.Message(role=m.Role.USER, message_id=str(uuid.uuid4()), parts=[
        m.Part(raw=inst.SerializeToString(), media_type="application/x-protobuf", filename="instruction.bin")])


async def call_agent(call: Any) -> list[str]:
    """Resolve the card, choose the named transport, and send the nested instruction with the named behaviour."""
    binding = BINDINGS.get(call.transport.upper())
    if binding is None:
        raise ValueError(f"unknown transport {call.transport!r}")
    behaviour = call.WhichOneof("behavior")
    streaming = call.streaming or binding == "GRPC"
    push = None
    if behaviour == "push_notification":
        url = call.push_notification.url
        url = url if url.startswith(("http://", "https://")) else f"http://{url}"
        push = m.TaskPushNotificationConfig(url=f"{url}/notifications", token="itk-token")
    async with await A2AClient.connect(call.agent_card_uri, bindings=[binding]) as client:
        message = outgoing(call.instruction)
        if behaviour == "resubscribe":
            return await _resubscribe(client, message)
        if not streaming:
            return texts_of(await client.send(message, push=push))
        return [text async for event in client.stream(message, push=push) for text in texts_of(event)]


async def _resubscribe(client: A2AClient, message: m.Message) -> list[str]:
    """Start a stream, leave it after its first event, resubscribe, and read until the task says it finished;
    cancel the task if it never does."""
    task_id = None
    async for event in client.stream(message):
        task_id = event.id if isinstance(event, m.Task) else getattr(event, "task_id", None)
        break
    if task_id is None:
        raise RuntimeError("the stream ended before naming its task")
    texts: list[str] = []
    async for event in client.resubscribe(task_id):
        for text in texts_of(event):
            texts.append(text.replace(FINISHED, ""))
            if FINISHED in text:
                return texts
    await client.cancel(task_id)
    return texts


def build() -> Parley:
    """The app: one agent, `itk`, owning `/` (its card at /.well-known/agent-card.json)."""
    app = Parley()

    @app.agent(id="itk", name="Parley ITK agent", description="Follows a2a-itk instructions (interop kit)",
               input_modes=["application/x-protobuf", "text/plain"])
    async def itk(ctx: RunContext) -> AsyncIterator[Any]:
        inst = instruction_of(ctx.message)
        if inst is None:
            yield Status(m.TaskState.FAILED, text="No valid instruction found in request")
            return
        try:
            answer = "\n".join(await perform(inst))
        except Exception as exc:  # noqa: BLE001 - the kit reads a failed task; the reason goes in its message
            yield Status(m.TaskState.FAILED, text=f"instruction failed: {exc}")
            return
        if not holds(inst):
            yield Status(m.TaskState.COMPLETED, text=answer)
            return
        yield Status(m.TaskState.WORKING, text=f"{answer}\n{FINISHED}")
        for _ in range(HOLD_UPDATES):  # a cancel ends the run here (the engine cancels this generator)
            yield Status(m.TaskState.WORKING)
            await asyncio.sleep(HOLD_INTERVAL)
        yield Status(m.TaskState.COMPLETED, text=f"{answer}\n{FINISHED}")

    return app
