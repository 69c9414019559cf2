"""Dashboard logins (parley.web.session): the sealed session cookie and the CSRF check, through real HTTP.

A tiny Starlette app stands in for the dashboard: `POST /login` writes the cookie of a session logged in with a
credential, `GET /me` reads it back, `POST /act` is a state-changing request refused by `csrf_problem`. Requests
go through Starlette's TestClient (real requests, real Set-Cookie headers). What an operator would notice: the
login survives page loads and reaches every replica that shares the key; a cookie from elsewhere, an edited
cookie or an expired one logs them out instead of letting anyone in; a cross-site form post or a request without
the page's token is refused with a reason.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from http.cookies import SimpleCookie

import pytest
from cryptography.fernet import Fernet
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from parley.settings import DashboardSettings
from parley.web.session import COOKIE, CSRF_HEADER, Session, Sessions, csrf_problem

ORIGIN = "http://testserver"  # the origin TestClient's requests come from
KEY_ENV = "PARLEY_SESSION_KEY"


def site(sessions: Sessions, *, secure: bool = False, expired: bool = False) -> Starlette:
    """A stand-in for the dashboard: log in, see who you are, do something that changes state."""

    async def login(request: Request) -> Response:
        form = await request.form()
        session = sessions.new(str(form["credential"]))
        if expired:
            session = Session(session.credential, session.csrf, time.time() - 60)
        response = JSONResponse({"csrf": session.csrf})
        sessions.write(response, session, secure=secure)
        return response

    async def me(request: Request) -> Response:
        session = sessions.read(request)
        if session is None:
            return JSONResponse({"session": None})
        return JSONResponse({"session": {"credential": session.credential, "csrf": session.csrf}})

    async def act(request: Request) -> Response:
        form = await request.form()
        token = form.get("csrf")
        problem = csrf_problem(request, sessions.read(request), {ORIGIN},
                               str(token) if token is not None else None)
        if problem is not None:
            return JSONResponse({"error": problem}, status_code=403)
        return JSONResponse({"done": True})

    return Starlette(routes=[Route("/login", login, methods=["POST"]), Route("/me", me, methods=["GET"]),
                             Route("/act", act, methods=["POST"])])


def sessions_with(key: str | None = None, *, hours: float = 12.0) -> Sessions:
    env: Mapping[str, str] = {KEY_ENV: key} if key is not None else {}
    return Sessions(DashboardSettings(session_key_env=KEY_ENV, session_hours=hours), env=env)


def log_in(client: TestClient, credential: str = "pk_abc_secret") -> tuple[str, str]:
    """Log in; (the sealed cookie value, the session's CSRF token)."""
    resp = client.post("/login", data={"credential": credential})
    assert resp.status_code == 200, resp.text
    return cookie_of(resp.headers["set-cookie"]), resp.json()["csrf"]


def cookie_of(set_cookie: str) -> str:
    jar: SimpleCookie = SimpleCookie()
    jar.load(set_cookie)
    return jar[COOKIE].value


def read_back(sessions: Sessions, cookie: str) -> dict | None:
    """What `sessions` makes of a request that carries `cookie` (as a browser would send it)."""
    with TestClient(site(sessions)) as client:
        resp = client.get("/me", headers={"cookie": f"{COOKIE}={cookie}"})
        assert resp.status_code == 200
        return resp.json()["session"]


# --- the cookie ------------------------------------------------------------------------------------------------------


def test_a_written_cookie_reads_back_the_same_credential_and_csrf_token() -> None:
    """After logging in, the next page load (the browser sends the cookie back) sees the same credential and the
    same CSRF token: the operator stays logged in and the page's forms keep working."""
    sessions = sessions_with()
    with TestClient(site(sessions)) as client:
        cookie, csrf = log_in(client, "pk_abc_secret")
        assert client.get("/me").json()["session"] == {"credential": "pk_abc_secret", "csrf": csrf}
    assert read_back(sessions, cookie) == {"credential": "pk_abc_secret", "csrf": csrf}
    assert len(csrf) >= 32


def test_the_cookie_does_not_show_the_credential() -> None:
    """The cookie is sealed: the API key the operator logged in with cannot be read from it (by a script, a
    proxy log or the browser's storage)."""
    with TestClient(site(sessions_with())) as client:
        cookie, csrf = log_in(client, "pk_abc_secret")
    assert "pk_abc_secret" not in cookie and csrf not in cookie


def test_a_cookie_sealed_with_another_key_is_rejected() -> None:
    """A cookie made by another server (another key; e.g. a process that restarted without a shared key) does
    not log anyone in: it reads as no session."""
    with TestClient(site(sessions_with())) as client:
        cookie, _ = log_in(client)
    assert read_back(sessions_with(), cookie) is None


def test_a_tampered_cookie_is_rejected() -> None:
    """Changing one character of the cookie (forging or editing it) makes it worthless: no session."""
    sessions = sessions_with()
    with TestClient(site(sessions)) as client:
        cookie, _ = log_in(client)
    assert read_back(sessions, cookie) is not None
    i = len(cookie) // 2  # inside the ciphertext: every base64 character there carries 6 bits of it
    tampered = cookie[:i] + ("A" if cookie[i] != "A" else "B") + cookie[i + 1:]
    assert read_back(sessions, tampered) is None
    assert read_back(sessions, "not-a-fernet-token") is None


def test_an_expired_session_is_rejected() -> None:
    """A login whose time is up (session_hours) is over even if the browser still sends the cookie."""
    sessions = sessions_with()
    with TestClient(site(sessions, expired=True)) as client:
        cookie, _ = log_in(client)
    assert read_back(sessions, cookie) is None
    with TestClient(site(sessions)) as client:  # the same key, a session that has not expired: accepted
        fresh, _ = log_in(client)
    assert read_back(sessions, fresh) is not None


def test_replicas_sharing_the_key_read_each_others_cookies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two replicas behind one address with the same PARLEY_SESSION_KEY (a Fernet key in the environment):
    a login made on one is honoured by the other, so a load balancer does not log the operator out."""
    monkeypatch.setenv(KEY_ENV, Fernet.generate_key().decode())
    settings = DashboardSettings(session_key_env=KEY_ENV)
    replica_a, replica_b = Sessions(settings), Sessions(settings)
    assert replica_a.shared and replica_b.shared
    with TestClient(site(replica_a)) as client:
        cookie, csrf = log_in(client, "pk_shared_login")
    assert read_back(replica_b, cookie) == {"credential": "pk_shared_login", "csrf": csrf}
    with TestClient(site(replica_b)) as client:
        cookie, csrf = log_in(client, "pk_other_way")
    assert read_back(replica_a, cookie) == {"credential": "pk_other_way", "csrf": csrf}


def test_without_a_shared_key_each_process_has_its_own() -> None:
    """Without PARLEY_SESSION_KEY each process makes its own key: not shared, and its cookies are its own."""
    a, b = sessions_with(), sessions_with()
    assert not a.shared and not b.shared
    with TestClient(site(a)) as client:
        cookie, _ = log_in(client)
    assert read_back(a, cookie) is not None and read_back(b, cookie) is None


@pytest.mark.parametrize("secure", [False, True])
def test_the_cookie_is_httponly_samesite_lax_and_secure_over_https(secure: bool) -> None:
    """The session cookie cannot be read by page scripts (HttpOnly), is not sent on cross-site POSTs or
    subresource requests (SameSite=Lax; a link from elsewhere still opens the dashboard logged in) and, when
    the dashboard is reached over HTTPS, only travels over HTTPS (Secure)."""
    with TestClient(site(sessions_with(), secure=secure)) as client:
        header = client.post("/login", data={"credential": "pk_x"}).headers["set-cookie"]
    jar: SimpleCookie = SimpleCookie()
    jar.load(header)
    morsel = jar[COOKIE]
    assert morsel["httponly"] is True
    assert morsel["samesite"].lower() == "lax"
    assert morsel["path"] == "/"
    assert int(morsel["max-age"]) > 11 * 3600  # lasts the login's 12 hours, not the browser session only
    assert bool(morsel["secure"]) is secure


# --- CSRF --------------------------------------------------------------------------------------------------------


def test_the_right_token_from_this_origin_is_accepted() -> None:
    """A state-changing request with the session's CSRF token (the X-CSRF-Token header the page's scripts send,
    or the `csrf` field of a form), from this server's Origin or with no Origin at all, goes through."""
    with TestClient(site(sessions_with())) as client:
        _, csrf = log_in(client)
        assert client.post("/act", headers={CSRF_HEADER: csrf, "origin": ORIGIN}).json() == {"done": True}
        assert client.post("/act", data={"csrf": csrf}, headers={"origin": ORIGIN}).json() == {"done": True}
        assert client.post("/act", data={"csrf": csrf}).json() == {"done": True}  # no Origin header


