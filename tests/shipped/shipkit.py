"""Parley as a user gets it: the sdist and wheel built from this checkout, installed into fresh virtual
environments outside it with the commands of docs/install.md, and that install's programs run as subprocesses.

The tests in this folder run under the development venv (pytest, Playwright, httpx), but everything they test
runs in an `Install`: its `parley` and `python`, started with no PYTHONPATH, no development venv on PATH, and a
working directory outside the checkout. So a module missing from the wheel, a dependency missing from
pyproject's `dependencies` (or an extra's), or a module that only imports after another one fails here.

The environments are built once per session and cached by the wheel's hash (and the Python version) under
`$PARLEY_SHIPPED_CACHE` or the system's temporary directory, so a second run reuses them; a file lock keeps two
sessions (two worktrees) from building the same one at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import free_port, stop_process, wait_until_ready

REPO = Path(__file__).resolve().parents[2]
INSTALL_DOC = REPO / "docs" / "install.md"
CACHE = Path(os.environ.get("PARLEY_SHIPPED_CACHE") or Path(tempfile.gettempdir()) / "parley-shipped")
WAIT = 60.0  # upper bound of one step (a server start, a CLI call); only detects a failure
INSTALL_TIMEOUT = 600.0

# The commands of docs/install.md, as written there. Running one replaces the placeholders: /path/to/parley is
# this checkout, /path/to/dist the session's dist directory (also linked as ./dist of every project directory).
VENV = "python3 -m venv .venv"
BUILD = "python -m build --outdir dist /path/to/parley"
FROM_CHECKOUT = ".venv/bin/pip install /path/to/parley"
FROM_CHECKOUT_EXTRA = ".venv/bin/pip install '/path/to/parley[grpc]'"
EDITABLE = ".venv/bin/pip install -e /path/to/parley"
FROM_WHEEL = ".venv/bin/pip install dist/parley_a2a-0.1.0-py3-none-any.whl"
FROM_WHEEL_EXTRA = ".venv/bin/pip install 'parley-a2a[grpc] @ file:///path/to/dist/parley_a2a-0.1.0-py3-none-any.whl'"
DOCUMENTED = [VENV, BUILD, FROM_CHECKOUT, FROM_CHECKOUT_EXTRA, EDITABLE, FROM_WHEEL, FROM_WHEEL_EXTRA]


def with_extra(command: str, extra: str) -> str:
    """A documented install command (shown with `[grpc]`) for another extra."""
    return command.replace("[grpc]", f"[{extra}]")


# name -> the documented commands that make it, in order (run in the project directory)
RECIPES: dict[str, list[str]] = {
    "wheel": [VENV, FROM_WHEEL],
    "wheel-grpc": [VENV, with_extra(FROM_WHEEL_EXTRA, "grpc")],
    "wheel-mcp": [VENV, with_extra(FROM_WHEEL_EXTRA, "mcp")],
    "wheel-otel": [VENV, with_extra(FROM_WHEEL_EXTRA, "otel")],
    "wheel-postgres-redis": [VENV, with_extra(FROM_WHEEL_EXTRA, "postgres,redis")],
    # a user who installed from the checkout and adds an extra later
    "checkout": [VENV, FROM_CHECKOUT, FROM_CHECKOUT_EXTRA],
    "editable": [VENV, EDITABLE],
}


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: no PYTHONPATH, no virtual environment active, nothing of this checkout
    on PATH, no Parley credentials or LLM settings from the developer's shell; plain, unbuffered output."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP") and not k.startswith("PARLEY_")}
    env["PATH"] = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                                  if p and not Path(p).resolve().is_relative_to(REPO))
    env.update({"PYTHONUNBUFFERED": "1", "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200"})
    env.update(extra)
    return env


def _expand(command: str, dist: Path) -> str:
    """A documented command with its placeholders filled in; `python -m build` is the dev venv's (the dev extra
    pins build), as a user runs the `python` they installed build into."""
    out = command.replace("/path/to/parley", str(REPO))  # inside the documented quotes: a path without spaces
    out = out.replace("/path/to/dist", str(dist))
    if out.startswith("python -m build "):
        out = shlex.quote(sys.executable) + out[len("python"):]
    return out


def _run(command: str, cwd: Path, dist: Path, log: Path) -> None:
    line = _expand(command, dist)
    with log.open("a") as out:
        out.write(f"$ {line}\n")
        out.flush()
        done = subprocess.run(["bash", "-c", line], check=False, cwd=cwd, env=clean_env(), stdout=out,
                              stderr=subprocess.STDOUT, timeout=INSTALL_TIMEOUT)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        pytest.fail(f"`{command}` exited {done.returncode} (in {cwd}):\n{tail}", pytrace=False)


@dataclass
class Dist:
    """The session's build: the sdist, the wheel built from it, and where installs of it are cached."""

    dir: Path
    wheel: Path
    sdist: Path
    cache: Path  # CACHE/<wheel hash>-py<version>


