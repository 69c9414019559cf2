"""The inspector in a real browser (Debian's chromium through Playwright) against a secured `parley serve`
whose `[server.dashboard] inspect_allow` lets it reach 127.0.0.1: the deliberately broken agent's card and
answers are marked where they fail, with the reason, and a streamed call shows each frame with its own mark
(A2A 1.0 sections 4.4.1, the card; 3.2 and 9.4, JSON-RPC results and SSE frames; 5.7, REQUIRED fields).
The agent's own text never runs as HTML."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dashboard_kit import browser, login, serving, write_config  # noqa: F401 - browser is a fixture
from test_dashboard_inspector import broken_agent  # noqa: F401 - a fixture
from test_serve_processes import WAIT, Server

WAIT_MS = WAIT * 1000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    from dashboard_kit import ADMIN_KEY

    config = write_config(tmp_path_factory.mktemp("inspector"))
    config.write_text(config.read_text() + '\n[server.dashboard]\ninspect_allow = ["127.0.0.0/8"]\n')
    with serving("inspector", config, PARLEY_ADMIN_KEY=ADMIN_KEY) as srv:
        yield srv


def test_the_inspector_marks_a_broken_agents_mistakes(browser, server, broken_agent):  # noqa: F811
    """Fetch the broken agent's card: its missing REQUIRED fields are marked failing. Send a message: the
    response is marked invalid, naming the wrong id and the unknown state. Stream one: the first frame passes,
    the second fails for having no payload. The page runs no script of the agent's."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(WAIT_MS)
    login(page, server.url)
    page.get_by_role("link", name="Inspect").click()
    page.get_by_label("Agent URL (its base URL, or its card's)").fill(broken_agent)
    page.get_by_role("button", name="Fetch the card").click()
    card = page.get_by_test_id("inspect-card-check")
    card.locator("li.fail", has_text="REQUIRED field `description` is missing or empty").wait_for()
    page.get_by_label("Message text").fill("<script>window.ran = 1</script> hello")
    page.get_by_label("Message metadata (a JSON object, optional)").fill('{"from": "browser"}')
    page.get_by_role("button", name="Send").click()
    console = page.get_by_test_id("inspect-console")
    reply = console.locator('li[data-valid="no"]').first
    reply.wait_for()
    assert "'not-yours'" in reply.locator("li.fail").first.inner_text()
    reply.locator("li.fail", has_text="TASK_STATE_SLEEPY").wait_for()
    request = console.locator("li.out").first.inner_text()
    assert '"from": "browser"' in request and "<script>" in request  # shown as text
    page.get_by_label("Method").select_option("SendStreamingMessage")
    page.get_by_label("Message text").fill("stream please")
    page.get_by_role("button", name="Send").click()
    frames = console.locator("li.in")
    frames.nth(1).wait_for()
    assert frames.nth(0).get_attribute("data-valid") == "yes"
    assert frames.nth(1).get_attribute("data-valid") == "no"
    assert "exactly one of task, message, statusUpdate, artifactUpdate is set" in frames.nth(1).inner_text()
    assert page.get_by_test_id("inspect-state").inner_text() == "Task t1: TASK_STATE_WORKING"
    assert page.evaluate("window.ran") is None
    context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"