@pytest.mark.parametrize(("how", "expected"), [
    ("no-token", "the CSRF token is missing or wrong (reload the page)"),
    ("wrong-header", "the CSRF token is missing or wrong (reload the page)"),
    ("wrong-form", "the CSRF token is missing or wrong (reload the page)"),
    ("other-session", "the CSRF token is missing or wrong (reload the page)"),
    ("foreign-origin", "the request comes from another origin (https://evil.example)"),
    ("no-session", "no dashboard session (reload the page)"),
])
def test_a_request_without_the_right_token_or_from_elsewhere_is_refused(how: str, expected: str) -> None:
    """A forged request is refused with the reason: no token, a wrong token (in the header or the form, or the
    token of another session), a page of another site (its Origin), or no session cookie at all."""
    sessions = sessions_with()
    with TestClient(site(sessions)) as other:
        _, other_csrf = log_in(other, "pk_someone_else")
    with TestClient(site(sessions)) as client:
        _, csrf = log_in(client)
        if how == "no-token":
            resp = client.post("/act")
        elif how == "wrong-header":
            resp = client.post("/act", headers={CSRF_HEADER: csrf[:-1] + ("x" if csrf[-1] != "x" else "y")})
        elif how == "wrong-form":
            resp = client.post("/act", data={"csrf": "guessed"})
        elif how == "other-session":
            resp = client.post("/act", headers={CSRF_HEADER: other_csrf})
        elif how == "foreign-origin":
            resp = client.post("/act", data={"csrf": csrf}, headers={"origin": "https://evil.example"})
        else:
            client.cookies.clear()
            resp = client.post("/act", headers={CSRF_HEADER: csrf})
    assert resp.status_code == 403
    assert resp.json() == {"error": expected}


def test_a_revoked_session_is_refused_until_it_would_have_expired() -> None:
    """Revocations (the logout list) refuse a session id until its own expiry, and forget it afterwards, so the
    list stays as long as the logged-out sessions that could still be presented."""
    from parley.web.session import PRUNE_AT, Revocations

    now = [1000.0]
    revoked = Revocations(clock=lambda: now[0])
    revoked.revoke("a", 1060.0)
    revoked.revoke("gone", 999.0)  # already expired: nothing to keep
    assert revoked.revoked("a") and not revoked.revoked("gone") and not revoked.revoked("b")
    now[0] = 1061.0
    assert not revoked.revoked("a")
    for i in range(PRUNE_AT + 5):
        revoked.revoke(f"s{i}", now[0] + 1)
    assert len(revoked) <= PRUNE_AT + 5 and not revoked.revoked("a")
    now[0] += 2
    revoked.revoke("last", now[0] + 60)
    assert len(revoked) <= 6  # the expired ones were dropped when the list was full
