"""parley.log_throttle.Throttled: a failure that repeats is one warning per interval, the next line counting
the ones suppressed, and one line when it is over (issue 27, item 2: a replica whose bus was down logged a
warning per commit, ~260 lines in 13 s). A stand-in clock: the interval is the behaviour under test."""

from __future__ import annotations

import logging

import pytest

from parley.log_throttle import Throttled


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_interval_with_the_count(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    throttled = Throttled(logging.getLogger("t.throttle"), 10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="t.throttle"):
        for i in range(260):  # 260 failures in 13 s
            clock.now = 100.0 + i * 0.05
            throttled.warning("publishing task %s failed", i)
        throttled.recovered("publishing works again")
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "publishing task 0 failed"
    assert lines[1].startswith("publishing task 200 failed (and 199 more like it in the last 10 s)")
    assert lines[2] == "publishing works again (59 more failure(s) since the last warning)"
    assert len(lines) == 3


def test_after_recovery_the_next_failure_is_logged_at_once(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    throttled = Throttled(logging.getLogger("t.throttle2"), 10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="t.throttle2"):
        throttled.recovered("nothing was failing: no line")
        assert throttled.warning("down") and throttled.failing
        throttled.recovered("up")
        assert not throttled.failing
        clock.now += 1
        assert throttled.warning("down again")
    assert [r.getMessage() for r in caplog.records] == ["down", "up", "down again"]
