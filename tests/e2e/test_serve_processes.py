"""`parley serve` as real processes: crash and resume, one process per SQLite file, `--app` with flags.

Every server here is a `parley serve` subprocess on 127.0.0.1 (a free port), ready once it
answers `GET /healthz` (a bounded wait), stopped with SIGTERM or killed with SIGKILL, and
always cleaned up by the `launch` fixture. Clients talk to it over HTTP (Parley's
`A2AClient`, raw JSON-RPC through httpx) or run the `parley` CLI as a subprocess. The
agents come from tests/e2e/apps/ (on the servers' PYTHONPATH): `resumable.py` and `tuned.py`.

1. Resuming from a checkpoint loses nothing (docs/operations.md, "Storage and restarts": a
   resumed task's answer is the one an uninterrupted run produces). Twenty tasks stream 40
   pieces each, checkpointing every 3 to 7 pieces; the server is SIGKILLed once every task
   has produced part of its answer (at several progress points, once or twice), restarted on
   the same --db, and every task must complete with exactly one artifact whose text is the
   uninterrupted answer, no piece missing, none twice. The same when the only checkpoint was
   taken before any text.
2. One process per SQLite file (docs/operations.md; docs/architecture.md, "Leases, the bus,
   several engines"): a second `parley serve` on the same --db exits 1 with one `error:` line
   naming the file and the pid of the process that holds it; the first server and its running
   task are untouched; after the first stops (SIGTERM) or dies (SIGKILL) the file can be served
   again and holds the first server's tasks.
3. `parley serve --app module:app` keeps the app's own `Parley(settings=...)` and applies only
   the flags it is given (src/parley/settings.py, `Settings.merged`; docs/operations.md,
   "Starting the server"): max_body_bytes and public_url from the app; --db, --memory,
   --public-url, --max-body-bytes and --grpc-port on top; --grpc-port also for the built-in
   agents and for --config (flag, or `[server] grpc_port` in the file).

Waits are bounded (WAIT) and only detect failures; nothing here is a timing assertion.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

APPS = Path(__file__).resolve().parent / "apps"
if str(APPS) not in sys.path:
    sys.path.append(str(APPS))

import resumable  # tests/e2e/apps: the agents the servers load (PIECES, full_answer: the oracle of test 1)
import tuned

from parley.client import A2AClient
from parley.protocol import models as m
from parley.protocol.states import is_terminal
from parley.tasks.engine import RESTART_MESSAGE, RESUME_MESSAGE
from support import PARLEY, free_port, stopped_at_end
from support import ServeProcess as Server  # also the `parley serve` process of the other e2e tests

WAIT = 30.0  # upper bound of one observable step (a server start, a task finishing); a failure detector only
S = m.TaskState


def server_env(**extra: str) -> dict[str, str]:
    """The environment of every `parley` subprocess: the test apps importable, plain output."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "250"}
    env["PYTHONPATH"] = os.pathsep.join([str(APPS), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(extra)
    return env


def other_port(*taken: int) -> int:
    port = free_port()
    while port in taken:
        port = free_port()
    return port


Launch = Callable[..., Server]


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Launch]:
    """`launch(name, *args, port=None, port_flag=True, cwd=tmp_path, env={})`: a ready `parley serve`."""
    with stopped_at_end(lambda srv: srv.close()) as started:
        def start(name: str, *args: str, port: int | None = None, port_flag: bool = True, cwd: Path | None = None,
                  env: dict[str, str] | None = None) -> Server:
            srv = Server(name, list(args), cwd=cwd or tmp_path, port=port, port_flag=port_flag,
                         env=server_env(**(env or {})), wait=WAIT)
            started.append(srv)
            return srv.wait_ready()

        yield start


def run_parley(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PARLEY, *args], cwd=cwd, env=server_env(), capture_output=True, text=True,
                          timeout=WAIT, check=False)


