"""Open streams end when the credential that opened them ends: a revoked or expired key, a token past `exp`.

The request pipeline wraps every stream (SendStreamingMessage, SubscribeToTask; every binding) in
:func:`watched`. The watch knows when the credential expires (the key's `expires_at`, the token's `exp`
plus the verifier's leeway) and ends the stream at that moment, idle or not. Revocation is noticed by
asking the authenticator again (:meth:`CredentialAuthenticator.still_valid`, which reads the key store,
shared by every replica): before each frame when the last answer is older than `recheck` seconds, and
every `recheck` seconds while the stream is idle; a revocation made by this process (the admin API) is
noticed before the next frame (the key store counts its revocations). So a frame goes out at most
`recheck` seconds (default 1) after another replica or `parley keys revoke` revoked the key, and never
after the key expired or this process revoked it. The stream then ends with UnauthenticatedError, which
each binding encodes as its stream error (JSON-RPC error frame, HTTP+JSON error event, gRPC
UNAUTHENTICATED).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from parley.protocol.errors import UnauthenticatedError
from parley.server.access import Principal

RECHECK_SECONDS = 1.0  # the longest a revocation made elsewhere goes unnoticed by an open stream

T = TypeVar("T")
Check = Callable[[Principal], Awaitable["str | None"]]  # None: still valid; else why it is not
Generation = Callable[[], int]  # changes when this process revokes a key: re-check before the next frame


def watched_credential(principal: Principal) -> bool:
    """Whether `principal`'s credential can end while a stream is open (it expires or can be revoked)."""
    return principal.expires_at is not None or principal.key_id is not None


async def watched(events: AsyncIterator[T], principal: Principal, check: Check, *,
                  generation: Generation = lambda: 0, recheck: float = RECHECK_SECONDS,
                  clock: Callable[[], float] = time.time) -> AsyncIterator[T]:
    """`events`, ended with UnauthenticatedError as soon as `principal`'s credential has ended (see above)."""
    checked_at, seen = time.monotonic(), generation()
    pending: asyncio.Future[T] | None = None

    async def ensure(force: bool) -> None:
        nonlocal checked_at, seen
        if principal.expires_at is not None and clock() >= principal.expires_at:
            raise UnauthenticatedError("The credential of this stream has expired: authenticate again")
        now, gen = time.monotonic(), generation()
        if force or gen != seen or now - checked_at >= recheck:
            why = await check(principal)
            checked_at, seen = now, gen
            if why is not None:
                raise UnauthenticatedError(f"{why}: this stream has ended")

    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(events))  # type: ignore[arg-type]
            wait = recheck
            if principal.expires_at is not None:
                wait = max(0.0, min(wait, principal.expires_at - clock()))
            done, _ = await asyncio.wait({pending}, timeout=wait)
            if not done:
                await ensure(force=True)
                continue
            try:
                entry = pending.result()
            except StopAsyncIteration:
                return
            finally:
                pending = None
            await ensure(force=False)
            yield entry
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        closer = getattr(events, "aclose", None)
        if closer is not None:
            await closer()


__all__ = ["RECHECK_SECONDS", "watched", "watched_credential"]
