"""Dashboard logins over real HTTP (a live server on 127.0.0.1, secured by an admin key from the environment):
what the login page may say, and what logging out ends.

- The login page shows only the server's own messages: `?message=` is a code mapped to fixed texts, so a link
  to the login page cannot make it say something else under this server's name (phishing).
- Logging out revokes the session on the server: a copy of the cookie taken before the logout opens nothing
  afterwards (the login page for a page, 401 for an action).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import pytest

from parley.serve import default_app
from parley.settings import AuthSettings, Settings
from parley.web.session import COOKIE
from support import LiveServer

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
