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

from support import free_port

WAIT_MS = WAIT * 1000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    from dashboard_kit import ADMIN_KEY

    pytest.importorskip("grpc")
    config = write_config(tmp_path_factory.mktemp("inspector"))
    text = config.read_text().replace("[server]\n", f"[server]\ngrpc_port = {free_port()}\n", 1)
    config.write_text(text + '\n[server.dashboard]\ninspect_allow = ["127.0.0.0/8"]\n')
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


def test_the_inspector_calls_grpc_and_0_3_http_json(browser, server):  # noqa: F811
    """The server inspects its own echo agent: the user picks its gRPC interface (A2A 1.0 section 10) and sends a
    message with the admin key as credential; the response, read as ProtoJSON, is marked valid and the console
    says `gRPC OK`. A stream over gRPC shows each message marked. Then the 0.3 HTTP+JSON interface (0.3 section
    3.2.3): the methods become 0.3's, and message/send's answer (the 0.3 proto's ProtoJSON) is marked valid. A
    GetTask of an unknown task over gRPC is NOT_FOUND, shown with its google.rpc.ErrorInfo (section 10.6)."""
    from dashboard_kit import ADMIN_KEY

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(WAIT_MS)
    login(page, server.url)
    page.goto(f"{server.url}/ui/inspect?url={server.url}/a2a/echo")
    interface = page.get_by_label("Interface")
    grpc_option = interface.locator("option", has_text="GRPC 1.0")
    assert grpc_option.get_attribute("disabled") is None
    interface.select_option(grpc_option.get_attribute("value"))
    page.get_by_label("Credential (an API key goes in X-API-Key, a JWT as a bearer token)").fill(ADMIN_KEY)
    page.get_by_label("Message text").fill("hello over grpc")
    page.get_by_role("button", name="Send").click()
    console = page.get_by_test_id("inspect-console")
    reply = console.locator("li.reply").first
    reply.wait_for()
    assert "← response (gRPC OK)" in reply.inner_text()
    assert reply.get_attribute("data-valid") == "yes", reply.inner_text()
    assert "parses as lf.a2a.v1.SendMessageResponse" in reply.inner_text()
    assert '"rpc": "lf.a2a.v1.A2AService/SendMessage"' in console.locator("li.out").first.inner_text()
    assert page.get_by_test_id("inspect-state").inner_text().endswith("TASK_STATE_COMPLETED")
    page.get_by_role("button", name="New conversation").click()
    page.get_by_label("Method").select_option("SendStreamingMessage")
    page.get_by_label("Message text").fill("stream over grpc")
    page.get_by_role("button", name="Send").click()
    frames = console.locator("li.in")
    frames.nth(1).wait_for()
    page.get_by_test_id("inspect-state").filter(has_text="TASK_STATE_COMPLETED").wait_for()
    assert all(frames.nth(i).get_attribute("data-valid") == "yes" for i in range(frames.count()))
    page.get_by_label("Method").select_option("GetTask")
    page.get_by_label("Task id (get, cancel, subscribe; and the next message continues it)").fill("no-such-task")
    page.get_by_role("button", name="Send").click()
    missing = console.locator("li.reply", has_text="gRPC NOT_FOUND")
    missing.wait_for()
    assert "TASK_NOT_FOUND" in missing.inner_text() and missing.get_attribute("data-valid") == "yes"

    page.get_by_role("button", name="New conversation").click()
    rest03 = interface.locator("option", has_text="HTTP+JSON 0.3")
    interface.select_option(rest03.get_attribute("value"))
    assert page.get_by_label("Method").locator("option").first.inner_text() == "message/send"
    page.get_by_label("Message text").fill("hello over 0.3 rest")
    page.get_by_role("button", name="Send").click()
    reply = console.locator("li.reply").first
    reply.wait_for()
    assert "← response (HTTP 200)" in reply.inner_text()
    assert reply.get_attribute("data-valid") == "yes", reply.inner_text()
    assert "/v1/message:send" in console.locator("li.out").first.inner_text()
    assert '"content"' in console.locator("li.out").first.inner_text()  # the 0.3 proto's parts
    context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"
