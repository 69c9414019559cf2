"""What the drivers of the official a2a-sdk 0.3.26 client share (tests/interop/sdk03_driver.py,
tests/rest/sdk03_rest_driver.py, tests/security/sdk03_auth_driver.py): a user message, the text of
parts, bounded waits, the error view of a call that must fail, and the one JSON object a driver prints.

The drivers run in their own virtualenv (.venv-sdk03: a2a-sdk 0.3 cannot be installed beside 1.x),
so this module imports nothing from Parley or pytest, only the standard library and a2a-sdk 0.3.
A driver finds it with `sys.path.insert(0, <tests>)` (it runs as a script)."""

from __future__ import annotations

import asyncio
import json
import sys
import traceback
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib.metadata import version as dist_version
from typing import Any

from a2a.types import Message, Part, Role, TextPart

WAIT = 20.0  # the longest one SDK call may take before the driver reports a failure; never a pacing delay


def user_message(text: str, *, task_id: str | None = None, context_id: str | None = None) -> Message:
    """A 0.3 user message with a fresh messageId (the task and context ids if given)."""
    return Message(message_id=str(uuid.uuid4()), role=Role.user, parts=[Part(root=TextPart(text=text))],
                   task_id=task_id, context_id=context_id)


def parts_text(parts: list[Part] | None) -> str:
    """The text of the text parts of a 0.3 message or artifact."""
    return "".join(p.root.text for p in parts or [] if isinstance(p.root, TextPart))


async def bounded(awaitable: Awaitable[Any]) -> Any:
    """Await within WAIT."""
    return await asyncio.wait_for(awaitable, WAIT)


async def next_event(stream: AsyncIterator[Any]) -> Any:
    """The next event of an SDK stream, within WAIT."""
    async with asyncio.timeout(WAIT):
        return await anext(stream)


def raw(event: Any) -> Any:
    """The view of an event that keeps it as the SDK returned it."""
    return event


async def error_of(call: Awaitable[Any], error_type: type[BaseException],
                   view: Callable[[Any], dict[str, Any]]) -> dict[str, Any] | None:
    """`view` of the `error_type` the call raises (within WAIT); None if it succeeds."""
    try:
        await bounded(call)
    except error_type as exc:
        return view(exc)
    return None


def report(produce: Callable[[], Awaitable[dict[str, Any]]], out: dict[str, Any]) -> int:
    """Run `produce()` and print `out` with its `result` as one JSON line; the exit status (0). If it raises, `out`
    holds `error` {type, message, status (HTTP), code (JSON-RPC), traceback} instead and the status is 1."""
    out = {"sdkVersion": dist_version("a2a-sdk"), **out}
    status = 0
    try:
        out["result"] = asyncio.run(produce())
    except Exception as exc:  # noqa: BLE001 - reported to the test, which asserts on it
        status = 1
        out["error"] = {
            "type": type(exc).__name__,
            "message": str(exc),
            "status": getattr(exc, "status_code", None),
            "code": getattr(getattr(exc, "error", None), "code", None),
            "traceback": traceback.format_exc(),
        }
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return status
