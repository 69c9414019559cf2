"""Fixtures of the push-notification end-to-end tests: recording webhooks on 127.0.0.1 (receiver.py)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest


def _receiver_module() -> ModuleType:
    """receiver.py under a name of its own (another test folder may have a top-level `receiver` too)."""
    name = "push_e2e_receiver"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("receiver.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


receiver = _receiver_module()


@pytest.fixture
def webhook() -> Iterator[Callable[..., object]]:
    """`webhook(answers=[...], hold=N, judge=...)`: a started receiver.Webhook, stopped after the test."""
    started: list = []

    def start(**kwargs: object):
        hook = receiver.Webhook(**kwargs).start()
        started.append(hook)
        return hook

    yield start
    for hook in started:
        hook.stop()
