"""Push notifications between Parley and the official A2A SDKs, both ways, over real HTTP on 127.0.0.1.

1. An a2a-sdk 1.x client registers a webhook with Parley, inline with `send_message`
   (`ClientConfig.push_notification_config`) or with `create_task_push_notification_config`, over
   JSON-RPC and over HTTP+JSON. Every body the webhook gets parses, strictly, as the SDK's own
   `a2a_pb2.StreamResponse` (google.protobuf json_format.ParseDict, unknown fields refused) and prints
   back to the same JSON: the A2A 1.0 payload of section 4.3.3 (`Content-Type: application/a2a+json`).
2. The a2a-sdk 0.3.26 client (its own virtualenv, .venv-sdk03, driven as a subprocess) registers a
   webhook with `tasks/pushNotificationConfig/set` (`set_task_callback`), or inline with `message/send`;
   the webhook gets 0.3 Task bodies (`Content-Type: application/json`) that the 0.3 SDK's
   `Task.model_validate` accepts, each the task as it stood after its change (docs/push.md, "A config
   remembers the protocol version its client spoke").
3. Parley's receiving side (parley.client.push: `PushVerifier(token=...)`, `read_notification`) accepts
   the notifications of an official a2a-sdk 1.x server (InMemoryPushNotificationConfigStore +
   BasePushNotificationSender, wired as the SDK's tests/integration/push_notifications do) when Parley's
   client registers the webhook there (inline with SendMessage, or CreateTaskPushNotificationConfig).

The webhook is tests/push_e2e/receiver.py; Parley runs in this process on uvicorn (tests/support.py's
LiveServer) over SQLite, with `[push] allow = ["127.0.0.1/32"]`. Which notifications are due is read from
the task's own log (SubscribeToTask with `Last-Event-ID: 0`): its status entries after the webhook was
registered. Waits are bounded and event-driven (the webhook's condition variable).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import textwrap
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from a2a.client import ClientConfig, ClientFactory
from a2a.types import (
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    Message,
    Part,
    SendMessageRequest,
    TaskPushNotificationConfig,
    a2a_pb2,
)
from a2a.utils.constants import TransportProtocol
from google.protobuf import json_format

from parley.agents.base import FunctionAgent, RunContext
from parley.client import A2AClient
from parley.client.push import PushVerificationError, PushVerifier, read_notification
from parley.protocol import models as m
from parley.protocol.operations import Operation
from parley.serve import default_app
from parley.settings import PushSettings, Settings
from support import LiveServer, free_port, replay_log, sdk_message

pytestmark = pytest.mark.interop

WAIT = 20.0
ROOT = Path(__file__).resolve().parents[2]
SDK03_PYTHON = ROOT / ".venv-sdk03" / "bin" / "python"


# --- Parley, in this process -------------------------------------------------------------------------------------------


async def steps(ctx: RunContext) -> AsyncIterator[Any]:
    """Three progress messages (working statuses), then its answer."""
    for i in range(3):
        yield ctx.say(f"step {i}")
    yield f"done: {ctx.text}"


@pytest.fixture
def parley(tmp_path: Path) -> Iterator[LiveServer]:
    """Parley's built-in agents and `steps`, over SQLite, webhooks on 127.0.0.1 allowed."""
    settings = Settings(push=PushSettings(allow=["127.0.0.1/32"], backoff_seconds=0.05, max_backoff_seconds=0.2))
    app = default_app(str(tmp_path / "parley.db"), settings=settings)
    app.add_agent(FunctionAgent(steps, id="steps", name="Steps"))
    srv = LiveServer(app).start()
    try:
        yield srv
    finally:
        srv.stop()


def due_statuses(log: list[tuple[int, dict[str, Any]]], after_seq: int = 0) -> dict[int, dict[str, Any]]:
    """seq -> statusUpdate of the status entries after `after_seq`: the notifications a webhook registered
    then is owed (status changes only: `artifact_updates` is off)."""
    return {seq: ev["statusUpdate"] for seq, ev in log if seq > after_seq and "statusUpdate" in ev}