def rpc(url: str, method: str, params: dict[str, Any]) -> httpx.Response:
    """One A2A 1.0 JSON-RPC request."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=WAIT)


def rpc_result(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    resp = rpc(url, method, params)
    assert resp.status_code == 200, (resp.status_code, resp.text)
    data = resp.json()
    assert "result" in data, data
    return data["result"]


def send_params(text: str, *, return_immediately: bool = False) -> dict[str, Any]:
    return {"message": {"messageId": os.urandom(8).hex(), "role": "ROLE_USER", "parts": [{"text": text}]},
            "configuration": {"returnImmediately": return_immediately}}


def task_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"])


def card_urls(url: str) -> list[tuple[str, str]]:
    """(binding, url) of every interface of the A2A 1.0 card at `url`."""
    resp = httpx.get(url + "/.well-known/agent-card.json", headers={"A2A-Version": "1.0"}, timeout=WAIT)
    assert resp.status_code == 200, resp.text
    return [(i["protocolBinding"], i["url"]) for i in resp.json()["supportedInterfaces"]]


# --- a task's log, as a client that replays it sees it ----------------------------------------------------------------


class Replay:
    """The events of a task's stream folded the way a client folds them (append or replace per artifact id)."""

    def __init__(self) -> None:
        self.events: list[m.StreamEvent] = []
        self.artifacts: dict[str, str] = {}
        self.state: S | None = None

    def add(self, ev: m.StreamEvent) -> None:
        self.events.append(ev)
        if isinstance(ev, m.Task):
            self.state = ev.status.state
            self.artifacts = {a.artifact_id: "".join(p.text or "" for p in a.parts) for a in ev.artifacts or []}
        elif isinstance(ev, m.TaskStatusUpdateEvent):
            self.state = ev.status.state
        elif isinstance(ev, m.TaskArtifactUpdateEvent):
            text = "".join(p.text or "" for p in ev.artifact.parts)
            aid = ev.artifact.artifact_id
            self.artifacts[aid] = self.artifacts.get(aid, "") + text if ev.append else text

    @property
    def pieces(self) -> int:
        return sum(text.count(" ") for text in self.artifacts.values())

    @property
    def terminal(self) -> bool:
        return self.state is not None and is_terminal(self.state)

    def terminal_events(self) -> list[int]:
        return [i for i, ev in enumerate(self.events)
                if isinstance(ev, (m.Task, m.TaskStatusUpdateEvent)) and is_terminal(ev.status.state)]


async def replay(client: A2AClient, task_id: str, *, on_event: Callable[[Replay], None] | None = None) -> Replay:
    """The task's whole log (SubscribeToTask with Last-Event-ID 0), followed live until the task is terminal."""
    log = Replay()
    async for ev in client.resubscribe(task_id, last_event_id="0"):
        log.add(ev)
        if on_event is not None:
            on_event(log)
    return log


# --- 1. resuming from a checkpoint loses nothing ----------------------------------------------------------------------

N_TASKS = 20
RESUMABLE = ("--app", "resumable:app")
# tag -> checkpoint interval (3..7 pieces): the kills land at different points between two checkpoints.
JOBS = {f"t{j:02d}": 3 + j % 5 for j in range(N_TASKS)}
# Pieces every task must have produced before a SIGKILL (two numbers: killed again while resuming). From 8 on,
# every task is past its second checkpoint; before it see test_resume_from_the_checkpoint_before_any_text.
KILLS = {"early": (8,), "middle": (17,), "late": (29,), "twice": (10, 26)}
HOLD_SLACK = 3  # pieces a task may produce past the kill point before it is held (see crash_and_resume)


def artifact_texts(task: m.Task) -> list[str]:
    return ["".join(p.text or "" for p in a.parts) for a in task.artifacts or []]


def describe(text: str, tag: str) -> str:
    """What is wrong with an answer, by piece index: missing, written twice, out of order."""
    indexes = [int(word.rpartition("-w")[2]) for word in text.split() if word.startswith(f"{tag}-w")]
    counts = collections.Counter(indexes)

    def spans(found: list[int]) -> str:
        runs: list[list[int]] = []
        for i in sorted(found):
            if runs and i == runs[-1][1] + 1:
                runs[-1][1] = i
            else:
                runs.append([i, i])
        return ",".join(f"w{a}" if a == b else f"w{a}..w{b}" for a, b in runs) or "none"

    return (f"{len(indexes)} pieces; missing {spans([i for i in range(resumable.PIECES) if i not in counts])}; "
            f"twice {spans([i for i, n in counts.items() if n > 1])}; in order: {indexes == sorted(indexes)}")


