"""Dashboard logins and failed authentications over real HTTP (a live server on 127.0.0.1, secured by an admin key
from the environment): what the login page may say, what logging out ends, and how guessing is slowed.

- The login page shows only the server's own messages: `?message=` is a code mapped to fixed texts, so a link
  to the login page cannot make it say something else under this server's name (phishing).
- Logging out revokes the session on the server: a copy of the cookie taken before the logout opens nothing
  afterwards (the login page for a page, 401 for an action).
- Failed authentications (bad API keys, wrong dashboard logins) are counted per client address: past the limit
  the address gets 429 + Retry-After, whatever it sends, until the failures leave the window.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import pytest

from parley.security.failures import FailureThrottle, client_address
from parley.serve import default_app
from parley.settings import AuthSettings, LimitSettings, Settings
from parley.web.session import COOKIE
from support import LiveServer, free_port, needs

ADMIN_ENV = "PARLEY_TEST_DASHBOARD_LOGINS_ADMIN_KEY"
ADMIN_KEY = "adm-" + secrets.token_urlsafe(32)
WAIT = 15.0


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    monkeypatch.setenv(ADMIN_ENV, ADMIN_KEY)
    app = default_app()
    app.settings = Settings(db="memory", auth=AuthSettings(admin_key_env=ADMIN_ENV))
    srv = LiveServer(app).start()
    try:
        yield srv
    finally:
        srv.stop()


def csrf_of(page: httpx.Response) -> str:
    return page.text.split('name="csrf-token" content="')[1].split('"')[0]


def log_in(http: httpx.Client, credential: str = ADMIN_KEY) -> httpx.Response:
    csrf = csrf_of(http.get("/ui/login"))
    return http.post("/ui/login", data={"credential": credential, "csrf": csrf, "next": "/ui/tasks"})


# --- item 19: the login page says only what the server chose --------------------------------------------------


@pytest.mark.parametrize("text", ["Your account is locked: call +1 555 0100 or visit evil.example to unlock it",
                                  "ended but not really", "<b>urgent</b>"])
def test_the_login_page_does_not_show_text_from_the_url(server: LiveServer, text: str) -> None:
    """Whatever `?message=` says that is not one of the server's codes is not shown, escaped or not."""
    with httpx.Client(base_url=server.url, timeout=WAIT) as http:
        page = http.get("/ui/login", params={"message": text})
        assert page.status_code == 200
        assert 'class="notice"' not in page.text
        for word in ("555", "evil.example", "urgent", "really"):
            assert word not in page.text, word


def test_the_login_page_shows_the_servers_own_messages(server: LiveServer) -> None:
    """A login that ended sends the browser to the login page with a code, which the page shows as its fixed text;
    a logout says so the same way."""
    with httpx.Client(base_url=server.url, timeout=WAIT) as http:
        page = http.get("/ui/login", params={"message": "ended"})
        assert "Your login has ended" in page.text
        assert log_in(http).status_code == 303
        out = http.post("/ui/logout", data={"csrf": csrf_of(http.get("/ui/tasks"))})
        assert out.status_code == 303 and out.headers["location"] == "/ui/login?message=logged-out"
        assert "You have logged out." in http.get(out.headers["location"]).text


# --- item 15: logging out ends the session, not just the browser's cookie ---------------------------------------


def test_a_copied_cookie_stops_working_at_logout(server: LiveServer) -> None:
    """Copy the session cookie, log out in the original browser: the copy gets the login page for a page and
    401 for an action, as a browser that never logged in would."""
    with httpx.Client(base_url=server.url, timeout=WAIT) as http:
        assert log_in(http).status_code == 303
        cookie = http.cookies[COOKIE]
        with httpx.Client(base_url=server.url, timeout=WAIT, cookies={COOKIE: cookie}) as thief:
            assert thief.get("/ui/tasks").status_code == 200  # the copy works while the login lasts
            csrf = csrf_of(http.get("/ui/tasks"))
            assert http.post("/ui/logout", data={"csrf": csrf}).status_code == 303
            page = thief.get("/ui/tasks")
            assert page.status_code == 303 and page.headers["location"].startswith("/ui/login"), page.headers
            action = thief.post("/ui/keys", data={"csrf": csrf, "agent": "echo", "name": "stolen",
                                                  "scopes": "admin"})
            assert action.status_code == 401, action.text
            events = thief.get("/ui/events", headers={"Accept": "text/event-stream"})
            assert events.status_code == 401


