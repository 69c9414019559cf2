"""Fixtures of the hub tests: the fleet on a live server that knows its own URL."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hubkit import Fleet, fleet_app

from support import LiveServer, free_port


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    """One fleet server per test module (tests use their own tasks)."""
    closed = free_port()  # nothing listens here: the `offline` agent's remote
    live = LiveServer(fleet_app(closed), self_url=True).start()
    yield Fleet(live, closed)
    live.stop()
