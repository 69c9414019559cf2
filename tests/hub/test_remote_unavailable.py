"""One unreachable remote agent does not stop a fleet: `parley serve --config` starts, serves the other agents,
says which agent is unavailable and why (its log line, GET /agents, /readyz, the dashboard), and tries again
in the background: once the remote agent answers, it is available with the remote card's details."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx

from parley.serve import default_app
from support import free_port, running, wait_until_ready

PARLEY = [sys.executable, "-m", "parley.cli"]


def test_an_unreachable_remote_agent_is_served_as_unavailable_until_it_answers(tmp_path: Path) -> None:
    remote_port, port = free_port(), free_port()
    config = tmp_path / "parley.toml"
    config.write_text(f"""
[server]
db = "memory"
builtin_agents = true
default_agent = "echo"
recheck_seconds = 0.2

[[agents]]
id = "far"
type = "remote"
card_url = "http://127.0.0.1:{remote_port}/a2a/interviewer/.well-known/agent-card.json"
""")
    proc = subprocess.Popen([*PARLEY, "serve", "--config", str(config), "--port", str(port), "--log-level",
                             "warning"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(proc, base)  # its output is read (communicate) in `finally`
        ready = httpx.get(f"{base}/readyz").json()
        assert ready["status"] == "ready"  # one remote agent down does not take the replica out of rotation
        assert ready["unavailable_agents"] == {"far": "unavailable"}  # public: which agent, not why (GET /agents)
        listed = httpx.get(f"{base}/agents").json()
        assert set(listed["unavailable"]) == {"far"}
        assert "Connection refused" in listed["unavailable"]["far"] or "connect" in listed["unavailable"]["far"]
        assert "unavailable: cannot load its card" in httpx.get(f"{base}/").text
        echo = httpx.post(f"{base}/a2a/echo", json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "still here"}]}}},
            headers={"A2A-Version": "1.0"}).json()
        assert echo["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

        # The remote agent comes up: the next recheck takes its card.
        with running(default_app(None), port=remote_port):
            deadline = time.monotonic() + 30
            while (listed := httpx.get(f"{base}/agents").json())["unavailable"]:
                assert time.monotonic() < deadline, f"never became available: {listed['unavailable']}"
                time.sleep(0.05)
            far = next(c for c in listed["agents"] if c["name"] == "Interviewer" or "far" in str(c))
            assert far["name"] == "Interviewer"  # the remote card's name, not the generic one
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert "agent 'far' (agents[0].card_url) is unavailable" in out
    assert "Traceback" not in out