def last_seq_in(log: list[tuple[int, dict[str, Any]]], state: str) -> int:
    """The seq of the last status entry with `state`."""
    return max(seq for seq, ev in log if ev.get("statusUpdate", {}).get("status", {}).get("state") == state)


async def wait_for(hook, predicate, what: str) -> list:
    return await asyncio.to_thread(hook.wait_for, predicate, what)


def for_task(got: list, task_id: str) -> list:
    return [r for r in got if r.event_id and r.event_id.startswith(task_id + ":")]


# --- 1. the a2a-sdk 1.x client registers a webhook with Parley ---------------------------------------------------------


@contextlib.asynccontextmanager
async def sdk1_client(agent_url: str, binding: str, push: TaskPushNotificationConfig | None = None):
    async with httpx.AsyncClient(timeout=WAIT) as http:
        config = ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=[binding],
                              push_notification_config=push)
        client = await ClientFactory(config).create_from_url(agent_url)
        try:
            yield client
        finally:
            await client.close()


async def sdk1_send(client, message: Message) -> a2a_pb2.Task:
    events = [ev async for ev in client.send_message(SendMessageRequest(message=message))]
    assert events and events[-1].WhichOneof("payload") == "task", events
    return events[-1].task


def _instants(value: object) -> object:
    """`value` with each `timestamp` read as the instant it names: ProtoJSON prints a Timestamp's fraction only when
    it is not zero ("...22Z" for "...22.000Z"), the same instant."""
    if isinstance(value, dict):
        return {k: datetime.fromisoformat(v) if k == "timestamp" and isinstance(v, str) else _instants(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_instants(v) for v in value]
    return value


def parse_with_sdk(rec) -> a2a_pb2.StreamResponse:
    """The body as the SDK's StreamResponse: strict (no unknown field), and it prints back to the same JSON
    (timestamps compared as instants)."""
    data = rec.json()
    parsed = json_format.ParseDict(data, a2a_pb2.StreamResponse(), ignore_unknown_fields=False)
    again = json_format.MessageToDict(parsed)
    assert _instants(again) == _instants(data), (again, data)
    return parsed


@pytest.mark.parametrize("binding", [TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON])
@pytest.mark.parametrize("how", ["inline", "create"])
async def test_sdk1_client_webhook_gets_stream_responses(how: str, binding: str, parley: LiveServer, webhook) -> None:
    """a2a-sdk 1.x registers a webhook with Parley ("inline": `ClientConfig.push_notification_config`, sent
    with `send_message` to `steps`; "create": `create_task_push_notification_config` on an `interviewer` task
    waiting for input, then the second turn). The webhook gets one notification per status change after the
    registration, each a StreamResponse `statusUpdate` the SDK parses strictly, with the config's token,
    `Content-Type: application/a2a+json`, and the status of the task's log entry it names."""
    hook = webhook()
    token = f"tok-{how}-{binding}"
    if how == "inline":
        agent = parley.url + "/a2a/steps"
        push = TaskPushNotificationConfig(url=hook.url, token=token)
        async with sdk1_client(agent, binding, push) as client:
            task = await sdk1_send(client, sdk_message("push me"))
        assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED, task
        registered_after = 0
    else:
        agent = parley.url + "/a2a/interviewer"
        async with sdk1_client(agent, binding) as client:
            first = await sdk1_send(client, sdk_message("I want push notifications"))
            assert first.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED, first
            created = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=first.id, url=hook.url, token=token))
            assert created.id and created.task_id == first.id and created.url == hook.url, created
            assert not created.token, f"the token is write-only (docs/push.md), yet was returned: {created}"
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=first.id))
            assert [c.id for c in listed.configs] == [created.id] and not listed.configs[0].token, listed
            got_back = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=first.id, id=created.id))
            assert got_back.url == hook.url and not got_back.token, got_back
            task = await sdk1_send(client, sdk_message("so that I need not poll", task_id=first.id,
                                                       context_id=first.context_id))
        assert task.id == first.id and task.status.state == a2a_pb2.TASK_STATE_COMPLETED, task

    log = await asyncio.to_thread(replay_log, agent, task.id, WAIT)
    registered_after = last_seq_in(log, "TASK_STATE_INPUT_REQUIRED") if how == "create" else registered_after
    due = due_statuses(log, registered_after)
    assert len(due) >= 2 and list(due.values())[-1]["status"]["state"] == "TASK_STATE_COMPLETED", log
    got = await wait_for(hook, lambda got: set(due) <= {r.seq for r in for_task(got, task.id)},
                         f"the {len(due)} notifications of task {task.id}")
    mine = for_task(got, task.id)
    assert [r.seq for r in mine] == sorted(due), [r.brief() for r in mine]
    for r in mine:
        assert r.content_type.startswith("application/a2a+json"), r.headers
        assert r.headers.get("x-a2a-notification-token") == token, r.headers
        parsed = parse_with_sdk(r)
        assert parsed.WhichOneof("payload") == "status_update", parsed
        update = parsed.status_update
        assert (update.task_id, update.context_id) == (task.id, task.context_id), update
        want = due[r.seq]["status"]
        assert a2a_pb2.TaskState.Name(update.status.state) == want["state"], (update, want)
        if "message" in want:
            assert [p.text for p in update.status.message.parts] == [p["text"] for p in want["message"]["parts"]]
    final = parse_with_sdk(mine[-1]).status_update.status
    assert final.state == a2a_pb2.TASK_STATE_COMPLETED, final
    if how == "inline":  # the progress messages of `steps` came through, in order
        texts = [p.text for r in mine for p in parse_with_sdk(r).status_update.status.message.parts]
        assert texts == ["step 0", "step 1", "step 2"], texts