async def kill_when_all_reach(url: str, pieces: int, kill: Callable[[], None], *, jobs: dict[str, int] | None = None,
                              ids: dict[str, str] | None = None) -> tuple[dict[str, str], dict[str, int]]:
    """Follow the `pieces` tasks `ids` (or first create one per job, tag -> checkpoint interval, with
    SendMessage returnImmediately) and SIGKILL the server as soon as each has produced `pieces` pieces or ended.

    Returns (tag -> task id, tag -> pieces seen at the kill; -1: it had ended)."""
    tags = list(jobs or ids or {})
    progress = {tag: 0 for tag in tags}
    ended: set[str] = set()
    errors: list[str] = []
    enough = asyncio.Event()

    def seen(tag: str, log: Replay) -> None:
        progress[tag] = log.pieces
        if log.terminal:
            ended.add(tag)
        if all(t in ended or progress[t] >= pieces for t in tags):
            enough.set()

    async with await A2AClient.connect(url + "/a2a/pieces") as client:
        if jobs is not None:
            created = await asyncio.gather(*(client.send(f"{tag} {every}", blocking=False)
                                             for tag, every in jobs.items()))
            assert all(isinstance(t, m.Task) for t in created), created
            ids = {tag: t.id for tag, t in zip(jobs, created, strict=True)}
        assert ids is not None

        async def follow(tag: str, task_id: str) -> None:
            try:
                await replay(client, task_id, on_event=lambda log: seen(tag, log))
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(f"{tag}: {exc!r}")
                enough.set()

        watchers = [asyncio.create_task(follow(tag, task_id)) for tag, task_id in ids.items()]
        try:
            try:
                await asyncio.wait_for(enough.wait(), WAIT)
            except TimeoutError:
                raise AssertionError(f"the tasks did not reach {pieces} pieces within {WAIT}s: {progress}") from None
            assert not errors, errors
            at_kill = {tag: -1 if tag in ended else n for tag, n in progress.items()}
            kill()
        finally:
            for w in watchers:
                w.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
    return ids, at_kill


async def final_states(url: str, ids: dict[str, str]) -> tuple[dict[str, tuple[Replay, m.Task]], m.Task]:
    """Every task's whole log (waiting until it ends) and snapshot; plus an uninterrupted control run."""
    async with await A2AClient.connect(url + "/a2a/pieces") as client:
        async def one(task_id: str) -> tuple[Replay, m.Task]:
            log = await replay(client, task_id)
            return log, await client.get(task_id)

        results = await asyncio.wait_for(asyncio.gather(*(one(task_id) for task_id in ids.values())), WAIT)
        control = await asyncio.wait_for(client.send("control 5"), WAIT)
    assert isinstance(control, m.Task)
    return dict(zip(ids, results, strict=True)), control


