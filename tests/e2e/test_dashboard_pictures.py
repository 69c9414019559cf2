"""The dashboard's pictures in a real browser (Debian's chromium under Playwright) against a secured server after
a known load (docs/dashboard.md, "The last hour" and "A task"): time to first event, push deliveries by outcome,
the delegation tree as a graph and the status timeline as a picture, read from the page as a person's browser
shows it (text, the SVGs' accessible names and titles) and checked against the load.

Time to first event: from a task's creation to the first update after the Task (A2A 1.0 section 3.1.2: a stream
sends the Task, then status and artifact updates). Push outcomes come from the delivery log (docs/push.md:
5xx retried with backoff, dead-lettered after max_attempts, 410 Gone disables the webhook).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from parley.agents.base import InternalEvent
from parley.app import Parley
from parley.settings import AuthSettings, PushSettings, Settings
from parley.web.tree_graph import MAX_LABEL
from support import chromium_browser, dashboard_login, running, settled_push_log, webhook_receiver

ADMIN_ENV = "PARLEY_TEST_PICTURES_ADMIN_KEY"
ADMIN_KEY = "adm_pictures-" + uuid.uuid4().hex
FIRST_WAIT = 0.3  # seconds `slowstart` waits before its first output
# Its time to first event is at least FIRST_WAIT less the moment between the agent's start and the task's creation
# stamp: a task is created in one pass (docs/architecture.md, step 4), its agent started first (0.3 ms seen).
AT_LEAST_MS = FIRST_WAIT * 1000 - 50
HOSTILE = '<img src=x onerror="window.__pwned = 1">'


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with chromium_browser() as chromium:
        yield chromium


def store_url(store: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The `db` setting of one store kind: memory, a SQLite file, or a fresh PostgreSQL schema (as replicas
    share it: the charts' numbers are read from there)."""
    if store == "postgres":
        request.getfixturevalue("monkeypatch").setenv("PARLEY_KEY_PEPPER", "pictures-" + uuid.uuid4().hex)
        return request.getfixturevalue("postgres_url")
    return "memory" if store == "memory" else str(tmp_path / "pictures.db")


def pictures_app(db: str) -> Parley:
    """Agents with a known behaviour, on a secured server whose webhooks may be on this machine."""
    import os

    os.environ[ADMIN_ENV] = ADMIN_KEY
    app = Parley(settings=Settings(db=db, bus="postgres" if db.startswith("postgres") else None, auth=AuthSettings(admin_key_env=ADMIN_ENV), push=PushSettings(
        allow=["127.0.0.1/32"], backoff_seconds=0.01, max_backoff_seconds=0.02, max_attempts=2)))

    @app.agent(id="steady", description="Answers at once.")
    async def steady(ctx):
        yield f"done: {ctx.text}"

    @app.agent(id="flaky", description="Always fails.")
    async def flaky(ctx):
        raise RuntimeError("broken on purpose")
        yield  # an async generator

    @app.agent(id="slowstart", description="Thinks before its first word.", replies=True)
    async def slowstart(ctx):
        await asyncio.sleep(FIRST_WAIT)  # the load under test (a known server-side wait), not synchronisation
        yield "finally"

    @app.agent(id="lead", description="Delegates to middle and to leaf.")
    async def lead(ctx):
        yield InternalEvent("internal:delegation", {"taskId": "far-away-1", "url": "http://127.0.0.1:9/a2a/x",
                                                    "agent": HOSTILE})
        async for out in ctx.delegate("leaf"):
            if isinstance(out, InternalEvent):  # the link only: leaf's answer would end lead's turn here
                yield out
        async for out in ctx.delegate("middle"):
            yield out

    @app.agent(id="middle", description="Delegates to leaf.")
    async def middle(ctx):
        async for out in ctx.delegate("leaf"):
            yield out

    @app.agent(id="leaf", description="Answers.")
    async def leaf(ctx):
        yield "leaf says hi"

    return app


