"""Logging in to the dashboard with a token of the configured issuer (docs/dashboard.md, "Logging in"): a JWT
with the admin scope opens it, one without is refused with the reason, and the session keeps the token
(sent on as a bearer token, A2A 1.0 section 7: the card's declared schemes)."""

from __future__ import annotations

import time

import httpx
import jwt
import pytest

from parley.serve import default_app
from parley.settings import AuthSettings, JwtSettings, Settings

SECRET = "a-test-secret-of-32-bytes-or-more-0123456789"
ISSUER = "https://idp.example"


def token(scope: str, subject: str = "alice") -> str:
    now = int(time.time())
    return jwt.encode({"iss": ISSUER, "sub": subject, "scope": scope, "iat": now, "exp": now + 600},
                      SECRET, algorithm="HS256")


@pytest.fixture
def http(monkeypatch: pytest.MonkeyPatch) -> httpx.AsyncClient:
    monkeypatch.setenv("PARLEY_JWT_SECRET", SECRET)
    app = default_app()
    app.settings = Settings(db="memory", auth=AuthSettings(jwt=JwtSettings(secret_env="PARLEY_JWT_SECRET",
                                                                            issuer=ISSUER)))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app.asgi()), base_url="http://127.0.0.1")


async def csrf_of(http: httpx.AsyncClient, path: str) -> str:
    page = (await http.get(path)).text
    return page.split('name="csrf-token" content="')[1].split('"')[0]


async def test_a_token_with_the_admin_scope_logs_in(http: httpx.AsyncClient) -> None:
    """The issuer's token with `admin` in its scope opens the dashboard; the pages then name its subject."""
    async with http:
        assert (await http.get("/")).status_code == 303  # secured: to the login page
        csrf = await csrf_of(http, "/ui/login")
        assert 'data-testid="oidc-login"' not in (await http.get("/ui/login")).text  # no client id: no button
        done = await http.post("/ui/login", data={"credential": token("admin a2a"), "csrf": csrf, "next": "/ui/tasks"})
        assert done.status_code == 303 and done.headers["location"] == "/ui/tasks"
        tasks = await http.get("/ui/tasks")
        assert tasks.status_code == 200 and ">alice<" in tasks.text


async def test_a_token_without_the_admin_scope_is_refused_with_the_reason(http: httpx.AsyncClient) -> None:
    """A valid token of a principal that is not an admin gets 403 and the reason; no session is made."""
    async with http:
        csrf = await csrf_of(http, "/ui/login")
        done = await http.post("/ui/login", data={"credential": token("a2a", "bob"), "csrf": csrf, "next": "/"})
        assert done.status_code == 403 and "not an admin" in done.text
        assert (await http.get("/ui/tasks")).status_code == 303


async def test_a_token_of_another_issuer_is_not_valid(http: httpx.AsyncClient) -> None:
    """A token signed with another secret is refused as not valid (401), as an A2A request with it would be."""
    forged = jwt.encode({"iss": ISSUER, "sub": "mallory", "scope": "admin", "exp": int(time.time()) + 600},
                        "another-secret-of-32-bytes-or-more-0123456789", algorithm="HS256")
    async with http:
        csrf = await csrf_of(http, "/ui/login")
        done = await http.post("/ui/login", data={"credential": forged, "csrf": csrf, "next": "/"})
        assert done.status_code == 401 and "not valid" in done.text


async def test_login_redirects_only_within_the_server(http: httpx.AsyncClient) -> None:
    """`next` pointing elsewhere (another host, `//host`) lands on the dashboard's home instead: no open
    redirect."""
    async with http:
        for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example", "/\t/evil.example",
                       "/\n/evil.example", "/ /evil.example"):
            csrf = await csrf_of(http, "/ui/login")
            done = await http.post("/ui/login", data={"credential": token("admin"), "csrf": csrf, "next": target})
            assert done.status_code == 303 and done.headers["location"] == "/"