def crash_and_resume(jobs: dict[str, int], kill_points: tuple[int, ...], db: Path, launch: Launch) -> None:
    """Start a `pieces` task per job on `parley serve --db`, SIGKILL the server at each kill point and restart
    it on the same file and port; then every task must end as an uninterrupted run would have.

    A run that will be killed holds its tasks a few pieces past the kill point (RESUMABLE_HOLD_AT), so the kill
    lands mid-answer however slowly the machine lets the test watch, and may still race a task's write."""
    def hold(n: int) -> dict[str, str]:
        return {"RESUMABLE_HOLD_AT": str(kill_points[n] + HOLD_SLACK)} if n < len(kill_points) else {}

    server = launch("run0", *RESUMABLE, "--db", str(db), env=hold(0))
    port = server.port
    ids: dict[str, str] | None = None
    at_kill = []
    for n, pieces in enumerate(kill_points, start=1):
        ids, progress = asyncio.run(kill_when_all_reach(server.url, pieces, server.kill,
                                                        jobs=None if ids else jobs, ids=ids))
        at_kill.append(progress)
        server = launch(f"run{n}", *RESUMABLE, "--db", str(db), port=port, env=hold(n))  # same file and port

    assert ids is not None
    results, control = asyncio.run(final_states(server.url, ids))

    assert (control.status.state, artifact_texts(control)) == (S.COMPLETED, [resumable.full_answer("control")])
    problems, resumed = [], []
    for tag, (log, task) in results.items():
        expected = resumable.full_answer(tag)
        if RESUME_MESSAGE in [msg.text() for msg in task.history or []]:
            resumed.append(tag)
        texts = artifact_texts(task)
        if task.status.state is not S.COMPLETED:
            why = task.status.message.text() if task.status.message else ""
            problems.append(f"{tag}: {task.status.state.value} {why!r}")
        elif len(texts) != 1:
            problems.append(f"{tag}: {len(texts)} artifacts ({' | '.join(describe(t, tag) for t in texts)}); "
                            f"together: {describe(''.join(texts), tag)}")
        elif texts[0] != expected:
            problems.append(f"{tag}: wrong answer: {describe(texts[0], tag)}")
        # A client replaying the task's log (SubscribeToTask, Last-Event-ID 0) folds the same answer, and the
        # log ends with its one terminal event.
        elif list(log.artifacts.values()) != [expected]:
            problems.append(f"{tag}: the replayed log folds to {[describe(t, tag) for t in log.artifacts.values()]}")
        elif log.terminal_events() != [len(log.events) - 1]:
            problems.append(f"{tag}: terminal events at {log.terminal_events()} of {len(log.events)}")
    assert not problems, (f"{len(problems)} of {len(jobs)} tasks (resumed: {len(resumed)}; pieces seen at each "
                          f"kill: {at_kill}):\n" + "\n".join(problems))
    # The kills landed mid-answer: most tasks were resumed (a task may have ended just before a kill).
    assert len(resumed) >= len(jobs) // 2, (resumed, at_kill)


@pytest.mark.parametrize("kill_points", list(KILLS.values()), ids=list(KILLS))
def test_resume_after_sigkill_loses_nothing(kill_points: tuple[int, ...], tmp_path: Path, launch: Launch) -> None:
    """A2A tasks resumed from their checkpoints after `parley serve` is SIGKILLed mid-answer (once, or again
    while resuming) end `completed` with exactly one artifact whose text is the uninterrupted answer
    (docs/operations.md, "Storage and restarts"; docs/architecture.md, "Running an agent": the engine saves
    the held text with each checkpoint and undoes text written after it). The regression this catches:
    resumed tasks lost the chunk held at the checkpoint and split their answer across two artifacts."""
    crash_and_resume(JOBS, kill_points, tmp_path / "tasks.db", launch)


def test_resume_from_the_checkpoint_before_any_text(tmp_path: Path, launch: Launch) -> None:
    """The same promise (docs/operations.md, "Storage and restarts": the final artifact is the one an
    uninterrupted run produces) when the only checkpoint an agent left was taken before its first piece of
    text: each task checkpoints {"next": 0} and then never again (every 40 pieces); the server is SIGKILLed
    once every task has streamed a few pieces. The resumed run starts over from piece 0, so the engine must
    undo the text written after the checkpoint, as it does for later checkpoints."""
    jobs = {f"s{j:02d}": resumable.PIECES for j in range(10)}
    crash_and_resume(jobs, (3,), tmp_path / "tasks.db", launch)


# --- 2. one process per SQLite file -----------------------------------------------------------------------------------


