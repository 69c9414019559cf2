"""Input limits on decoded requests (parts, text, inline files, metadata, history): a precise error for each.

Called by the request pipeline on every decoded call (see :func:`check_input`).
"""

from __future__ import annotations

from typing import Any

from parley.settings import LimitSettings


def check_input(call: Any, limits: LimitSettings) -> None:
    """Raise an A2AError naming the limit a decoded request goes over; nothing otherwise."""
