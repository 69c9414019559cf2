"""A webhook host name that does not resolve when it is registered (a passing DNS failure) is accepted, and
decided at delivery (issue 27, item 8; A2A 1.0 section 13.2; docs/push.md, "SSRF-safe by default").

Registration checks the URL's syntax and, when the name resolves, every address; a name that does not
resolve is no danger (it reaches nothing) and may be fine a minute later, so refusing it would refuse a
legitimate webhook. Delivery always resolves and checks (and pins) the address: there a name that still
does not resolve is a failed attempt, retried with backoff, and delivered once DNS answers with an allowed
address. DNS is the one external service stood in for (UrlGuard's `resolve=`).
"""

from __future__ import annotations

import socket

import pytest
from webhooks import push_settings

from parley.push.ssrf import UnsafeUrl, UrlGuard, parse_allow


class FlakyDns:
    """A DNS stand-in: raises socket.gaierror (a name that does not resolve) until `answer` is set."""

    def __init__(self) -> None:
        self.answer: list[str] | None = None
        self.calls = 0

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls += 1
        if self.answer is None:
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return self.answer


def _use_guard(server, guard: UrlGuard) -> None:
    """Give a running server's push parts this guard (registration and delivery)."""
    push = server.live.server.config.app.state.parley.push
    push.guard = push.configs.guard = push.dispatcher.guard = guard


def test_unresolved_name_is_registered_then_retried_until_it_resolves(server, hooks):
    """A config whose host does not resolve is stored (no -32602); the notifications of the task's next
    changes fail while DNS fails (attempts without an HTTP status, state `pending`: retried, not dead), and
    reach the webhook once the name resolves to an allowed address."""
    dns = FlakyDns()
    _use_guard(server, UrlGuard(parse_allow(["127.0.0.1/32"]), resolve=dns))
    task = server.send("interviewer", "I want to learn Rust")
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    path = hooks.path("dns-later")
    made = server.create_config("interviewer", task["id"], f"http://hooks.parley-test.invalid:{hooks.port}{path}",
                                id="later")
    assert made["id"] == "later"
    listed = server.rpc("interviewer", "ListTaskPushNotificationConfigs", {"taskId": task["id"]})["configs"]
    assert [c["id"] for c in listed] == ["later"]

    done = server.send("interviewer", "because it is fast", task_id=task["id"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    log = server.wait_log("interviewer", task["id"], lambda lg: any(
        len(n["tries"]) >= 2 for n in lg["notifications"]))
    for n in log["notifications"]:
        assert n["state"] == "pending", n  # retried, never dead while DNS fails
        assert all(t["status"] is None and t["outcome"] == "retry" for t in n["tries"]), n
        assert not n["tries"] or "does not resolve" in n["lastError"], n
    assert hooks.count(path) == 0

    dns.answer = ["127.0.0.1"]
    log = server.wait_settled_log("interviewer", task["id"])
    assert {n["state"] for n in log["notifications"]} == {"delivered"}, log
    assert hooks.count(path) == len(log["notifications"])


async def test_guard_accepts_an_unresolved_name_at_registration_only():
    """UrlGuard: `check_registration` accepts a name that does not resolve (it is neither an IP literal nor
    a metadata host); `check` (delivery) refuses it, so nothing is ever sent to an unchecked address."""
    guard = UrlGuard(resolve=FlakyDns())
    await guard.check_registration("https://hooks.example.com/a2a")
    with pytest.raises(UnsafeUrl, match="does not resolve"):
        await guard.check("https://hooks.example.com/a2a")
    with pytest.raises(UnsafeUrl, match="metadata"):
        await guard.check_registration("http://metadata.google.internal/computeMetadata/v1/")


@pytest.mark.parametrize("answer", [["10.0.0.7"], ["93.184.216.34", "169.254.169.254"]])
def test_name_resolving_to_a_private_address_is_still_refused(start_server, hooks, answer):
    """Section 13.2: a name that does resolve at registration is checked there: a private or link-local
    answer is -32602 naming the address, and nothing is stored."""
    server = start_server(push_settings(allow=[]))
    dns = FlakyDns()
    dns.answer = answer
    _use_guard(server, UrlGuard(resolve=dns))
    task = server.send("echo", "hello")
    err = server.rpc_error("echo", "CreateTaskPushNotificationConfig",
                           {"taskId": task["id"], "url": "https://inside.parley-test.invalid/hook", "id": "x"})
    assert err.code == -32602 and answer[-1] in err.message, err.message
    assert server.rpc("echo", "ListTaskPushNotificationConfigs", {"taskId": task["id"]}).get("configs", []) == []
