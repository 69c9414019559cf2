"""Fixtures of the push-notification end-to-end tests: recording webhooks on 127.0.0.1 (receiver.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from support import stopped_at_end, webhook_receiver

receiver = webhook_receiver()


@pytest.fixture
def webhook() -> Iterator[Callable[..., object]]:
    """`webhook(answers=[...], hold=N, judge=...)`: a started receiver.Webhook, stopped after the test."""
    with stopped_at_end(lambda hook: hook.stop()) as started:
        def start(**kwargs: object):
            hook = receiver.Webhook(**kwargs).start()
            started.append(hook)
            return hook

        yield start
