"""MCP tools against a real MCP server (tests/runtime/mcp_server.py) over stdio and streamable HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import free_port, text, tool_calls

from support import require

require("mcp", "mcp")

from parley.agents.llm import LLMAgent
from parley.agents.tools import ToolError
from parley.agents.tools.mcp import MCPError, MCPTools
from parley.client import A2AClient
from parley.protocol import models as m

SERVER = str(Path(__file__).with_name("mcp_server.py"))


@pytest.fixture
def quiet() -> Iterator:
    with open(os.devnull, "w") as sink:
        yield sink


def stdio_tools(quiet, prefix: str = "") -> MCPTools:
    return MCPTools.stdio(sys.executable, [SERVER, "stdio"], prefix=prefix, errlog=quiet)


@pytest.fixture(scope="module")
def mcp_http_url() -> Iterator[str]:
    """The test MCP server over streamable HTTP, as a subprocess on 127.0.0.1."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, SERVER, "http", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("the MCP HTTP test server did not start") from None
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


async def check_toolset(tools: MCPTools, prefix: str = "") -> None:
    try:
        listed = await tools.list_tools()
        by_name = {t.name: t for t in listed}
        assert set(by_name) == {f"{prefix}add", f"{prefix}shout", f"{prefix}explode"}
        add = by_name[f"{prefix}add"]
        assert add.description == "Add two integers."
        assert add.parameters["type"] == "object" and set(add.parameters["required"]) == {"a", "b"}
        assert add.parameters["properties"]["a"]["type"] == "integer"
        assert await add.call({"a": 2, "b": 40}) == "42"
        assert await by_name[f"{prefix}shout"].call({"text": "hey"}) == "HEY"
        with pytest.raises(ToolError, match="kaboom"):
            await by_name[f"{prefix}explode"].call({"reason": "kaboom"})
        with pytest.raises(ToolError):
            await tools.call("no_such_tool", {})
    finally:
        await tools.aclose()


async def test_stdio_server_tools_are_listed_and_called(quiet):
    await check_toolset(stdio_tools(quiet))


async def test_http_server_tools_are_listed_and_called(mcp_http_url):
    await check_toolset(MCPTools.http(mcp_http_url, prefix="remote_"), prefix="remote_")


async def test_an_unreachable_server_is_a_clear_error():
    tools = MCPTools.http(f"http://127.0.0.1:{free_port()}/mcp", timeout=10)
    with pytest.raises(MCPError, match="cannot connect to the MCP server http://127.0.0.1"):
        await tools.list_tools()
    await tools.aclose()


async def test_a_stdio_server_that_dies_at_start_is_reported_with_its_last_stderr_lines(tmp_path):
    """A server that exits before the MCP handshake: the error names it and ends with what it wrote to stderr
    (the reason a user needs: a missing module, a bad flag), and those lines still reach `errlog`."""
    script = tmp_path / "broken_server.py"
    script.write_text("import sys\nprint('starting', file=sys.stderr)\n"
                      "print('ModuleNotFoundError: No module named weather_api', file=sys.stderr)\nsys.exit(3)\n")
    errlog = tmp_path / "errlog.txt"
    with errlog.open("w") as sink:
        tools = MCPTools.stdio(sys.executable, [str(script)], errlog=sink, timeout=20)
        with pytest.raises(MCPError) as caught:
            await tools.list_tools()
        await tools.aclose()
    said = str(caught.value)
    assert said.startswith(f"cannot connect to the MCP server {sys.executable} {script}: "), said
    assert said.endswith("its stderr ended with:\n  starting\n  ModuleNotFoundError: No module named weather_api")
    assert errlog.read_text() == "starting\nModuleNotFoundError: No module named weather_api\n"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_agent_calls_mcp_tools(fake_llm, backend, host, quiet, transport, request):
    tools = stdio_tools(quiet, "calc_") if transport == "stdio" else MCPTools.http(
        request.getfixturevalue("mcp_http_url"), prefix="calc_")
    fake_llm.script(
        tool_calls(("c1", "calc_add", {"a": 2, "b": 40}), ("c2", "calc_explode", {"reason": "kaboom"})),
        text("The answer is 42."),
    )
    hosted = host(LLMAgent(id="mcp", backend=backend, tools=[tools]))
    async with await A2AClient.connect(hosted.agent_url("mcp")) as client:
        task = await client.send("add 2 and 40")
    assert task.status.state is m.TaskState.COMPLETED, task.status
    offered = sorted(t["function"]["name"] for t in fake_llm.bodies[0]["tools"])
    assert offered == ["calc_add", "calc_explode", "calc_shout"]
    results = {x["tool_call_id"]: x["content"] for x in fake_llm.bodies[1]["messages"] if x["role"] == "tool"}
    assert results["c1"] == "42"
    assert results["c2"].startswith("error: ") and "kaboom" in results["c2"]
