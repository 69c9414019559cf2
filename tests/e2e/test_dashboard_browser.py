"""The dashboard, driven in a real browser (Debian's chromium, headless, through Playwright) against a real
`parley serve` with an admin key: log in, make a key and use it from a real A2A client, chat with streamed
answers and an input-required question, cancel a running task, follow a delegation to its child task, watch
a task made by the CLI appear in the live table, and agent text that stays text.

A2A 1.0 sections: 3.1.2 SendStreamingMessage (the chat), 3.1.5 CancelTask, 4.1.3 TaskState (input-required),
7 authentication (the key made here is refused once revoked).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from dashboard_kit import ADMIN_KEY, browser, login, serving, write_config  # noqa: F401 - browser is a fixture
from test_serve_processes import PARLEY, WAIT, Server, server_env

from parley.client import A2AClient
from parley.protocol import models as m

WAIT_MS = WAIT * 1000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One secured `parley serve` (admin key from the environment) with the dashboard test agents."""
    with serving("dashboard", write_config(tmp_path_factory.mktemp("dashboard")), PARLEY_ADMIN_KEY=ADMIN_KEY) as srv:
        yield srv


@pytest.fixture
def page(browser, server):  # noqa: F811 - browser is the fixture of dashboard_kit
    """A fresh browser context (no cookies), logged in as the admin."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(WAIT_MS)
    login(page, server.url)
    yield page
    context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"


def send(url: str, text: str, *, key: str = ADMIN_KEY, task_id: str | None = None,
         wait: bool = True) -> m.Task:
    """One message from a real A2A client (parley.client), on a thread of its own: Playwright's sync API
    holds this thread's event loop."""
    async def go() -> m.Task:
        async with await A2AClient.connect(url, headers={"X-API-Key": key}) as client:
            return await client.send(text, task_id=task_id, blocking=wait)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, go()).result()


