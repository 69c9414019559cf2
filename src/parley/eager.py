"""Running a coroutine's first step at once, and a task only for the rest when it suspends (what Python 3.12's
eager tasks do, on 3.11 too): a group commit of the memory store, which never waits, then costs no task.

:class:`Resume` awaits a coroutine step that already ran up to a future it suspended on (also what
:mod:`parley.server.ready` uses to wait for an SSE frame it polled for).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any


def start_eagerly(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> asyncio.Task | None:
    """Run `coro` up to its first suspension now; None when it finished (its exceptions raise here), else the
    task that runs the rest of it."""
    try:
        pending = coro.send(None)
    except StopIteration:
        return None
    return loop.create_task(_rest(coro, pending))


async def _rest(step: Coroutine[Any, Any, Any], pending: Any) -> Any:
    return await Resume(step, pending)


class Resume(Awaitable[Any]):
    """Awaits a coroutine step that already ran up to `pending`: hands `pending` to the task, then goes on."""

    __slots__ = ("pending", "step")

    def __init__(self, step: Generator[Any, Any, Any] | Coroutine[Any, Any, Any], pending: Any) -> None:
        self.step, self.pending = step, pending

    def __await__(self) -> Generator[Any, Any, Any]:
        step, pending = self.step, self.pending
        while True:
            try:
                sent = yield pending
            except BaseException as exc:  # noqa: BLE001 - cancellation and the like go where the step waits
                try:
                    pending = step.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    pending = step.send(sent)
                except StopIteration as done:
                    return done.value


__all__ = ["Resume", "start_eagerly"]
