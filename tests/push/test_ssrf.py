"""Webhook URLs cannot be turned against the server's own network (A2A 1.0 section 13.2; docs/push.md,
"SSRF-safe by default").

Registration is refused with -32602 naming the reason; the check is made again at every delivery; the
connection goes to the address that was checked (DNS answers that change later cannot redirect it).
Only the webhook receiver's 127.0.0.1/32 is ever allowlisted.
"""

from __future__ import annotations

import re

import pytest
from webhooks import http, push_settings, uid

from parley.push.ssrf import UnsafeUrl, UrlGuard, parse_allow

REFUSED = [
    # (url, what the -32602 message must name)
    ("http://127.0.0.1:{port}/hook", "loopback"),
    ("http://localhost:{port}/hook", "loopback"),
    ("http://10.1.2.3/hook", "private"),
    ("http://172.16.5.4/hook", "private"),
    ("http://172.31.255.1/hook", "private"),
    ("http://192.168.1.10/hook", "private"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[::1]:{port}/hook", "loopback"),
    ("http://[fe80::1]/hook", "link-local"),
    ("http://0.0.0.0:{port}/hook", "unspecified"),
    ("http://[::ffff:127.0.0.1]:{port}/hook", "loopback"),
    ("http://[fd12:3456::1]/hook", "private"),
    ("http://224.0.0.1/hook", "multicast"),
    ("http://100.64.0.1/hook", "100.64.0.1"),  # carrier-grade NAT: refused, the address named
    ("http://metadata.google.internal/computeMetadata/v1/", "metadata"),
    ("http://METADATA.Google.Internal./computeMetadata/v1/", "metadata"),
    # other spellings of loopback and metadata addresses: whatever the host resolves to is checked
    ("http://2130706433:{port}/hook", "loopback"),
    ("http://127.1:{port}/hook", "loopback"),
    ("http://0x7f.0.0.1:{port}/hook", "loopback"),
    ("http://[::]:{port}/hook", "unspecified"),
    ("http://[::ffff:a9fe:a9fe]/latest/meta-data/", "link-local"),
    ("http://[fe80::1%25eth0]/hook", "link-local"),
    ("ftp://example.com/hook", "http or https"),
    ("http://user:pass@example.com/hook", "credentials"),
]


@pytest.fixture
def closed(start_server):
    """A server with push on and no allowlist at all (the production default)."""
    return start_server(push_settings(allow=[]))


@pytest.mark.parametrize(("url", "named"), REFUSED, ids=[u for u, _ in REFUSED])
def test_registration_refused(closed, hooks, url, named):
    """Section 13.2 (agents SHOULD validate webhook URLs: reject private ranges, localhost and link-local)
    and section 3.1.7: CreateTaskPushNotificationConfig with an unsafe URL is -32602 whose message names
    what is wrong; nothing is stored."""
    url = url.format(port=hooks.port)
    task = closed.send("echo", "hello")
    err = closed.rpc_error("echo", "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": url,
                                                                         "id": "unsafe"})
    assert err.code == -32602, err.error
    assert named in err.message, err.message
    listed = closed.rpc("echo", "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
    assert listed.get("configs", []) == []


def test_refused_in_every_form_of_registration(closed, hooks):
    """Sections 3.1.1/6.6 (inline config), 3.1.7 and 13.2: the inline config of SendMessage, 0.3
    `tasks/pushNotificationConfig/set` and `message/send`, and the REST route refuse a loopback webhook
    with -32602 (HTTP 400 in REST); a refused inline config creates no task."""
    path = hooks.path("never")
    url = hooks.url(path)
    err = closed.rpc_error("echo", "SendMessage", {
        "message": {"messageId": uid("m-"), "role": "ROLE_USER", "parts": [{"text": "refused"}]},
        "configuration": {"taskPushNotificationConfig": {"url": url}}})
    assert err.code == -32602 and "loopback" in err.message
    assert closed.rpc("echo", "ListTasks", {}).get("tasks", []) == [], "a task was made for a refused send"

    err03 = closed.rpc_error("echo", "message/send", {
        "message": {"kind": "message", "messageId": uid("m-"), "role": "user",
                    "parts": [{"kind": "text", "text": "refused"}]},
        "configuration": {"pushNotificationConfig": {"url": url}}}, version=None)
    assert err03.code == -32602 and "loopback" in err03.message

    task = closed.send("echo", "hello")
    set03 = closed.rpc_error("echo", "tasks/pushNotificationConfig/set", {
        "taskId": task["id"], "pushNotificationConfig": {"url": url}}, version=None)
    assert set03.code == -32602 and "loopback" in set03.message

    resp = http.post(f"{closed.agent_url('echo')}/tasks/{task['id']}/pushNotificationConfigs",
                     json={"url": url}, headers={"A2A-Version": "1.0"})
    assert resp.status_code == 400 and "loopback" in resp.text, resp.text
    assert hooks.count(path) == 0


def test_allowlisted_address_is_accepted_and_only_it(server, hooks):
    """Section 13.2 ("Implement URL allowlists where appropriate") and docs/push.md: `[push] allow`
    admits exactly the listed networks: 127.0.0.1/32 is accepted, 127.0.0.2 still refused."""
    task = server.send("echo", "hello")
    url = hooks.url(hooks.path("allowed"))
    made = server.create_config("echo", task["id"], url, id="ok")
    assert made["url"] == url
    err = server.rpc_error("echo", "CreateTaskPushNotificationConfig",
                           {"taskId": task["id"], "url": f"http://127.0.0.2:{hooks.port}/hook"})
    assert err.code == -32602 and "loopback" in err.message


# --- the guard itself: DNS answers are checked whole, and pinned -----------------------------------


class Resolver:
    """A DNS stand-in: the answers in turn (the last one repeats), counting the lookups."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        return self.answers[min(len(self.calls) - 1, len(self.answers) - 1)]


async def test_target_pins_the_checked_address():
    """Section 13.2 and docs/push.md: the connection goes to the address that was checked, the host
    name kept for Host/SNI; a resolver that answers a public address first and 127.0.0.1 afterwards
    cannot redirect a checked Target, and the next check (the one at delivery) refuses the new answer."""
    dns = Resolver(["93.184.216.34"], ["127.0.0.1"])
    guard = UrlGuard(resolve=dns)
    target = await guard.check("https://hooks.example.com:8443/a2a/hook?x=1")
    assert target.address == "93.184.216.34"
    assert target.url == "https://93.184.216.34:8443/a2a/hook?x=1"
    assert target.host == "hooks.example.com"
    assert dns.calls == ["hooks.example.com"], "the pinned target does not resolve again"
    with pytest.raises(UnsafeUrl, match="127.0.0.1.*loopback"):
        await guard.check("https://hooks.example.com:8443/a2a/hook?x=1")


@pytest.mark.parametrize("answer", [["93.184.216.34", "10.0.0.5"], ["10.0.0.5", "93.184.216.34"],
                                    ["2606:4700:4700::1111", "fd00::1"], ["93.184.216.34", "169.254.169.254"],
                                    ["93.184.216.34", "::ffff:192.168.0.1"]])
async def test_mixed_public_and_private_answer_is_refused(answer):
    """Section 13.2 and docs/push.md: every address the host resolves to must be public: one private,
    link-local or mapped-private address among public ones refuses the URL."""
    guard = UrlGuard(resolve=Resolver(answer))
    with pytest.raises(UnsafeUrl):
        await guard.check("https://mixed.example.com/hook")


@pytest.mark.parametrize("answer, carried", [
    ("::7f00:1", "127.0.0.1"),  # IPv4-compatible ::127.0.0.1
    ("::a9fe:a9fe", "169.254.169.254"),  # IPv4-compatible metadata service
    ("64:ff9b::a00:5", "10.0.0.5"),  # NAT64 of a private address
    ("64:ff9b::7f00:1", "127.0.0.1"),
    ("2002:c0a8:1::1", "192.168.0.1"),  # 6to4 of a private address
    ("2002:a9fe:a9fe::1", "169.254.169.254"),
    ("168.63.129.16", "168.63.129.16"),  # Azure's platform endpoint
])
async def test_ipv6_forms_of_refused_ipv4_addresses_are_refused(answer, carried):
    """Issue 28, item 12 (section 13.2): an IPv6 address that carries an IPv4 one (compatible, NAT64, 6to4)
    reaches that IPv4 address, so it is checked as that address; the error names it."""
    guard = UrlGuard(resolve=Resolver([answer]))
    with pytest.raises(UnsafeUrl, match=re.escape(carried)):
        await guard.check("https://embedded.example.com/hook")
    with pytest.raises(UnsafeUrl):
        await UrlGuard().check(f"https://[{answer}]/hook" if ":" in answer else f"https://{answer}/hook")


@pytest.mark.parametrize("answer", ["64:ff9b::5db8:d822", "2002:5db8:d822::1"])
async def test_ipv6_forms_of_public_ipv4_addresses_are_accepted(answer):
    """NAT64 (DNS64 on an IPv6-only network) and 6to4 forms of a public address (93.184.216.34) stay usable,
    and an allowlist entry for the carried IPv4 network admits its NAT64 form."""
    assert (await UrlGuard(resolve=Resolver([answer])).check("https://nat64.example.com/hook")).address == answer
    allowed = UrlGuard(parse_allow(["10.0.0.0/8"]), resolve=Resolver(["64:ff9b::a00:5"]))
    assert (await allowed.check("https://inside.example.com/hook")).address == "64:ff9b::a00:5"


async def test_public_answers_are_accepted_and_allowlist_is_exact():
    """Section 13.2 and docs/push.md: a host resolving to public addresses only is accepted (the first
    is pinned); an allowlist entry admits its own network and nothing around it."""
    target = await UrlGuard(resolve=Resolver(["2606:4700:4700::1111", "93.184.216.34"])).check(
        "http://public.example.com/hook")
    assert target.url == "http://[2606:4700:4700::1111]/hook" and target.host == "public.example.com"
    allow = UrlGuard(parse_allow(["10.20.0.0/16"]), resolve=Resolver(["10.20.3.4"]))
    assert (await allow.check("http://inside.example.com/hook")).address == "10.20.3.4"
    outside = UrlGuard(parse_allow(["10.20.0.0/16"]), resolve=Resolver(["10.21.0.1"]))
    with pytest.raises(UnsafeUrl, match="private"):
        await outside.check("http://outside.example.com/hook")


# --- at delivery ------------------------------------------------------------------------------------


def _runtime(server):
    return server.live.server.config.app.state.parley


def _use_guard(server, guard: UrlGuard) -> None:
    """Give a running server's push parts a guard with a stand-in resolver (UrlGuard's `resolve=`)."""
    push = _runtime(server).push
    push.guard = push.configs.guard = push.dispatcher.guard = guard


def test_delivery_connects_to_the_pinned_address_with_the_original_host(server, hooks):
    """Section 13.2 and docs/push.md: the notification is POSTed to the checked address, with the host
    name of the URL in `Host`; the host name itself is never looked up by the HTTP client (it exists in
    no real DNS)."""
    dns = Resolver(["127.0.0.1"])
    _use_guard(server, UrlGuard(parse_allow(["127.0.0.1/32"]), resolve=dns))
    path = hooks.path("pinned")
    name = f"hook-{uid()}.parley-test.invalid"
    task = server.send("echo", "pinned", push={"url": f"http://{name}:{hooks.port}{path}"})
    changes = server.replay_changes("echo", task["id"])
    server.wait_settled_log("echo", task["id"], len(changes))
    got = hooks.requests(path)
    assert len(got) == len(changes)
    assert all(r.headers["host"] == f"{name}:{hooks.port}" for r in got)
    assert set(dns.calls) == {name} and len(dns.calls) >= 1 + len(changes), "checked again at every delivery"


def test_dns_answer_changed_after_registration_is_refused_at_delivery(server, hooks):
    """Section 13.2 and docs/push.md: the URL is checked again at every delivery; a host that resolved to
    an allowed address at registration and to a private one afterwards (DNS rebinding) is dead, with
    the reason in the log, and nothing is sent."""
    dns = Resolver(["127.0.0.1"], ["10.0.0.7"])
    _use_guard(server, UrlGuard(parse_allow(["127.0.0.1/32"]), resolve=dns))
    path = hooks.path("rebound")
    task = server.send("echo", "rebinding", push={"url": f"http://rebind.parley-test.invalid:{hooks.port}{path}"})
    changes = server.replay_changes("echo", task["id"])
    log = server.wait_settled_log("echo", task["id"], len(changes))
    for n in log["notifications"]:
        assert n["state"] == "dead", n
        assert "10.0.0.7" in n["lastError"] and "private" in n["lastError"], n
        assert [(t["status"], t["outcome"]) for t in n["tries"]] == [(None, "dead")]
    assert hooks.count(path) == 0


def test_config_no_longer_allowed_after_restart_is_dead(start_server, hooks, tmp_path):
    """Section 13.2 and docs/push.md ("checked when a config is registered and again at every delivery";
    "has a URL that is no longer allowed: gives up (dead)"): a config registered while 127.0.0.1 was
    allowed, then the server restarted without the allowlist on the same SQLite file: the next changes
    are dead, the log names the reason, and the webhook gets nothing."""
    db = tmp_path / "parley.db"
    first = start_server(push_settings(), db=db)
    task = first.send("interviewer", "I want to learn Rust")
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    path = hooks.path("was-allowed")
    first.create_config("interviewer", task["id"], hooks.url(path), id="old")
    first.stop()

    second = start_server(push_settings(allow=[]), db=db)
    assert [c["id"] for c in second.rpc("interviewer", "ListTaskPushNotificationConfigs",
                                        {"taskId": task["id"]})["configs"]] == ["old"]
    done = second.send("interviewer", "because it is fast", task_id=task["id"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    log = second.wait_settled_log("interviewer", task["id"])
    assert log["notifications"]
    for n in log["notifications"]:
        assert n["state"] == "dead", n
        assert "127.0.0.1" in n["lastError"] and "loopback" in n["lastError"], n
    assert hooks.count(path) == 0