def wait_for_task(url: str, task_id: str, accept: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """GetTask until `accept(task)` (bounded polling)."""
    deadline = time.monotonic() + WAIT
    while True:
        task = rpc_result(url, "GetTask", {"id": task_id})
        if accept(task):
            return task
        if time.monotonic() > deadline:
            raise AssertionError(f"task {task_id} never got there: {task}")
        time.sleep(0.02)


def status_text(task: dict[str, Any]) -> str:
    msg = task["status"].get("message")
    return "".join(p.get("text", "") for p in msg["parts"]) if msg else ""


def serve_expecting_refusal(args: list[str], *, port: int, cwd: Path,
                            damage: Callable[[], Any]) -> tuple[int, str, str]:
    """Run a `parley serve` that must exit at once: (exit status, stdout, stderr). If it starts serving
    instead (or is still running after WAIT), it is killed and the test fails, showing `damage()`."""
    proc = subprocess.Popen([*PARLEY, "serve", *args, "--port", str(port), "--log-level", "warning"], cwd=cwd,
                            env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + WAIT
        while proc.poll() is None and time.monotonic() < deadline:  # bounded: it exits, or it answers /healthz
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=WAIT)
            raise AssertionError(f"a second parley serve on the same --db started instead of exiting:\n{out}{err}\n"
                                 f"what the first server's running task looks like now: {damage()}")
        out, err = proc.communicate(timeout=WAIT)
        assert "Traceback" not in out + err, out + err
        return proc.returncode, out, err
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(WAIT)


@pytest.mark.parametrize("stop", ["sigterm", "sigkill"])
def test_second_server_on_the_same_db_is_refused(stop: str, tmp_path: Path, launch: Launch) -> None:
    """One process per SQLite file (docs/operations.md, "Storage and restarts"): a second `parley serve`
    on the same --db exits 1 with one `error:` line naming the file and the holder's pid, without touching
    the first server or its running task (whose log ends with its terminal state); once the first has
    stopped (SIGTERM) or died (SIGKILL: the lock dies with the process), the file is served again, tasks intact."""
    db = tmp_path / "shared.db"
    first = launch("first", *RESUMABLE, "--db", str(db))
    done = rpc_result(first.url + "/a2a/opener", "SendMessage", send_params("nothing"))["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    running = rpc_result(first.url + "/a2a/gated", "SendMessage", send_params("g1", return_immediately=True))["task"]
    gated = first.url + "/a2a/gated"
    wait_for_task(gated, running["id"], lambda t: status_text(t) == "waiting at gate g1")

    rc, stdout, stderr = serve_expecting_refusal(
        [*RESUMABLE, "--db", str(db)], port=other_port(first.port), cwd=tmp_path,
        damage=lambda: rpc_result(gated, "GetTask", {"id": running["id"]}))
    assert rc == 1, (rc, stdout, stderr)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error:"), lines[0]
    assert str(db) in lines[0], lines[0]
    assert f"pid {first.proc.pid}" in lines[0], lines[0]

    # The first server keeps serving; its running task still waits at its gate, untouched.
    assert first.proc.poll() is None, first.output()
    assert httpx.get(first.url + "/healthz", timeout=WAIT).status_code == 200
    still = rpc_result(gated, "GetTask", {"id": running["id"]})
    assert (still["status"]["state"], status_text(still)) == ("TASK_STATE_WORKING", "waiting at gate g1"), still
    opened = rpc_result(first.url + "/a2a/opener", "SendMessage", send_params("g1"))["task"]
    assert task_text(opened) == "opened g1"
    final = wait_for_task(gated, running["id"], lambda t: t["status"]["state"] != "TASK_STATE_WORKING")
    assert final["status"]["state"] == "TASK_STATE_COMPLETED", final
    assert task_text(final) == "released g1"

    async def whole_log(url: str) -> Replay:
        async with await A2AClient.connect(url) as client:
            return await asyncio.wait_for(replay(client, running["id"]), WAIT)

    def check_log(log: Replay) -> None:
        states = [ev.status.state for ev in log.events if isinstance(ev, m.TaskStatusUpdateEvent)]
        assert states[-1] is S.COMPLETED and S.FAILED not in states, states
        assert log.terminal_events() == [len(log.events) - 1], log.events  # nothing after the terminal state
        texts = [ev.status.message.text() for ev in log.events
                 if isinstance(ev, m.TaskStatusUpdateEvent) and ev.status.message is not None]
        assert RESTART_MESSAGE not in texts and RESUME_MESSAGE not in texts, texts

    check_log(asyncio.run(whole_log(gated)))

    if stop == "sigterm":
        assert first.terminate() in (0, -signal.SIGTERM), first.output()
    else:
        first.kill()
    third = launch("third", *RESUMABLE, "--db", str(db), port=other_port(first.port))
    assert rpc_result(third.url + "/a2a/gated", "GetTask", {"id": running["id"]}) == final
    assert rpc_result(third.url + "/a2a/opener", "GetTask", {"id": done["id"]}) == done
    listed = rpc_result(third.url + "/a2a/gated", "ListTasks", {})
    assert [t["id"] for t in listed["tasks"]] == [running["id"]], listed
    check_log(asyncio.run(whole_log(third.url + "/a2a/gated")))
    assert "Traceback" not in first.output() + third.output()


# --- 3. `parley serve --app` keeps the app's settings and honours the flags -------------------------------------------

TUNED = ("--app", "tuned:app")
SMALL = "y" * 1000  # a request body of about 1.2 kB: under the app's 2048-byte limit
LARGE = "x" * 3000  # over it (and under the 8 MiB default: only the app's own setting refuses it)


def body_size(text: str) -> int:
    return len(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send_params(text)}))


