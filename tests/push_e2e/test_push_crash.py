"""Push notifications survive `parley serve` being killed: real processes, a real webhook, nothing mocked.

docs/push.md, "What is sent, and the guarantees": a notification is written to the outbox in the commit
of the change itself (durable); it is retried until the webhook answers 2xx (at least once), and "a
notification sent while the server died is sent again after the restart. Duplicates carry the same
`Parley-Event-Id`"; a webhook receives a task's notifications "in the order of the task's log
(`Parley-Event-Seq` is the position), one at a time"; 408/429/5xx are retried with backoff; `parley push
log` shows every notification and every attempt.

Every Parley here is a `parley serve --config parley.toml --db FILE --push-allow 127.0.0.1/32`
subprocess (the agent `steps`, a Python agent written into the test's directory; `[push]` with a
backoff of 50 ms), started until `GET /healthz` answers, killed with SIGKILL and restarted on the same
database and port. The webhook is tests/push_e2e/receiver.py, in this process, recording every request
on arrival. The oracle of "every notification" is the task's own log, replayed over SSE
(`SubscribeToTask` with `Last-Event-ID: 0`) after the restart: its status entries (and artifact
entries, with `artifact_updates = true`), by sequence number, and each notification body must be
exactly that entry as a 1.0 `StreamResponse`.

Waits are bounded (WAIT) and event-driven where the webhook is concerned; the only polling is for
server readiness and for the delivery log to settle (failure detectors, never timing assertions).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from parley.client.push import PushVerificationError, PushVerifier
from parley.tasks.engine import RESUME_MESSAGE
from support import PARLEY, ServeProcess, free_port, replay_log, stopped_at_end

WAIT = 30.0  # upper bound of one observable step; a failure detector only
TOKEN = "crash-test-token"
STEPS = 3  # progress messages of the agent before its (optional) gate

# The agent the servers load (tests write it next to parley.toml; `parley serve` imports from its cwd).
# Message text: "<n> [gate URL]". It says "step 0".."step n-1" (working statuses); with a gate it
# checkpoints, then waits until GET <gate URL> answers (receiver.py's latch, opened by the test), so a
# SIGKILL can land while it runs; a resumed run (ctx.checkpoint set) goes straight to the gate. Then it
# streams three artifact chunks and ends (completed).
AGENT = '''
import httpx
from parley.agents.base import ArtifactChunk, RunContext
from parley.protocol import models as m


async def steps(ctx: RunContext):
    words = ctx.text.split()
    n, gate = int(words[0]), (words[1] if len(words) > 1 else None)
    if not ctx.checkpoint:
        for i in range(n):
            yield ctx.say(f"step {i}")
        if gate:
            yield ctx.internal("checkpoint", state={"at": "gate"})
            yield ctx.say("at the gate")
    if gate:
        async with httpx.AsyncClient(timeout=120) as http:
            (await http.get(gate)).raise_for_status()
    pieces = ["one", " two", " three"]
    for i, piece in enumerate(pieces):
        yield ArtifactChunk(m.Artifact(artifact_id="answer", name="answer", parts=[m.Part(text=piece)]),
                            append=i > 0, last_chunk=i == len(pieces) - 1)
'''


def config_text(*, artifact_updates: bool) -> str:
    return textwrap.dedent(f"""\
        [server]
        builtin_agents = false

        [[agents]]
        id = "steps"
        type = "python"
        entry = "pushsteps:steps"

        [push]
        backoff_seconds = 0.05
        max_backoff_seconds = 0.2
        max_attempts = 100
        timeout_seconds = 20
        poll_seconds = 3600  # no help from polling: every delivery must be started by its own wake-up
        artifact_updates = {"true" if artifact_updates else "false"}
        """)


def server_env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "250"}


@pytest.fixture
def parley(tmp_path: Path) -> Iterator[Callable[..., ServeProcess]]:
    """`parley(name, port=None, artifact_updates=False)`: a ready `parley serve` on tmp_path/tasks.db."""
    (tmp_path / "pushsteps.py").write_text(AGENT)
    with stopped_at_end(lambda srv: srv.close()) as started:
        def start(name: str, *, port: int | None = None, artifact_updates: bool = False) -> ServeProcess:
            config = tmp_path / "parley.toml"
            config.write_text(config_text(artifact_updates=artifact_updates))
            args = ["--config", str(config), "--db", str(tmp_path / "tasks.db"), "--push-allow", "127.0.0.1/32"]
            srv = ServeProcess(name, args, cwd=tmp_path, port=port, env=server_env(), wait=WAIT)
            started.append(srv)
            return srv.wait_ready()

        yield start


# --- talking to Parley ------------------------------------------------------------------------------------------------


def send(agent_url: str, text: str, hook_url: str, *, return_immediately: bool) -> dict[str, Any]:
    """SendMessage (A2A 1.0 JSON-RPC) with the webhook registered inline; the task."""
    params = {"message": {"messageId": os.urandom(8).hex(), "role": "ROLE_USER", "parts": [{"text": text}]},
              "configuration": {"returnImmediately": return_immediately,
                                "taskPushNotificationConfig": {"url": hook_url, "token": TOKEN}}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    resp = httpx.post(agent_url, json=body, headers={"A2A-Version": "1.0"}, timeout=WAIT)
    assert resp.status_code == 200, resp.text
    assert "result" in resp.json(), resp.text
    return resp.json()["result"]["task"]


def notified(log: list[tuple[int, dict[str, Any]]], *, artifacts: bool) -> dict[int, dict[str, Any]]:
    """The entries of a log that are push notifications (docs/push.md): status changes, and artifact
    updates when `artifact_updates` is on. seq -> the entry."""
    kinds = ("statusUpdate", "artifactUpdate") if artifacts else ("statusUpdate",)
    return {seq: ev for seq, ev in log if any(k in ev for k in kinds)}


def api_push_log(agent_url: str, task_id: str) -> dict[str, Any]:
    resp = httpx.get(f"{agent_url}/tasks/{task_id}/pushLog", timeout=WAIT)
    assert resp.status_code == 200, resp.text
    return resp.json()


def settled_push_log(agent_url: str, task_id: str, count: int) -> dict[str, Any]:
    """`parley push log URL TASK --json` (the CLI, a subprocess), once the log has `count` notifications and
    none is pending any more (bounded polling of GET .../pushLog: the last outcome is recorded just after
    the webhook's answer)."""
    deadline = time.monotonic() + WAIT
    while True:
        data = api_push_log(agent_url, task_id)
        notes = data["notifications"]
        if len(notes) >= count and all(n["state"] != "pending" for n in notes):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"the delivery log did not settle: {json.dumps(data, indent=1)[:3000]}")
        time.sleep(0.05)
    proc = subprocess.run([*PARLEY, "push", "log", agent_url, task_id, "--json"], env=server_env(),
                          capture_output=True, text=True, timeout=WAIT, check=False)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    return json.loads(proc.stdout)


