"""A task's status changes as a picture for the task page: each state a band along a time axis from the status
update that set it to the next (the last one to now while the task runs), from the timestamps in its log.
Drawn as inline SVG on the server (no script: the CSP holds)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

WIDTH, HEIGHT = 640, 92
LEFT, RIGHT = 8, 8  # room for the first and last markers
BAND_Y, BAND_HEIGHT = 14, 18
LABEL_ROWS = 3  # labels of changes close together go on rows below each other
LABEL_WIDTH, LABEL_GAP = 110, 8  # about what a label ("input-required +1.2 s") takes, in the drawing's units


def state_timeline(rows: list[dict[str, Any]], *, settled: bool, now: float) -> dict[str, Any] | None:
    """`{"width", "height", "bands": [...], "marks": [...], "span"}` from timeline rows (`seq`, `state`, `at`: an
    ISO 8601 time or None): bands `{x, width, state}`, marks `{x, label_y, seq, state, offset}` (`offset`:
    seconds since the first change). None when fewer than one row has a time."""
    points = [(t, row) for row in rows if (t := _seconds(row.get("at"))) is not None]
    if not points:
        return None
    start = points[0][0]
    end = points[-1][0] if settled else max(points[-1][0], now)
    span = max(end - start, 1e-3)
    inner = WIDTH - LEFT - RIGHT

    def x_of(t: float) -> float:
        return round(LEFT + (t - start) / span * inner, 2)

    bands, marks = [], []
    ends = [float("-inf")] * LABEL_ROWS  # where each label row's last label ends (x)
    for i, (t, row) in enumerate(points):
        until = points[i + 1][0] if i + 1 < len(points) else end
        x = x_of(t)
        bands.append({"x": x, "width": round(max(x_of(until) - x, 0.0), 2), "state": row["state"]})
        free = [r for r in range(LABEL_ROWS) if ends[r] + LABEL_GAP <= x]
        label_row = free[0] if free else min(range(LABEL_ROWS), key=lambda r: ends[r])
        ends[label_row] = x + LABEL_WIDTH
        marks.append({"x": x, "label_y": BAND_Y + BAND_HEIGHT + 16 + 14 * label_row, "seq": row["seq"],
                      "state": row["state"], "offset": max(t - start, 0.0), "at": row["at"]})
    return {"width": WIDTH, "height": HEIGHT, "bands": bands, "marks": marks, "span": end - start,
            "band_y": BAND_Y, "band_height": BAND_HEIGHT}


def _seconds(at: str | None) -> float | None:
    """An ISO 8601 timestamp as Unix seconds; None if absent or unreadable (an agent's own odd timestamp)."""
    if not at:
        return None
    try:
        return datetime.fromisoformat(at).timestamp()
    except ValueError:
        return None


__all__ = ["HEIGHT", "WIDTH", "state_timeline"]