# --- 2. the a2a-sdk 0.3.26 client registers a webhook with Parley -------------------------------------------------------

# Runs in .venv-sdk03 (a2a-sdk 0.3.26 cannot be installed beside 1.x); imports nothing from Parley.
#   driver.py register AGENT_URL HOOK_URL TOKEN set|inline  -> one JSON object on stdout
#   driver.py validate < [body, ...]                        -> [Task view, ...]: Task.model_validate of each
SDK03_DRIVER = textwrap.dedent('''
    import asyncio, json, sys, uuid
    import httpx
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types import (GetTaskPushNotificationConfigParams, Message, Part, PushNotificationConfig, Role, Task,
                           TaskPushNotificationConfig, TextPart)

    def message(text, task_id=None, context_id=None):
        return Message(message_id=str(uuid.uuid4()), role=Role.user, parts=[Part(root=TextPart(text=text))],
                       task_id=task_id, context_id=context_id)

    def text_of(parts):
        return "".join(p.root.text for p in parts or [] if isinstance(p.root, TextPart))

    def view(task):
        return {"id": task.id, "contextId": task.context_id, "kind": task.kind, "state": task.status.state.value,
                "statusText": text_of(task.status.message.parts) if task.status.message else None,
                "artifacts": [text_of(a.parts) for a in task.artifacts or []],
                "history": [[m.role.value, text_of(m.parts)] for m in task.history or []]}

    async def send(client, msg):
        last = None
        async for event in client.send_message(msg):
            last = event
        task, _ = last
        return task

    async def register(agent_url, hook_url, token, how):
        push = PushNotificationConfig(url=hook_url, token=token)
        methods = []

        async def record(request):  # the JSON-RPC methods the SDK puts on the wire
            if request.method == "POST" and request.content:
                methods.append(json.loads(request.content).get("method"))

        async with httpx.AsyncClient(timeout=20, event_hooks={"request": [record]}) as http:
            config = ClientConfig(streaming=False, httpx_client=http,
                                  push_notification_configs=[push] if how == "inline" else [])
            client = await ClientFactory.connect(agent_url, client_config=config)
            out = {}
            if how == "inline":
                task = await send(client, message("push me"))
            else:
                first = await send(client, message("I want push notifications"))
                out["first"] = view(first)
                cfg = await client.set_task_callback(
                    TaskPushNotificationConfig(task_id=first.id, push_notification_config=push))
                out["set"] = cfg.model_dump(mode="json", exclude_none=True)
                got = await client.get_task_callback(GetTaskPushNotificationConfigParams(
                    id=first.id, push_notification_config_id=cfg.push_notification_config.id))
                out["get"] = got.model_dump(mode="json", exclude_none=True)
                task = await send(client, message("so that I need not poll", first.id, first.context_id))
            out["task"] = view(task)
            out["methods"] = methods
            await client.close()
        return out

    def main():
        if sys.argv[1] == "validate":
            print(json.dumps([view(Task.model_validate(json.loads(body))) for body in json.load(sys.stdin)]))
        else:
            print(json.dumps(asyncio.run(register(*sys.argv[2:6]))))

    main()
''')


