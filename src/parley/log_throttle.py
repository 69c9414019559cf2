"""One log line per interval for a failure that repeats, with the number of lines it stood for.

A failure met on every commit (the bus unreachable: each commit's publish fails) would otherwise log a line
per commit, hundreds a second on a busy replica, drowning everything else; the first occurrence is what an
operator needs, then a reminder now and then saying how often it happened meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class Throttled:
    """Log `warning(...)` at most once per `interval` seconds; the next line that is logged says how many were
    suppressed since the previous one.

    Args:
        logger: where the lines go.
        interval: the shortest time between two lines, in seconds.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, logger: logging.Logger, interval: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.interval = interval
        self.clock = clock
        self._last: float | None = None
        self.suppressed = 0

    def warning(self, msg: str, *args: object) -> bool:
        """Log a warning unless one was logged less than `interval` seconds ago; whether it was logged."""
        now = self.clock()
        if self._last is not None and now - self._last < self.interval:
            self.suppressed += 1
            return False
        if self.suppressed:
            msg = f"{msg} (and {self.suppressed} more like it in the last {now - self._last:.0f} s)"
        self._last, self.suppressed = now, 0
        self.logger.warning(msg, *args)
        return True

    @property
    def failing(self) -> bool:
        """Whether a warning was logged and the failure has not been declared over since (:meth:`recovered`)."""
        return self._last is not None

    def recovered(self, msg: str, *args: object) -> None:
        """The failure is over: log `msg` once (with how many warnings were suppressed since the last line),
        and log its next occurrence at once. Nothing happens while it was not failing."""
        if self._last is None:
            return
        if self.suppressed:
            msg = f"{msg} ({self.suppressed} more failure(s) since the last warning)"
        self._last, self.suppressed = None, 0
        self.logger.warning(msg, *args)


__all__ = ["Throttled"]
