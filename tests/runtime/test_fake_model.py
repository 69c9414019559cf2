"""The scripted model that ships with Parley (provider "fake") and the check of a model server at start (issue 26).

A user tries an LLM agent without a model server: a config file declares `provider = "fake"` and a script
(a tool call, then an answer); `parley serve --config` serves it and a real client talks to it. And an LLM
agent whose model server cannot be reached says so when the server starts (one line naming the agent and the
URL) and in /readyz, instead of starting silently and failing on the first message. Real processes throughout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from parley.agents.llm import ChatRequest, FakeBackend, Finish, TextDelta
from support import free_port, stop_process, wait_until_ready

PARLEY = [sys.executable, "-m", "parley.cli"]
V1 = {"A2A-Version": "1.0"}


async def events(backend: FakeBackend, messages: list[dict]) -> list:
    return [ev async for ev in backend.stream(ChatRequest(messages=messages))]


async def test_each_call_of_a_turn_takes_the_next_step_and_answers_stream_word_by_word() -> None:
    backend = FakeBackend([{"tool": "weather", "arguments": {"city": "Paris"}}, "It is sunny in Paris."])
    user = [{"role": "user", "content": "Weather in Paris?"}]
    first = await events(backend, user)
    assert len(first) == 1 and isinstance(first[0], Finish) and first[0].reason == "tool_calls"
    [call] = first[0].tool_calls
    assert (call.name, json.loads(call.arguments)) == ("weather", {"city": "Paris"})
    after_tool = [*user, {"role": "assistant", "tool_calls": [call.to_message()]},
                  {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    second = await events(backend, after_tool)
    words = [e.text for e in second if isinstance(e, TextDelta)]
    assert words == ["It ", "is ", "sunny ", "in ", "Paris."] and isinstance(second[-1], Finish)
    # Past the script, and at the next turn's start, the model says what it was told.
    done = [*after_tool, {"role": "assistant", "content": "It is sunny in Paris."}]
    third = await events(backend, done)
    assert "".join(e.text for e in third if isinstance(e, TextDelta)) == "You said: Weather in Paris?"
    next_turn = await events(backend, [*done, {"role": "user", "content": "And Rome?"}])
    assert next_turn[-1].reason == "tool_calls"  # a new turn starts the script again


@pytest.mark.parametrize("step", [42, {}, {"tool": ""}, {"tool": "x", "arguments": [1]}, {"tool": "x", "extra": 1},
                                  []])
def test_a_malformed_script_step_is_refused_naming_its_index(step: object) -> None:
    with pytest.raises(ValueError, match=r"script\[1\]"):
        FakeBackend(["fine", step])  # type: ignore[list-item]


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """A config with a fake-model agent that calls a Python tool, which records its calls in a file."""
    (tmp_path / "weather_tools.py").write_text(textwrap.dedent('''
        import json, os
        from parley.agents.tools import tool

        @tool
        async def weather(city: str) -> str:
            """Current weather in a city."""
            with open(os.environ["WEATHER_CALLS"], "a") as f:
                f.write(json.dumps({"city": city}) + "\\n")
            return f"Sunny in {city}"
    '''))
    (tmp_path / "parley.toml").write_text(textwrap.dedent('''
        [[agents]]
        id = "forecaster"
        type = "llm"
        provider = "fake"
        tools = ["weather_tools:weather"]
        script = [{tool = "weather", arguments = {city = "Paris"}}, "It is sunny in Paris today."]
    '''))
    return tmp_path


def serve(folder: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str, Path]:
    port = free_port()
    log = folder / "serve.log"
    proc = subprocess.Popen([*PARLEY, "serve", "--port", str(port), "--memory", *args], cwd=folder,
                            stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(folder), **(env or {})})
    url = f"http://127.0.0.1:{port}"
    wait_until_ready(proc, url, 60, output=lambda: log.read_text(errors="replace"))
    return proc, url, log


@pytest.fixture
def stopping() -> Iterator[list[subprocess.Popen]]:
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        stop_process(proc)


def test_a_fake_model_agent_from_a_config_calls_its_tool_and_streams_its_answer(fleet: Path, stopping) -> None:
    calls = fleet / "calls.jsonl"
    proc, url, _ = serve(fleet, "--config", "parley.toml", env={"WEATHER_CALLS": str(calls)})
    stopping.append(proc)
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": {
        "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Weather in Paris?"}]}}}
    with httpx.Client(timeout=30) as client, client.stream("POST", f"{url}/a2a/forecaster", json=body,
                                                           headers=V1) as r:
        results = [json.loads(line[5:])["result"] for line in r.iter_lines() if line.startswith("data:")]
    chunks = [p["text"] for x in results if "artifactUpdate" in x for p in x["artifactUpdate"]["artifact"]["parts"]]
    assert "".join(chunks) == "It is sunny in Paris today."
    assert len([c for c in chunks if c]) > 1  # streamed in pieces, as a model's tokens
    assert results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [{"city": "Paris"}]


def test_a_config_with_a_bad_script_stops_with_one_line(fleet: Path) -> None:
    (fleet / "parley.toml").write_text('[[agents]]\nid = "x"\ntype = "llm"\nprovider = "fake"\nscript = [3]\n')
    done = subprocess.run([*PARLEY, "serve", "--memory", "--config", "parley.toml", "--port", str(free_port())],
                          cwd=fleet, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert "agents[0].script" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("routed", [False, True], ids=["plain", "behind-a-routing-rule"])
def test_an_llm_agent_whose_model_server_is_out_of_reach_says_so_at_start(tmp_path: Path, stopping,
                                                                          routed: bool) -> None:
    closed = free_port()  # nothing listens there
    route = '''
        [[agents]]
        id = "echo"
        type = "builtin"

        [[routes]]
        from = "writer"
        to = "echo"
        keywords = ["echo"]
    ''' if routed else ""
    (tmp_path / "parley.toml").write_text(textwrap.dedent(f'''
        [[agents]]
        id = "writer"
        type = "llm"
        model = "llama3.1"
        base_url = "http://127.0.0.1:{closed}/v1"
    ''') + textwrap.dedent(route))
    proc, url, log = serve(tmp_path, "--config", "parley.toml")
    stopping.append(proc)
    lines = [line for line in log.read_text().splitlines() if "unavailable" in line and "'writer'" in line]
    assert len(lines) == 1, log.read_text()
    assert f"http://127.0.0.1:{closed}/v1" in lines[0]
    ready = httpx.get(f"{url}/readyz", timeout=10).json()
    assert "writer" in json.dumps(ready)  # /readyz names the agent that cannot work now


def test_an_llm_agent_whose_mcp_server_dies_at_start_says_why_at_start(tmp_path: Path, stopping) -> None:
    """An MCP server that exits at once (here: a module it needs is missing) is found when `parley serve` starts:
    the warning names the agent and ends with the server's own last stderr lines, and /readyz lists the agent
    (public, so without the reason)."""
    pytest.importorskip("mcp")
    (tmp_path / "broken_mcp.py").write_text(
        "import sys\nprint('ModuleNotFoundError: No module named weather_api', file=sys.stderr)\nsys.exit(1)\n")
    (tmp_path / "parley.toml").write_text(textwrap.dedent(f'''
        [[agents]]
        id = "helper"
        type = "llm"
        provider = "fake"
        script = ["hello"]

        [[agents.mcp]]
        command = [{json.dumps(sys.executable)}, "broken_mcp.py"]
    '''))
    proc, url, log = serve(tmp_path, "--config", "parley.toml")
    stopping.append(proc)
    text = log.read_text()
    warning = text[text.index("agent 'helper' is unavailable: "):]
    assert warning.startswith(f"agent 'helper' is unavailable: cannot connect to the MCP server {sys.executable} "
                              "broken_mcp.py: "), text
    assert "its stderr ended with:\n  ModuleNotFoundError: No module named weather_api;" in warning, text
    ready = httpx.get(f"{url}/readyz", timeout=10).json()
    assert ready["unavailable_agents"] == {"helper": "unavailable"}  # named, the reason only in the log
