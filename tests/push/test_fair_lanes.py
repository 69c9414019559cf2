"""Fair delivery lanes per owner (issue 28, item 10): one owner's many slow webhooks cannot hold up another's.

A2A 1.0 section 4.3.3 (the server POSTs each notification to the client's webhook) and docs/push.md ("Fair
between owners"). Before, lanes were per webhook but the `[push] concurrency` lanes were shared by everyone: an
owner with as many hanging webhooks as lanes held every lane, and another owner's notification waited for their
timeouts. Now one owner runs at most `concurrency_per_owner` lanes and free lanes go round-robin between owners.
Causality, not timing: the other owner's notification arrives while every slow request is still held open.
"""

from __future__ import annotations

import time

from webhooks import WAIT, Reply, make_keys, push_settings

SLOW_HOOKS = 6  # more than the server's lanes


def _held_requests(hooks, paths: list[str], at_least: int) -> int:
    """How many requests the slow webhooks have received, once at least `at_least` have (a bounded poll)."""
    deadline = time.monotonic() + WAIT
    while (got := sum(hooks.count(p) for p in paths)) < at_least:
        assert time.monotonic() < deadline, f"{got} slow request(s) within {WAIT:g} s, expected {at_least}"
        time.sleep(0.02)
    return got


def test_one_owners_hanging_webhooks_do_not_hold_up_another_owner(start_server, hooks):
    """Mallory's six webhooks hang (more than the server's four lanes); Alice's one webhook still receives its
    notification while all of Mallory's requests are held open, and Mallory never has more than her share of
    lanes. When they answer, Mallory's notifications are delivered too."""
    keys, (alice, mallory) = make_keys("echo", "alice", "mallory")
    server = start_server(push_settings(concurrency=4, concurrency_per_owner=2, timeout_seconds=120), keys=keys)
    held = hooks.hold()
    slow = [hooks.path(f"slow{i}") for i in range(SLOW_HOOKS)]
    for path in slow:
        hooks.program(path, Reply(200, hold=held))
        server.send("echo", "slow", push={"url": hooks.url(path)}, key=mallory)
    _held_requests(hooks, slow, 2)  # Mallory's share of the lanes is taken and held

    quick = hooks.path("alice")
    task = server.send("echo", "quick", push={"url": hooks.url(quick)}, key=alice)
    hooks.wait_for(quick, 1)
    assert not held.released
    assert sum(hooks.count(p) for p in slow) <= 2, "one owner had more than its share of the lanes"
    log = server.wait_settled_log("echo", task["id"], key=alice)
    assert all(n["state"] == "delivered" for n in log["notifications"]), log

    held.release()
    for path in slow:
        hooks.wait_for(path, 1)
