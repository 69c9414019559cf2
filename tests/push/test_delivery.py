"""Delivery of push notifications (docs/push.md, "What is sent, and the guarantees" and "Retries").

A real Parley server on 127.0.0.1 POSTs to a real webhook receiver on 127.0.0.1 (allowlisted as
127.0.0.1/32). What the receiver got is compared with the task's own log (a replay of SubscribeToTask
from Last-Event-ID 0) and with the delivery log (`GET .../tasks/{id}/pushLog`, `parley push log`).
"""

from __future__ import annotations

import json

import pytest
from webhooks import (
    V1,
    Reply,
    cli,
    http,
    make_keys,
    message_params,
    notifications_of,
    push_settings,
    seqs,
    strictly_increasing,
    uid,
)

from support import free_port

ECHO_TEXT = "push notifications arrive in the order of the task's log, one at a time"


def state_03(state_10: str) -> str:
    """TASK_STATE_INPUT_REQUIRED -> input-required."""
    return state_10.removeprefix("TASK_STATE_").lower().replace("_", "-")


def tries_of(notification: dict) -> list[tuple[int | None, str]]:
    return [(t["status"], t["outcome"]) for t in notification["tries"]]


# --- what is sent ---------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", ["jsonrpc-1.0", "rest-1.0", "jsonrpc-0.3"])
def test_inline_config_gets_every_status_change_in_log_order(server, hooks, binding):
    """Sections 3.1.1/6.6 (inline `taskPushNotificationConfig`), 4.3.3 (payload: a StreamResponse,
    `application/a2a+json`; `Authorization: <scheme> <credentials>`) and 13.2. docs/push.md: the
    webhook is stored with the task, so it hears of every status change, in the order of the log
    (`Parley-Event-Seq`), with `X-A2A-Notification-Token` and `Parley-Event-Id` `<task>:<seq>`; a 0.3
    client gets the Task as it stood after the change (`kind: task`, `application/json`)."""
    path = hooks.path("inline")
    token, credentials = uid("tok-"), uid("cred-")
    if binding == "jsonrpc-0.3":
        params = {"message": {"kind": "message", "messageId": uid("m-"), "role": "user",
                              "parts": [{"kind": "text", "text": ECHO_TEXT}]},
                  "configuration": {"pushNotificationConfig": {
                      "url": hooks.url(path), "token": token,
                      "authentication": {"schemes": ["Bearer"], "credentials": credentials}}}}
        task = server.rpc("echo", "message/send", params, version=None)
        assert task["kind"] == "task"
    else:
        params = message_params(ECHO_TEXT, push={"url": hooks.url(path), "token": token,
                                                 "authentication": {"scheme": "Bearer",
                                                                    "credentials": credentials}})
        if binding == "jsonrpc-1.0":
            task = server.rpc("echo", "SendMessage", params)["task"]
        else:
            resp = http.post(f"{server.agent_url('echo')}/message:send", json=params, headers=V1)
            assert resp.status_code == 200, resp.text
            task = resp.json()["task"]
    task_id = task["id"]
    assert task["status"]["state"] in ("TASK_STATE_COMPLETED", "completed")

    changes = server.replay_changes("echo", task_id)
    assert [ev["statusUpdate"]["status"]["state"] for _, ev in changes][-1] == "TASK_STATE_COMPLETED"
    hooks.wait_for(path, len(changes))
    server.wait_settled_log("echo", task_id, len(changes))
    got = hooks.requests(path)

    assert seqs(got) == [seq for seq, _ in changes], "one notification per status change, in log order"
    assert strictly_increasing(seqs(got))
    for req, (seq, event) in zip(got, changes, strict=True):
        assert req.headers["x-a2a-notification-token"] == token
        assert req.headers["authorization"] == f"Bearer {credentials}"
        assert req.event_id == f"{task_id}:{seq}"
        assert req.headers["parley-event-seq"] == str(seq)
        body = req.json()
        if binding == "jsonrpc-0.3":
            assert req.content_type.split(";")[0] == "application/json"
            assert body["kind"] == "task" and body["id"] == task_id
            assert body["status"]["state"] == state_03(event["statusUpdate"]["status"]["state"])
        else:
            assert req.content_type.split(";")[0] == "application/a2a+json"
            assert body == event, "the body is the StreamResponse of the log entry"
            assert set(body) == {"statusUpdate"} and body["statusUpdate"]["taskId"] == task_id
    if binding == "jsonrpc-0.3":  # the Task as it stood: the last one has the echoed artifact, the first not
        assert not got[0].json().get("artifacts")
        final = got[-1].json()
        assert "".join(p["text"] for a in final["artifacts"] for p in a["parts"]) == ECHO_TEXT


