"""The config file: every mistake is one line naming file, key and reason; the example fleet runs."""

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from parley.hub.config import ConfigError, load_config
from support import free_port

ROOT = Path(__file__).resolve().parents[2]
PARLEY = [sys.executable, "-m", "parley.cli"]

GOOD = """
[server]
db = "memory"
[[agents]]
id = "a"
type = "python"
entry = "examples.fleet.agents:support"
"""


def write(tmp_path, text):
    p = tmp_path / "parley.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("text,key,reason", [
    ("[server]\nport = 'x'\n[[agents]]\nid='a'\ntype='builtin'", "server.port", "Expected `int`, got `str`"),
    ("[server]\nport = 70000\n[[agents]]\nid='echo'\ntype='builtin'", "server.port", "between 1 and 65535"),
    ("[[agents]]\nid='a'\ntype='python'", "agents[0].entry", "needs entry"),
    ("[[agents]]\nid='a'\ntype='python'\nentry='m:f'\ncolour='red'", "agents[0].colour", "unknown key"),
    ("[[agents]]\nid='a'\ntype='magic'", "agents[0].type", "Invalid enum value 'magic'"),
    ("[[agents]]\nid='a'\ntype='llm'", "agents[0].model", "needs a model"),
    ("[[agents]]\nid='a b'\ntype='python'\nentry='m:f'", "agents[0].id", "not a valid agent id"),
    ("[[agents]]\nid='a'\ntype='python'\nentry='m:f'\n[[agents]]\nid='a'\ntype='python'\nentry='m:g'",
     "agents[1].id", "duplicate agent id"),
    ("[[agents]]\nid='a'\ntype='python'\nentry='m:f'\ndelegates=['zzz']", "agents[0].delegates[0]", "no agent 'zzz'"),
    ("[[agents]]\nid='a'\ntype='python'\nentry='m:f'\n[[routes]]\nfrom='a'\nto='b'\nkeywords=['x']",
     "routes[0].to", "no agent 'b'"),
    ("[[agents]]\nid='a'\ntype='python'\nentry='m:f'\n[[agents]]\nid='b'\ntype='python'\nentry='m:f'\n"
     "[[routes]]\nfrom='a'\nto='b'\nregex=['((']", "routes[0].regex[0]", "not a valid regular expression"),
    ("[[agents]]\nid='a'\ntype='python'\nentry='m:f'\n[[agents]]\nid='b'\ntype='python'\nentry='m:f'\n"
     "[[routes]]\nfrom='a'\nto='b'", "routes[0]", "needs at least one of keywords"),
    ("[[agents]]\nid='r'\ntype='remote'\ncard_url='ftp://x'", "agents[0].card_url", "needs card_url"),
    ("[[agents]]\nid='a'\ntype='python'\nentry='m:f'\nmodel='x'", "agents[0].model", "not used by agents of type"),
    ("", "agents", "no agents declared"),
    ("[server\n", "", "not valid TOML"),
])
def test_each_mistake_names_the_key_and_the_reason(tmp_path, text, key, reason):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == key
    assert reason in info.value.reason
    assert str(info.value).startswith(str(path) + ":")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_config(tmp_path / "nope.toml")


def test_the_examples_parse():
    for name in ("parley.toml", "parley-llm.toml"):
        config = load_config(ROOT / "examples" / "fleet" / name)
        assert {a.id for a in config.agents} == {"front-desk", "billing", "support"}


@pytest.mark.parametrize("text,fragment", [
    ("[[agents]]\nid='a'\ntype='python'\nentry='no_such_module_xyz:f'", "agents[0].entry: cannot import"),
    ("[[agents]]\nid='a'\ntype='python'\nentry='examples.fleet.agents:nothing_here'", "has no attribute"),
    ("[llm]\nbase_url='http://127.0.0.1:9/v1'\nmodel='m'\napi_key_env='PARLEY_TEST_UNSET_KEY'\n"
     "[[agents]]\nid='a'\ntype='llm'", "agents[0].api_key_env: the environment variable PARLEY_TEST_UNSET_KEY"),
])
def test_serve_reports_build_errors_in_one_line(tmp_path, text, fragment):
    path = write(tmp_path, text)
    env = {k: v for k, v in os.environ.items() if k != "PARLEY_TEST_UNSET_KEY"}
    done = subprocess.run([*PARLEY, "serve", "--config", str(path), "--port", str(free_port())], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error: ") and fragment in " ".join(lines)


@pytest.mark.parametrize("where", ["repository", "elsewhere"])
def test_the_example_fleet_crosses_all_three_agents(where, tmp_path):
    """`parley serve --config examples/fleet/parley.toml`, then one conversation through all three; from the
    repository root, and from another directory (the config's Python entries are found next to the file)."""
    port = free_port()
    cwd = ROOT if where == "repository" else tmp_path
    config = "examples/fleet/parley.toml" if where == "repository" else str(ROOT / "examples/fleet/parley.toml")
    proc = subprocess.Popen([*PARLEY, "serve", "--config", config, "--port", str(port),
                             "--memory", "--log-level", "warning"], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/.well-known/agent-card.json", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the fleet did not start"
            time.sleep(0.05)
        chat = subprocess.run([*PARLEY, "chat", f"{base}/a2a/front-desk"], cwd=ROOT, capture_output=True, text=True,
                              input="I want a refund for my broken router\nINV-1042\n\n", timeout=60)
        assert chat.returncode == 0, chat.stderr
        out = chat.stdout
        assert "asked Billing" in out and "Which invoice" in out
        assert "asked Support" in out and "the router has a hardware fault" in out
        assert "Refund approved for INV-1042" in out and "[completed]" in out
        task_id = out.split("task ", 1)[1].split()[0]
        trace = httpx.get(f"{base}/a2a/front-desk/tasks/{task_id}/trace", timeout=10).json()
        chain = []
        node = trace
        while node:
            chain.append((node["agent"], node["state"]))
            node = node["children"][0] if node.get("children") else None
        assert [a for a, _ in chain] == ["front-desk", "billing", "support"]
        assert {s for _, s in chain} == {"completed"}
    finally:
        proc.terminate()
        proc.wait(timeout=20)