def test_the_dashboard_needs_an_admin_login(browser, server):  # noqa: F811
    """Anyone opening the dashboard of a secured server lands on the login page; a wrong key is refused with a
    message; the admin key opens the agents page, which lists every hosted agent."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server.url}/")
    assert "/ui/login" in page.url
    page.get_by_label("Admin API key or bearer token").fill("pk_not-a-real-key")
    page.get_by_role("button", name="Log in").click()
    assert "not valid" in page.get_by_test_id("login-error").inner_text()
    login(page, server.url)
    agents = page.get_by_test_id("agents").inner_text()
    for name in ("Echo", "Interviewer", "Slow", "Writer", "Front", "Fixer"):
        assert name in agents
    assert page.get_by_test_id("open-banner").count() == 0
    hub = page.get_by_test_id("hub").inner_text()
    assert "front" in hub and "fixer" in hub and "broken" in hub
    context.close()


def test_a_key_made_in_the_dashboard_is_shown_once_and_works_until_revoked(page, server):
    """A key created on the Keys page is shown once (with a copy button), listed with its name, scopes and
    expiry, answers a real A2A client, shows when it was last used, and is refused once revoked."""
    base = server.url
    page.goto(f"{base}/ui/keys")
    page.get_by_label("Agent").select_option("echo")
    page.get_by_label("Name").fill("ci-client")
    page.get_by_label("Scopes").fill("a2a")
    page.get_by_label("Expires").select_option("7d")
    page.get_by_role("button", name="Create key").click()
    created = page.get_by_test_id("created-key")
    token = created.locator("code").inner_text()
    assert token.startswith("pk_")
    assert created.get_by_role("button", name="Copy new API key").get_attribute("data-copy") == token

    page.goto(f"{base}/ui/keys")  # shown once: not on the page again
    assert token not in page.content()
    row = page.locator("[data-testid=keys] tr", has_text="ci-client")
    cells = row.locator("td").all_inner_texts()
    assert cells[1] == "echo" and cells[2] == "a2a" and cells[5] != "" and cells[6] == "active"
    assert cells[4] == ""  # never used yet

    task = send(f"{base}/a2a/echo", "hello from a key", key=token)
    assert task.status.state is m.TaskState.COMPLETED
    page.reload()
    assert row.locator("td").nth(4).inner_text() != ""  # last used

    row.get_by_role("button", name="Revoke ci-client").click()
    page.wait_for_url(f"{base}/ui/keys")
    assert row.locator("td").nth(6).inner_text() == "revoked"
    refused = httpx.post(f"{base}/a2a/echo", headers={"X-API-Key": token, "A2A-Version": "1.0"}, json={
        "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task.id}})
    assert refused.status_code == 401


def test_chat_streams_the_answer_and_answers_an_input_required_question(page, server):
    """The chat panel sends a streaming message, shows the agent's question when the task needs input,
    continues the same task with the answer, and the console shows the raw request and every SSE frame."""
    page.goto(f"{server.url}/ui/agents/interviewer")
    page.get_by_test_id("chat-link").click()  # the chat has its own page, linked at the top of the agent's
    assert page.url.endswith("/ui/agents/interviewer/chat")
    page.get_by_label("Message", exact=True).fill("I want to learn Rust")
    page.get_by_role("button", name="Send").click()
    state = page.get_by_test_id("chat-state")
    page.wait_for_selector("[data-testid=chat-state][data-state=input-required]")
    task_id = state.get_attribute("data-task")
    assert "Why does that matter" in page.get_by_test_id("chat-log").inner_text()
    console = page.get_by_test_id("console")
    request = console.locator("li.out pre").first.inner_text()
    assert '"method": "SendStreamingMessage"' in request and "I want to learn Rust" in request
    frames = console.locator("li.in pre").all_inner_texts()
    assert len(frames) >= 2 and all(f.startswith("id: ") and "\ndata: " in f for f in frames)
    assert "TASK_STATE_INPUT_REQUIRED" in frames[-1]

    page.get_by_label("Message", exact=True).fill("for speed")
    page.get_by_role("button", name="Send").click()
    page.wait_for_selector("[data-testid=chat-state][data-state=completed]")
    assert state.get_attribute("data-task") == task_id  # the answer continued the same task
    assert "for speed" in page.locator(".bubble.agent").last.inner_text()
    second = console.locator("li.out pre").nth(1).inner_text()
    assert f'"taskId": "{task_id}"' in second

    page.goto(f"{server.url}/ui/tasks/{task_id}")
    assert page.get_by_test_id("task-state").inner_text() == "completed"
    timeline = page.get_by_test_id("timeline").inner_text()
    assert timeline.index("input-required") < timeline.index("completed")


def test_agent_text_stays_text_and_markdown_is_rendered_safely(page, server):
    """A `<script>` in a message or an artifact never runs: the chat shows it as text and renders the finished
    answer's Markdown as the task page does; the task page renders Markdown without raw HTML and without
    javascript: links; data is formatted JSON, a file downloads."""
    hostile = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 3\">"
    page.goto(f"{server.url}/ui/agents/writer/chat")
    page.get_by_label("Message", exact=True).fill(hostile)
    page.get_by_role("button", name="Send").click()
    page.wait_for_selector("[data-testid=chat-state][data-state=completed]")
    assert hostile in page.locator(".bubble.user").last.inner_text()
    task_id = page.get_by_test_id("chat-state").get_attribute("data-task")
    answer = page.locator(".bubble.agent[data-rendered=yes]").last
    assert answer.locator("h1").inner_text() == "Report"  # Markdown rendered, not `# Report`
    assert answer.locator(".markdown strong").first.inner_text() == "bold"
    assert "<script>window.__pwned = 1</script>" in answer.inner_text()  # shown, not run

    page.goto(f"{server.url}/ui/tasks/{task_id}")
    artifact = page.get_by_test_id("artifact")
    assert artifact.locator("h1").inner_text() == "Report"
    assert artifact.locator(".markdown strong").first.inner_text() == "bold"
    assert "<script>window.__pwned = 1</script>" in artifact.inner_text()  # shown, not run
    assert page.locator("script:not([src])").count() == 0
    assert page.locator("a[href^='javascript']").count() == 0
    assert artifact.get_by_role("link", name="a good link").get_attribute("href") == "https://example.com/docs"
    assert hostile in page.get_by_test_id("message").first.inner_text()
    assert json.loads(artifact.locator("pre.json").inner_text()) == {"total": 3, "items": ["a", "b"]}
    with page.expect_download() as info:
        artifact.get_by_role("link", name="report.csv").click()
    assert Path(info.value.path()).read_bytes() == b"col1,col2\n1,2\n"
    assert page.evaluate("window.__pwned") is None


def test_the_chat_sends_a_file_and_agent_pages_show_only_their_own_routes(page, server, tmp_path):
    """A file attached in the chat goes with the message (a `raw` part, A2A 1.0 section 4.1.6): the task page
    shows it. Echo's page has no routing section (no rule concerns it); front's shows its rule to fixer."""
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"hello file")
    page.goto(f"{server.url}/ui/agents/echo/chat")
    page.get_by_label("Message", exact=True).fill("here is a file")
    page.get_by_label("Attach a file (optional)").set_input_files(str(notes))
    page.get_by_role("button", name="Send").click()
    page.wait_for_selector("[data-testid=chat-state][data-state=completed]")
    request = page.get_by_test_id("console").locator("li.out pre").first.inner_text()
    assert '"filename": "notes.txt"' in request
    task_id = page.get_by_test_id("chat-state").get_attribute("data-task")
    page.goto(f"{server.url}/ui/tasks/{task_id}")
    assert "notes.txt (text/plain, 10 bytes)" in page.get_by_test_id("message").first.inner_text()
    page.goto(f"{server.url}/ui/agents/echo")
    assert page.get_by_test_id("hub").count() == 0
    page.goto(f"{server.url}/ui/agents/front")
    hub = page.get_by_test_id("hub").inner_text()
    assert "fixer" in hub and "broken" in hub


def test_cancel_a_running_task_from_its_page(page, server):
    """A running task's page has a Cancel button; pressing it cancels the task (CancelTask), as GetTask
    then says."""
    task = send(f"{server.url}/a2a/slow", "take your time", wait=False)
    page.goto(f"{server.url}/ui/tasks/{task.id}")
    page.wait_for_selector("[data-testid=task-state] >> text=working")
    page.get_by_role("button", name="Cancel task").click()
    page.wait_for_selector("[data-testid=task-state] >> text=canceled")
    assert page.get_by_role("button", name="Cancel task").count() == 0
    got = httpx.post(f"{server.url}/a2a/slow", headers={"X-API-Key": ADMIN_KEY, "A2A-Version": "1.0"}, json={
        "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task.id}}).json()
    assert got["result"]["status"]["state"] == "TASK_STATE_CANCELED"


def test_follow_a_delegation_tree_to_the_child_task(page, server):
    """A routed message's task page shows its delegation tree; the child is a link to the child's own page,
    which names the agent that did the work and its answer."""
    task = send(f"{server.url}/a2a/front", "my router is broken")
    assert task.status.state is m.TaskState.COMPLETED
    page.goto(f"{server.url}/ui/tasks/{task.id}")
    nodes = page.get_by_test_id("tree-node")
    assert nodes.count() == 2
    child = nodes.nth(1)
    child_id = child.get_attribute("data-task")
    assert child_id != task.id and "fixer" in child.inner_text()
    child.get_by_role("link").first.click()
    page.wait_for_url(f"{server.url}/ui/tasks/{child_id}")
    assert "Diagnosis: my router is broken (fixer)" in page.get_by_test_id("artifact").inner_text()
    assert page.get_by_role("link", name=task.id).count() == 1  # "Delegated by" links back to the parent


def test_a_task_made_by_the_cli_appears_in_the_live_table_without_reload(page, server):
    """The task table follows the change feed: a task sent with `parley send` shows up while the page stays
    loaded (no navigation), with its agent and state, and the first words of what it was asked and answered
    (echo answers with the words it got)."""
    import subprocess

    page.goto(f"{server.url}/ui/tasks")
    page.wait_for_selector("[data-testid=live-status] >> text=updates appear")
    page.evaluate("window.__stayed = true")
    out = subprocess.run([*PARLEY, "--api-key", ADMIN_KEY, "send", "--json", f"{server.url}/a2a/echo",
                          "made by the CLI"], env=server_env(), capture_output=True, text=True, timeout=WAIT, check=False)
    assert out.returncode == 0, out.stderr
    task_id = json.loads(out.stdout)["id"]
    row = page.locator(f"tr[data-task='{task_id}']")
    row.wait_for()
    assert page.evaluate("window.__stayed") is True
    cells = row.locator("td").all_inner_texts()
    assert cells[2] == "echo" and cells[3] == "admin"
    row.locator("text=completed").wait_for()
    asked, answered = row.locator("td.preview").all_inner_texts()
    assert asked == "made by the CLI" and answered == "made by the CLI"


def test_a_streaming_answer_shows_in_the_live_table_and_grows_on_its_page_while_it_streams(page, server):
    """An agent streaming a word every 50 ms without a pause (as an LLM streams tokens): its task shows up in the
    live table, and its page shows the answer growing, while it streams. Issue 25 counts the dashboard among an
    answer's live subscribers; it refreshes at most every 0.3 s rather than after a quiet moment, which a
    streaming answer never has (A2A 1.0 section 3.1.2 SendStreamingMessage; 3.1.5 CancelTask ends it)."""
    from playwright.sync_api import expect  # the browser fixture has checked Playwright is there

    page.goto(f"{server.url}/ui/tasks")
    page.wait_for_selector("[data-testid=live-status] >> text=updates appear")
    task = send(f"{server.url}/a2a/chatty", "go", wait=False)
    try:
        page.locator(f"tr[data-task='{task.id}']").wait_for()  # while it streams: no pause comes
        page.goto(f"{server.url}/ui/tasks/{task.id}")
        shown = page.get_by_test_id("artifact").inner_text().split()
        assert shown and shown[-1].startswith("w")
        later = f"w{int(shown[-1][1:]) + 10} "  # ten more words, half a second on
        expect(page.get_by_test_id("artifact")).to_contain_text(later, timeout=WAIT_MS)
        assert page.get_by_test_id("task-state").inner_text().strip() == "working"
    finally:
        httpx.post(f"{server.url}/a2a/chatty", headers={"X-API-Key": ADMIN_KEY, "A2A-Version": "1.0"}, json={
            "jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": task.id}})


def test_task_table_filters(page, server):
    """Filtering by agent and state shows only matching tasks; a bad state gives an error page, not a crash."""
    done = send(f"{server.url}/a2a/echo", "filter me")
    page.goto(f"{server.url}/ui/tasks?agent=echo&state=TASK_STATE_COMPLETED")
    rows = page.locator("[data-testid=task-rows] tr[data-task]")
    assert rows.count() >= 1
    assert set(rows.locator("td:nth-child(3)").all_inner_texts()) == {"echo"}
    assert page.locator(f"tr[data-task='{done.id}']").count() == 1
    page.goto(f"{server.url}/ui/tasks?agent=slow&state=TASK_STATE_COMPLETED")
    assert page.locator(f"tr[data-task='{done.id}']").count() == 0
    response = page.goto(f"{server.url}/ui/tasks?state=bogus")
    assert response.status == 400 and "Unknown state" in page.inner_text("main")


@pytest.mark.parametrize("path", ["/", "/ui/agents/echo", "/ui/agents/echo/chat", "/ui/tasks", "/ui/keys",
                                  "/ui/inspect"])
def test_pages_fit_a_phone_and_every_control_is_labelled(page, server, path):
    """At phone width (375 px) no page scrolls sideways (long URLs and curl commands wrap), and every form
    control has a label and every button an accessible name."""
    page.set_viewport_size({"width": 375, "height": 800})
    page.goto(server.url + path)
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    unlabelled = page.evaluate("""() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
        .filter(e => e.labels.length === 0 && !e.getAttribute('aria-label')).map(e => e.outerHTML)""")
    assert unlabelled == []
    nameless = page.evaluate("""() => [...document.querySelectorAll('button')]
        .filter(b => !(b.getAttribute('aria-label') || b.textContent.trim())).map(b => b.outerHTML)""")
    assert nameless == []
    page.keyboard.press("Tab")  # the first stop is the skip link
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"


def test_state_changes_need_the_csrf_token(server):
    """Outside the browser: a logged-in session's POST without its CSRF token, or from another origin, is
    refused (403) and changes nothing; with the token it goes through."""
    with httpx.Client(base_url=server.url) as http:
        login_page = http.get("/ui/login").text
        csrf = login_page.split('name="csrf-token" content="')[1].split('"')[0]
        done = http.post("/ui/login", data={"credential": ADMIN_KEY, "csrf": csrf, "next": "/"})
        assert done.status_code == 303
        csrf = http.get("/ui/keys").text.split('name="csrf-token" content="')[1].split('"')[0]
        form = {"agent": "echo", "name": "csrf-probe", "scopes": "a2a", "expires": ""}
        assert http.post("/ui/keys", data=form).status_code == 403
        assert http.post("/ui/keys", data={**form, "csrf": "wrong"}).status_code == 403
        assert http.post("/ui/keys", data={**form, "csrf": csrf},
                         headers={"Origin": "https://evil.example"}).status_code == 403
        keys = httpx.get(f"{server.url}/admin/keys", headers={"X-API-Key": ADMIN_KEY}).json()["keys"]
        assert "csrf-probe" not in {k["name"] for k in keys}
        chat = http.post("/ui/a2a/echo", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}})
        assert chat.status_code == 403
        made = http.post("/ui/keys", data={**form, "csrf": csrf}, headers={"Origin": server.url})
        assert made.status_code == 200 and "pk_" in made.text


def test_an_open_server_says_so_and_its_first_key_must_be_an_admin_key(browser, tmp_path):  # noqa: F811
    """With no credentials configured the dashboard is open and says so in a banner; the first key made there
    must carry the admin scope, and making it secures the server: this browser stays logged in with it,
    another browser must log in."""
    srv = Server("open", ["--memory"], cwd=tmp_path, port=None, port_flag=True, env=server_env())
    try:
        srv.wait_ready()
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{srv.url}/")
        assert "Open development mode" in page.get_by_test_id("open-banner").inner_text()
        page.goto(f"{srv.url}/ui/keys")
        page.get_by_label("Scopes").fill("a2a")
        page.get_by_role("button", name="Create key").click()
        assert "must have the admin scope" in page.get_by_test_id("key-error").inner_text()
        page.get_by_label("Scopes").fill("admin a2a")
        page.get_by_role("button", name="Create key").click()
        token = page.get_by_test_id("created-key").locator("code").inner_text()
        page.goto(f"{srv.url}/")
        assert page.get_by_test_id("open-banner").count() == 0 and page.get_by_test_id("agents").count() == 1
        other = browser.new_context().new_page()
        other.goto(f"{srv.url}/")
        assert "/ui/login" in other.url
        assert httpx.get(f"{srv.url}/admin/keys", headers={"X-API-Key": token}).status_code == 200
        context.close()
    finally:
        srv.close()


def test_the_screenshot_script_makes_a_picture_of_every_page(browser, tmp_path):  # noqa: F811
    """`scripts/dashboard_screenshots.py DIR` (docs/dashboard.md) runs as documented and writes one PNG per
    page, each a real image of the page's size."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "scripts" / "dashboard_screenshots.py"
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], env=server_env(), capture_output=True,
                          text=True, timeout=WAIT * 4, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    names = {p.name for p in tmp_path.glob("*.png")}
    assert names == {"login.png", "agents.png", "agent.png", "charts.png", "chat.png", "inspect.png", "tasks.png",
                     "task-delegation.png", "task.png", "keys.png", "phone.png"}
    for name in names:
        head = (tmp_path / name).read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        width = int.from_bytes(head[16:20], "big")
        assert width == (375 if name == "phone.png" else 1280)


