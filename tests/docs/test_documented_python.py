"""The Python snippets of README.md run as written: the client, and the LLM agent with its tools (its MCP
server is the one the project ships, examples/mcp_weather.py; the model is the tests' fake, behind the same
OpenAI-compatible HTTP interface). The first agent snippet is run by the `--app` command block
(test_documented_commands.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
from docblocks import REPO, blocks
from test_documented_commands import WAIT, Sandbox

sys.path.insert(0, str(REPO / "tests" / "runtime"))
from fake_llm import FakeLLM, text, tool_calls


def readme_python(starting: str) -> str:
    """The README's Python block whose first line starts with `starting`."""
    for block in blocks(REPO / "README.md"):
        if block.language == "python" and block.body.lstrip().startswith(starting):
            return block.body
    raise AssertionError(f"README.md has no Python block starting with {starting!r}")


def test_the_client_snippet_runs(tmp_path: Path) -> None:
    """The README's client is a whole program: it runs as written (issue 26: it once used a top-level
    `async with`)."""
    snippet = readme_python("import asyncio\n\nfrom parley.client import A2AClient")
    block = next(b for b in blocks(REPO / "README.md") if b.mode == "run")
    sandbox = Sandbox(tmp_path, block, llm_port=0)
    sandbox.start(f"{REPO / '.venv' / 'bin' / 'parley'} serve --port {sandbox.port}")
    try:
        (tmp_path / "client_snippet.py").write_text(sandbox.rewrite(snippet))
        done = subprocess.run([sys.executable, "client_snippet.py"], cwd=tmp_path, env=sandbox.env, text=True,
                              capture_output=True, timeout=WAIT)
    finally:
        sandbox.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "You said 'hello'" in done.stdout, done.stdout[-2000:]  # the streamed events were printed


def test_the_llm_agent_snippet_runs_with_its_tools(tmp_path: Path) -> None:
    """The snippet's agent serves, calls its MCP server's tool when the model asks, and answers."""
    snippet = readme_python("# my_agents.py\nimport sys\n\nfrom parley import Parley\nfrom parley.agents.llm")
    fake = FakeLLM().script(tool_calls(("call-1", "forecast", {"city": "Paris"})), text("Pack sunglasses."))
    fake.start()
    block = next(b for b in blocks(REPO / "README.md") if b.mode == "run")
    sandbox = Sandbox(tmp_path, block, llm_port=fake.port)
    (tmp_path / "my_agents.py").write_text(snippet)
    sandbox.env["PARLEY_LLM_BASE_URL"] = fake.base_url
    try:
        sandbox.start(f"{REPO / '.venv' / 'bin' / 'parley'} serve --app my_agents:app --port {sandbox.port}")
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "A weekend in Paris?"}]}}}
        answer = httpx.post(f"http://127.0.0.1:{sandbox.port}/a2a/travel", json=body,
                            headers={"A2A-Version": "1.0"}, timeout=WAIT).json()
    finally:
        sandbox.stop()
        fake.stop()
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert "Pack sunglasses." in json.dumps(task["artifacts"])
    second = json.dumps(fake.bodies[1]["messages"])  # what the model saw after the tool ran
    assert "Paris: sunny for the next 1 day(s)" in second
