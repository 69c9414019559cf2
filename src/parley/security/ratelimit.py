"""Rate limits (token buckets per principal and agent) and concurrency limits, with RateLimit headers."""

from __future__ import annotations

from parley.server.access import NO_GRANT, Access, Grant, Principal
from parley.settings import LimitSettings


class Limiter:
    """The RateLimiter of the request pipeline, configured by `LimitSettings`."""

    def __init__(self, limits: LimitSettings) -> None:
        self.limits = limits

    async def acquire(self, access: Access, principal: Principal) -> Grant:
        return NO_GRANT