def sdk03(tmp_path: Path, *args: str, stdin: str | None = None) -> Any:
    if not SDK03_PYTHON.exists():
        pytest.fail(f"{SDK03_PYTHON} is missing (a virtualenv with a2a-sdk 0.3.26)")
    driver = tmp_path / "sdk03_push_driver.py"
    driver.write_text(SDK03_DRIVER)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run([str(SDK03_PYTHON), str(driver), *args], input=stdin, capture_output=True, text=True,
                          timeout=60, env=env, check=False)
    assert proc.returncode == 0, f"the 0.3 SDK driver failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout)


V03_STATE = {"TASK_STATE_WORKING": "working", "TASK_STATE_COMPLETED": "completed",
             "TASK_STATE_INPUT_REQUIRED": "input-required", "TASK_STATE_SUBMITTED": "submitted"}


@pytest.mark.parametrize("how", ["set", "inline"])
async def test_sdk03_client_webhook_gets_v03_tasks(how: str, parley: LiveServer, webhook, tmp_path: Path) -> None:
    """a2a-sdk 0.3.26 registers a webhook with Parley ("set": `set_task_callback`, i.e.
    `tasks/pushNotificationConfig/set`, on an interviewer task waiting for input, then the second turn;
    "inline": `ClientConfig.push_notification_configs` with `message/send` to `steps`). Each notification
    is a 0.3 Task (`Content-Type: application/json`) that the 0.3 SDK's `Task.model_validate` accepts: the
    task as it stood after that change (its state, its id), the last one completed with the answer."""
    hook = webhook()
    token = f"tok03-{how}"
    agent = parley.url + ("/a2a/steps" if how == "inline" else "/a2a/interviewer")
    out = await asyncio.to_thread(sdk03, tmp_path, "register", agent, hook.url, token, how)
    task = out["task"]
    assert task["state"] == "completed", out
    if how == "inline":
        assert out["methods"] == ["message/send"], out["methods"]
    if how == "set":
        assert out["methods"] == ["message/send", "tasks/pushNotificationConfig/set",
                                  "tasks/pushNotificationConfig/get", "message/send"], out["methods"]
        assert out["first"]["state"] == "input-required", out
        pnc = out["set"]["pushNotificationConfig"]  # the 0.3 SDK's models dump by alias (camelCase)
        assert out["set"]["taskId"] == task["id"] and pnc["url"] == hook.url and pnc.get("id"), out
        assert "token" not in pnc, f"the token is write-only (docs/push.md), yet was returned: {out['set']}"
        assert out["get"]["pushNotificationConfig"] == pnc and out["get"]["taskId"] == task["id"], out
        assert "token" not in out["get"]["pushNotificationConfig"], out["get"]

    log = await asyncio.to_thread(replay_log, agent, task["id"], WAIT)
    after = last_seq_in(log, "TASK_STATE_INPUT_REQUIRED") if how == "set" else 0
    due = due_statuses(log, after)
    got = await wait_for(hook, lambda got: set(due) <= {r.seq for r in for_task(got, task["id"])},
                         f"the {len(due)} notifications of task {task['id']}")
    mine = for_task(got, task["id"])
    assert [r.seq for r in mine] == sorted(due), [r.brief() for r in mine]
    for r in mine:
        assert r.content_type.startswith("application/json"), r.headers
        assert r.headers.get("x-a2a-notification-token") == token, r.headers
    views = await asyncio.to_thread(sdk03, tmp_path, "validate", stdin=json.dumps([r.body.decode() for r in mine]))
    assert [v["kind"] for v in views] == ["task"] * len(mine), views
    assert {(v["id"], v["contextId"]) for v in views} == {(task["id"], task["contextId"])}, views
    assert [v["state"] for v in views] == [V03_STATE[s["status"]["state"]] for _, s in sorted(due.items())], views
    assert views[-1]["state"] == "completed" and views[-1]["artifacts"] == task["artifacts"], (views[-1], task)
    assert views[-1]["history"] == task["history"], (views[-1], task)
    if how == "inline":
        assert [v["statusText"] for v in views[1:4]] == ["step 0", "step 1", "step 2"], views
        assert all(v["artifacts"] == [] for v in views[:-1]), views  # the task as it stood: no answer yet
    else:
        assert all(v["history"][0] == ["user", "I want push notifications"] for v in views), views