def send(base: str, agent: str, text: str, push_url: str | None = None) -> dict:
    """One blocking A2A 1.0 SendMessage as the admin, with a webhook if given; the task it answers."""
    params: dict = {"message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}}
    if push_url:
        params["configuration"] = {"taskPushNotificationConfig": {"url": push_url, "token": "tok"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    reply = httpx.post(f"{base}/a2a/{agent}", json=body, timeout=30,
                       headers={"X-API-Key": ADMIN_KEY, "A2A-Version": "1.0"}).json()
    return reply["result"]["task"]


@pytest.mark.parametrize("store", ["memory", "sqlite", "postgres"])
def test_the_charts_show_a_known_load(browser, store: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """4 tasks of `steady` completed, 3 of `flaky` failed, 2 of `slowstart` whose first event comes after
    FIRST_WAIT. steady's tasks have webhooks: one answers 500 then 200 (1 attempt retried, 2 delivered), one
    always 500 with max_attempts 2 (2 retried, 2 dead-lettered), one 410 (1 disabled). The agent pages show
    exactly those counts, in their text and in the charts' accessible names and bars, with time to first event
    p50/p95 over the right number of tasks, slowstart's at least FIRST_WAIT, never after the time to completion."""
    hooks = webhook_receiver()
    app = pictures_app(store_url(store, request, tmp_path))
    with running(app) as server, hooks.Webhook(answers=[500]) as flapping, \
            hooks.Webhook(default=500) as broken, hooks.Webhook(answers=[410]) as gone:
        hooked = [send(server.url, "steady", f"hook {i}", hook.url)["id"]
                  for i, hook in enumerate([flapping, broken, gone])]
        assert send(server.url, "steady", "plain")["status"]["state"] == "TASK_STATE_COMPLETED"
        for _ in range(3):
            assert send(server.url, "flaky", "go")["status"]["state"] == "TASK_STATE_FAILED"
        for _ in range(2):
            assert send(server.url, "slowstart", "think")["status"]["state"] == "TASK_STATE_COMPLETED"
        logs = [settled_push_log(f"{server.url}/a2a/steady", t, headers={"X-API-Key": ADMIN_KEY}) for t in hooked]
        logged: dict[str, int] = {}
        for log in logs:
            for n in log["notifications"]:
                for t in n["tries"]:
                    logged[t["outcome"]] = logged.get(t["outcome"], 0) + 1
        assert logged == {"delivered": 2, "retry": 3, "dead": 2, "disabled": 1}, logs

        context, page, violations = logged_in(browser, server.url)

        page.goto(f"{server.url}/ui/agents/steady")
        assert counts(page) == {"completed": 4, "failed": 0, "canceled": 0, "rejected": 0}
        assert page.get_by_test_id("errors").inner_text() == "0"
        push = page.get_by_test_id("chart-push")
        label = push.get_attribute("aria-label")
        assert label.endswith("delivered 2, failed, retried 3, dead-lettered 2, disabled (410 Gone) 1"), label
        assert {o: int(page.get_by_test_id(f"push-{o}").inner_text()) for o in ("delivered", "retry", "dead",
                "disabled")} == logged
        assert bar_sums(page, "chart-push", "data-outcome") == logged
        steady_first = latency(page, "first-event")
        steady_done = latency(page, "latency")
        assert steady_first["count"] == 4 and "(4 tasks;" in steady_first["text"], steady_first
        assert steady_first["p50"] <= steady_first["p95"] and steady_first["p50"] <= steady_done["p50"], (
            steady_first, steady_done)
        assert steady_first["p95"] <= steady_done["p95"], (steady_first, steady_done)
        assert sum(int(c) for c in per_minute(page, "chart-first-event", "data-count")) == 4
        assert sum(int(c) for c in per_minute(page, "chart-completion", "data-count")) == 4

        page.goto(f"{server.url}/ui/agents/flaky")
        assert counts(page) == {"completed": 0, "failed": 3, "canceled": 0, "rejected": 0}
        assert page.get_by_test_id("errors").inner_text() == "3"
        assert bar_sums(page, "chart-per-minute", "data-state") == {"failed": 3}
        assert page.get_by_test_id("push-delivered").inner_text() == "0" and bar_sums(page, "chart-push",
                                                                                     "data-outcome") == {}

        page.goto(f"{server.url}/ui/agents/slowstart")
        first = latency(page, "first-event")
        done = latency(page, "latency")
        assert first["count"] == 2 and first["p50"] >= AT_LEAST_MS, first
        minute_p50s = [float(v) for v in per_minute(page, "chart-first-event", "data-p50-ms")]
        assert minute_p50s and all(v >= AT_LEAST_MS for v in minute_p50s), minute_p50s
        assert sum(int(c) for c in per_minute(page, "chart-first-event", "data-count")) == 2
        assert first["p50"] <= done["p50"] and first["p95"] <= done["p95"], (first, done)
        # no upper bound on a shared machine: a second or more reads "1.0 s"
        assert re.search(r"p50 [\d.]+ m?s · p95 [\d.]+ m?s \(2 tasks;", first["text"]), first["text"]
        assert violations == [], violations
        context.close()


@pytest.mark.parametrize("store", ["memory", "sqlite", "postgres"])
def test_the_task_page_draws_its_tree_and_timeline(browser, store: str, request: pytest.FixtureRequest,
                                                   tmp_path: Path) -> None:
    """`lead` delegates to `middle` (which delegates to `leaf`) and to `leaf`, and names a child on an
    unreachable server whose agent name is HTML. Its page draws 5 boxes and 4 edges (lead -> middle -> leaf,
    lead -> leaf, lead -> the far one), each box with its agent and state, the local ones linking to their task
    pages, the hostile name shown as text and never run. The timeline picture marks submitted, working and
    completed in order, offsets from 0 and growing."""
    app = pictures_app(store_url(store, request, tmp_path))
    with running(app) as server:
        task = send(server.url, "lead", "go")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        context, page, violations = logged_in(browser, server.url)
        page.goto(f"{server.url}/ui/tasks/{task['id']}")

        graph = page.get_by_test_id("tree-graph")
        assert graph.get_attribute("aria-label") == "Delegation tree: 5 tasks"
        nodes = graph.get_by_test_id("graph-node")
        shown = sorted((n.get_attribute("data-depth"), n.get_attribute("data-agent"), n.get_attribute("data-state"))
                       for n in nodes.all())
        assert shown == [("0", "lead", "completed"), ("1", HOSTILE[: MAX_LABEL - 1] + "…", "unknown"),
                         ("1", "leaf", "completed"), ("1", "middle", "completed"), ("2", "leaf", "completed")]
        assert graph.get_by_test_id("tree-edge").count() == 4
        root = graph.locator(f"[data-task='{task['id']}']")
        assert root.locator("text.agent").text_content() == "lead"
        assert root.locator("text.sub").text_content().startswith("completed · ")
        assert graph.locator("a").count() == 4  # the local tasks link to their pages; the far one does not
        hostile = graph.locator("[data-state=unknown]")
        assert hostile.locator("text.agent").text_content() == HOSTILE[: MAX_LABEL - 1] + "…"  # text, not markup
        assert "task far-away-1" in hostile.locator("title").text_content()
        assert page.evaluate("window.__pwned") is None
        middle = graph.locator("[data-agent=middle] a")
        middle.click()
        page.wait_for_selector("[data-testid=tree-graph]")
        assert page.get_by_test_id("tree-graph").get_attribute("aria-label") == "Delegation tree: 2 tasks"

        page.goto(f"{server.url}/ui/tasks/{task['id']}")
        picture = page.get_by_test_id("timeline-picture")
        marks = picture.locator("g.mark").all()
        states = [mk.get_attribute("data-state") for mk in marks]
        assert states[0] == "submitted" and states[1] == "working" and states[-1] == "completed", states
        offsets = [float(mk.get_attribute("data-offset-ms")) for mk in marks]
        assert offsets[0] == 0.0 and offsets == sorted(offsets)
        label = picture.get_attribute("aria-label")
        assert label.startswith("Status changes over ") and "submitted at +0 ms" in label and "completed at +" in label
        assert picture.locator("g.mark text").first.text_content() == "submitted +0 ms"
        assert violations == [], violations
        context.close()


def test_the_charts_redraw_live_as_tasks_end(browser, tmp_path: Path) -> None:
    """issue 30, "live charts": an open agent page counts a task that ends after it was drawn, without a reload
    (the page hears the change feed and fetches its charts again); another agent's failures are not counted on it."""
    app = pictures_app(str(tmp_path / "pictures.db"))
    with running(app) as server:
        assert send(server.url, "steady", "before")["status"]["state"] == "TASK_STATE_COMPLETED"
        context, page, violations = logged_in(browser, server.url)
        page.goto(f"{server.url}/ui/agents/steady")
        assert counts(page)["completed"] == 1
        page.evaluate("document.querySelector('section[data-charts]').dataset.drawnAt = 'first'")
        for _ in range(2):
            assert send(server.url, "flaky", "go")["status"]["state"] == "TASK_STATE_FAILED"
        for _ in range(2):
            assert send(server.url, "steady", "after")["status"]["state"] == "TASK_STATE_COMPLETED"
        from playwright.sync_api import expect  # the browser fixture has checked Playwright is there

        expect(page.get_by_test_id("count-completed")).to_have_text("3", timeout=20_000)  # polls the DOM (no eval)
        assert page.evaluate("document.querySelector('section[data-charts]').dataset.drawnAt") is None  # redrawn
        assert counts(page) == {"completed": 3, "failed": 0, "canceled": 0, "rejected": 0}
        assert bar_sums(page, "chart-per-minute", "data-state") == {"completed": 3}
        assert page.url == f"{server.url}/ui/agents/steady" and violations == []
        context.close()


def logged_in(browser, base: str) -> tuple[object, object, list[str]]:
    """A new browser context logged in as the admin, its page, and the CSP violations its console reports."""
    context = browser.new_context()
    page = context.new_page()
    violations: list[str] = []
    page.on("console", lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None)
    dashboard_login(page, base, ADMIN_KEY)
    return context, page, violations


def counts(page) -> dict[str, int]:
    """The legend's count of each final state."""
    return {s: int(page.get_by_test_id(f"count-{s}").inner_text()) for s in ("completed", "failed", "canceled",
                                                                                 "rejected")}


def bar_sums(page, chart: str, attribute: str) -> dict[str, int]:
    """The bars of one chart, their counts added up per state or outcome."""
    summed: dict[str, int] = {}
    for rect in page.get_by_test_id(chart).locator("rect").all():
        kind = rect.get_attribute(attribute)
        summed[kind] = summed.get(kind, 0) + int(rect.get_attribute("data-count"))
    return summed


def per_minute(page, chart: str, attribute: str) -> list[str]:
    """One attribute of each minute's bars of a per-minute latency chart."""
    return [g.get_attribute(attribute) for g in page.get_by_test_id(chart).locator("g").all()]


def latency(page, testid: str) -> dict:
    """One latency line: its text, its p50 and p95 in ms (from its data attributes) and how many tasks."""
    dd = page.get_by_test_id(testid)
    count = dd.get_attribute("data-count")
    return {"text": dd.inner_text(), "p50": float(dd.get_attribute("data-p50-ms") or "nan"),
            "p95": float(dd.get_attribute("data-p95-ms") or "nan"),
            "count": int(count) if count is not None else None}