def test_logging_in_again_after_a_logout_works(server: LiveServer) -> None:
    """The revocation is of one session, not of the credential: the same key logs in again at once."""
    with httpx.Client(base_url=server.url, timeout=WAIT) as http:
        assert log_in(http).status_code == 303
        assert http.post("/ui/logout", data={"csrf": csrf_of(http.get("/ui/tasks"))}).status_code == 303
        assert http.get("/ui/tasks").status_code == 303
        assert log_in(http).status_code == 303
        assert http.get("/ui/tasks").status_code == 200


# --- item 14: failed logins and bad keys are throttled per client address ---------------------------------------


LIMIT = 3


@pytest.fixture
def strict(monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    """A secured server that refuses an address after LIMIT failed authentications in a minute."""
    monkeypatch.setenv(ADMIN_ENV, ADMIN_KEY)
    app = default_app()
    app.settings = Settings(db="memory", auth=AuthSettings(admin_key_env=ADMIN_ENV),
                            limits=LimitSettings(auth_failures=LIMIT, auth_failure_window_seconds=60))
    srv = LiveServer(app).start()
    try:
        yield srv
    finally:
        srv.stop()


def throttle_of(srv: LiveServer) -> FailureThrottle:
    return srv.server.config.app.state.parley.security.failures


def get_task(srv: LiveServer, key: str | None, **headers: str) -> httpx.Response:
    if key is not None:
        headers["X-API-Key"] = key
    return httpx.post(f"{srv.url}/a2a/echo", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                                   "params": {"id": "nope"}},
                      headers={"A2A-Version": "1.0", **headers}, timeout=WAIT)


def test_bad_api_keys_are_throttled_per_address(strict: LiveServer) -> None:
    """LIMIT refused keys from one address: 401 each; then that address gets 429 + Retry-After (-31429) whatever it
    sends, the right key included, on the API and the dashboard login alike; another client (a trusted proxy's
    X-Forwarded-For) is not affected; once the failures leave the window, the address is let in again."""
    for i in range(LIMIT):
        resp = get_task(strict, f"pk_0000000000000000_wrong{i}")
        assert resp.status_code == 401, resp.text
    refused = get_task(strict, ADMIN_KEY)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == -31429, refused.text
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    with httpx.Client(base_url=strict.url, timeout=WAIT) as http:
        login = log_in(http)
        assert login.status_code == 429 and "Too many failed logins" in login.text
        assert 1 <= int(login.headers["Retry-After"]) <= 60
    other = get_task(strict, ADMIN_KEY, **{"X-Forwarded-For": "203.0.113.7"})  # 127.0.0.1 is a trusted proxy
    assert other.status_code == 200 and other.json()["error"]["code"] == -32001, other.text  # in, no such task
    clock = throttle_of(strict).clock
    throttle_of(strict).clock = lambda: clock() + 61
    assert get_task(strict, ADMIN_KEY).status_code == 200


def test_failed_dashboard_logins_are_throttled(strict: LiveServer) -> None:
    """LIMIT wrong logins: 401 each; the next login, even with the admin key, is 429 with Retry-After, and so is the
    API from that address."""
    with httpx.Client(base_url=strict.url, timeout=WAIT) as http:
        for i in range(LIMIT):
            assert log_in(http, f"not-the-key-{i}").status_code == 401
        again = log_in(http)
        assert again.status_code == 429 and "Retry-After" in again.headers
        assert http.get("/ui/tasks").status_code == 303  # not logged in
    assert get_task(strict, ADMIN_KEY).status_code == 429


def test_requests_without_credentials_are_not_counted(strict: LiveServer) -> None:
    """A request with no credential is no guess: many of them get 401, and the key still works afterwards."""
    for _ in range(LIMIT * 3):
        assert get_task(strict, None).status_code == 401
    assert get_task(strict, ADMIN_KEY).status_code == 200


