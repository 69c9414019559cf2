"""The caller of the request being served, kept for the agent runs that request starts (in memory only).

The request pipeline remembers the principal it authenticated (:func:`remember`) in a context variable;
the engine starts a run in a task created while serving the request, so the run (and the in-process calls
it makes) sees that caller (:func:`current_caller`). A remote hop with token exchange
(:mod:`parley.hub.remote`) reads the caller's bearer token from it. The token is never stored: a run
resumed after a restart, or taken over by another replica, has no caller here.
"""

from __future__ import annotations

import contextvars

from parley.server.access import Principal

_CALLER: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("parley_caller", default=None)


def remember(principal: Principal) -> None:
    """Make `principal` the caller of what is served from here on in this task (an in-process call, whose
    `internal` principal only repeats its caller's id, keeps the caller it inherited)."""
    if principal.kind != "internal":
        _CALLER.set(principal)


def current_caller() -> Principal | None:
    """The principal of the request this code runs for, if any."""
    return _CALLER.get()


__all__ = ["current_caller", "remember"]
