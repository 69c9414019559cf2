"""Dashboard logins: a sealed cookie holding the credential the operator logged in with, and a CSRF token.

The cookie is a Fernet token (AES-CBC + HMAC, from `cryptography`: sealed and authenticated, never
readable or forgeable by the browser) over {credential, csrf, expiry, session id}. Logging out revokes the
session id on the server (:class:`Revocations`, until the session would have expired anyway), so a copy
of the cookie taken before the logout opens nothing afterwards. The credential itself is kept,
not a verdict about it, so every request is authenticated again: a revoked or expired key logs its
dashboard sessions out at once, on every replica. The cookie is HttpOnly, SameSite=Lax (a link from
elsewhere opens the dashboard logged in; no GET changes anything, and every POST needs the CSRF token),
and Secure when the dashboard is reached over HTTPS.

Every state-changing request must carry the session's CSRF token (the `X-CSRF-Token` header, or the
`csrf` form field) and, when the browser sends one, an `Origin` of this server: a page elsewhere can
neither read the token nor pass the Origin check.
"""

from __future__ import annotations

import hmac
import os
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import msgspec
from cryptography.fernet import Fernet, InvalidToken
from starlette.requests import Request
from starlette.responses import Response

from parley.settings import DashboardSettings

COOKIE = "parley_session"
PRUNE_AT = 1024  # revocations held before the expired ones are dropped
CSRF_HEADER = "x-csrf-token"


def _session_id() -> str:
    return secrets.token_urlsafe(16)


@dataclass(frozen=True, slots=True)
class Session:
    """One browser's dashboard session: the credential it logged in with ("" before a login), its CSRF token,
    its expiry, and its id (what a logout revokes)."""

    credential: str
    csrf: str
    expires_at: float
    id: str = field(default_factory=_session_id)


class _Sealed(msgspec.Struct, array_like=True):
    credential: str
    csrf: str
    expires_at: float
    id: str


class Revocations:
    """Session ids logged out before their expiry, each kept until that expiry (then the cookie is refused by
    its own expiry). Kept in this process: a server's dashboard sessions are revoked on the replica that
    served the logout (docs/security.md says what that means for several replicas)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._until: dict[str, float] = {}
        self._clock = clock

    def revoke(self, session_id: str, expires_at: float) -> None:
        """Refuse `session_id` from now until `expires_at`; forget the revocations that are no longer needed."""
        now = self._clock()
        if len(self._until) >= PRUNE_AT:
            self._until = {sid: until for sid, until in self._until.items() if until > now}
        if expires_at > now:
            self._until[session_id] = expires_at

    def revoked(self, session_id: str) -> bool:
        """Whether `session_id` was logged out (and has not expired since)."""
        until = self._until.get(session_id)
        return until is not None and until > self._clock()

    def __len__(self) -> int:
        return len(self._until)


class Sessions:
    """Seals and opens session cookies with one Fernet key.

    Args:
        settings: `session_key_env` names the variable holding the key (replicas share it); unset or empty,
            a key is made for this process. `session_hours`: how long a login lasts.
        env: where the key is read (default: the process environment).
    """

    def __init__(self, settings: DashboardSettings, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        key = env.get(settings.session_key_env) if settings.session_key_env else None
        self.shared = bool(key)
        self._fernet = Fernet(key.encode() if key else Fernet.generate_key())
        self.lifetime = settings.session_hours * 3600
        self.revocations = Revocations()

    def new(self, credential: str = "") -> Session:
        """A fresh session (a new CSRF token): anonymous, or logged in with `credential`."""
        return Session(credential, secrets.token_urlsafe(24), time.time() + self.lifetime)

    def read(self, request: Request) -> Session | None:
        """The request's session, or None (no cookie, a cookie not sealed by this key, an expired one, or one
        whose session was logged out)."""
        raw = request.cookies.get(COOKIE)
        if not raw:
            return None
        try:
            sealed = msgspec.json.decode(self._fernet.decrypt(raw.encode(), ttl=int(self.lifetime) + 60), type=_Sealed)
        except (InvalidToken, msgspec.DecodeError, ValueError):
            return None
        if sealed.expires_at <= time.time() or self.revocations.revoked(sealed.id):
            return None
        return Session(sealed.credential, sealed.csrf, sealed.expires_at, sealed.id)

    def revoke(self, session: Session) -> None:
        """Log `session` out on the server: its cookie, and every copy of it, opens nothing from now on."""
        self.revocations.revoke(session.id, session.expires_at)

    def write(self, response: Response, session: Session, *, secure: bool, path: str = "/") -> None:
        """Set the cookie of `session` on `response`."""
        token = self._fernet.encrypt(msgspec.json.encode(_Sealed(session.credential, session.csrf,
                                                                 session.expires_at, session.id))).decode()
        response.set_cookie(COOKIE, token, max_age=max(1, int(session.expires_at - time.time())), path=path,
                            httponly=True, samesite="lax", secure=secure)

    @staticmethod
    def clear(response: Response, *, path: str = "/") -> None:
        response.delete_cookie(COOKIE, path=path)

    def seal(self, data: bytes) -> str:
        """`data` sealed with the session key (for other short-lived cookies, such as a login in progress)."""
        return self._fernet.encrypt(data).decode()

    def unseal(self, token: str | None, max_age: int) -> bytes | None:
        """What `seal` sealed, if it is this key's and younger than `max_age` seconds; else None."""
        if not token:
            return None
        try:
            return self._fernet.decrypt(token.encode(), ttl=max_age)
        except InvalidToken:
            return None


def csrf_problem(request: Request, session: Session | None, own_origins: set[str],
                 form_token: str | None = None) -> str | None:
    """Why a state-changing request must be refused (no session, wrong token, a foreign Origin), or None.

    `own_origins`: this server's origins (`scheme://host[:port]`) as browsers reach it."""
    if session is None:
        return "no dashboard session (reload the page)"
    sent = request.headers.get(CSRF_HEADER) or form_token or ""
    if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
        return "the CSRF token is missing or wrong (reload the page)"
    origin = request.headers.get("origin")
    if origin is not None and origin not in own_origins:
        return f"the request comes from another origin ({origin})"
    return None


__all__ = ["COOKIE", "CSRF_HEADER", "Revocations", "Session", "Sessions", "csrf_problem"]
