"""What the dashboard's browser tests share: Debian's chromium under Playwright, a `parley serve` with the
dashboard test agents, and logging in.

Chromium comes from the distribution (`/usr/bin/chromium`, installed by .ci/run), never downloaded. Without
it the browser tests are skipped, except under CI=true, where its absence is a failure.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("PARLEY_CHROMIUM", "/usr/bin/chromium")
# The flags a root, offline, headless Chromium needs here (no sandbox as root; no background fetches that the
# closed network refuses).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
ADMIN_KEY = "adm_dashboard-test-key-0123456789"

CONFIG = """
[server]
db = "{db}"
builtin_agents = true
default_agent = "echo"
[server.auth]
admin_key_env = "PARLEY_ADMIN_KEY"

[[agents]]
id = "slow"
type = "python"
entry = "dashboard_agents:slow"
name = "Slow"
description = "Works until it is canceled."

[[agents]]
id = "writer"
type = "python"
entry = "dashboard_agents:writer"
name = "Writer"
description = "Answers with Markdown, data and a file."

[[agents]]
id = "front"
type = "python"
entry = "dashboard_agents:front"
name = "Front"
description = "Greets; sends broken things to fixer."

[[agents]]
id = "fixer"
type = "python"
entry = "dashboard_agents:fixer"
name = "Fixer"
description = "Diagnoses."

[[routes]]
from = "front"
to = "fixer"
keywords = ["broken"]
"""


def chromium_or_skip() -> str:
    """The chromium binary; a skip (a failure under CI=true) when it is not installed."""
    if shutil.which(CHROMIUM) or Path(CHROMIUM).exists():
        return CHROMIUM
    if os.environ.get("CI") == "true":
        pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium for the dashboard tests")
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")


def write_config(directory: Path) -> Path:
    path = directory / "parley.toml"
    path.write_text(CONFIG.format(db=directory / "dashboard.db"))
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One headless chromium for a test module."""
    executable = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@contextlib.contextmanager
def serving(name: str, config: Path, **env: str) -> Iterator[object]:
    """A ready `parley serve --config config` (its directory as working directory), stopped afterwards."""
    from test_serve_processes import Server, server_env

    srv = Server(name, ["--config", str(config)], cwd=config.parent, port=None, port_flag=True,
                 env=server_env(**env))
    try:
        yield srv.wait_ready()
    finally:
        srv.close()


def login(page, base: str, credential: str = ADMIN_KEY) -> None:
    """Log in through the login form, as a person would."""
    page.goto(f"{base}/ui/login")
    page.get_by_label("Admin API key or bearer token").fill(credential)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/")
