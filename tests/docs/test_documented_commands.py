"""Every shell command of README.md and docs/ runs, as written, against real servers (see docblocks.py).

Each `sh run` block is run in a sandbox that looks like a user's checkout (`.venv` and `examples/`
linked from this repository, the Python files the docs define written out), with the documented
addresses rewritten to free ports: `127.0.0.1:8000` (a `parley serve` the block starts, or one the test
starts for it), `50051` (gRPC) and `11434` (an OpenAI-compatible model server, the tests' fake).
`TASK_ID`, `KEY_ID` and `pk_...` stand for the last task id, key id and key an earlier command of
the block printed. Every command must exit 0 and print what its `# =>` lines promise.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from docblocks import REPO, Block, Command, blocks, shell_blocks

sys.path.insert(0, str(REPO / "tests" / "runtime"))
from fake_llm import FakeLLM, text

from support import free_port

WAIT = 60.0
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
SERVE = re.compile(r"(?:^|[\s/])parley serve\b")
RUN_BLOCKS = [b for b in shell_blocks() if b.mode == "run"]


def test_every_shell_block_is_run_or_setup() -> None:
    """A shell block in the docs says whether the tests run it (`sh run`) or CI does (`sh setup`)."""
    unmarked = [f"{b.where} ({b.language} {b.mode})".rstrip() for b in shell_blocks() if b.mode not in ("run", "setup")]
    assert not unmarked, f"shell blocks neither `run` nor `setup`: {unmarked}"
    assert len(RUN_BLOCKS) >= 10


def _readme_files() -> dict[str, str]:
    """The Python files README.md defines (`# my_agents.py`), the first definition of each name."""
    files: dict[str, str] = {}
    for block in blocks(REPO / "README.md"):
        for name, body in block.files.items():
            files.setdefault(name, body)
    return files


class Sandbox:
    """A user's working directory, the processes a block started, and what its commands printed."""

    def __init__(self, root: Path, block: Block, llm_port: int) -> None:
        self.dir = root
        (root / ".venv").symlink_to(REPO / ".venv")
        (root / "examples").symlink_to(REPO / "examples")
        for name in ("bench", "tests"):  # `python bench/fault_run.py ...` (docs/operations.md) uses both
            (root / name).symlink_to(REPO / name)
        for name in ("parley.toml", "agents.py"):  # `parley serve --config parley.toml`: the example fleet, copied
            (root / name).write_text((REPO / "examples" / "fleet" / name).read_text())
        for name, body in {**_readme_files(), **block.files}.items():
            (root / name).write_text(body)
        self.port, self.grpc_port, self.llm_port = free_port(), free_port(), llm_port
        self.env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
                    "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}
        for name in ("PARLEY_API_KEY", "PARLEY_TOKEN", "PARLEY_LLM_BASE_URL", "PARLEY_LLM_API_KEY", "PARLEY_LLM_MODEL"):
            self.env.pop(name, None)
        self.server: subprocess.Popen[str] | None = None
        self.last: dict[str, str] = {}

    def rewrite(self, command: str) -> str:
        out = command.replace("127.0.0.1:8000", f"127.0.0.1:{self.port}")
        out = out.replace("50051", str(self.grpc_port)).replace("11434", str(self.llm_port))
        for name, value in self.last.items():
            out = out.replace(name, value)
        if SERVE.search(out) and "--port" not in out:
            out += f" --port {self.port}"
        return out

    # --- one command ---------------------------------------------------------------------------

    def run(self, command: Command) -> None:
        line = self.rewrite(command.text)
        if line.startswith("export "):
            name, _, value = line[len("export "):].partition("=")
            self.env[name.strip()] = value.strip().strip("'\"")
            return
        if SERVE.search(line):
            self.start(line)
            output = ""
        else:
            typed = "".join(f"{t}\n" for t in command.typed)
            done = subprocess.run(["bash", "-c", line], cwd=self.dir, env=self.env, input=typed, text=True,
                                  capture_output=True, timeout=WAIT)
            output = done.stdout + done.stderr
            assert done.returncode == 0, f"`{command.text}` exited {done.returncode}:\n{output[-3000:]}"
            self.remember(line, done.stdout, done.stderr)
        for promised in command.expect:
            assert promised in output, f"`{command.text}` should print {promised!r}; it printed:\n{output[-3000:]}"

    def remember(self, line: str, stdout: str, stderr: str) -> None:
        """The ids later commands of the block refer to (TASK_ID, KEY_ID, pk_...)."""
        ids = UUID.findall(stdout + stderr)
        if ids and "keys" not in line:
            self.last["TASK_ID"] = ids[0]
        token = re.search(r"^(pk_\S+)$", stdout, re.MULTILINE)
        if token:
            self.last["pk_..."] = token.group(1)
            key_id = re.search(r"API key (\S+) for agent", stderr)
            if key_id:
                self.last["KEY_ID"] = key_id.group(1)

    # --- servers -------------------------------------------------------------------------------

    def start(self, line: str) -> None:
        """Start a `parley serve` (stopping the one before) and wait until it answers."""
        self.stop()
        self.server = subprocess.Popen(["bash", "-c", line], cwd=self.dir, env=self.env, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + WAIT
        while True:
            if self.server.poll() is not None:
                out = self.server.stdout.read() if self.server.stdout else ""
                pytest.fail(f"`{line}` exited {self.server.returncode} before it served:\n{out[-3000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"`{line}` did not answer within {WAIT} s"
            time.sleep(0.05)  # polling the server's readiness, bounded by the deadline

    def stop(self) -> None:
        if self.server is None:
            return
        if self.server.poll() is None:
            os.killpg(self.server.pid, signal.SIGINT)
            try:
                self.server.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                os.killpg(self.server.pid, signal.SIGKILL)
                self.server.wait()
        if self.server.stdout:
            self.server.stdout.close()
        self.server = None


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    """The model server the LLM commands point at (scripted with short streamed answers)."""
    fake = FakeLLM().script(*(text("Hello from the model.") for _ in range(20)))
    fake.start()
    yield fake
    fake.stop()


def needs_running_server(commands: list[Command]) -> bool:
    """Whether a command talks to 127.0.0.1:8000 before the block starts a `parley serve` of its own."""
    for command in commands:
        if SERVE.search(command.text):
            return False
        if "127.0.0.1:8000" in command.text:
            return True
    return False


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=[b.where for b in RUN_BLOCKS])
def test_documented_block_runs(block: Block, tmp_path: Path, llm: FakeLLM) -> None:
    sandbox = Sandbox(tmp_path, block, llm.port)
    commands = block.commands()
    try:
        if needs_running_server(commands):
            sandbox.start(f"{REPO / '.venv' / 'bin' / 'parley'} serve --port {sandbox.port}")
        for command in commands:
            sandbox.run(command)
    finally:
        sandbox.stop()


def test_the_readme_runs_top_to_bottom_in_one_directory(tmp_path: Path, llm: FakeLLM) -> None:
    """Issue 26: a reader follows README.md in order, in one directory with one database (.parley/), as the
    first `sh setup` command leaves it: no section may leave the next one locked out (the Security section
    once secured the database for good, and "Writing an agent" then failed with `Authentication required`).
    A block that needs the server at 127.0.0.1:8000 and starts none talks to the README's first `parley
    serve` (started again if a block replaced it, as a reader goes back to the first terminal)."""
    readme = [b for b in RUN_BLOCKS if b.path.name == "README.md"]
    assert len(readme) >= 5
    sandbox = Sandbox(tmp_path, readme[0], llm.port)
    default = f"{REPO / '.venv' / 'bin' / 'parley'} serve --port {sandbox.port}"
    current = ""
    try:
        for block in readme:
            commands = block.commands()
            if needs_running_server(commands) and current != default:
                sandbox.start(default)
                current = default
            for command in commands:
                sandbox.run(command)
                if SERVE.search(command.text):
                    current = command.text
    finally:
        sandbox.stop()
