"""StderrTail: a subprocess's stderr passed on to a stream, its last lines kept for error messages.

An MCP server that dies at start usually says why on stderr (a missing module, a bad flag); the error
Parley reports then ends with those lines instead of only "connection closed".
"""

from __future__ import annotations

import os
import sys
import threading
from collections import deque
from typing import TextIO


class StderrTail:
    """A pipe whose write end is handed to a subprocess as stderr; a reader thread forwards each line."""

    def __init__(self, forward_to: TextIO | None = None, *, keep: int = 20) -> None:
        read_fd, write_fd = os.pipe()
        self.file = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self._lines: deque[str] = deque(maxlen=keep)
        self._forward_to = forward_to
        self._reader = threading.Thread(target=self._read, args=(read_fd,), name="mcp stderr", daemon=True)
        self._reader.start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as pipe:
            for line in pipe:
                self._lines.append(line.rstrip("\n"))
                target = self._forward_to if self._forward_to is not None else sys.stderr
                try:
                    target.write(line)
                    target.flush()
                except (OSError, ValueError):  # the target was closed: the lines are still kept
                    pass

    def close(self, wait: float = 2.0) -> list[str]:
        """Close Parley's write end and return the last lines (all of them once the subprocess has exited)."""
        if not self.file.closed:
            self.file.close()
        self._reader.join(wait)
        return list(self._lines)

    def last_lines(self) -> list[str]:
        """The lines read so far (the newest last)."""
        return list(self._lines)