CONTRAST_JS = """() => {
  const parse = (c) => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
    const [r, g, b, a = 1] = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number); return [r, g, b, a]; };
  const lum = ([r, g, b]) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const background = (el) => { for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor); if (c && c[3] > 0) return c; } return [255, 255, 255, 1]; };
  const low = [];
  for (const el of document.querySelectorAll('body *')) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || el.closest('.sr, .skip') || el.offsetParent === null) continue;
    const style = getComputedStyle(el);
    const fg = parse(style.color), bg = background(el);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    const large = parseFloat(style.fontSize) >= 24 || (parseFloat(style.fontSize) >= 18.66 && Number(style.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) low.push(`${el.tagName}.${el.className} ${ratio.toFixed(2)} "${el.textContent.trim().slice(0, 30)}"`);
  }
  return low;
}"""


@pytest.mark.parametrize("path", ["/", "/ui/agents/interviewer", "/ui/tasks", "/ui/keys", "/ui/login"])
def test_text_has_enough_contrast(page, server, path):
    """Every visible piece of text meets WCAG 2.1 AA contrast against its background (4.5:1, 3:1 for large
    text), computed from the colours the browser actually renders."""
    page.goto(server.url + path)
    assert page.evaluate(CONTRAST_JS) == []


def reached_login(page) -> bool:
    """Whether the page arrives at the login page within a second."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_url("**/ui/login**", timeout=1000)
    except PlaywrightTimeout:
        return False
    return True


def test_an_open_live_table_closes_when_its_login_is_revoked(browser, server):  # noqa: F811
    """The live table re-checks its login while it streams: once the key it logged in with is revoked, the
    page goes back to the login page instead of showing more task ids (docs/dashboard.md, "Logging in")."""
    admin = {"X-API-Key": ADMIN_KEY}
    made = httpx.post(f"{server.url}/admin/keys", headers=admin,
                      json={"agent": "*", "name": "short-lived admin", "scopes": ["admin", "a2a"]}).json()
    context = browser.new_context()
    page = context.new_page()
    login(page, server.url, made["token"])
    page.goto(f"{server.url}/ui/tasks")
    page.wait_for_selector("[data-testid=live-status] >> text=updates appear")
    assert httpx.delete(f"{server.url}/admin/keys/{made['key']['id']}", headers=admin).status_code == 200
    for _ in range(30):  # each task is a change; the stream re-checks the login at most every 5 s
        send(f"{server.url}/a2a/echo", "a change to see")
        if reached_login(page):
            break
    assert "/ui/login" in page.url
    context.close()
