"""The last A2A 0.3 release of the official SDK, a2a-sdk 0.3.26, against a live Parley.

a2a-sdk 0.3.x and 1.x are both the `a2a` package, so 0.3.26 lives in its own
virtualenv, `.venv-sdk03` at the repository root (or $PARLEY_SDK03_VENV), created
on first use by the `sdk03_python` fixture. Each test starts a Parley server in this process and
runs `sdk03_driver.py SCENARIO` with that interpreter; the driver uses the 0.3.26
`ClientFactory` client (and, in one scenario, the deprecated `A2AClient`) and
prints one JSON object of what the SDK returned, which the test asserts on.

Without network the venv cannot be built: the tests then skip, except when
`CI=true`, where they fail.

Not covered: ListTasks (`tasks/list`) - the 0.3.26 client has no method for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from interop_support import (
    ECHO_CHUNKS,
    ECHO_TEXT,
    SLOW_ARTIFACT_ID,
    SLOW_FIRST,
    SLOW_SECOND,
    Gate,
    OpenGateOnKeepalive,
    slow_app,
)

from parley.app import Settings
from support import interviewer_question, interviewer_thanks

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]
# Where the 0.3.26 virtualenv lives (git-ignored); PARLEY_SDK03_VENV overrides it.
SDK03_VENV = Path(os.environ.get("PARLEY_SDK03_VENV") or ROOT / ".venv-sdk03")
SDK03_LOCK = SDK03_VENV.with_name(SDK03_VENV.name + ".lock")  # shared with tests/interop_client
SDK03_VERSION = "0.3.26"
DRIVER = Path(__file__).with_name("sdk03_driver.py")
INSTALL_TIMEOUT = 900
DRIVER_TIMEOUT = 120


# --- the a2a-sdk 0.3.26 virtualenv -----------------------------------------------


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _clean_env() -> dict[str, str]:
    """The environment for the other interpreter, without this venv's Python settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def _installed_sdk(python: Path) -> str | None:
    if not python.exists():
        return None
    probe = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('a2a-sdk'))"],
        capture_output=True, text=True, timeout=60, env=_clean_env(), check=False,
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"CI=true and the a2a-sdk {SDK03_VERSION} virtualenv could not be built: {reason}", pytrace=False)
    pytest.skip(f"a2a-sdk {SDK03_VERSION} is not available (is the network down?): {reason}")


@contextmanager
def _venv_lock() -> Iterator[None]:
    """An exclusive lock on `<venv>.lock`: other test helpers build the same venv."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no concurrent builders to guard against
        yield
        return
    with open(SDK03_LOCK, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def sdk03_python() -> Path:
    """The interpreter of `.venv-sdk03`, with a2a-sdk 0.3.26 installed (built on first use)."""
    python = _venv_python(SDK03_VENV)
    if _installed_sdk(python) == SDK03_VERSION:
        return python
    with _venv_lock():
        return _build_venv(python)


def _build_venv(python: Path) -> Path:
    if _installed_sdk(python) == SDK03_VERSION:  # built meanwhile by another process
        return python
    steps = []
    if not python.exists():
        steps.append([sys.executable, "-m", "venv", str(SDK03_VENV)])
    steps.append([
        str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet",
        "--retries", "2", "--timeout", "30", f"a2a-sdk[http-server]=={SDK03_VERSION}",
        "uvicorn",  # not needed here; tests/interop_client runs 0.3.26 servers from the same venv
    ])
    for cmd in steps:
        shown = " ".join(cmd)
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, env=_clean_env(), check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            _unavailable(f"`{shown}` failed: {exc}")
        if done.returncode != 0:
            _unavailable(f"`{shown}` exited with {done.returncode}:\n{(done.stderr or done.stdout)[-2000:]}")
    found = _installed_sdk(python)
    if found != SDK03_VERSION:
        _unavailable(f"{python} has a2a-sdk {found!r} after installing, not {SDK03_VERSION}")
    return python


def drive(python: Path, base_url: str, scenario: str, *args: str) -> dict[str, Any]:
    """Run one driver scenario; return its `result`, failing with the SDK's traceback if it raised."""
    cmd = [str(python), str(DRIVER), base_url, scenario, *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=DRIVER_TIMEOUT, env=_clean_env(), check=False)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the a2a-sdk {SDK03_VERSION} driver did not finish {scenario!r} in {DRIVER_TIMEOUT}s: {exc}")
    lines = done.stdout.strip().splitlines()
    assert lines, f"the driver printed nothing (exit {done.returncode}); stderr:\n{done.stderr}"
    out = json.loads(lines[-1])
    if "error" in out:
        err = out["error"]
        pytest.fail(
            f"a2a-sdk {SDK03_VERSION} raised in scenario {scenario!r}: {err['type']} (code {err['code']}): "
            f"{err['message']}\n{err['traceback']}"
        )
    assert done.returncode == 0, done.stderr
    assert out["sdkVersion"] == SDK03_VERSION
    return out["result"]


def assert_one_task(events: list[dict]) -> tuple[str, str]:
    task_id, ctx = events[0]["taskId"], events[0]["contextId"]
    assert all(ev["taskId"] == task_id and ev["contextId"] == ctx for ev in events), events
    return task_id, ctx