def test_config_created_on_waiting_task_gets_the_following_changes(server, hooks):
    """Sections 3.1.7 (CreateTaskPushNotificationConfig: "When task updates occur, the agent will send
    HTTP POST requests ... with StreamResponse payloads") and 4.3.3. A task waiting for input
    (interviewer) gets two configs; after the answer both webhooks receive every following status
    change, in log order, and neither receives the changes from before it was registered."""
    task = server.send("interviewer", "I want to learn Rust")
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    task_id = task["id"]
    path_a, path_b = hooks.path("create-a"), hooks.path("create-b")
    made_a = server.create_config("interviewer", task_id, hooks.url(path_a), id="a", token="tok-a")
    made_b = server.create_config("interviewer", task_id, hooks.url(path_b), id="b", token="tok-b")
    assert (made_a["id"], made_a["url"]) == ("a", hooks.url(path_a))
    assert (made_b["id"], made_b["url"]) == ("b", hooks.url(path_b))

    answered = server.send("interviewer", "because it is fast", task_id=task_id)
    assert answered["status"]["state"] == "TASK_STATE_COMPLETED"
    log_changes = server.replay_changes("interviewer", task_id)
    states = [ev["statusUpdate"]["status"]["state"] for _, ev in log_changes]
    asked = max(i for i, s in enumerate(states) if s == "TASK_STATE_INPUT_REQUIRED")
    following = log_changes[asked + 1:]
    assert following and following[-1][1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

    for path, token in ((path_a, "tok-a"), (path_b, "tok-b")):
        hooks.wait_for(path, len(following))
        server.wait_settled_log("interviewer", task_id)
        got = hooks.requests(path)
        assert seqs(got) == [seq for seq, _ in following], path
        assert [r.json() for r in got] == [ev for _, ev in following]
        assert all(r.headers["x-a2a-notification-token"] == token for r in got)
    log = server.push_log("interviewer", task_id)
    assert {n["configId"] for n in log["notifications"]} == {"a", "b"}
    assert all(n["state"] == "delivered" for n in log["notifications"])


# --- retries and the delivery log -----------------------------------------------------------------


def test_webhook_down_then_up_gets_everything_in_order_and_log_shows_failures(server, hooks):
    """Sections 4.3.3 ("Agents MUST attempt delivery at least once"; retries with exponential backoff)
    and 13.2. docs/push.md: a webhook that answers 503 is retried until it answers 2xx; duplicates
    carry the same Parley-Event-Id; the next notification is sent only after the previous one was
    delivered; `GET .../pushLog` and `parley push log --json` show the failed attempts, then delivered."""
    path = hooks.path("down")
    hooks.program(path, 503, 503, 503, 200)
    task = server.send("echo", ECHO_TEXT, push={"url": hooks.url(path)})
    task_id = task["id"]
    changes = server.replay_changes("echo", task_id)
    assert len(changes) >= 2
    log = server.wait_settled_log("echo", task_id, len(changes))
    got = hooks.requests(path)

    first = changes[0][0]
    expected = [first] * 4 + [seq for seq, _ in changes[1:]]
    assert seqs(got) == expected, "the first change retried until delivered, then the next ones, in order"
    assert {r.event_id for r in got[:4]} == {f"{task_id}:{first}"}

    notes = log["notifications"]
    assert [n["seq"] for n in notes] == [seq for seq, _ in changes]
    assert all(n["state"] == "delivered" for n in notes)
    assert notes[0]["attempts"] == 4 and notes[0]["lastStatus"] == 200
    assert tries_of(notes[0]) == [(503, "retry"), (503, "retry"), (503, "retry"), (200, "delivered")]
    assert [t["attempt"] for t in notes[0]["tries"]] == [1, 2, 3, 4]
    for earlier, later in zip(notes[0]["tries"], notes[0]["tries"][1:], strict=False):
        assert earlier["nextAt"] is not None and later["at"] >= earlier["nextAt"], "no retry before its time"
    assert all(tries_of(n) == [(200, "delivered")] for n in notes[1:])

    proc = cli("push", "log", server.agent_url("echo"), task_id, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == log
    table = cli("push", "log", server.agent_url("echo"), task_id)
    assert table.returncode == 0, table.stderr
    assert f"{task_id}:{first}" in table.stdout and "retry" in table.stdout and "delivered" in table.stdout


def test_429_retry_after_is_honoured(start_server, hooks):
    """Section 4.3.3 (retry logic) and docs/push.md: after 429 with `Retry-After: 1` the next attempt is
    not made before that second has passed, although the backoff (0.05 s) would allow it sooner."""
    server = start_server(push_settings(backoff_seconds=0.05, max_backoff_seconds=0.1))
    path = hooks.path("busy")
    hooks.program(path, Reply(429, {"Retry-After": "1"}), 200)
    task = server.send("echo", "rate limited", push={"url": hooks.url(path)})
    log = server.wait_settled_log("echo", task["id"])
    first = log["notifications"][0]
    assert tries_of(first) == [(429, "retry"), (200, "delivered")]
    t1, t2 = first["tries"]
    assert t1["nextAt"] >= t1["at"] + 1.0, "the retry was scheduled at least Retry-After later"
    assert t2["at"] >= t1["nextAt"], "and not attempted before"
    assert t2["at"] - t1["at"] >= 1.0
    got = hooks.requests(path)
    assert got[1].at - got[0].at >= 1.0 - 0.05  # the receiver's own clock agrees (a lower bound only)


def test_retry_is_made_when_due_with_notifications_queued_behind(start_server, hooks):
    """Sections 4.3.3/13.2 (retries with exponential backoff) and docs/push.md: a failed notification
    is retried after `backoff_seconds * 2^(n-1)`, at most `max_backoff_seconds` (0.1 s here), also
    while later notifications of the task wait behind it in the same lane. Each retry is started by its
    own due time (`nextAt`), never before it: the server reads the outbox on its own only once an hour
    here (`poll_seconds`), so a retry that waited for that would not come before the log's deadline."""
    server = start_server(push_settings(backoff_seconds=0.05, max_backoff_seconds=0.1, poll_seconds=3600))
    path = hooks.path("flaky")
    hooks.program(path, 503, 503, 200)
    task = server.send("echo", ECHO_TEXT, push={"url": hooks.url(path)})
    changes = server.replay_changes("echo", task["id"])
    assert len(changes) >= 2, "a later notification waits behind the failing one"
    log = server.wait_settled_log("echo", task["id"], len(changes))
    head = log["notifications"][0]
    assert tries_of(head) == [(503, "retry"), (503, "retry"), (200, "delivered")]
    for earlier, later in zip(head["tries"], head["tries"][1:], strict=False):
        assert earlier["nextAt"] - earlier["at"] <= 0.1 + earlier["durationSeconds"] + 0.01, earlier
        assert later["at"] >= earlier["nextAt"], f"retry {later['attempt']} was made before it was due"


def test_backoff_schedule():
    """Sections 4.3.3/13.2 ("retry logic with exponential backoff") and docs/push.md: the n-th retry
    waits `backoff_seconds * 2^(n-1)`, half of it random jitter, at most `max_backoff_seconds`; a
    Retry-After that asks for longer is honoured (up to `max_age_seconds`). PushDispatcher.delay with
    an injected rng: 0 gives the lower end of the jitter, 1 the upper."""
    from parley.push.dispatcher import PushDispatcher
    from parley.push.secrets import SecretBox
    from parley.push.ssrf import UrlGuard
    from parley.settings import PushSettings
    from parley.tasks.memory_store import MemoryTaskStore

    settings = PushSettings(backoff_seconds=1.0, max_backoff_seconds=10.0, max_age_seconds=100.0)

    def dispatcher(r: float) -> PushDispatcher:
        return PushDispatcher(MemoryTaskStore(), settings, guard=UrlGuard(), box=SecretBox(), rng=lambda: r)

    low, high, mid = dispatcher(0.0), dispatcher(1.0), dispatcher(0.5)
    assert [low.delay(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert [high.delay(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert [mid.delay(n) for n in range(1, 4)] == [0.75, 1.5, 3.0]
    assert low.delay(1, retry_after=30.0) == 30.0, "a longer Retry-After is honoured"
    assert high.delay(3, retry_after=1.0) == 4.0, "a shorter Retry-After does not hurry the backoff"
    assert low.delay(1, retry_after=1e6) == 100.0, "Retry-After is capped by max_age_seconds"


def test_retry_later_than_max_age_is_dead(start_server, hooks):
    """Section 4.3.3 ("Agents MAY stop attempting delivery ...") and docs/push.md: when the next try
    would come later than `max_age_seconds` after the change (here a 429 whose Retry-After is longer
    than the age allowed), the notification is dead-lettered instead of retried."""
    server = start_server(push_settings(max_age_seconds=1.0))
    path = hooks.path("too-late")
    hooks.program(path, Reply(429, {"Retry-After": "120"}))
    task = server.send("echo", "too late", push={"url": hooks.url(path)})
    changes = server.replay_changes("echo", task["id"])
    log = server.wait_settled_log("echo", task["id"], len(changes))
    for n in log["notifications"]:
        assert n["state"] == "dead" and tries_of(n) == [(429, "dead")], n
    assert hooks.count(path) == len(changes)


def test_timeouts_408_and_5xx_and_unreachable_are_retried(start_server, hooks):
    """Sections 4.3.3/13.2 (retries) and docs/push.md: 408 and 5xx answers are retried until the
    webhook answers 2xx, each attempt in the log with its status; a webhook that cannot be reached
    (nothing listens on its port) is retried too, and dead after `max_attempts`."""
    server = start_server(push_settings(max_attempts=6))
    path = hooks.path("transient")
    hooks.program(path, 200, 408, 500, 502, 504, 200)  # the last change fails four times
    task = server.send("echo", "transient failures", push={"url": hooks.url(path)})
    changes = server.replay_changes("echo", task["id"])
    log = server.wait_settled_log("echo", task["id"], len(changes))
    last = log["notifications"][-1]
    assert last["state"] == "delivered"
    assert tries_of(last) == [(408, "retry"), (500, "retry"), (502, "retry"), (504, "retry"), (200, "delivered")]

    unreachable = start_server(push_settings(max_attempts=2))
    closed = f"http://127.0.0.1:{free_port()}/nobody-listens"
    task = unreachable.send("echo", "unreachable", push={"url": closed})
    log = unreachable.wait_settled_log("echo", task["id"])
    for n in log["notifications"]:
        assert n["state"] == "dead" and n["attempts"] == 2, n
        assert [t["outcome"] for t in n["tries"]] == ["retry", "dead"]
        assert all(t["status"] is None and t["error"] for t in n["tries"])


def test_endless_answer_is_not_read_to_the_end(start_server, hooks):
    """Section 13.2 and docs/push.md ("at most 64 KiB of an answer is read"): a webhook that answers 200
    with a body that never ends does not hold the delivery: the notification is delivered at the first
    attempt, well within the timeout."""
    server = start_server(push_settings(timeout_seconds=5))
    path = hooks.path("endless")
    hooks.program(path, Reply(200, endless=True))
    task = server.send("echo", "a long answer", push={"url": hooks.url(path)})
    changes = server.replay_changes("echo", task["id"])
    log = server.wait_settled_log("echo", task["id"], len(changes))
    for n in log["notifications"]:
        assert tries_of(n) == [(200, "delivered")], n


def test_in_flight_notification_is_sent_again_after_restart(start_server, hooks, tmp_path):
    """Section 4.3.3 ("Agents MUST attempt delivery at least once"; "duplicate deliveries may occur")
    and docs/push.md ("A notification sent while the server died is sent again after the restart.
    Duplicates carry the same Parley-Event-Id"): the server stops while its webhook holds a
    notification; after the restart on the same SQLite file it is sent again, with the same event id,
    and the rest follow in order."""
    db = tmp_path / "parley.db"
    first = start_server(push_settings(timeout_seconds=60), db=db)
    path = hooks.path("restart")
    held = hooks.hold()
    hooks.program(path, Reply(200, hold=held), 200)
    task = first.send("echo", ECHO_TEXT, push={"url": hooks.url(path)})
    task_id = task["id"]
    changes = first.replay_changes("echo", task_id)
    [in_flight] = hooks.wait_for(path, 1)
    first.stop()
    held.release()  # the answer comes too late: the server that asked is gone

    second = start_server(push_settings(), db=db)
    log = second.wait_settled_log("echo", task_id, len(changes))
    assert all(n["state"] == "delivered" for n in log["notifications"])
    got = hooks.requests(path)
    assert got[0] is in_flight and got[1].event_id == in_flight.event_id == f"{task_id}:{changes[0][0]}"
    assert got[1].body == in_flight.body
    assert seqs(got[1:]) == [seq for seq, _ in changes], "after the restart: every change, in order"


def test_config_remembers_the_version_its_client_spoke(server, hooks):
    """Sections 4.3.3 (1.0 payload: StreamResponse, application/a2a+json) and docs/push.md ("A config
    remembers the protocol version its client spoke"): on one task, a config set with 0.3
    `tasks/pushNotificationConfig/set` gets Tasks (`kind: task`, application/json) and a config created
    with 1.0 gets StreamResponses, whatever version continues the task."""
    task = server.send("interviewer", "I want to learn Rust")
    task_id = task["id"]
    old, new = hooks.path("v03"), hooks.path("v10")
    server.rpc("interviewer", "tasks/pushNotificationConfig/set",
               {"taskId": task_id, "pushNotificationConfig": {"id": "old", "url": hooks.url(old)}}, version=None)
    server.create_config("interviewer", task_id, hooks.url(new), id="new")
    server.send("interviewer", "because it is fast", task_id=task_id)
    server.wait_settled_log("interviewer", task_id)
    got_old, got_new = hooks.requests(old), hooks.requests(new)
    assert got_old and seqs(got_old) == seqs(got_new)
    for r in got_old:
        assert r.content_type.split(";")[0] == "application/json"
        assert r.json()["kind"] == "task" and r.json()["id"] == task_id
    assert got_old[-1].json()["status"]["state"] == "completed"
    for r in got_new:
        assert r.content_type.split(";")[0] == "application/a2a+json"
        assert set(r.json()) == {"statusUpdate"}
    assert got_new[-1].json()["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_410_gone_disables_the_config(server, hooks):
    """Section 4.3.3 ("Agents MAY stop attempting delivery ...") and docs/push.md: a webhook that answers
    410 Gone has its config disabled: nothing more is sent to it, the log says `disabled`; another
    config of the same task keeps receiving."""
    key = uid("gone-")
    gone, alive = hooks.path("gone"), hooks.path("alive")
    hooks.program(gone, 410)
    task = server.send("steps", key, push={"url": hooks.url(gone), "id": "gone"}, wait=False)
    task_id = task["id"]
    server.create_config("steps", task_id, hooks.url(alive), id="alive")
    hooks.wait_for(gone, 1)
    server.wait_log("steps", task_id, lambda log: any(n["state"] == "disabled" for n in log["notifications"]))
    server.gates.open(f"{key}/1")
    server.gates.open(f"{key}/2")
    hooks.wait_until(alive, lambda got: any(r.json()["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
                                            for r in got))
    log = server.wait_log("steps", task_id, lambda log: all(n["state"] != "pending" for n in log["notifications"]))

    assert hooks.count(gone) == 1, "nothing more is sent to a webhook that answered 410"
    disabled = notifications_of(log, "gone")
    assert disabled and all(n["state"] == "disabled" for n in disabled)
    assert disabled[0]["lastStatus"] == 410 and tries_of(disabled[0]) == [(410, "disabled")]
    alive_notes = notifications_of(log, "alive")
    assert alive_notes and all(n["state"] == "delivered" for n in alive_notes)
    assert seqs(hooks.requests(alive)) == [n["seq"] for n in alive_notes]


@pytest.mark.parametrize("status", [400, 401, 404])
def test_refusal_is_dead_at_once(server, hooks, status):
    """Section 4.3.3 and docs/push.md: an answer other than 2xx, 408, 429, 5xx or 410 (400, 401, 404)
    gives the notification up at once (`dead`), without retries: it would answer the same again."""
    path = hooks.path("refused")
    hooks.program(path, status)
    task = server.send("echo", "refused", push={"url": hooks.url(path)})
    changes = server.replay_changes("echo", task["id"])
    log = server.wait_settled_log("echo", task["id"], len(changes))
    notes = log["notifications"]
    assert len(notes) == len(changes)
    for n in notes:
        assert n["state"] == "dead" and n["attempts"] == 1 and n["lastStatus"] == status
        assert tries_of(n) == [(status, "dead")]
    assert seqs(hooks.requests(path)) == [seq for seq, _ in changes], "each sent exactly once"


def test_redirect_is_not_followed_and_is_dead(server, hooks):
    """Section 13.2 (SSRF) and docs/push.md: redirects are not followed (the target gets nothing), and
    a redirect answer gives the notification up at once (`dead`)."""
    path, target = hooks.path("moved"), hooks.path("redirect-target")
    hooks.program(path, Reply(302, {"Location": hooks.url(target)}))
    task = server.send("echo", "redirected", push={"url": hooks.url(path)})
    changes = server.replay_changes("echo", task["id"])
    log = server.wait_settled_log("echo", task["id"], len(changes))
    assert all(n["state"] == "dead" and tries_of(n) == [(302, "dead")] for n in log["notifications"])
    assert hooks.count(path) == len(changes)
    assert hooks.count(target) == 0, "the redirect was followed"


def test_webhook_that_never_answers_times_out_and_is_retried(start_server, hooks):
    """Sections 4.3.3/13.2 ("a reasonable timeout for webhook requests") and docs/push.md: a webhook
    that does not answer within `timeout_seconds` counts as a failure and is retried; the retry carries
    the same event id."""
    server = start_server(push_settings(timeout_seconds=0.5))
    path = hooks.path("silent")
    never = hooks.hold()  # released only after the test
    hooks.program(path, Reply(200, hold=never), 200)
    task = server.send("echo", "are you there", push={"url": hooks.url(path)})
    changes = server.replay_changes("echo", task["id"])
    log = server.wait_settled_log("echo", task["id"], len(changes))
    first = log["notifications"][0]
    assert first["state"] == "delivered"
    assert tries_of(first) == [(None, "retry"), (200, "delivered")]
    assert "0.5" in first["tries"][0]["error"], first["tries"][0]
    got = hooks.requests(path)
    assert got[0].event_id == got[1].event_id == f"{task['id']}:{changes[0][0]}"
    assert not never.released


def test_max_attempts_exhausted_is_dead(start_server, hooks):
    """Section 4.3.3 ("Agents MAY stop attempting delivery after a configured number of consecutive
    failures") and docs/push.md: after `max_attempts` failed attempts the notification is dead-lettered;
    the next one is sent only after that."""
    server = start_server(push_settings(max_attempts=3))
    path = hooks.path("always-down")
    hooks.program(path, 503)
    task = server.send("echo", "nobody home", push={"url": hooks.url(path)})
    changes = server.replay_changes("echo", task["id"])
    log = server.wait_settled_log("echo", task["id"], len(changes))
    for n in log["notifications"]:
        assert n["state"] == "dead" and n["attempts"] == 3 and n["lastStatus"] == 503
        assert tries_of(n) == [(503, "retry"), (503, "retry"), (503, "dead")]
        assert n["nextAt"] is None
    assert seqs(hooks.requests(path)) == [seq for seq, _ in changes for _ in range(3)]


def test_slow_webhook_delays_neither_other_webhooks_nor_answers(start_server, hooks):
    """Section 4.3.3 and docs/push.md ("Never in the way"): while one task's webhook holds its request
    open, the server answers requests, another task's webhook receives all its notifications, and the
    held webhook gets nothing more (one at a time) until it answers; then it gets the rest, in order."""
    server = start_server(push_settings(timeout_seconds=60))
    slow, quick = hooks.path("slow"), hooks.path("quick")
    held = hooks.hold()
    hooks.program(slow, Reply(200, hold=held), 200)

    slow_task = server.send("echo", "the slow one", push={"url": hooks.url(slow)})
    assert slow_task["status"]["state"] == "TASK_STATE_COMPLETED", "the send was not held up by its webhook"
    hooks.wait_for(slow, 1)
    assert server.get_task("echo", slow_task["id"])["status"]["state"] == "TASK_STATE_COMPLETED"

    quick_task = server.send("echo", "the quick one", push={"url": hooks.url(quick)})
    quick_changes = server.replay_changes("echo", quick_task["id"])
    hooks.wait_for(quick, len(quick_changes))
    server.wait_settled_log("echo", quick_task["id"], len(quick_changes))
    assert seqs(hooks.requests(quick)) == [seq for seq, _ in quick_changes]
    assert not held.released and hooks.count(slow) == 1, "the held webhook got a second request at once"
    log = server.push_log("echo", slow_task["id"])
    assert [n["state"] for n in log["notifications"]] == ["pending"] * len(log["notifications"])

    held.release()
    slow_changes = server.replay_changes("echo", slow_task["id"])
    server.wait_settled_log("echo", slow_task["id"], len(slow_changes))
    assert seqs(hooks.requests(slow)) == [seq for seq, _ in slow_changes]


@pytest.mark.parametrize("artifacts", [False, True])
def test_artifact_updates_only_when_enabled(start_server, hooks, artifacts):
    """Section 4.3.3 (the payload may be an `artifactUpdate`) and docs/push.md: artifact updates are
    notifications only with `[push] artifact_updates = true`; status changes always."""
    server = start_server(push_settings(artifact_updates=artifacts))
    path = hooks.path("artifacts")
    task = server.send("echo", ECHO_TEXT, push={"url": hooks.url(path)})
    changes = server.replay_changes("echo", task["id"], artifacts=artifacts)
    assert any("artifactUpdate" in ev for _, ev in server.replay("echo", task["id"])), "echo streams artifacts"
    server.wait_settled_log("echo", task["id"], len(changes))
    got = hooks.requests(path)
    assert [r.json() for r in got] == [ev for _, ev in changes]
    kinds = {next(iter(r.json())) for r in got}
    assert kinds == ({"statusUpdate", "artifactUpdate"} if artifacts else {"statusUpdate"})
    log = server.push_log("echo", task["id"])
    assert {n["kind"] for n in log["notifications"]} == ({"status", "artifact"} if artifacts else {"status"})


# --- access -----------------------------------------------------------------------------------------


def test_another_principal_cannot_reach_push_log_or_configs(start_server, hooks):
    """Sections 3.1.7-3.1.10 (TaskNotFoundError: "does not exist or is not accessible") and 13.1/13.2:
    the push log is for the task's owner only (404 to anybody else, over HTTP and `parley push log`), and
    another principal can neither create, get, list nor delete the push configs of the task."""
    keys, (alice, mallory) = make_keys("interviewer", "alice", "mallory")
    server = start_server(keys=keys)
    mine, theirs = hooks.path("owner"), hooks.path("intruder")
    task = server.send("interviewer", "a private matter", push={"url": hooks.url(mine), "id": "mine",
                                                               "token": "alice-token"}, key=alice)
    task_id = task["id"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

    assert server.push_log_raw("interviewer", task_id, alice).status_code == 200
    denied = server.push_log_raw("interviewer", task_id, mallory)
    assert denied.status_code == 404, denied.text
    assert "alice-token" not in denied.text and hooks.url(mine) not in denied.text
    proc = cli("push", "log", server.agent_url("interviewer"), task_id, "--json", env={"PARLEY_API_KEY": mallory})
    assert proc.returncode != 0 and "404" in proc.stderr + proc.stdout

    calls = [
        ("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": hooks.url(theirs), "id": "theirs"}),
        ("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "mine"}),
        ("ListTaskPushNotificationConfigs", {"taskId": task_id}),
        ("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "mine"}),
    ]
    for method, params in calls:
        err = server.rpc_error("interviewer", method, params, key=mallory)
        assert err.code == -32001, (method, err.error)
        assert hooks.url(mine) not in json.dumps(err.error)

    listed = server.rpc("interviewer", "ListTaskPushNotificationConfigs", {"taskId": task_id}, key=alice)
    assert [c["id"] for c in listed["configs"]] == ["mine"], "the intruder changed the task's configs"

    server.send("interviewer", "never mind", task_id=task_id, key=alice)
    server.wait_settled_log("interviewer", task_id, key=alice)
    assert hooks.count(mine) >= 2
    assert hooks.count(theirs) == 0


def test_push_log_of_unknown_task_is_404(server):
    """Section 3.1.10 (TaskNotFoundError) and docs/push.md: the push log of a task that does not exist
    is not found."""
    resp = server.push_log_raw("echo", uid("no-such-task-"))
    assert resp.status_code == 404, resp.text


@pytest.mark.parametrize("steps", range(6))
async def test_stopping_the_dispatcher_as_it_is_woken_stops_it(steps: int) -> None:
    """docs/push.md: a server that shuts down stops delivering (notifications in flight stay pending). A commit
    that wakes the dispatcher in the same loop turns as the shutdown stops it must not lose the stop: on
    Python 3.11 `asyncio.wait_for` could swallow the cancel when the wake-up had completed the wait first,
    and the dispatcher went on, so `stop()` (and the server's shutdown) waited for it without end. The stop
    is tried at each of the first loop turns after the wake-up, which covers that window."""
    import asyncio

    from parley.push.dispatcher import PushDispatcher
    from parley.push.secrets import SecretBox
    from parley.push.ssrf import UrlGuard
    from parley.settings import PushSettings
    from parley.tasks.memory_store import MemoryTaskStore

    dispatcher = PushDispatcher(MemoryTaskStore(), PushSettings(poll_seconds=3600.0), guard=UrlGuard(),
                                box=SecretBox())
    dispatcher.start()
    for _ in range(5):  # it has read the (empty) outbox and waits for a wake-up
        await asyncio.sleep(0)
    runner = dispatcher._runner
    assert runner is not None and not runner.done()
    dispatcher.wake()
    for _ in range(steps):
        await asyncio.sleep(0)
    stopping = asyncio.ensure_future(dispatcher.stop())
    done, _ = await asyncio.wait([stopping], timeout=20.0)  # a failure detector only
    assert stopping in done, "stop() never returned: the dispatcher lost its cancel"
    assert runner.cancelled()


def test_no_trace_context_is_sent_while_telemetry_is_off(server, hooks):
    """docs/push.md ("Tracing"): `traceparent`/`tracestate` go on webhook requests only with OpenTelemetry on;
    with it off (a bare install) notifications are delivered as before, without them."""
    path = hooks.path("untraced")
    task = server.send("echo", "hello", push={"url": hooks.url(path)})
    log = server.wait_settled_log("echo", task["id"])
    got = hooks.wait_for(path, len(log["notifications"]))
    assert all("traceparent" not in r.headers and "tracestate" not in r.headers for r in got)
