"""Failed authentications, counted per client address: guessing keys, tokens or the dashboard's login is slowed
to a few tries a minute.

After `limit` failures (a credential presented and refused: an unknown, revoked or expired API key, a token
that does not verify, a wrong dashboard login) from one address within `window` seconds, that address is
refused with 429 and `Retry-After` until the oldest of those failures leaves the window, whatever it sends,
valid credentials included: a refused address learns nothing more about which credential is right. A request
without any credential is no guess and is not counted (it gets its 401).

The address is the connection's peer, or, when that peer is a trusted proxy (`forwarded_allow_ips`), the
client address the proxy appended (the last of `X-Forwarded-For`, or the last `for=` of `Forwarded`): behind a
proxy every client would otherwise share the proxy's address. The counts are kept in this process, for at most
MAX_ADDRESSES addresses (the least recently failing are forgotten first).
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping

MAX_ADDRESSES = 10_000


class FailureThrottle:
    """Failures per address in a sliding window; an address with `limit` of them is refused until they age out.

    Args:
        limit: failures within `window` that refuse the address (None: never refused, nothing is counted).
        window: the window, in seconds.
        clock: seconds (monotonic), read at each failure and check.
    """

    def __init__(self, limit: int | None, window: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        if limit is not None and limit < 1:
            raise ValueError("limits.auth_failures must be at least 1 (leave it out for the default)")
        if not window > 0:
            raise ValueError("limits.auth_failure_window_seconds must be more than 0")
        self.limit = limit
        self.window = window
        self.clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, address: str | None) -> int | None:
        """Whole seconds until `address` may try again (at least 1), or None when it is not refused."""
        if self.limit is None or address is None:
            return None
        times = self._recent(address)
        if times is None or len(times) < self.limit:
            return None
        return max(1, math.ceil(times[0] + self.window - self.clock()))

    def failed(self, address: str | None) -> None:
        """Count one failure of `address`."""
        if self.limit is None or address is None:
            return
        times = self._recent(address) or deque(maxlen=self.limit)
        times.append(self.clock())
        self._failures[address] = times
        self._failures.move_to_end(address)
        while len(self._failures) > MAX_ADDRESSES:
            self._failures.popitem(last=False)

    def _recent(self, address: str) -> deque[float] | None:
        """The failures of `address` still in the window (older ones dropped), or None."""
        times = self._failures.get(address)
        if times is None:
            return None
        horizon = self.clock() - self.window
        while times and times[0] <= horizon:
            times.popleft()
        if not times:
            del self._failures[address]
            return None
        return times


def client_address(peer: str | None, headers: Mapping[str, str], trusted: list[str]) -> str | None:
    """The client's address: the peer (an HTTP peer host, or a gRPC peer such as `ipv4:1.2.3.4:5678`), or the
    address a trusted proxy forwarded (see the module docstring). None when unknown (an in-process call)."""
    host = _peer_host(peer)
    if host is None:
        return None
    if "*" in trusted or host in trusted:
        forwarded = _forwarded_for(headers)
        if forwarded is not None:
            return forwarded
    return host


def _peer_host(peer: str | None) -> str | None:
    if not peer:
        return None
    for prefix in ("ipv4:", "ipv6:"):  # gRPC peers: ipv4:1.2.3.4:5678, ipv6:[::1]:5678
        if peer.startswith(prefix):
            rest = peer[len(prefix):]
            if rest.startswith("["):
                return rest[1:rest.find("]")] if "]" in rest else rest
            return rest.rsplit(":", 1)[0]
    return peer


def _forwarded_for(headers: Mapping[str, str]) -> str | None:
    """The last client address a proxy appended (X-Forwarded-For, else Forwarded), if it is an IP address."""
    candidate = None
    xff = headers.get("x-forwarded-for")
    if xff:
        candidate = xff.split(",")[-1].strip()
    elif headers.get("forwarded"):
        for pair in headers["forwarded"].split(",")[-1].split(";"):
            name, _, value = pair.strip().partition("=")
            if name.lower() == "for":
                candidate = value.strip().strip('"')
    if not candidate:
        return None
    if candidate.startswith("["):  # Forwarded: for="[2001:db8::1]:4711"
        candidate = candidate[1:candidate.find("]")] if "]" in candidate else candidate
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        host = candidate.rsplit(":", 1)[0]  # an IPv4 address with a port
        try:
            return str(ipaddress.ip_address(host))
        except ValueError:
            return None


__all__ = ["MAX_ADDRESSES", "FailureThrottle", "client_address"]
