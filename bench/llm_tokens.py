"""The LLM-shaped workload's request and tokens, shared by every server bench/llm_stream.py runs (Parley's agent in
bench/llm_agents.py, a2a-sdk's in bench/sdk_llm_server.py, the floor in bench/floor_server.py); no Parley import, so
that the peers and the floor load none of it.

A request's text "N INTERVAL_MS" asks for N tokens, one every INTERVAL_MS; token i is " t<i>:<time.time_ns() at
emit>", so the client can tell the delay from the agent's yield to its own receipt, and the order.
"""

from __future__ import annotations

import time

DEFAULT_TOKENS, DEFAULT_INTERVAL_MS = 200, 50


def parse(text: str) -> tuple[int, float]:
    """(tokens, interval s) from "N INTERVAL_MS" (defaults 200, 50)."""
    fields = [int(x) for x in (text or "").split() if x.isdigit()]
    n, interval_ms = (fields + [DEFAULT_TOKENS, DEFAULT_INTERVAL_MS][len(fields):])[:2]
    return n, interval_ms / 1000


def token_text(i: int) -> str:
    """Token `i`, stamped with the wall clock (ns) at the moment it is emitted."""
    return f" t{i}:{time.time_ns()}"