def assert_body_limit(url: str, limit: int) -> None:
    """A body over `limit` gets HTTP 413; one under it is served."""
    big = "x" * (limit + 200)
    assert body_size(big) > limit
    resp = rpc(url, "SendMessage", send_params(big))
    assert resp.status_code == 413, (resp.status_code, resp.text[:300])
    assert body_size(SMALL) < limit
    task = rpc_result(url, "SendMessage", send_params(SMALL))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and task_text(task) == SMALL.upper()


def test_app_alone_keeps_its_settings(tmp_path: Path, launch: Launch) -> None:
    """`parley serve --app tuned:app` serves with the app's own Settings: max_body_bytes=2048 (a larger
    body gets HTTP 413) and public_url (every interface URL of the card); unset, db is .parley/parley.db."""
    srv = launch("tuned", *TUNED)
    shout = srv.url + "/a2a/shout"
    assert_body_limit(shout, tuned.MAX_BODY_BYTES)
    bindings = ["JSONRPC", "JSONRPC", "HTTP+JSON", "HTTP+JSON"]  # 1.0 and 0.3 each; no gRPC without a port
    assert card_urls(shout) == [(b, tuned.PUBLIC_URL + "/a2a/shout") for b in bindings]
    assert (tmp_path / ".parley" / "parley.db").exists()


def test_app_with_db_keeps_tasks_across_a_restart(tmp_path: Path, launch: Launch) -> None:
    """`parley serve --app tuned:app --db FILE`: tasks survive a restart (GetTask finds the task completed)
    and the app's own max_body_bytes still applies beside the flag."""
    db = tmp_path / "tuned.db"
    first = launch("first", *TUNED, "--db", str(db))
    task = rpc_result(first.url + "/a2a/shout", "SendMessage", send_params("hello"))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and task_text(task) == "HELLO"
    assert first.terminate() in (0, -signal.SIGTERM), first.output()
    assert db.exists() and not (tmp_path / ".parley").exists()
    second = launch("second", *TUNED, "--db", str(db))
    again = rpc_result(second.url + "/a2a/shout", "GetTask", {"id": task["id"]})
    assert again["status"]["state"] == "TASK_STATE_COMPLETED" and task_text(again) == "HELLO", again
    assert_body_limit(second.url + "/a2a/shout", tuned.MAX_BODY_BYTES)


def test_app_with_memory_loses_tasks_at_a_restart(tmp_path: Path, launch: Launch) -> None:
    """`parley serve --app tuned:app --memory`: no database file, and after a restart GetTask answers
    TaskNotFound (-32001); `--max-body-bytes` replaces the app's limit."""
    first = launch("first", *TUNED, "--memory", "--max-body-bytes", "4096")
    shout = first.url + "/a2a/shout"
    task = rpc_result(shout, "SendMessage", send_params(LARGE))["task"]  # over the app's 2048, under the flag's 4096
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and task_text(task) == LARGE.upper()
    assert_body_limit(shout, 4096)
    assert rpc_result(shout, "GetTask", {"id": task["id"]})["status"]["state"] == "TASK_STATE_COMPLETED"
    assert first.terminate() in (0, -signal.SIGTERM), first.output()
    second = launch("second", *TUNED, "--memory")
    resp = rpc(second.url + "/a2a/shout", "GetTask", {"id": task["id"]})
    assert resp.json().get("error", {}).get("code") == -32001, resp.text
    assert not (tmp_path / ".parley").exists() and list(tmp_path.glob("*.db")) == []