# --- 3. Parley's receiving side and an official a2a-sdk 1.x server -----------------------------------------------------


def sdk_push_server_app(url: str):
    """An a2a-sdk 1.x server with push notifications, wired like the SDK's tests/integration/push_notifications
    (InMemoryPushNotificationConfigStore + BasePushNotificationSender), over JSON-RPC. Its agent asks a
    question when a new task's message starts with "ask", else works, adds an artifact and completes."""
    from a2a.helpers import new_task_from_user_message
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import (
        BasePushNotificationSender,
        InMemoryPushNotificationConfigStore,
        InMemoryTaskStore,
        TaskUpdater,
    )
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
    from starlette.applications import Starlette

    class Executor(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task = context.current_task
            if task is None:
                await event_queue.enqueue_event(new_task_from_user_message(context.message))
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            text = context.get_user_input()
            if task is None and text.startswith("ask"):
                await updater.requires_input(updater.new_agent_message([Part(text="Why?")]))
                return
            await updater.start_work()
            await updater.add_artifact([Part(text=f"answer to {text}")], artifact_id="answer", name="answer")
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            raise NotImplementedError

    card = AgentCard(
        name="sdk-push", description="a2a-sdk 1.x server with push notifications", version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="answer", name="answer", description="answers", tags=["test"])])
    notifications = httpx.AsyncClient(timeout=WAIT)
    store = InMemoryPushNotificationConfigStore()
    handler = DefaultRequestHandler(
        agent_executor=Executor(), task_store=InMemoryTaskStore(), agent_card=card, push_config_store=store,
        push_sender=BasePushNotificationSender(httpx_client=notifications, config_store=store))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        await handler.aclose()
        await notifications.aclose()

    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]
    return Starlette(routes=routes, lifespan=lifespan)


