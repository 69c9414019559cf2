"""The three test agents served by the last A2A 0.3 SDK (a2a-sdk 0.3.26).

Run with the python of ``.venv-sdk03`` (a2a-sdk 0.3.26 cannot be installed
next to 1.3), as a subprocess::

    .venv-sdk03/bin/python tests/interop_client/sdk03_server.py PORT

It serves, on 127.0.0.1:PORT, one A2AStarletteApplication per agent
(``/echo``, ``/interviewer``, ``/slow``, cards at
``/<agent>/.well-known/agent-card.json``) and ``POST /_control/release/<task id>``
for the slow agent, then prints ``READY http://127.0.0.1:PORT`` on stdout.
The agents behave exactly like the a2a-sdk 1.3 ones in ``sdk_servers.py``
(which documents them, and whose constants and chunking it imports: that module imports
only the standard library at module level); it imports nothing from Parley.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
import uuid

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
    TextPart,
)

# The agents' constants and the echo agent's chunking are sdk_servers.py's (this script's folder is on sys.path;
# sdk_servers imports only the standard library at module level).
from sdk_servers import HEARTBEAT_INTERVAL, INTERVIEW_QUESTION, chunks
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

_releases: dict[str, asyncio.Event] = {}


def text_part(text: str) -> Part:
    return Part(root=TextPart(text=text))


async def begin(context: RequestContext, event_queue: EventQueue) -> TaskUpdater:
    """Publish the Task first (0.3 SDK agents must), then return an updater for it."""
    if context.current_task is None:
        msg = context.message
        await event_queue.enqueue_event(
            Task(
                id=context.task_id or str(uuid.uuid4()),
                context_id=context.context_id or str(uuid.uuid4()),
                status=TaskStatus(state=TaskState.submitted),
                history=[msg] if msg is not None else [],
            )
        )
    return TaskUpdater(event_queue, context.task_id, context.context_id)


class Base(AgentExecutor):
    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        _releases.pop(context.task_id, None)
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


class Echo(Base):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = await begin(context, event_queue)
        await updater.start_work()
        pieces = chunks(context.get_user_input())
        for i, piece in enumerate(pieces):
            await updater.add_artifact([text_part(piece)], artifact_id="echo", name="echo",
                                       append=i > 0, last_chunk=i == len(pieces) - 1)
        await updater.complete()


class Interviewer(Base):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        updater = await begin(context, event_queue)
        if task is not None and task.status.state == TaskState.input_required:
            await updater.start_work()
            await updater.add_artifact([text_part(f"Nice to meet you, {context.get_user_input()}!")],
                                       artifact_id="answer", name="answer")
            await updater.complete()
            return
        await updater.requires_input(updater.new_agent_message([text_part(INTERVIEW_QUESTION)]), final=True)


class Slow(Base):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        heartbeat = "heartbeat" in context.get_user_input()
        released = _releases.setdefault(context.task_id, asyncio.Event())
        updater = await begin(context, event_queue)
        try:
            await updater.start_work(updater.new_agent_message([text_part("working")]))
            beats = 0
            while not released.is_set():
                if not heartbeat:
                    await released.wait()
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(released.wait(), HEARTBEAT_INTERVAL)
                if not released.is_set():
                    await updater.add_artifact([text_part(".")], artifact_id="heartbeat", name="heartbeat",
                                               append=beats > 0)
                    beats += 1
            await updater.add_artifact([text_part("released")], artifact_id="result", name="result")
            await updater.complete()
        except asyncio.CancelledError:
            # SDK 0.3.26 hands cancel() a *tap* of the task's queue, so the canceled status
            # written there never reaches this request's own queue, and a message/stream
            # opened by this request would stay open forever (observed). Publish it here too.
            with contextlib.suppress(Exception):
                await updater.cancel()
            raise
        finally:
            _releases.pop(context.task_id, None)


def build_app(base_url: str) -> Starlette:
    async def release(request: Request) -> JSONResponse:
        ev = _releases.get(request.path_params["task_id"])
        if ev is None:
            return JSONResponse({"released": False}, status_code=404)
        ev.set()
        return JSONResponse({"released": True})

    app = Starlette(routes=[Route("/_control/release/{task_id}", release, methods=["POST"])])
    for name, executor in {"echo": Echo(), "interviewer": Interviewer(), "slow": Slow()}.items():
        card = AgentCard(
            name=f"sdk03-{name}",
            description=f"a2a-sdk 0.3.26 test agent {name!r}",
            url=f"{base_url}/{name}",
            version="1.0.0",
            protocol_version="0.3.0",
            preferred_transport="JSONRPC",
            capabilities=AgentCapabilities(streaming=True, push_notifications=False),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id=name, name=name, description=f"the {name} test agent", tags=["test"])],
        )
        handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore())
        A2AStarletteApplication(agent_card=card, http_handler=handler).add_routes_to_app(
            app,
            agent_card_url=f"/{name}/.well-known/agent-card.json",
            rpc_url=f"/{name}",
            extended_agent_card_url=f"/{name}/agent/authenticatedExtendedCard",
        )
    return app


def main() -> None:
    port = int(sys.argv[1])
    url = f"http://127.0.0.1:{port}"
    server = uvicorn.Server(uvicorn.Config(build_app(url), host="127.0.0.1", port=port, log_level="warning"))

    def announce() -> None:
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline or server.should_exit:
                return
            time.sleep(0.01)
        from importlib.metadata import version

        import a2a  # noqa: F401

        print(f"READY {url} a2a-sdk={version('a2a-sdk')}", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    server.run()  # handles SIGTERM / SIGINT


if __name__ == "__main__":
    main()