# --- what the webhook got ---------------------------------------------------------------------------------------------


def check_deliveries(got: list, task_id: str, expected: dict[int, dict[str, Any]]) -> dict[str, list]:
    """The guarantees over everything the webhook received for the task, in arrival order. Returns the
    receipts grouped by event id."""
    problems: list[str] = []
    for r in got:
        if r.event_id != f"{task_id}:{r.seq}":
            problems.append(f"#{r.index}: Parley-Event-Id {r.event_id!r} is not <task id>:<Parley-Event-Seq {r.seq}>")
        if r.headers.get("x-a2a-notification-token") != TOKEN:
            problems.append(f"#{r.index}: X-A2A-Notification-Token is {r.headers.get('x-a2a-notification-token')!r}")
        if not r.content_type.startswith("application/a2a+json"):
            problems.append(f"#{r.index}: Content-Type {r.content_type!r}")
    seqs = [r.seq for r in got]
    # One at a time, in the log's order: a notification is only sent once the previous one was delivered, so
    # the arrival order never goes back (a duplicate comes right after its original, before anything later).
    if seqs != sorted(seqs):
        problems.append(f"arrivals out of order (Parley-Event-Seq in arrival order): {seqs}")
    distinct = list(dict.fromkeys(seqs))
    if distinct != sorted(expected):
        missing = sorted(set(expected) - set(seqs))
        extra = sorted(set(seqs) - set(expected))
        problems.append(f"distinct notifications {distinct} != the task's notifiable entries {sorted(expected)} "
                        f"(missing {missing}, not in the log as notifiable {extra})")
    by_id: dict[str, list] = {}
    for r in got:
        by_id.setdefault(r.event_id, []).append(r)
    for eid, copies in by_id.items():
        if len({c.body for c in copies}) != 1 or len({c.seq for c in copies}) != 1:
            problems.append(f"duplicates of {eid} differ: " + " | ".join(c.brief() for c in copies))
    for r in got:
        if r.seq in expected and r.json() != expected[r.seq]:
            problems.append(f"#{r.index} (seq {r.seq}) is not the log's entry {r.seq}:\n  got  {r.body[:400]!r}\n"
                            f"  want {json.dumps(expected[r.seq])[:400]}")
    assert not problems, "\n".join(problems) + "\nreceived:\n" + "\n".join(r.brief() for r in got)
    return by_id