def test_the_throttle_counts_in_a_sliding_window() -> None:
    """FailureThrottle on its own: refused at the limit, for as long as the oldest failure stays in the window;
    unknown addresses (in-process calls) are never counted; None turns it off."""
    now = [100.0]
    throttle = FailureThrottle(2, 10.0, clock=lambda: now[0])
    throttle.failed("198.51.100.1")
    now[0] = 104.0
    assert throttle.retry_after("198.51.100.1") is None
    throttle.failed("198.51.100.1")
    assert throttle.retry_after("198.51.100.1") == 6  # until the failure at 100 is 10 s old
    assert throttle.retry_after("198.51.100.2") is None
    now[0] = 110.0
    assert throttle.retry_after("198.51.100.1") is None  # the first left the window
    throttle.failed(None)
    assert throttle.retry_after(None) is None
    off = FailureThrottle(None)
    for _ in range(100):
        off.failed("198.51.100.1")
    assert off.retry_after("198.51.100.1") is None


@pytest.mark.parametrize(("peer", "headers", "expected"), [
    ("198.51.100.1", {}, "198.51.100.1"),
    ("ipv4:198.51.100.1:5678", {}, "198.51.100.1"),
    ("ipv6:[2001:db8::1]:5678", {}, "2001:db8::1"),
    ("127.0.0.1", {"x-forwarded-for": "10.0.0.1, 203.0.113.9"}, "203.0.113.9"),
    ("127.0.0.1", {"forwarded": 'for=10.0.0.1, for="[2001:db8::2]:4711"'}, "2001:db8::2"),
    ("198.51.100.1", {"x-forwarded-for": "203.0.113.9"}, "198.51.100.1"),  # not a trusted proxy: its own address
    ("127.0.0.1", {"x-forwarded-for": "not-an-address"}, "127.0.0.1"),
    (None, {}, None),
])
def test_the_client_address(peer, headers, expected) -> None:
    assert client_address(peer, headers, ["127.0.0.1"]) == expected


@needs("grpc", "grpc")
def test_bad_keys_over_grpc_are_throttled_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same count over gRPC (the peer `ipv4:127.0.0.1:<port>` is the address): LIMIT wrong keys are
    UNAUTHENTICATED, then the right key is RESOURCE_EXHAUSTED with `retry-after` metadata."""
    import asyncio

    from parley.protocol import models as m
    from parley.protocol.operations import Operation

    from .secured import grpc_raw

    monkeypatch.setenv(ADMIN_ENV, ADMIN_KEY)
    app = default_app()
    port = free_port()
    app.settings = Settings(db="memory", auth=AuthSettings(admin_key_env=ADMIN_ENV), grpc_port=port,
                            limits=LimitSettings(auth_failures=LIMIT))
    srv = LiveServer(app).start()
    try:
        target = f"127.0.0.1:{port}"

        def get(key: str):
            return asyncio.run(grpc_raw(target, Operation.GET, m.GetTaskRequest(id="nope"), "echo",
                                        [("x-api-key", key)]))

        for i in range(LIMIT):
            assert get(f"pk_0000000000000000_wrong{i}").code == "UNAUTHENTICATED"
        refused = get(ADMIN_KEY)
        assert refused.code == "RESOURCE_EXHAUSTED", refused
        assert 1 <= int(refused.trailers["retry-after"]) <= 60, refused.trailers
    finally:
        srv.stop()


def test_an_open_live_table_ends_at_logout(server: LiveServer) -> None:
    """A live table (the change feed, SSE) opened with a copy of the cookie ends with a `logout` event at the next
    change after the logout, instead of going on with task ids."""
    with httpx.Client(base_url=server.url, timeout=WAIT) as http:
        assert log_in(http).status_code == 303
        cookie = http.cookies[COOKIE]
        csrf = csrf_of(http.get("/ui/tasks"))
        with httpx.Client(base_url=server.url, timeout=WAIT, cookies={COOKIE: cookie}) as thief, \
                thief.stream("GET", "/ui/events", headers={"Accept": "text/event-stream"}) as feed:
            assert feed.status_code == 200
            lines = feed.iter_lines()
            assert next(lines).startswith(": connected")
            assert http.post("/ui/logout", data={"csrf": csrf}).status_code == 303
            sent = httpx.post(f"{server.url}/a2a/echo", headers={"X-API-Key": ADMIN_KEY, "A2A-Version": "1.0"},
                              json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
                                  "messageId": secrets.token_hex(8), "role": "ROLE_USER", "parts": [{"text": "hi"}]}}},
                              timeout=WAIT)
            assert sent.status_code == 200
            events = [line for line in lines if line.startswith("event:")]  # until the server ends the stream
            assert events == ["event: logout"], events
