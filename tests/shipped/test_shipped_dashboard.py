"""The dashboard of the bare install, driven in Debian's chromium as an operator drives it (docs/dashboard.md):
log in with an admin key made by `parley keys create`, make a key on the Keys page and use it from the installed
CLI, revoke it and see the CLI refused, cancel a task waiting for input, log out.

Every form here is a POST that Starlette parses with python-multipart: on an install without it each one
answered 500 (the defect these tests guard against).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from shipkit import WAIT, Install, Served

from support import dashboard_login

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture(scope="module")
def secured(bare: Install, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, str, Path]]:
    """The installed `parley serve` in a fresh directory, secured by an admin key made with the installed
    `parley keys create` (docs/dashboard.md, "Logging in"): (the server, the admin key, its directory)."""
    workdir = tmp_path_factory.mktemp("dashboard")
    made = bare.parley("keys", "create", "*", "--name", "dashboard", "--scopes", "admin,a2a",
                       "--db", ".parley/parley.db", cwd=workdir)
    assert made.returncode == 0, made.stderr
    admin_key = made.stdout.strip().splitlines()[-1]
    with bare.serve(cwd=workdir) as served:
        yield served, admin_key, workdir


@pytest.fixture
def page(browser, secured):
    """A fresh browser context (no cookies) logged in with the admin key; no JavaScript error may happen."""
    served, admin_key, _ = secured
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(WAIT * 1000)
    dashboard_login(page, served.url, admin_key)
    yield page
    context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"


def test_login_lists_the_agents_and_logout_ends_the_session(page, secured) -> None:
    """After logging in, the agents page lists the built-in agents; "Log out" returns to the login page, and the
    dashboard asks for a login again."""
    served, _, _ = secured
    agents = page.get_by_test_id("agents").inner_text()
    assert "Echo" in agents and "Interviewer" in agents
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(f"{served.url}/ui/login?message=logged-out")  # the server's own message, by its code
    assert "You have logged out." in page.content()
    page.goto(f"{served.url}/ui/keys")
    assert "/ui/login" in page.url


def test_a_key_made_in_the_dashboard_works_until_revoked(page, secured, bare: Install) -> None:
    """A key made on the Keys page is shown once and answers the installed CLI; once revoked there, the same
    CLI call is refused."""
    served, _, workdir = secured
    page.goto(f"{served.url}/ui/keys")
    page.get_by_label("Agent").select_option("echo")
    page.get_by_label("Name").fill("shipped-client")
    page.get_by_role("button", name="Create key").click()
    token = page.get_by_test_id("created-key").locator("code").inner_text()
    assert token.startswith("pk_")

    sent = bare.parley("--api-key", token, "send", served.url, "hello with a key", cwd=workdir)
    assert sent.returncode == 0 and "hello with a key" in sent.stdout, sent.stdout + sent.stderr

    page.goto(f"{served.url}/ui/keys")
    row = page.locator("[data-testid=keys] tr", has_text="shipped-client")
    row.get_by_role("button", name="Revoke shipped-client").click()
    page.wait_for_url(f"{served.url}/ui/keys")
    assert row.locator("td").nth(6).inner_text() == "revoked"
    refused = bare.parley("--api-key", token, "send", served.url, "hello again", cwd=workdir)
    assert refused.returncode != 0 and "hello again" not in refused.stdout


def test_cancel_a_task_from_its_page(page, secured, bare: Install) -> None:
    """A task waiting for input (the interviewer's question, asked over the installed CLI) has a Cancel button on
    its page; pressing it cancels the task, and the button is gone."""
    served, admin_key, workdir = secured
    asked = bare.parley("--api-key", admin_key, "send", f"{served.url}/a2a/interviewer", "I learn A2A", cwd=workdir)
    assert "input-required" in asked.stdout, asked.stdout + asked.stderr  # (its exit code says so too)
    task_id = UUID.search(asked.stdout + asked.stderr).group(0)
    page.goto(f"{served.url}/ui/tasks/{task_id}")
    page.wait_for_selector("[data-testid=task-state] >> text=input-required")
    page.get_by_role("button", name="Cancel task").click()
    page.wait_for_selector("[data-testid=task-state] >> text=canceled")
    assert page.get_by_role("button", name="Cancel task").count() == 0


INSPECT_GRPC = '''\
import asyncio
from parley.web.inspector import Endpoint, InspectError, Inspector
endpoint = Endpoint("GRPC", "127.0.0.1:50051", "1.0")
print(endpoint.callable)
print(endpoint.why_not)
try:
    asyncio.run(Inspector(["127.0.0.0/8"]).call(endpoint, "GetTask", {"id": "t1"}, {}))
except InspectError as exc:
    print(f"refused: {exc}")
'''


def test_the_inspector_says_grpc_needs_the_extra(bare: Install, tmp_path: Path) -> None:
    """docs/dashboard.md, "Inspect any agent": on the bare install (no grpc extra) a card's gRPC interface is not
    callable and says why, and a call to one is refused with that sentence rather than failing on an import."""
    done = bare.run_python(INSPECT_GRPC, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    callable_, why, refused = done.stdout.strip().splitlines()
    needs = "gRPC needs the parley-a2a[grpc] extra on this server (pip install 'parley-a2a[grpc]')"
    assert (callable_, why, refused) == ("False", needs, f"refused: {needs}")
