"""Fixtures shared by the end-to-end tests: `launch` starts real `parley serve` processes; `bulky_server` is one
serving tests/e2e/apps/bulky.py."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_serve_processes import Server, launch, server_env  # noqa: F401 - launch: a fixture, found by name


@pytest.fixture
def bulky_server(tmp_path: Path) -> Iterator[Server]:
    """A ready `parley serve --app bulky:app --memory` (tests/e2e/apps/bulky.py: the agents of the slow-client and
    slow-body tests), stopped after the test."""
    srv = Server("bulky", ["--app", "bulky:app", "--memory"], cwd=tmp_path, port=None, port_flag=True,
                 env=server_env())
    try:
        yield srv.wait_ready()
    finally:
        srv.close()