@pytest.fixture
def sdk_server() -> Iterator[str]:
    """The a2a-sdk 1.x push-capable server on 127.0.0.1, in a thread; its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = uvicorn.Server(uvicorn.Config(sdk_push_server_app(url), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="sdk-push-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT
    while not server.started:  # bounded start-up wait
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the a2a-sdk test server did not start")
        time.sleep(0.01)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=WAIT)


@pytest.mark.parametrize("how", ["inline", "create"])
async def test_parley_receiver_accepts_sdk1_server_notifications(how: str, sdk_server: str, webhook) -> None:
    """Parley's client registers a webhook with an official a2a-sdk 1.x server ("inline": the
    `taskPushNotificationConfig` of SendMessage; "create": CreateTaskPushNotificationConfig on a task waiting
    for input, then the second turn) and sends a message. The SDK server's notifications (token, no
    signature: docs/push.md says to use `token=` alone) pass `PushVerifier(token=...)` and
    `read_notification`: A2A 1.0 events of that task, ending in `completed`, the answer among them; the same
    requests with another token are refused."""
    hook = webhook()
    token = f"sdk-{how}-{uuid.uuid4().hex[:8]}"
    config = m.TaskPushNotificationConfig(url=hook.url, token=token)
    async with await A2AClient.connect(sdk_server) as client:
        assert client.version == "1.0", client.card
        if how == "inline":
            req = m.SendMessageRequest(message=m.Message(message_id=str(uuid.uuid4()), role=m.Role.USER,
                                                         parts=[m.Part(text="hello")]),
                                       configuration=m.SendMessageConfiguration(task_push_notification_config=config))
            task = await client.transport.call(Operation.SEND, req)
            before = 0
        else:
            first = await client.send("ask me")
            assert isinstance(first, m.Task) and first.status.state is m.TaskState.INPUT_REQUIRED, first
            before = len(hook.received())
            created = await client.transport.call(
                Operation.PUSH_SET, m.TaskPushNotificationConfig(task_id=first.id, url=hook.url, token=token))
            assert created.url == hook.url and created.task_id == first.id, created
            task = await client.send("because", task_id=first.id, context_id=first.context_id)
    assert isinstance(task, m.Task) and task.status.state is m.TaskState.COMPLETED, task
    assert before == 0, "the SDK server sent notifications before any webhook was registered"

    def done(got: list) -> bool:  # the SDK sends its notifications beside the request: wait for `completed`
        return any(b'"TASK_STATE_COMPLETED"' in r.body for r in got)

    got = await wait_for(hook, done, "the SDK server's `completed` notification")
    verifier = PushVerifier(token=token)
    wrong = PushVerifier(token=token + "-not")
    notes = []
    for r in got:
        assert r.headers.get("x-a2a-notification-token") == token, r.headers
        note = await verifier.verify(r.headers, r.body)
        assert note.version == "1.0" and note.task_id == task.id and note.event_id is None, note
        again = read_notification(r.body, r.content_type)
        assert (again.task_id, again.version, type(again.event)) == (note.task_id, note.version, type(note.event))
        with pytest.raises(PushVerificationError):
            await wrong.verify(r.headers, r.body)
        notes.append(note)
    # What the SDK sent, read by the SDK itself, and by Parley: the same kind of event, the same state.
    for r, note in zip(got, notes, strict=True):
        sdk_view = json_format.ParseDict(r.json(), a2a_pb2.StreamResponse())
        kind = sdk_view.WhichOneof("payload")
        assert kind == {m.Task: "task", m.TaskStatusUpdateEvent: "status_update",
                        m.TaskArtifactUpdateEvent: "artifact_update", m.Message: "message"}[type(note.event)], r.body
        if kind == "status_update":
            assert a2a_pb2.TaskState.Name(sdk_view.status_update.status.state) == "TASK_STATE_" + \
                note.event.status.state.name, (r.body, note.event)
    states = [n.event.status.state for n in notes if isinstance(n.event, m.TaskStatusUpdateEvent)]
    assert states and states[-1] is m.TaskState.COMPLETED, states
    answers = [p.text for n in notes if isinstance(n.event, m.TaskArtifactUpdateEvent) for p in n.event.artifact.parts]
    answers += [p.text for n in notes if isinstance(n.event, m.Task) for a in n.event.artifacts or [] for p in a.parts]
    assert f"answer to {'hello' if how == 'inline' else 'because'}" in answers, [r.body for r in got]
    await verifier.aclose()
    await wrong.aclose()
