"""Fixtures of the push-notification tests: the webhook receiver and live Parley servers (see webhooks.py).

Everything runs on 127.0.0.1: each Parley server under uvicorn in a thread (tests/support.py), the
webhook receiver under uvicorn in another. The servers' push settings allow exactly 127.0.0.1/32 and
use small backoffs, so retries are quick.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
for folder in (HERE.parent, HERE):  # support.py (tests/), webhooks.py (here)
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from webhooks import Gates, PushServer, Webhooks, push_app, push_settings

from parley.app import Parley
from parley.settings import PushSettings, Settings
from support import LiveServer, stopped_at_end


@pytest.fixture(scope="session")
def receiver() -> Iterator[Webhooks]:
    hooks = Webhooks().start()
    yield hooks
    hooks.stop()


@pytest.fixture
def hooks(receiver: Webhooks) -> Iterator[Webhooks]:
    """The webhook receiver (each test uses fresh paths); held requests are released after the test."""
    yield receiver
    receiver.release_all()


@pytest.fixture
def start_server() -> Iterator[Callable[..., PushServer]]:
    """Factory: `start_server(push_settings(...), db=None, keys=None, port=None)`; stopped after the test.

    `db`: a SQLite file (default: in memory). `keys`: a key store (the server then wants API keys)."""
    with stopped_at_end(lambda srv: srv.stop()) as started:
        def start(push: PushSettings | None = None, *, db: str | Path | None = None, keys: Any = None,
                  port: int | None = None) -> PushServer:
            settings = Settings(db=str(db) if db else "memory", push=push if push is not None else push_settings())
            gates = Gates()
            app = push_app(settings, gates)
            if keys is not None:  # Runtime(keys=...): the store the server checks API keys against
                app.asgi = lambda settings=None, **access: Parley.asgi(app, settings, keys=keys, **access)  # type: ignore[method-assign]
            srv = PushServer(LiveServer(app, port, self_url=True).start(), gates, settings)
            started.append(srv)
            return srv

        yield start


@pytest.fixture
def server(start_server: Callable[..., PushServer]) -> PushServer:
    """A server with the test push settings (in-memory store)."""
    return start_server()