def check_push_log(data: dict[str, Any], task_id: str, expected: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """`parley push log --json`: one notification per notifiable entry, every one delivered (2xx)."""
    notes = data["notifications"]
    assert data["taskId"] == task_id, data
    assert [n["seq"] for n in notes] == sorted(expected), [n["seq"] for n in notes]
    assert [n["eventId"] for n in notes] == [f"{task_id}:{s}" for s in sorted(expected)], notes
    assert len({n["configId"] for n in notes}) == 1, notes
    bad = [n for n in notes if n["state"] != "delivered" or n["lastStatus"] != 200 or not n["tries"]
           or n["tries"][-1]["outcome"] != "delivered" or n["tries"][-1]["status"] != 200]
    assert not bad, "not delivered:\n" + json.dumps(bad, indent=1)
    return notes


def state_of(ev: dict[str, Any]) -> str:
    return ev["statusUpdate"]["status"]["state"]


def status_texts(expected: dict[int, dict[str, Any]]) -> list[str]:
    out = []
    for _, ev in sorted(expected.items()):
        msg = ev.get("statusUpdate", {}).get("status", {}).get("message")
        if msg:
            out.append("".join(p.get("text", "") for p in msg["parts"]))
    return out


# --- 1. SIGKILL with a notification in flight -------------------------------------------------------------------------


@pytest.mark.parametrize("kill_when", ["task-finished", "task-running"])
def test_sigkill_mid_delivery_loses_no_notification(kill_when: str, tmp_path: Path, parley, webhook) -> None:
    """`parley serve` is SIGKILLed while the webhook holds the task's first notification (unanswered), either
    after the task finished (every notification already in the outbox) or while the agent waits at its gate
    after a checkpoint (the restarted server resumes it, and commits more changes). After the restart on the
    same database: the webhook has every notification of the task (status and artifact updates: here
    `artifact_updates = true`), each one exactly its log entry, in the log's order, the held one sent again
    with the same Parley-Event-Id and body, and `parley push log --json` says each was delivered."""
    hook = webhook(hold=1)
    first = parley("first", artifact_updates=True)
    agent = first.url + "/a2a/steps"
    gate = f"g-{kill_when}"
    running = kill_when == "task-running"
    text = f"{STEPS} {hook.gate_url(gate)}" if running else str(STEPS)
    task = send(agent, text, hook.url, return_immediately=running)
    task_id = task["id"]
    if running:
        hook.wait_for_gate(gate)  # after its checkpoint: the task is `working`, waiting
    else:
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    held = hook.wait_for(lambda got: len(got) >= 1, "the first notification")[0]
    assert held.answered is None and held.event_id and held.event_id.startswith(task_id + ":"), held.brief()

    first.kill()  # the delivery is in flight: Parley never gets an answer to it
    before = hook.received()
    assert len(before) == 1, ("one at a time: nothing else may be sent while the first notification is "
                              "unanswered\n" + "\n".join(r.brief() for r in before))
    hook.release()  # the held request is answered now, into a closed connection
    hook.open_gate(gate)

    second = parley("second", port=first.port, artifact_updates=True)
    log = replay_log(second.url + "/a2a/steps", task_id)
    expected = notified(log, artifacts=True)
    assert held.seq == min(expected), (held.brief(), sorted(expected))
    final = [state_of(ev) for _, ev in sorted(expected.items()) if "statusUpdate" in ev][-1]
    assert final == "TASK_STATE_COMPLETED", log
    assert any("artifactUpdate" in ev for ev in expected.values()), log
    if running:  # the restarted server resumed the task: changes committed after the restart are notified too
        assert RESUME_MESSAGE in status_texts(expected), status_texts(expected)

    got = hook.wait_for(lambda got: set(expected) <= {r.seq for r in got[1:]},
                        "every notification of the task after the restart")
    by_id = check_deliveries(got, task_id, expected)
    # The notification that was in flight when the server died was sent again: same id, same body.
    assert len(by_id[held.event_id]) >= 2, "\n".join(r.brief() for r in got)

    data = settled_push_log(second.url + "/a2a/steps", task_id, len(expected))
    check_push_log(data, task_id, expected)
    got = hook.received()  # nothing more arrived while the log settled that breaks the guarantees
    check_deliveries(got, task_id, expected)
    assert "Traceback" not in first.output() + second.output(), first.output() + second.output()


# --- 2. a webhook that is down (503) for its first attempts, across a restart -----------------------------------------


DOWN_FOR = 4  # the webhook answers 503 to its first DOWN_FOR requests, then 200
KILL_AFTER = 2  # ... and Parley is SIGKILLed once the webhook has seen this many of them


def test_webhook_down_for_its_first_attempts_across_a_restart(tmp_path: Path, parley, webhook) -> None:
    """The webhook answers 503 to its first four requests (all of them the task's first notification: the
    next one waits for it), Parley is SIGKILLed after the second and restarted on the same database: the
    retries go on (5xx is retried, with backoff), the fifth request is answered 200, and then every other
    notification follows, each exactly once, in order. `parley push log --json` shows the first
    notification's 503 attempts as `retry` (each with its next try) and its last as `delivered` (200)."""
    hook = webhook(answers=[503] * DOWN_FOR)
    first = parley("first")
    task = send(first.url + "/a2a/steps", str(STEPS), hook.url, return_immediately=False)
    task_id = task["id"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    hook.wait_for(lambda got: len(got) >= KILL_AFTER and all(r.answered for r in got), f"{KILL_AFTER} attempts")
    first.kill()
    assert [r.answered for r in hook.received()] == [503] * KILL_AFTER, [r.brief() for r in hook.received()]

    second = parley("second", port=first.port)
    agent = second.url + "/a2a/steps"
    expected = notified(replay_log(agent, task_id), artifacts=False)
    assert len(expected) == STEPS + 2, expected  # working, step 0..2, completed
    assert state_of(expected[max(expected)]) == "TASK_STATE_COMPLETED", expected

    got = hook.wait_for(lambda got: set(expected) <= {r.seq for r in got if r.answered == 200},
                        "every notification answered 200")
    by_id = check_deliveries(got, task_id, expected)
    first_id = f"{task_id}:{min(expected)}"
    assert [r.answered for r in by_id[first_id]] == [503] * DOWN_FOR + [200], [r.brief() for r in got]
    # Delivered once each: nothing is sent again after a 2xx.
    assert {eid: len(rs) for eid, rs in by_id.items() if eid != first_id} == {
        f"{task_id}:{s}": 1 for s in sorted(expected)[1:]}, [r.brief() for r in got]

    notes = check_push_log(settled_push_log(agent, task_id, len(expected)), task_id, expected)
    head = notes[0]
    statuses = [t["status"] for t in head["tries"]]
    # Attempts made before the SIGKILL may have died with it unrecorded; those after the restart may not.
    assert statuses[-1] == 200 and set(statuses[:-1]) == {503} and len(statuses) >= DOWN_FOR - KILL_AFTER + 2, head
    assert head["attempts"] == len(head["tries"]), head
    for t in head["tries"][:-1]:
        assert t["outcome"] == "retry" and t["nextAt"] is not None and t["nextAt"] >= t["at"], head
    assert [t["attempt"] for t in head["tries"]] == sorted({t["attempt"] for t in head["tries"]}), head
    for n in notes[1:]:
        assert n["attempts"] == 1 and [t["status"] for t in n["tries"]] == [200], n
    assert "Traceback" not in first.output() + second.output(), first.output() + second.output()


def signature_claims(rec) -> dict[str, Any]:
    """The (unverified) claims of a request's Parley-Signature, for messages."""
    import base64

    token = rec.headers.get("parley-signature", "")
    try:
        payload = token.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}


# --- 3. the receiver of docs/push.md ("Verifying, in a few lines") across a crash -------------------------------------


def test_verifying_receiver_accepts_the_notification_resent_after_a_crash(tmp_path: Path, parley, webhook) -> None:
    """A webhook built as docs/push.md shows it (one PushVerifier with the JWKS, the audience and the token;
    401 when verification fails) holds the first notification, and Parley is SIGKILLed. The notification is
    "sent again after the restart" as another attempt, and the `jti` of a signature is "unique per attempt"
    (docs/push.md, "Signed"), so the verifier must accept the re-sent request: nothing is refused, and the
    delivery log says every notification was delivered."""
    port = free_port()
    verifier_box: dict[str, PushVerifier] = {}

    async def judge(rec) -> int | None:
        verifier = verifier_box["v"]
        try:
            await verifier.verify(rec.headers, rec.body)
        except PushVerificationError as exc:
            rec.verdict = str(exc)
            return 401
        return None

    hook = webhook(hold=1, judge=judge)
    verifier_box["v"] = PushVerifier(jwks_url=f"http://127.0.0.1:{port}/.well-known/jwks.json", audience=hook.url,
                                     token=TOKEN)
    first = parley("first", port=port)
    task = send(first.url + "/a2a/steps", str(STEPS), hook.url, return_immediately=False)
    task_id = task["id"]
    held = hook.wait_for(lambda got: len(got) >= 1 and got[0].judged, "the first notification, verified")[0]
    assert held.verdict is None, held.brief()  # verified (the JWKS fetched from the first server)
    first.kill()
    hook.release()

    second = parley("second", port=port)  # the same signing key (it is in the database) and the same JWKS URL
    agent = second.url + "/a2a/steps"
    expected = notified(replay_log(agent, task_id), artifacts=False)
    settled = settled_push_log(agent, task_id, len(expected))
    got = hook.received()
    refused = [r for r in got if r.verdict is not None]
    assert not refused, ("the documented receiver refused notifications Parley sent:\n"
                         + "\n".join(r.brief() for r in refused) + "\nsignature claims (jti) of every request: "
                         + repr([(r.index, r.event_id, signature_claims(r).get("jti")) for r in got])
                         + "\ndelivery log:\n"
                         + json.dumps([{k: n[k] for k in ("eventId", "state", "attempts", "lastStatus")}
                                       for n in settled["notifications"]], indent=1))
    check_deliveries(got, task_id, expected)
    check_push_log(settled, task_id, expected)


# --- 4. retries come when they are due, also while the task's later notifications wait -------------------------------

RETRIES = 5  # 503 answers before the webhook recovers


def test_retries_come_when_due_while_later_notifications_wait(tmp_path: Path, parley, webhook) -> None:
    """docs/push.md, "Retries": a 503 is retried after `backoff_seconds * 2^(n-1)` (half of it jitter, at most
    `max_backoff_seconds`): here 50 ms doubling up to 200 ms. The task's first notification is answered 503
    five times while its four later notifications wait in the same lane (one at a time). Each retry must be
    started by its own due time, never before it (measured on Parley's own delivery log): the server polls the
    outbox only once an hour here (`poll_seconds`), so a retry that waited for the poll would never come
    within the test's deadline."""
    hook = webhook(answers=[503] * RETRIES)
    srv = parley("only")
    agent = srv.url + "/a2a/steps"
    task = send(agent, str(STEPS), hook.url, return_immediately=False)
    expected = notified(replay_log(agent, task["id"]), artifacts=False)
    assert len(expected) == STEPS + 2, expected
    got = hook.wait_for(lambda got: set(expected) <= {r.seq for r in got if r.answered == 200},
                        "every notification answered 200")
    check_deliveries(got, task["id"], expected)
    notes = check_push_log(settled_push_log(agent, task["id"], len(expected)), task["id"], expected)
    tries = notes[0]["tries"]
    assert [t["status"] for t in tries] == [503] * RETRIES + [200], tries
    lateness = [round(t["at"] - prev["nextAt"], 3) for prev, t in itertools.pairwise(tries)]
    # The backoff runs from the attempt's end (its start `at` plus its duration, which a busy machine lengthens).
    delays = [round(t["nextAt"] - t["at"] - t["durationSeconds"], 3) for t in tries[:-1]]
    assert all(0 < d <= 0.2 + 0.001 for d in delays), f"backoff delays {delays} (50 ms doubling, at most 200 ms)"
    assert min(lateness) >= -0.01, f"a retry came before it was due: seconds after its nextAt {lateness}"
