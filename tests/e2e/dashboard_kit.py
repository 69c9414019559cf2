"""What the dashboard's browser tests share: Debian's chromium under Playwright, a `parley serve` with the
dashboard test agents, and logging in.

Chromium comes from the distribution (`/usr/bin/chromium`, installed by .ci/run), never downloaded. Without
it the browser tests are skipped, except under CI=true, where its absence is a failure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import CHROMIUM, CHROMIUM_ARGS, chromium_browser, chromium_or_skip, dashboard_login

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

[[agents]]
id = "chatty"
type = "python"
entry = "dashboard_agents:chatty"
name = "Chatty"
description = "Streams a word every 50 ms until canceled."

[[routes]]
from = "front"
to = "fixer"
keywords = ["broken"]
"""


def write_config(directory: Path) -> Path:
    path = directory / "parley.toml"
    path.write_text(CONFIG.format(db=directory / "dashboard.db"))
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One headless chromium for a test module."""
    with chromium_browser() as chromium:
        yield chromium


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
    """Log in through the login form, as a person would (the admin key by default)."""
    dashboard_login(page, base, credential)


__all__ = ["ADMIN_KEY", "CHROMIUM", "CHROMIUM_ARGS", "browser", "chromium_or_skip", "login", "serving", "write_config"]
