"""Screenshots of every dashboard page, for docs/dashboard.md:

    .venv/bin/python scripts/dashboard_screenshots.py docs/screenshots

Starts `parley serve` with the browser tests' agents (tests/e2e/apps/dashboard_agents.py) and an admin
key, makes a few tasks (a chat, a delegation, a rich artifact, echo tasks with webhooks on this machine: one
answering 500 then 200, one 410 Gone), and saves a PNG of each page from Debian's chromium at 1280 px, plus the
agent page at phone width.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "tests"))  # dashboard_kit imports tests/support.py

from dashboard_kit import ADMIN_KEY, CHROMIUM, CHROMIUM_ARGS, write_config

from support import settled_push_log, webhook_receiver


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rpc(base: str, agent: str, text: str, task_id: str | None = None, push_url: str | None = None) -> dict:
    message = {"messageId": os.urandom(8).hex(), "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id:
        message["taskId"] = task_id
    params: dict = {"message": message}
    if push_url:
        params["configuration"] = {"taskPushNotificationConfig": {"url": push_url, "token": "screenshots"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    reply = httpx.post(f"{base}/a2a/{agent}", json=body, timeout=30,
                       headers={"X-API-Key": ADMIN_KEY, "A2A-Version": "1.0"}).json()
    return reply["result"]["task"]


def with_inspect_allow(config: Path) -> Path:
    """The config, its inspector and its webhooks allowed to reach this machine (to inspect the server's own
    agents; the screenshots' webhook receivers), retries quick."""
    config.write_text(config.read_text() + '\n[server.dashboard]\ninspect_allow = ["127.0.0.0/8"]\n'
                      '\n[server.push]\nallow = ["127.0.0.0/8"]\nbackoff_seconds = 0.05\n')
    return config


def main(out: Path) -> None:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        env = {**os.environ, "PARLEY_ADMIN_KEY": ADMIN_KEY,
               "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "e2e" / "apps"), os.environ.get("PYTHONPATH", "")])}
        parley = Path(sys.executable).with_name("parley")
        proc = subprocess.Popen([str(parley), "serve", "--port", str(port), "--log-level", "warning",
                                 "--config", str(with_inspect_allow(write_config(Path(tmp))))], env=env, cwd=tmp)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:  # bounded: the server answering /healthz is the signal
                try:
                    if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("parley serve did not start")
                time.sleep(0.1)
            routed = rpc(base, "front", "my router is broken")
            rich = rpc(base, "writer", "Made for the screenshots.")
            asked = rpc(base, "interviewer", "I want to learn Rust")
            rpc(base, "interviewer", "for speed", task_id=asked["id"])
            hooks = webhook_receiver()
            with hooks.Webhook(answers=[500]) as flapping, hooks.Webhook(answers=[410]) as gone:
                hooked = [rpc(base, "echo", f"hello {i}", push_url=hook.url)["id"]
                          for i, hook in enumerate([flapping, gone, flapping])]
                for task_id in hooked:
                    settled_push_log(f"{base}/a2a/echo", task_id, headers={"X-API-Key": ADMIN_KEY})
            for i in range(4):
                rpc(base, "echo", f"plain {i}")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(f"{base}/ui/login")
                page.screenshot(path=out / "login.png")
                page.get_by_label("Admin API key or bearer token").fill(ADMIN_KEY)
                page.get_by_role("button", name="Log in").click()
                page.wait_for_url(f"{base}/")
                page.screenshot(path=out / "agents.png", full_page=True)
                page.goto(f"{base}/ui/agents/interviewer")
                page.screenshot(path=out / "agent.png", full_page=True)
                page.get_by_test_id("chat-link").click()
                page.get_by_label("Message", exact=True).fill("I want to learn Rust")
                page.get_by_role("button", name="Send").click()
                page.wait_for_selector("[data-testid=chat-state][data-state=input-required]")
                page.screenshot(path=out / "chat.png", full_page=True)
                page.goto(f"{base}/ui/inspect?url={base}/a2a/writer")
                page.get_by_label("Message text").fill("Inspect me")
                page.get_by_label("Credential (an API key goes in X-API-Key, a JWT as a bearer token)").fill(ADMIN_KEY)
                page.get_by_role("button", name="Send").click()
                page.locator("[data-testid=inspect-console] li[data-valid]").first.wait_for()
                page.screenshot(path=out / "inspect.png", full_page=True)
                page.set_viewport_size({"width": 1280, "height": 1200})  # the last hour's charts, all of them
                page.goto(f"{base}/ui/agents/echo")
                page.evaluate("document.querySelector('[data-testid=charts]').scrollIntoView()")
                page.screenshot(path=out / "charts.png")
                page.set_viewport_size({"width": 1280, "height": 900})
                page.goto(f"{base}/ui/tasks")
                page.wait_for_selector("[data-testid=live-status] >> text=updates appear")
                page.screenshot(path=out / "tasks.png", full_page=True)
                page.goto(f"{base}/ui/tasks/{routed['id']}")
                page.screenshot(path=out / "task-delegation.png", full_page=True)
                page.goto(f"{base}/ui/tasks/{rich['id']}")
                page.screenshot(path=out / "task.png", full_page=True)
                page.goto(f"{base}/ui/keys")
                page.get_by_label("Name").fill("reporting")
                page.get_by_role("button", name="Create key").click()
                page.get_by_test_id("created-key").wait_for()
                page.screenshot(path=out / "keys.png", full_page=True)
                page.set_viewport_size({"width": 375, "height": 800})
                page.goto(f"{base}/ui/agents/echo")
                page.screenshot(path=out / "phone.png")
                browser.close()
        finally:
            proc.terminate()
            proc.wait(30)
    for name in sorted(p.name for p in out.glob("*.png")):
        print(out / name)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots"))
