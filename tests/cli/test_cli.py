"""The `parley` console script, run as a real subprocess against live servers."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from parley.agents.base import AgentOutput, RunContext
from parley.app import Parley
from parley.tasks.memory_store import MemoryTaskStore

_SCRIPT = Path(sys.executable).with_name("parley")
PARLEY = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "parley.cli"]
ENV = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"}
TIMEOUT = 60  # a safety net against hangs, not an assertion on speed


def parley(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PARLEY, *args], check=False, input=stdin, capture_output=True, text=True, env=ENV, timeout=TIMEOUT)


def ok(*args: str, stdin: str | None = None, code: int = 0) -> str:
    """stdout of `parley ARGS`, which must exit `code` (0; `parley send`: 4 for a task waiting for input)."""
    proc = parley(*args, stdin=stdin)
    assert proc.returncode == code, f"parley {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    return proc.stdout


def ok_json(*args: str, code: int = 0) -> Any:
    return json.loads(ok(*args, "--json", code=code))


def assert_one_error_line(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 1, exactly one line on stderr starting with `error:`, no traceback anywhere."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error:"), lines[0]
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def artifact_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"])


# --- a controllable agent for live watch and cancel ------------------------------------------------------------


class Gate:
    def __init__(self) -> None:
        self.started = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.event: asyncio.Event | None = None


class Gates:
    """Agents park on a gate (in the server's loop) until the test opens it from its own thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gates: dict[str, Gate] = {}

    def get(self, key: str) -> Gate:
        with self._lock:
            return self._gates.setdefault(key, Gate())

    async def wait(self, key: str) -> None:
        gate = self.get(key)
        gate.loop, gate.event = asyncio.get_running_loop(), asyncio.Event()
        gate.started.set()
        await gate.event.wait()

    def wait_started(self, key: str) -> None:
        assert self.get(key).started.wait(TIMEOUT), f"the agent never reached gate {key!r}"

    def open(self, key: str) -> None:
        self.wait_started(key)
        gate = self.get(key)
        assert gate.loop is not None and gate.event is not None
        gate.loop.call_soon_threadsafe(gate.event.set)

    def open_all(self) -> None:
        with self._lock:
            gates = list(self._gates.values())
        for gate in gates:
            if gate.started.is_set() and gate.loop is not None and gate.event is not None:
                try:
                    gate.loop.call_soon_threadsafe(gate.event.set)
                except RuntimeError:  # the server loop is already closed
                    pass


@pytest.fixture
def gated(serve: Any) -> Iterator[tuple[str, Gates]]:
    """A live server whose default agent `gated` waits at a gate named by the message text."""
    gates = Gates()
    app = Parley(store=MemoryTaskStore())

    @app.agent(id="gated", description="Waits for the test to open its gate")
    async def gated_agent(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        await gates.wait(ctx.text)
        yield f"released {ctx.text}"

    srv = serve(app)
    yield srv.url, gates
    gates.open_all()


class LineReader:
    """Reads a subprocess's stdout line by line with a bounded wait (no sleeps)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.thread = threading.Thread(target=self._pump, args=(proc,), daemon=True)
        self.thread.start()

    def _pump(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def next_line(self) -> str | None:
        return self.lines.get(timeout=TIMEOUT)

    def rest(self) -> str:
        self.thread.join(TIMEOUT)
        out = []
        while not self.lines.empty():
            line = self.lines.get_nowait()
            if line is not None:
                out.append(line)
        return "".join(out)


# --- card, send, chat ------------------------------------------------------------------------------------------------


def test_card(server: Any) -> None:
    out = ok("card", server.url)
    assert out.splitlines()[0].startswith("Echo ")
    assert "JSONRPC" in out and "1.0" in out and "0.3" in out
    assert "streaming=True" in out
    assert "skill echo:" in out
    card = ok_json("card", server.url)
    assert card["name"] == "Echo"
    assert {(i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]} >= {
        ("JSONRPC", "1.0"), ("JSONRPC", "0.3")}
    interviewer = ok_json("card", server.url + "/a2a/interviewer")
    assert interviewer["name"] == "Interviewer"


def test_send_plain(server: Any) -> None:
    out = ok("send", server.url, "hello there brave new world")
    assert "completed" in out
    assert "response: hello there brave new world" in out
    task = ok_json("send", server.url, "one two three four five")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert artifact_text(task) == "one two three four five"
    rest = ok_json("send", "--binding", "rest", server.url, "over http json")
    assert rest["status"]["state"] == "TASK_STATE_COMPLETED" and artifact_text(rest) == "over http json"


def test_send_stream(server: Any) -> None:
    out = ok("send", "--stream", server.url, "hello there brave new world")
    lines = out.splitlines()
    assert lines[0].startswith("task ") and "(submitted)" in lines[0]
    assert "[working]" in lines
    assert "hello there brave new world" in lines
    assert lines[-1] == "[completed]"
    assert lines.index("[working]") < lines.index("hello there brave new world") < lines.index("[completed]")
    events = [json.loads(chunk) for chunk in _json_documents(ok("send", "--stream", "--json", server.url, "a b c d"))]
    assert "id" in events[0] and events[0]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert events[-1]["status"]["state"] == "TASK_STATE_COMPLETED"
    chunks = [e for e in events if "artifact" in e]
    assert "".join(p["text"] for e in chunks for p in e["artifact"]["parts"]) == "a b c d"
    assert [bool(e.get("lastChunk")) for e in chunks] == [False] * (len(chunks) - 1) + [True]


def _json_documents(text: str) -> Iterator[str]:
    """Split concatenated pretty-printed JSON documents."""
    decoder = json.JSONDecoder()
    i = 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        obj, end = decoder.raw_decode(text, i)
        yield json.dumps(obj)
        i = end


def test_send_with_protocol_0_3(server: Any) -> None:
    out = ok("send", "-V", "0.3", server.url, "zero point three")
    assert "completed" in out and "response: zero point three" in out
    out = ok("send", "-V", "0.3", "--stream", server.url, "streamed in old dialect")
    lines = out.splitlines()
    assert "streamed in old dialect" in lines and lines[-1] == "[completed]"
    task = ok_json("send", "-V", "0.3", server.url, "json too")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and artifact_text(task) == "json too"


def test_send_unsupported_version(server: Any) -> None:
    assert_one_error_line(parley("send", "-V", "2.0", server.url, "hi"), "2.0")


def test_send_task_id_continues_the_interviewer(server: Any) -> None:
    url = server.url + "/a2a/interviewer"
    first = ok_json("send", url, "I want to learn Rust", code=4)  # exit 4: the task waits for input
    assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    question = "".join(p["text"] for p in first["status"]["message"]["parts"])
    assert "Why does that matter to you?" in question
    out = ok("send", url, "it is fast", "--task-id", first["id"])
    assert first["id"] in out and "completed" in out
    assert "it matters because 'it is fast'" in out
    task = ok_json("tasks", "get", url, first["id"])
    assert [h["role"] for h in task["history"]] == ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"]
    # The same, in 0.3.
    first = ok_json("send", "-V", "0.3", url, "gardening", code=4)
    second = ok_json("send", "-V", "0.3", url, "it is calming", "--task-id", first["id"])
    assert second["id"] == first["id"] and second["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "'gardening'" in artifact_text(second) and "'it is calming'" in artifact_text(second)


def test_send_to_a_finished_task_is_an_error(server: Any) -> None:
    task = ok_json("send", server.url, "done")
    assert_one_error_line(parley("send", server.url, "more", "--task-id", task["id"]), "-32004")


def test_chat_with_the_interviewer(server: Any) -> None:
    url = server.url + "/a2a/interviewer"
    out = ok("chat", url, stdin="I want to learn Rust\nbecause it is fast\n")
    assert out.startswith("Interviewer")
    assert "[input-required] You said 'I want to learn Rust'. Why does that matter to you?" in out
    assert "Thank you. You said 'I want to learn Rust', and it matters because 'because it is fast'." in out
    assert "[completed]" in out
    assert out.index("[input-required]") < out.index("Thank you.") < out.index("[completed]")
    task_lines = [line for line in out.replace("you> ", "\n").splitlines() if line.startswith("task ")]
    assert len(task_lines) == 2
    assert task_lines[0].split()[1] == task_lines[1].split()[1]  # both turns on one task
    page = ok_json("tasks", "list", url)
    assert len(page["tasks"]) == 1 and page["tasks"][0]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_chat_ends_on_empty_line_or_eof(server: Any) -> None:
    out = ok("chat", server.url, stdin="hello echo\n\nnot sent\n")
    assert "hello echo" in out and "not sent" not in out.replace("you> ", "")
    assert ok_json("tasks", "list", server.url)["totalSize"] == 1
    ok("chat", server.url, stdin="")


# --- tasks ------------------------------------------------------------------------------------------------------------


def test_tasks_list_and_get(server: Any) -> None:
    ids = [ok_json("send", server.url, f"message {i}")["id"] for i in range(3)]
    asked = ok_json("send", server.url + "/a2a/interviewer", "a topic", code=4)
    page = ok_json("tasks", "list", server.url + "/a2a/echo")
    assert [t["id"] for t in page["tasks"]] == ids[::-1]
    assert page["totalSize"] == 3 and page["nextPageToken"] == ""
    assert [t["id"] for t in ok_json("tasks", "list", server.url)["tasks"]] == [asked["id"], *ids[::-1]]  # every agent
    out = ok("tasks", "list", server.url, "--agent", "echo")
    for task_id in ids:
        assert task_id in out
    assert "3 of 3" in out and asked["id"] not in out
    out = ok("tasks", "list", server.url + "/a2a/echo", "--page-size", "2")
    assert "2 of 3" in out and "--page-token" in out
    token = out.split("--page-token", 1)[1].split()[0]
    rest = ok_json("tasks", "list", server.url, "--agent", "echo", "--page-size", "2", "--page-token", token)
    assert [t["id"] for t in rest["tasks"]] == [ids[0]]
    assert ok_json("tasks", "list", server.url, "--state", "completed")["totalSize"] == 3
    assert ok_json("tasks", "list", server.url, "--state", "working")["tasks"] == []
    ir = ok_json("tasks", "list", server.url + "/a2a/interviewer", "--state", "input-required")
    assert [t["id"] for t in ir["tasks"]] == [asked["id"]]
    out = ok("tasks", "get", server.url, ids[1])
    assert ids[1] in out and "completed" in out and "response: message 1" in out
    task = ok_json("tasks", "get", server.url, ids[1], "--history-length", "0")
    assert task["id"] == ids[1] and "history" not in task
    v03 = ok_json("tasks", "get", "-V", "0.3", server.url, ids[1])
    assert v03["id"] == ids[1] and artifact_text(v03) == "message 1"


def test_tasks_cancel(server: Any) -> None:
    url = server.url + "/a2a/interviewer"
    task = ok_json("send", url, "cancel me", code=4)
    out = ok("tasks", "cancel", url, task["id"])
    assert task["id"] in out and "canceled" in out
    assert ok_json("tasks", "get", url, task["id"])["status"]["state"] == "TASK_STATE_CANCELED"
    assert_one_error_line(parley("tasks", "cancel", url, task["id"]), "-32002")


def test_tasks_cancel_a_running_task(gated: tuple[str, Gates]) -> None:
    url, gates = gated
    task = ok_json("send", url, "slow job", "--no-wait")
    gates.wait_started("slow job")
    cancelled = ok_json("tasks", "cancel", url, task["id"])
    assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
    assert "artifacts" not in ok_json("tasks", "get", url, task["id"])


def test_tasks_watch_a_live_task(gated: tuple[str, Gates]) -> None:
    url, gates = gated
    task = ok_json("send", url, "watched", "--no-wait")
    gates.wait_started("watched")
    proc = subprocess.Popen([*PARLEY, "tasks", "watch", url, task["id"]], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        reader = LineReader(proc)
        first = reader.next_line()
        assert first is not None and first.startswith(f"task {task['id']} (working)")
        gates.open("watched")  # the watcher is subscribed: let the agent finish
        rest = reader.rest()
        assert proc.wait(TIMEOUT) == 0
        assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = rest.splitlines()
    assert "released watched" in lines and lines[-1] == "[completed]"


def test_tasks_watch_follows_an_interrupted_task_to_its_end(server: Any) -> None:
    """A2A 1.0 section 3.1.6: a subscription stays open through input-required until the task finishes."""
    url = server.url + "/a2a/interviewer"
    task = ok_json("send", url, "a question", code=4)
    watch = subprocess.Popen([*PARLEY, "tasks", "watch", url, task["id"]], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        assert watch.stdout is not None
        first = watch.stdout.readline()  # the snapshot: the watch is subscribed
        assert first.startswith(f"task {task['id']} (input-required)"), first
        ok("send", url, "because it is fun", "--task-id", task["id"], "--context-id", task["contextId"])
        rest, err = watch.communicate(timeout=TIMEOUT)
    finally:
        watch.kill()
    assert watch.returncode == 0, err
    assert "[working]" in rest and "[completed]" in rest
    assert "because it is fun" in rest  # the answer the interviewer gave, streamed to the watcher


def test_tasks_watch_a_finished_task_is_an_error(server: Any) -> None:
    task = ok_json("send", server.url, "finished")
    assert_one_error_line(parley("tasks", "watch", server.url, task["id"]), "-32004")


def test_agents(server: Any) -> None:
    out = ok("agents", server.url)
    lines = out.splitlines()
    assert any(line.startswith("Echo") and f"{server.url}/a2a/echo" in line for line in lines)
    assert any(line.startswith("Interviewer") and f"{server.url}/a2a/interviewer" in line for line in lines)
    data = ok_json("agents", server.url)
    assert sorted(c["name"] for c in data["agents"]) == ["Echo", "Interviewer"]


# --- errors -------------------------------------------------------------------------------------------------------------


def test_unknown_task_id(server: Any) -> None:
    assert_one_error_line(parley("tasks", "get", server.url, "no-such-task"), "no-such-task", "-32001")
    assert_one_error_line(parley("tasks", "cancel", server.url, "no-such-task"), "-32001")
    assert_one_error_line(parley("send", server.url, "hi", "--task-id", "no-such-task"), "-32001")


@pytest.mark.parametrize(
    "args",
    [
        ["card", "{url}"],
        ["send", "{url}", "hello"],
        ["send", "--stream", "{url}", "hello"],
        ["chat", "{url}"],
        ["agents", "{url}"],
        ["tasks", "list", "{url}"],
        ["tasks", "get", "{url}", "t1"],
        ["tasks", "cancel", "{url}", "t1"],
        ["tasks", "watch", "{url}", "t1"],
    ],
    ids=lambda a: "-".join(x for x in a if x != "{url}"),
)
def test_unreachable_url(args: list[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    line = assert_one_error_line(parley(*[a.format(url=url) for a in args], stdin=""))
    assert "cannot reach" in line and "127.0.0.1" in line


def test_invalid_state(server: Any) -> None:
    assert_one_error_line(parley("tasks", "list", server.url, "--state", "bogus"), "bogus")


def test_invalid_binding(server: Any) -> None:
    assert_one_error_line(parley("send", "--binding", "carrier-pigeon", server.url, "hi"), "carrier-pigeon")


def test_not_an_a2a_server(server: Any) -> None:
    assert_one_error_line(parley("card", server.url + "/no/such/thing"))


# --- parley serve ---------------------------------------------------------------------------------------------------------


class ServeProcess:
    """`parley serve` as a subprocess; stderr goes to a file for diagnostics."""

    def __init__(self, tmp_path: Path, db: Path, name: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / f"{name}.log"
        self._log_file = self.log.open("w")
        self.proc = subprocess.Popen(
            [*PARLEY, "serve", "--port", str(self.port), "--db", str(db), "--log-level", "warning"],
            stdout=self._log_file, stderr=subprocess.STDOUT, env=ENV, text=True,
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + TIMEOUT
        while True:  # bounded polling: the only readiness signal is the card URL answering
            if self.proc.poll() is not None:
                pytest.fail(f"parley serve exited with {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                if httpx.get(self.url + "/.well-known/agent-card.json", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"parley serve did not answer on {self.url}:\n{self.log.read_text()}")
            time.sleep(0.05)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(TIMEOUT)
        finally:
            self._log_file.close()


@pytest.fixture
def serve_process(tmp_path: Path) -> Iterator[Any]:
    started: list[ServeProcess] = []

    def start(db: Path, name: str) -> ServeProcess:
        sp = ServeProcess(tmp_path, db, name)
        started.append(sp)
        sp.wait_ready()
        return sp

    yield start
    for sp in started:
        if sp.proc.poll() is None:
            sp.proc.kill()
            sp.proc.wait()


def test_serve_keeps_tasks_across_restarts(tmp_path: Path, serve_process: Any) -> None:
    db = tmp_path / "data" / "parley.db"
    first = serve_process(db, "first")
    done = ok_json("send", first.url, "remember me")
    asked = ok_json("send", first.url + "/a2a/interviewer", "persistence", code=4)
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    first.stop()
    assert db.exists()

    second = serve_process(db, "second")
    task = ok_json("tasks", "get", second.url, done["id"])
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert artifact_text(task) == "remember me"
    assert [t["id"] for t in ok_json("tasks", "list", second.url, "--agent", "echo")["tasks"]] == [done["id"]]
    assert {t["id"] for t in ok_json("tasks", "list", second.url)["tasks"]} == {done["id"], asked["id"]}
    # The interrupted conversation survives the restart and can be continued.
    again = ok_json("tasks", "get", second.url + "/a2a/interviewer", asked["id"])
    assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    final = ok_json("send", second.url + "/a2a/interviewer", "it is durable", "--task-id", asked["id"])
    assert final["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "'it is durable'" in artifact_text(final)
    assert second.stop() in (0, -15)
    assert "Traceback" not in second.log.read_text()


@pytest.mark.parametrize("spec", ["nonexistent:thing", "parley.cli:app", "no-colon"])
def test_serve_with_a_bad_app(spec: str, tmp_path: Path) -> None:
    proc = subprocess.run([*PARLEY, "serve", "--app", spec, "--port", str(free_port()),
                           "--db", str(tmp_path / "x.db")], check=False, capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
    assert_one_error_line(proc, spec.partition(":")[0])


# --- help and version ---------------------------------------------------------------------------------


def test_help_shows_every_default_and_bracketed_text() -> None:
    """`--help` keeps `[default: ...]` and text in brackets (no Rich markup eats them)."""
    serve = ok("serve", "--help")
    assert "Interface to listen on [default: 127.0.0.1]" in " ".join(serve.split())
    assert "TCP port [default: 8000]" in " ".join(serve.split())
    assert "(parley-a2a[otel])" in " ".join(serve.split())
    create = " ".join(ok("keys", "create", "--help").split())
    assert "[default: a2a]" in create and "[default: .parley/parley.db]" in create


def test_version_names_the_installed_distribution() -> None:
    from importlib.metadata import version

    assert ok("--version").strip() == f"parley {version('parley-a2a')}"


# --- exit codes, pipes, interrupts, whole ids --------------------------------------------------------------------


def test_send_exit_status_says_how_the_task_ended(serve: Any) -> None:
    """0 completed, 3 failed / rejected / canceled, 4 waiting for input (documented in `parley send --help`)."""
    app = Parley(store=MemoryTaskStore())

    @app.agent(id="fine", default=True)
    async def fine(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield "all good"

    @app.agent(id="broken")
    async def broken(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield ctx.fail("cannot do that")

    @app.agent(id="asks")
    async def asks(ctx: RunContext) -> AsyncIterator[AgentOutput]:
        yield ctx.ask("which one?")

    url = serve(app).url
    for agent, code in (("fine", 0), ("broken", 3), ("asks", 4)):
        for streamed in ([], ["--stream"]):
            proc = parley("send", *streamed, f"{url}/a2a/{agent}", "go")
            assert proc.returncode == code, (agent, streamed, proc.returncode, proc.stdout, proc.stderr)
            assert "Traceback" not in proc.stderr
    assert "3 when it ended failed, rejected or canceled" in " ".join(ok("send", "--help").split())


def test_a_stream_piped_into_head_ends_quietly(server: Any) -> None:
    """`parley send --stream ... | head -1`: the reader leaves early; no BrokenPipe traceback."""
    cmd = " ".join([*PARLEY, "send", "--stream", server.url, "'" + "many words " * 400 + "'"]) + " | head -1"
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {cmd}"], check=False, capture_output=True, text=True, env=ENV,
                          timeout=TIMEOUT)
    assert len(done.stdout.splitlines()) == 1
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_ctrl_c_at_the_chat_prompt_ends_the_chat(server: Any) -> None:
    """SIGINT while `parley chat` waits at its prompt ends it at once (exit 130), without waiting for a line."""
    proc = subprocess.Popen([*PARLEY, "chat", server.url + "/a2a/interviewer"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    reader = LineReader(proc)
    first = reader.next_line()  # the banner: it is at the prompt now
    assert first is not None and "type a message" in first
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=TIMEOUT) == 130  # stdin stays open: only the signal can end it
    proc.stdin.close()


def test_card_lists_each_interface_once_and_tasks_list_shows_whole_ids(server: Any) -> None:
    lines = [line.split() for line in ok("card", server.url).splitlines() if "http://" in line]
    assert len(lines) == len({tuple(x) for x in lines}) >= 4
    task = ok_json("send", server.url, "an id to read")
    narrow = subprocess.run([*PARLEY, "tasks", "list", server.url], check=False, capture_output=True, text=True,
                            env={**ENV, "COLUMNS": "80"}, timeout=TIMEOUT)
    assert narrow.returncode == 0 and task["id"] in narrow.stdout, narrow.stdout


# --- starts that fail ------------------------------------------------------------------------------------------------


def test_a_busy_port_is_reported_before_the_banner(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*PARLEY, "serve", "--port", str(port), "--memory"], check=False, cwd=tmp_path,
                              capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
    line = assert_one_error_line(done, f"cannot listen on 127.0.0.1:{port}")
    assert "serving" not in done.stderr, line
    assert not (tmp_path / ".parley").exists()


def test_a_refused_start_leaves_no_parley_directory_but_keeps_one_that_existed(tmp_path: Path) -> None:
    """`parley serve --host 0.0.0.0` with no credentials is refused (docs/security.md, Modes): the `.parley/`
    it would have used is not left behind; a `.parley/` that was there before stays, with its files."""
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    args = [*PARLEY, "serve", "--host", "0.0.0.0", "--port", str(free_port())]
    done = subprocess.run(args, cwd=fresh, check=False, capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
    assert_one_error_line(done, "no credentials are configured")
    assert not (fresh / ".parley").exists()
    kept = tmp_path / "kept"
    (kept / ".parley").mkdir(parents=True)
    (kept / ".parley" / "notes.txt").write_text("mine")
    done = subprocess.run(args, cwd=kept, check=False, capture_output=True, text=True, env=ENV, timeout=TIMEOUT)
    assert done.returncode == 1
    assert (kept / ".parley" / "notes.txt").read_text() == "mine"