def build(workdir: Path) -> Dist:
    """Build the sdist and the wheel from it with docs/install.md's command, in `workdir` (outside the
    checkout); the cache directory of this wheel gets a copy of both."""
    _run(BUILD, workdir, workdir / "dist", workdir / "build.log")
    wheels, sdists = sorted((workdir / "dist").glob("*.whl")), sorted((workdir / "dist").glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, f"the build made {wheels + sdists}"
    digest = hashlib.sha256(wheels[0].read_bytes()).hexdigest()[:16]
    python = subprocess.run(["python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], env=clean_env(),
                            capture_output=True, text=True, check=True).stdout.strip()  # what VENV will run
    cache = CACHE / f"{digest}-py{python}"
    _in_use(cache)
    _prune(keep=cache)
    dist = cache / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    for made in (wheels[0], sdists[0]):
        if not (dist / made.name).exists():
            shutil.copy2(made, dist / made.name)
    return Dist(dist, dist / wheels[0].name, dist / sdists[0].name, cache)


@dataclass
class Install:
    """One virtual environment with Parley installed as a user installs it; runs its programs."""

    name: str
    project: Path  # the user's project directory; .venv is in it
    dist: Path

    @property
    def bin(self) -> Path:
        return self.project / ".venv" / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    def parley(self, *args: str, cwd: Path, input: str | None = None, env: dict[str, str] | None = None,
               timeout: float = WAIT) -> subprocess.CompletedProcess[str]:
        """Run this install's `parley` command and wait for it."""
        return subprocess.run([str(self.bin / "parley"), *args], check=False, cwd=cwd, env=clean_env(**(env or {})),
                              text=True, input=input, capture_output=True, timeout=timeout)

    def run_python(self, code: str, *, cwd: Path, timeout: float = WAIT) -> subprocess.CompletedProcess[str]:
        """Run `code` in a fresh interpreter of this install (`python -c`)."""
        return subprocess.run([str(self.python), "-c", code], check=False, cwd=cwd, env=clean_env(), text=True,
                              capture_output=True, timeout=timeout)

    @contextmanager
    def serve(self, *args: str, cwd: Path, env: dict[str, str] | None = None,
              ready_timeout: float = WAIT) -> Iterator[Served]:
        """`parley serve --port <free> *args` of this install, in `cwd`, until it answers /readyz; stopped
        (SIGTERM, a graceful stop) after the block. Its output is in `served.output()`."""
        port = free_port()
        log = cwd / f"serve-{port}.log"
        with log.open("w") as out:
            proc = subprocess.Popen([str(self.bin / "parley"), "serve", "--port", str(port), *args], cwd=cwd,
                                    env=clean_env(**(env or {})), stdout=out, stderr=subprocess.STDOUT)
        served = Served(f"http://127.0.0.1:{port}", proc, log)
        try:
            wait_until_ready(proc, served.url, ready_timeout, output=served.output)
            yield served
        finally:
            stop_process(proc)


@dataclass
class Served:
    """A running `parley serve` of an install."""

    url: str
    proc: subprocess.Popen
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def install(name: str, dist: Dist) -> Install:
    """The install `name` of RECIPES for this build: reused from the cache when a finished one is there, else
    made with its documented commands in a fresh project directory. The checkout's installs (`checkout`,
    `editable`) are cached per checkout path too: an editable install points into one checkout."""
    where = name if name not in ("checkout", "editable") else (
        f"{name}-{hashlib.sha256(str(REPO).encode()).hexdigest()[:8]}")
    project = dist.cache / where
    done = project / ".installed"
    recipe = "\n".join(RECIPES[name])
    with _locked(dist.cache / f"{where}.lock"):
        if done.exists() and done.read_text() == recipe and (project / ".venv" / "bin" / "parley").exists():
            return Install(name, project, dist.dir)
        shutil.rmtree(project, ignore_errors=True)
        project.mkdir(parents=True)
        (project / "dist").symlink_to(dist.dir)
        started = time.monotonic()
        for command in RECIPES[name]:
            _run(command, project, dist.dir, project / "install.log")
        done.write_text(recipe)
        (project / "install-seconds").write_text(f"{time.monotonic() - started:.1f}\n")
    return Install(name, project, dist.dir)


KEEP = 3  # cached builds kept: the newest ones (an edit to src/parley makes a new wheel, hence a new build)
_HELD: list[object] = []  # the open `.use` files of this process (their shared locks last until it exits)


def _in_use(cache: Path) -> None:
    """Mark `cache` used now, and hold a shared lock on it for the rest of this process: no other session
    prunes it meanwhile."""
    cache.mkdir(parents=True, exist_ok=True)
    os.utime(cache)
    handle = (cache.parent / f"{cache.name}.use").open("a")
    fcntl.flock(handle, fcntl.LOCK_SH)
    _HELD.append(handle)


def _prune(keep: Path) -> None:
    """Remove cached builds beyond the KEEP most recently used (each is ~800 MB of environments), skipping any
    that another session is using."""
    builds = sorted((d for d in CACHE.iterdir() if d.is_dir() and d != keep), key=lambda d: d.stat().st_mtime,
                    reverse=True)
    for old in builds[KEEP - 1:]:
        with (CACHE / f"{old.name}.use").open("a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # in use by a running session
            shutil.rmtree(old, ignore_errors=True)
            (CACHE / f"{old.name}.use").unlink(missing_ok=True)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def documented_install_commands() -> list[str]:
    """The commands of docs/install.md's `sh setup` blocks, as written."""
    sys.path.insert(0, str(REPO / "tests" / "docs"))
    from docblocks import blocks

    return [c.text for b in blocks(INSTALL_DOC) if b.language == "sh" and b.mode == "setup" for c in b.commands()]


IMPORT_LINE = re.compile(r"(?:from parley[\w.]* import [\w, ]+|import parley[\w.]*(?: as \w+)?)")


def documented_imports() -> list[str]:
    """Every distinct `from parley... import ...` / `import parley...` line of README.md and docs/*.md (code
    blocks and prose alike), in the order they first appear."""
    seen: dict[str, None] = {}
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for found in IMPORT_LINE.findall(doc.read_text(encoding="utf-8")):
            seen.setdefault(found.strip().rstrip(","), None)
    return list(seen)


__all__ = ["CACHE", "DOCUMENTED", "INSTALL_DOC", "RECIPES", "REPO", "WAIT", "Dist", "Install", "Served", "build",
           "clean_env", "documented_imports", "documented_install_commands", "install", "with_extra"]
