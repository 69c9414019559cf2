"""Logging in to the dashboard at the configured OpenID Connect provider, in Debian's chromium: the
authorization code flow with PKCE (RFC 6749 section 4.1, RFC 7636), the provider's access token kept as the
login (the token A2A 1.0 section 7's declared openIdConnect scheme accepts), admins only.

The provider is a stand-in (tests/e2e/stub_oidc.py) speaking the same HTTP interface: discovery, JWKS,
authorization and token endpoints.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from dashboard_kit import browser, serving  # noqa: F401 - browser is a fixture
from stub_oidc import AUDIENCE, StubProvider
from test_serve_processes import WAIT, Server

CLIENT_ID = "parley-dashboard"
CLIENT_SECRET = "dashboard-client-secret"


@pytest.fixture(scope="module")
def provider() -> Iterator[StubProvider]:
    stub = StubProvider(CLIENT_ID, CLIENT_SECRET).start()
    yield stub
    stub.stop()


@pytest.fixture(scope="module")
def server(provider: StubProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    directory: Path = tmp_path_factory.mktemp("oidc")
    config = directory / "parley.toml"
    config.write_text(f"""
[server]
db = "memory"
[server.auth.jwt]
oidc_discovery_url = "{provider.discovery_url}"
audience = ["{AUDIENCE}"]
[server.dashboard]
oidc_client_id = "{CLIENT_ID}"
oidc_client_secret_env = "PARLEY_OIDC_SECRET"
[[agents]]
id = "echo"
type = "builtin"
""")
    with serving("oidc", config, PARLEY_OIDC_SECRET=CLIENT_SECRET) as srv:
        yield srv


@pytest.fixture
def page(browser, server):  # noqa: F811
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(WAIT * 1000)
    yield page
    context.close()


def test_an_admin_logs_in_at_the_provider_and_lands_where_they_were_going(page, server, provider):
    """From the login page, "Log in with your identity provider" goes to the provider and back; the admin
    lands on the page they first asked for. The client sent a state and an S256 challenge, and
    redeemed the code with its verifier and its secret."""
    provider.next_user = {"sub": "ops-admin", "scope": "openid admin a2a"}
    page.goto(f"{server.url}/ui/tasks")
    assert "/ui/login" in page.url
    page.get_by_test_id("oidc-login").click()
    page.wait_for_url(f"{server.url}/ui/tasks")
    assert page.get_by_role("heading", name="Tasks").count() == 1
    assert "ops-admin" in page.locator("header .who").inner_text()
    asked = provider.authorize_requests[-1]
    assert asked["code_challenge_method"] == "S256" and asked["state"] and asked["code_challenge"]
    assert asked["redirect_uri"] == f"{server.url}/ui/login/oidc/callback"
    assert provider.token_requests[-1]["code_verifier"]


def test_a_provider_user_without_the_admin_scope_is_refused(page, server, provider):
    """A user the provider vouches for, but without the admin scope, is told so and stays logged out."""
    provider.next_user = {"sub": "viewer", "scope": "openid a2a"}
    page.goto(f"{server.url}/ui/login")
    page.get_by_test_id("oidc-login").click()
    page.wait_for_url(f"{server.url}/ui/login/oidc/callback*")
    assert "not an admin" in page.get_by_test_id("login-error").inner_text()
    page.goto(f"{server.url}/ui/tasks")
    assert "/ui/login" in page.url


def test_an_answer_with_another_state_or_no_login_in_progress_is_refused(server, provider):
    """A callback whose state is not the one this browser was sent off with (a forged or replayed redirect),
    or one that arrives with no login in progress, logs nobody in, and its code is never redeemed."""
    redeemed = len(provider.token_requests)
    with httpx.Client(base_url=server.url, timeout=WAIT) as http:
        started = http.get("/ui/login/oidc", params={"next": "/ui/keys"})
        assert started.status_code == 303 and started.headers["location"].startswith(f"{provider.url}/authorize?")
        forged = http.get("/ui/login/oidc/callback", params={"code": "stolen", "state": "guessed"})
        assert forged.status_code == 403 and "state mismatch" in forged.text
        assert http.get("/ui/tasks").status_code == 303  # still logged out
    with httpx.Client(base_url=server.url, timeout=WAIT) as fresh:
        stray = fresh.get("/ui/login/oidc/callback", params={"code": "stolen", "state": "guessed"})
        assert stray.status_code == 403 and "start it again" in stray.text
    assert len(provider.token_requests) == redeemed


def test_a_login_never_ends_on_another_site(server, provider):
    """A `next` that a browser would turn into another site (`/<tab>/evil.example` becomes `//evil.example`
    once the tab is dropped) is replaced by the dashboard's home: the page after the provider's login
    points only at this server."""
    provider.next_user = {"sub": "ops-admin", "scope": "openid admin a2a"}
    with httpx.Client(base_url=server.url, timeout=WAIT) as http:
        started = http.get("/ui/login/oidc", params={"next": "/\t/evil.example"})
        back = http.get(started.headers["location"])  # the provider approves and sends the browser back
        assert back.status_code == 302 and back.headers["location"].startswith(f"{server.url}/ui/login/oidc/callback")
        landed = http.get(back.headers["location"])
        assert landed.status_code == 200
        assert 'content="0;url=/"' in landed.text and "evil" not in landed.text