def assert_finals(events: list[dict]) -> None:
    """0.3 `final`: false on every status update but the stream's last, true on a terminal one."""
    statuses = [ev for ev in events if ev["kind"] == "status"]
    assert all(ev["final"] is False for ev in statuses if ev is not events[-1]), statuses
    if events[-1]["kind"] == "status" and events[-1]["state"] in ("completed", "canceled", "failed", "rejected"):
        assert events[-1]["final"] is True


# --- tests -------------------------------------------------------------------------


def test_sdk03_resolves_the_card(server, sdk03_python):
    card = drive(sdk03_python, server.url, "card")
    assert card["name"] == "Echo"
    assert card["url"] == f"{server.url}/"
    assert card["preferredTransport"] == "JSONRPC"
    assert card["protocolVersion"].split(".")[:2] == ["0", "3"]
    assert card["streaming"] is True
    assert card["skills"] == ["echo"]

    named = drive(sdk03_python, server.url, "card", "--agent", "/a2a/interviewer")
    assert named["name"] == "Interviewer"
    assert named["url"] == f"{server.url}/a2a/interviewer"


def test_sdk03_send_blocking(server, sdk03_python):
    result = drive(sdk03_python, server.url, "send")
    assert result["count"] == 1 and result["update"] is None
    task = result["task"]
    assert task["state"] == "completed"
    assert task["id"] and task["contextId"]
    assert task["artifactText"] == ECHO_TEXT and len(task["artifactIds"]) == 1
    assert task["history"] == [["user", ECHO_TEXT, task["id"], task["contextId"]]]


def test_sdk03_legacy_a2aclient_send_and_stream(server, sdk03_python):
    result = drive(sdk03_python, server.url, "legacy_send")
    assert result["responseId"] == "legacy-1"
    assert result["send"]["state"] == "completed"
    assert result["send"]["artifactText"] == ECHO_TEXT
    assert result["streamIds"] == ["legacy-2"]  # every SSE frame answers the request's id
    stream = result["stream"]
    assert stream[0]["kind"] == "task"
    assert_one_task(stream)
    assert [ev["text"] for ev in stream if ev["kind"] == "artifact"] == ECHO_CHUNKS
    assert stream[-1]["kind"] == "status" and stream[-1]["state"] == "completed"
    assert_finals(stream)


def test_sdk03_stream(server, sdk03_python):
    events = drive(sdk03_python, server.url, "stream")["events"]
    assert events[0]["kind"] == "task" and events[0]["state"] == "submitted"
    assert_one_task(events)
    artifacts = [ev for ev in events if ev["kind"] == "artifact"]
    assert [a["text"] for a in artifacts] == ECHO_CHUNKS
    assert [a["append"] for a in artifacts] == [False, True, True]
    assert [a["lastChunk"] for a in artifacts] == [False, False, True]
    assert len({a["artifactId"] for a in artifacts}) == 1
    last = events[-1]
    assert last["kind"] == "status" and last["state"] == "completed"
    assert_finals(events)
    # The SDK's own aggregation of the stream (ClientTaskManager) ends with the full echo.
    assert last["aggregate"]["state"] == "completed"
    assert last["aggregate"]["artifactText"] == ECHO_TEXT
    assert last["aggregate"]["artifactIds"] == [artifacts[0]["artifactId"]]


def test_sdk03_get(server, sdk03_python):
    result = drive(sdk03_python, server.url, "get")
    sent, got = result["sent"], result["got"]
    assert got["id"] == sent["id"] and got["contextId"] == sent["contextId"]
    assert got["state"] == "completed"
    assert got["artifactText"] == ECHO_TEXT
    assert got["history"] == [["user", ECHO_TEXT, sent["id"], sent["contextId"]]]
    assert result["historyLength1"]["history"] == got["history"][-1:]


def test_sdk03_multiturn_blocking(server, sdk03_python):
    result = drive(sdk03_python, server.url, "multiturn", "--agent", "/a2a/interviewer")
    first, second = result["first"], result["second"]
    t1, t2, got = result["turn1"], result["turn2"], result["got"]
    assert t1["state"] == "input-required"
    assert t1["statusText"] == interviewer_question(first)
    assert t1["artifactText"] == ""
    assert t2["id"] == t1["id"] and t2["contextId"] == t1["contextId"]
    assert t2["state"] == "completed"
    assert t2["artifactText"] == interviewer_thanks(first, second)
    assert [h[:2] for h in got["history"]] == [["user", first], ["agent", interviewer_question(first)], ["user", second]]
    assert {(h[2], h[3]) for h in got["history"]} == {(t1["id"], t1["contextId"])}


