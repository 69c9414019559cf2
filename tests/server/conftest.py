"""Fixtures of the server behaviour suite: live servers hosting the test agents."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from srvkit import Lab, Live, lab_app


@dataclass
class LabServer:
    """A live server with the built-in agents plus the controllable test agents."""

    live: Live
    lab: Lab

    @property
    def url(self) -> str:
        return self.live.url

    def agent(self, agent_id: str) -> str:
        return self.live.agent_url(agent_id)


def _start() -> LabServer:
    lab = Lab()
    return LabServer(Live(lab_app(lab)).start(), lab)


def _stop(srv: LabServer) -> None:
    srv.lab.open_all()  # let every parked agent finish so the server can stop
    srv.live.stop()


@pytest.fixture(scope="module")
def lab_server() -> Iterator[LabServer]:
    """One lab server shared by a test module (tests use unique texts/contexts)."""
    srv = _start()
    yield srv
    _stop(srv)


@pytest.fixture
def fresh_server() -> Iterator[LabServer]:
    """A lab server of its own, with an empty task store."""
    srv = _start()
    yield srv
    _stop(srv)
