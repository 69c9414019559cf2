"""Traces: links in both stores, the trace endpoint (local and remote children), and `parley trace`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
from hubkit import Fleet, collect, last_state, path_of, trace

from parley.client import A2AClient
from parley.protocol import models as m

_SCRIPT = Path(sys.executable).with_name("parley")
PARLEY = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "parley.cli"]
ENV = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1", "TERM": "dumb"}


async def test_the_trace_endpoint_shows_the_tree_with_states_and_timings(fleet: Fleet) -> None:
    front = fleet.agent("front-desk")
    async with await A2AClient.connect(front) as client:
        events = await collect(client, "refund for INV-3")
    assert last_state(events) is m.TaskState.COMPLETED
    task_id = events[0].id
    tree = await trace(front, task_id)
    assert path_of(tree) == [("front-desk", "completed"), ("billing", "completed"), ("specialist", "completed")]
    child = tree["children"][0]
    grandchild = child["children"][0]
    assert tree["parent"] is None and child["parent"] == task_id and grandchild["parent"] == child["taskId"]
    assert tree["url"] == front and child["url"] == fleet.agent("billing")
    for node in (tree, child, grandchild):
        assert node["principal"] == "anonymous"
        assert node["source"] == "local"
        assert node["created"].endswith("Z") and node["updated"] >= node["created"]
        assert node["durationSeconds"] >= 0

    # depth bounds the tree; deeper levels are marked as cut
    shallow = await trace(front, task_id, depth=1)
    assert shallow["children"][0]["children"] == [] and shallow["children"][0]["truncated"] is True
    # the default agent's route, and errors
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{fleet.url}/tasks/{task_id}/trace")).json()["taskId"] == task_id  # default agent
        assert (await http.get(f"{fleet.agent('billing')}/tasks/{task_id}/trace")).status_code == 404
        assert (await http.get(f"{front}/tasks/nope/trace")).status_code == 404
        assert (await http.get(f"{front}/tasks/{task_id}/trace", params={"depth": "x"})).status_code == 400
        assert (await http.get(f"{fleet.url}/a2a/ghost/tasks/{task_id}/trace")).status_code == 404


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PARLEY, *args], capture_output=True, text=True, env=ENV, timeout=60, check=False)


async def test_parley_trace_renders_the_whole_tree(fleet: Fleet) -> None:
    front = fleet.agent("front-desk")
    async with await A2AClient.connect(front) as client:
        task = await client.send("invoice loop")  # front-desk -> billing -> (refused) front-desk
        done = await client.send("refund for INV-5")
    assert isinstance(task, m.Task) and isinstance(done, m.Task)

    proc = run_cli("trace", front, done.id)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "front-desk completed" in lines[0] and done.id in lines[0]
    assert any("billing completed" in line for line in lines)
    assert any("specialist completed" in line for line in lines)

    failed = run_cli("trace", front, task.id)
    assert failed.returncode == 0, failed.stderr
    assert "front-desk failed" in failed.stdout and "billing failed" in failed.stdout
    assert "delegation cycle: front-desk -> billing -> front-desk" in failed.stdout

    as_json = run_cli("trace", front, done.id, "--json", "--depth", "1")
    tree = json.loads(as_json.stdout)
    assert tree["children"][0]["agent"] == "billing" and tree["children"][0]["truncated"] is True

    missing = run_cli("trace", front, "no-such-task")
    assert missing.returncode == 1
    assert missing.stderr.startswith("error:") and "404" in missing.stderr and "Traceback" not in missing.stderr