def test_sdk03_multiturn_streaming(server, sdk03_python):
    result = drive(sdk03_python, server.url, "multiturn_stream", "--agent", "/a2a/interviewer")
    first, second = result["first"], result["second"]
    turn1, turn2 = result["turn1"], result["turn2"]
    task_id, ctx = assert_one_task(turn1)
    assert turn1[0]["kind"] == "task"
    assert turn1[-1]["kind"] == "status" and turn1[-1]["state"] == "input-required"
    assert turn1[-1]["text"] == interviewer_question(first)
    assert turn1[-1]["aggregate"]["state"] == "input-required"

    assert assert_one_task(turn2) == (task_id, ctx)
    assert turn2[0]["kind"] == "task"
    assert turn2[-1]["kind"] == "status" and turn2[-1]["state"] == "completed"
    assert "".join(ev["text"] for ev in turn2 if ev["kind"] == "artifact") == interviewer_thanks(first, second)
    assert_finals(turn2)


def test_sdk03_errors(server, sdk03_python):
    result = drive(sdk03_python, server.url, "errors")
    assert result["getUnknown"]["code"] == -32001  # TaskNotFoundError
    assert result["cancelFinished"]["code"] == -32002  # TaskNotCancelableError
    assert result["sendToFinished"]["code"] == -32004  # UnsupportedOperationError


def test_sdk03_cancel(serve, sdk03_python):
    gate = Gate()
    srv = serve(slow_app(gate))
    result = drive(sdk03_python, srv.url, "cancel")
    before, after = result["before"], result["after"]
    task_id, ctx = assert_one_task(before + after)
    assert before[0]["kind"] == "task"
    assert before[-1]["kind"] == "artifact" and before[-1]["text"] == SLOW_FIRST

    assert result["running"]["state"] == "working" and result["running"]["artifactText"] == SLOW_FIRST
    assert result["canceled"]["id"] == task_id and result["canceled"]["contextId"] == ctx
    assert result["canceled"]["state"] == "canceled"
    assert after, "the stream closed without reporting the canceled state"
    assert after[-1]["kind"] == "status" and after[-1]["state"] == "canceled" and after[-1]["final"] is True
    assert not [ev for ev in after if ev["kind"] == "artifact"]
    assert result["got"]["state"] == "canceled"
    assert result["got"]["artifactText"] == SLOW_FIRST
    assert result["secondCancel"]["code"] == -32002
    assert not gate.opened


def test_sdk03_resubscribe(serve, sdk03_python):
    gate = Gate()
    srv = serve(slow_app(gate))
    result = drive(sdk03_python, srv.url, "resubscribe", "--release", "/a2a/release")
    before, first, rest = result["before"], result["first"], result["rest"]
    task_id, ctx = assert_one_task([*before, first, *rest])
    assert before[-1]["kind"] == "artifact" and before[-1]["text"] == SLOW_FIRST

    # tasks/resubscribe starts with the task as it is now ...
    assert first["kind"] == "task" and first["state"] == "working"
    assert first["aggregate"]["artifactText"] == SLOW_FIRST
    # ... and, once the agent is released, delivers the rest.
    assert gate.opened and result["release"]["artifactText"] == "released"
    artifacts = [ev for ev in rest if ev["kind"] == "artifact"]
    assert [(a["artifactId"], a["text"], a["append"], a["lastChunk"]) for a in artifacts] == [
        (SLOW_ARTIFACT_ID, SLOW_SECOND, True, True)
    ]
    assert rest[-1]["kind"] == "status" and rest[-1]["state"] == "completed" and rest[-1]["final"] is True
    assert rest[-1]["aggregate"]["artifactText"] == SLOW_FIRST + SLOW_SECOND
    assert (result["got"]["id"], result["got"]["contextId"]) == (task_id, ctx)
    assert result["got"]["state"] == "completed"
    assert result["got"]["artifactText"] == SLOW_FIRST + SLOW_SECOND


def test_sdk03_nonblocking_send_then_resubscribe(serve, sdk03_python):
    gate = Gate()
    srv = serve(slow_app(gate))
    result = drive(sdk03_python, srv.url, "nonblocking_resubscribe", "--release", "/a2a/release")
    sent, first, rest = result["sent"], result["first"], result["rest"]
    assert result["sentCount"] == 1
    assert sent["state"] in ("submitted", "working")
    assert first["kind"] == "task" and first["taskId"] == sent["id"] and first["state"] in ("submitted", "working")
    assert assert_one_task([first, *rest]) == (sent["id"], sent["contextId"])
    assert rest[-1]["kind"] == "status" and rest[-1]["state"] == "completed" and rest[-1]["final"] is True
    assert rest[-1]["aggregate"]["artifactText"] == SLOW_FIRST + SLOW_SECOND


def test_sdk03_stream_with_keepalive_comments(serve, sdk03_python):
    gate = Gate()
    watched = OpenGateOnKeepalive(slow_app(gate, Settings(keepalive_seconds=0.05)), gate)
    srv = serve(watched)
    events = drive(sdk03_python, srv.url, "slow_stream")["events"]
    assert watched.keepalives >= 1
    assert events[0]["kind"] == "task"
    assert_one_task(events)
    assert [ev["text"] for ev in events if ev["kind"] == "artifact"] == [SLOW_FIRST, SLOW_SECOND]
    assert events[-1]["kind"] == "status" and events[-1]["state"] == "completed" and events[-1]["final"] is True
    assert_finals(events)