def test_public_url_flag_wins_over_the_apps(tmp_path: Path, launch: Launch) -> None:
    """`parley serve --app tuned:app --public-url URL`: the card's interface URLs use the flag's URL, and the
    app's max_body_bytes still applies."""
    public = "https://proxy.example.test/agents"
    srv = launch("public", *TUNED, "--memory", "--public-url", public)
    shout = srv.url + "/a2a/shout"
    assert {u for _, u in card_urls(shout)} == {public + "/a2a/shout"}
    assert {u for _, u in card_urls(srv.url)} == {public + "/"}
    assert_body_limit(shout, tuned.MAX_BODY_BYTES)


def send_over_grpc(url: str, text: str, cwd: Path, code: int = 0) -> str:
    """`parley send --binding grpc URL TEXT` must exit `code` (0; 4 when the task waits for input); its output."""
    proc = run_parley("send", "--binding", "grpc", url, text, cwd=cwd)
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc.stdout


def test_app_with_grpc_port(tmp_path: Path, launch: Launch) -> None:
    """`parley serve --app tuned:app --grpc-port N`: a gRPC client reaches the app's agent (`parley send
    --binding grpc`), and the card, still built on the app's public_url, lists the gRPC interface."""
    port = free_port()
    grpc_port = other_port(port)
    public = f"http://localhost:{port}"  # the app's public_url: reachable, and not the address the client used
    srv = launch("grpc", *TUNED, "--memory", "--grpc-port", str(grpc_port), port=port,
                 env={"TUNED_PUBLIC_URL": public})
    shout = srv.url + "/a2a/shout"
    assert ("GRPC", f"localhost:{grpc_port}") in card_urls(shout)
    assert ("JSONRPC", public + "/a2a/shout") in card_urls(shout)
    out = send_over_grpc(shout, "hi", tmp_path)
    assert "completed" in out and "HI" in out, out


def test_builtin_agents_with_grpc_port(tmp_path: Path, launch: Launch) -> None:
    """`parley serve --grpc-port N` (built-in agents): `parley send --binding grpc` reaches echo."""
    port = free_port()
    srv = launch("builtin", "--grpc-port", str(other_port(port)), port=port)
    out = send_over_grpc(srv.url, "hello over grpc", tmp_path)
    assert "completed" in out and "hello over grpc" in out, out


@pytest.mark.parametrize("where", ["flag", "file"])
def test_config_with_grpc_port(where: str, tmp_path: Path, launch: Launch) -> None:
    """`parley serve --config FILE --grpc-port N`, and `[server] grpc_port = N` in the file: the config's
    agents (here `builtin_agents = true`) answer over gRPC; the file's port is the HTTP port."""
    port = free_port()
    grpc_port = other_port(port)
    config = tmp_path / "parley.toml"
    lines = ["[server]", "builtin_agents = true", 'db = "memory"', f"port = {port}"]
    if where == "file":
        lines.append(f"grpc_port = {grpc_port}")
    config.write_text("\n".join(lines) + "\n")
    flags = ["--grpc-port", str(grpc_port)] if where == "flag" else []
    srv = launch("config", "--config", str(config), *flags, port=port, port_flag=False)
    assert ("GRPC", f"127.0.0.1:{grpc_port}") in card_urls(srv.url + "/a2a/echo")
    out = send_over_grpc(srv.url + "/a2a/echo", "hello from the config", tmp_path)
    assert "completed" in out and "hello from the config" in out, out
    out = send_over_grpc(srv.url + "/a2a/interviewer", "a topic", tmp_path, code=4)
    assert "input-required" in out, out
