"""Delivers the push outbox: each notification POSTed to its webhook, retried until it is delivered or
given up, in order per webhook, without ever holding up a task or a request.

The outbox rows are written by the store in the commit that appends a task's entries
(:class:`parley.tasks.store.Notification`). The dispatcher is woken after every commit that may have
added rows, when a lane ends, and when the next retry is due; otherwise it reads the outbox every
`poll_seconds` (rows another process wrote). For each (task, webhook) lane only the oldest pending
notification is sent, one at a time: a webhook sees a task's changes in order. Lanes run concurrently (`[push] concurrency`), so a slow
webhook slows only its own lane.

Lanes are shared fairly between owners (the principals whose tasks notify): one owner has at most `[push]
concurrency_per_owner` lanes running, and free lanes go round-robin between the owners with due notifications
(each owner one lane per round, oldest first within an owner), so one owner's many or slow webhooks cannot hold
up another owner's notifications.

One attempt: the URL is checked again and its address pinned (:mod:`parley.push.ssrf`), the body is
built in the version the client spoke (:mod:`parley.push.payload`), signed (:mod:`parley.push.signing`),
and POSTed with a timeout, no redirects, and at most RESPONSE_LIMIT bytes of the answer read. With
OpenTelemetry on, the POST is a span in the task's trace and carries `traceparent`/`tracestate`
(:mod:`parley.telemetry.push_spans`). Then:

    2xx                          delivered
    410 Gone                     the config is disabled: nothing more is sent to it
    408, 429, 5xx, no answer,    retried after backoff * 2^(attempt-1) (half of it random jitter, at
    the host does not resolve    most max_backoff; a Retry-After that asks for longer is honoured)
    any other answer             dead: the webhook refused it, and would refuse it again
    a refused URL                dead (it resolves to an address that is not allowed)

A notification that has had `max_attempts` attempts, or would be retried after `max_age_seconds`, is
dead-lettered. Every attempt goes to the delivery log (`parley push log`). A notification sent but not
yet recorded when the process dies is sent again after the restart: delivery is at least once, and a
duplicate carries the same `Parley-Event-Id`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import email.utils
import logging
import random
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

from parley.push.payload import body_of, event_id, headers_of
from parley.push.secrets import Binding, SecretBox, SecretError
from parley.push.signing import SIGNATURE_HEADER, PushSigner, standard_webhook_headers
from parley.push.ssrf import Unresolved, UnsafeUrl, UrlGuard
from parley.settings import PushSettings
from parley.tasks.store import DeliveryAttempt, Notification, StoredPushConfig, TaskRecord, TaskStore
from parley.telemetry import hooks as telemetry

log = logging.getLogger("parley.push")

RESPONSE_LIMIT = 64 * 1024  # bytes of a webhook's answer read (the rest is not)
ERROR_CHARS = 300


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What one attempt came to."""

    status: int | None
    error: str | None
    retry_after: float | None = None


class PushDispatcher:
    """Drains the push outbox of one store.

    Args:
        store: where the outbox is.
        settings: `[push]`: timeout, attempts, age, backoff, concurrency, signing.
        guard: checks and pins webhook URLs.
        box: opens the configs' sealed secrets.
        signer: signs notifications (None: unsigned); `settings.signs(agent)` decides per agent.
        issuer: the server's public base URL (the signature's `iss`).
        webhook_secret: a Standard Webhooks secret (`whsec_...`): also send those headers.
        clock, rng: time and jitter (injectable for tests of the schedule).
    """

    def __init__(self, store: TaskStore, settings: PushSettings, *, guard: UrlGuard, box: SecretBox,
                 signer: PushSigner | None = None, issuer: Callable[[], str] = lambda: "",
                 webhook_secret: str | None = None, clock: Callable[[], float] = time.time,
                 rng: Callable[[], float] = random.random) -> None:
        self.store = store
        self.settings = settings
        self.guard = guard
        self.box = box
        self.signer = signer
        self.issuer = issuer
        self.webhook_secret = webhook_secret
        self.clock = clock
        self.rng = rng
        self._wakeup = asyncio.Event()
        self._lanes: dict[tuple[str, str], asyncio.Task] = {}
        self._owners: dict[str, int] = {}  # lanes running per owner
        self._runner: asyncio.Task | None = None
        self._http: httpx.AsyncClient | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._runner is None:
            timeout = httpx.Timeout(self.settings.timeout_seconds)
            # No pooled connections: a connection is made to a pinned address with one host name's TLS
            # (SNI); reusing it for another host name on the same address would be the wrong TLS session.
            limits = httpx.Limits(max_connections=self.settings.concurrency, max_keepalive_connections=0)
            self._http = httpx.AsyncClient(timeout=timeout, limits=limits, follow_redirects=False, trust_env=False,
                                           headers={"User-Agent": "parley-push"})
            self._runner = asyncio.create_task(self._run(), name="parley-push")

    async def stop(self) -> None:
        """Stop sending; notifications in flight stay pending and are sent again at the next start."""
        runner, self._runner = self._runner, None
        tasks = [runner, *self._lanes.values()] if runner is not None else list(self._lanes.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._lanes.clear()
        self._owners.clear()
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def wake(self) -> None:
        """Look at the outbox now (a commit may have added notifications, or a lane is free)."""
        self._wakeup.set()

    # --- the loop --------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            self._wakeup.clear()
            try:
                await self._start_due()
                next_at = await self.store.next_notification_at(set(self._lanes), self._capped())
            except Exception:  # a store hiccup must not end delivery for good
                log.exception("push: reading the outbox failed; trying again")
                next_at = None
            now = self.clock()
            if len(self._lanes) >= self.settings.concurrency or next_at is None:
                wait = self.settings.poll_seconds  # a lane that ends, or a commit, wakes the loop before that
            elif next_at <= now:
                continue  # it came due while the outbox was read: look again at once
            else:
                wait = min(self.settings.poll_seconds, next_at - now)
            with contextlib.suppress(TimeoutError):  # asyncio.timeout: wait_for (3.11) could drop a stop's cancel
                async with asyncio.timeout(wait):
                    await self._wakeup.wait()

    def _capped(self) -> set[str]:
        """The owners that have all the lanes they may have running."""
        cap = max(1, self.settings.concurrency_per_owner)
        return {owner for owner, running in self._owners.items() if running >= cap}

    async def _start_due(self) -> None:
        """Start lanes for due notifications, round-robin between owners: in each round every owner with a due
        notification (and a lane to spare) gets one, the oldest due first, until the lanes are all taken."""
        free = self.settings.concurrency - len(self._lanes)
        this_round: set[str] = set()
        while free > 0:
            now = self.clock()
            due = await self.store.due_notifications(now, 1, set(self._lanes), self._capped() | this_round)
            if not due:
                if not this_round:
                    return
                this_round = set()  # every owner had its turn: the next round
                continue
            n = due[0]
            record = await self.store.get(n.task_id)
            owner = record.owner if record is not None else ""
            lane = (n.task_id, n.config_id)
            self._owners[owner] = self._owners.get(owner, 0) + 1
            self._lanes[lane] = asyncio.create_task(self._lane(lane, owner, n, record),
                                                    name=f"parley-push-{n.task_id}")
            this_round.add(owner)
            free -= 1

    async def _lane(self, lane: tuple[str, str], owner: str, n: Notification, record: TaskRecord | None) -> None:
        try:
            await self.deliver(n, record)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("push: delivering notification %s of task %s failed unexpectedly", n.id, n.task_id)
        finally:
            self._lanes.pop(lane, None)
            left = self._owners.get(owner, 1) - 1
            if left > 0:
                self._owners[owner] = left
            else:
                self._owners.pop(owner, None)
            self.wake()  # the lane's next notification may be due now

    # --- one attempt -----------------------------------------------------------------------------

    async def deliver(self, n: Notification, record: TaskRecord | None = None) -> str:
        """Make one attempt at `n` and record it; returns the outcome (delivered, retry, dead, disabled).
        `record`: its task, when the caller has read it already."""
        started = self.clock()
        target = await self.store.push_target(n.task_id, n.config_id)
        record = record if record is not None else await self.store.get(n.task_id)
        agent_id = record.agent_id if record is not None else None
        if target is None or record is None:
            outcome = Outcome(None, "the push config or its task no longer exists")
            return await self._record(n, outcome, started, agent_id, final="dead")
        if target.disabled_at is not None:
            return await self._record(n, Outcome(None, "the webhook was disabled (410 Gone)"), started, agent_id,
                                      final="disabled")
        with telemetry.push_delivery(task_id=n.task_id, agent_id=agent_id, config_id=n.config_id,
                                     event_id=event_id(n.task_id, n.seq), attempt=n.attempts + 1,
                                     url=target.config.url) as traced:
            outcome, final = await self._attempt(n, target, record, traced)
            if traced is not None:
                traced.answered(outcome.status, outcome.error, sent=final is None)
        return await self._record(n, outcome, started, agent_id, final=final)

    async def _attempt(self, n: Notification, target: StoredPushConfig, record: TaskRecord,
                       traced: Any) -> tuple[Outcome, str | None]:
        """Open the config, build, sign and POST the notification: (outcome, final state or None: by the answer).
        `traced`: the attempt's span (parley.telemetry.push_spans.PushTrace) or None; its headers are sent."""
        try:
            config = self.box.open(target.config, Binding(n.task_id, n.config_id, record.owner,
                                                            target.created_at))
            log_entries = await self.store.events_after(n.task_id, 0)
            body, content_type = body_of(target.version, log_entries, n.seq)
            pinned = await self.guard.check(config.url)
        except Unresolved as exc:  # DNS may answer later: a failed attempt, retried like no answer
            return Outcome(None, _short(exc)), None
        except (UnsafeUrl, SecretError, LookupError) as exc:
            return Outcome(None, _short(exc)), "dead"
        headers = headers_of(config, n.task_id, n.seq, content_type)
        eid = event_id(n.task_id, n.seq)
        attempt = n.attempts + 1
        if self.signer is not None and self.settings.signs(record.agent_id):
            headers[SIGNATURE_HEADER] = await self.signer.sign(
                body, issuer=self.issuer(), url=config.url, task_id=n.task_id, event_id=eid, seq=n.seq,
                attempt=attempt, now=self.clock())
        if self.webhook_secret:
            headers.update(standard_webhook_headers(self.webhook_secret, eid, body, self.clock()))
        headers["Host"] = urlsplit(config.url).netloc
        if traced is not None:  # OpenTelemetry on: traceparent/tracestate of this attempt's span
            headers.update(traced.headers)
        return await self._post(pinned.url, pinned.host, headers, body), None

    async def _post(self, url: str, host: str, headers: dict[str, str], body: bytes) -> Outcome:
        assert self._http is not None, "the dispatcher is not started"
        try:
            async with asyncio.timeout(self.settings.timeout_seconds):
                request = self._http.build_request("POST", url, content=body, headers=headers,
                                                   extensions={"sni_hostname": host})
                response = await self._http.send(request, stream=True)
                try:
                    read = 0
                    async for chunk in response.aiter_raw():
                        read += len(chunk)
                        if read >= RESPONSE_LIMIT:
                            break
                finally:
                    await response.aclose()
        except TimeoutError:
            return Outcome(None, f"no answer within {self.settings.timeout_seconds:g} s")
        except httpx.HTTPError as exc:
            return Outcome(None, _short(exc) or type(exc).__name__)
        status = response.status_code
        error = None if 200 <= status < 300 else f"HTTP {status}"
        return Outcome(status, error, _retry_after(response.headers.get("retry-after"), self.clock()))

    async def _record(self, n: Notification, outcome: Outcome, started: float, agent_id: str | None, *,
                      final: str | None = None) -> str:
        now = self.clock()
        attempt = n.attempts + 1
        status = outcome.status
        next_at: float | None = None
        if final is not None:
            result = final
        elif status is not None and 200 <= status < 300:
            result = "delivered"
        elif status == 410:
            result = "disabled"
        elif status is None or status in (408, 429) or status >= 500:
            delay = self.delay(attempt, outcome.retry_after)
            too_old = now + delay - n.created_at > self.settings.max_age_seconds
            if attempt >= self.settings.max_attempts or too_old:
                result = "dead"
            else:
                result, next_at = "retry", now + delay
        else:
            result = "dead"
        updated = dataclasses.replace(n, attempts=attempt, last_status=status, last_error=outcome.error,
                                      next_at=next_at if next_at is not None else n.next_at,
                                      state="pending" if result == "retry" else result,
                                      done_at=None if result == "retry" else now)
        await self.store.record_attempt(DeliveryAttempt(n.id, attempt, started, status, outcome.error,
                                                        max(0.0, now - started), result, next_at), updated)
        if result == "disabled" and final is None:
            await self.store.disable_push_config(n.task_id, n.config_id, now)
        if result in ("dead", "disabled"):
            log.warning("push: notification %s of task %s to config %s is %s after %d attempt(s): %s",
                        event_id(n.task_id, n.seq), n.task_id, n.config_id, result, attempt, outcome.error)
        telemetry.push_attempt(result, agent_id, now - n.created_at if result == "delivered" else None)
        return result

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds before attempt `attempt + 1`: exponential, half of it random, capped; at least Retry-After."""
        s = self.settings
        base = min(s.max_backoff_seconds, s.backoff_seconds * 2 ** (attempt - 1))
        delay = base / 2 + self.rng() * base / 2
        if retry_after is not None:
            delay = max(delay, min(retry_after, s.max_age_seconds))
        return delay


def _retry_after(value: str | None, now: float) -> float | None:
    """A Retry-After value (seconds, or an HTTP date) as seconds from now."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(int(value[:9]))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def _short(exc: BaseException) -> str:
    return str(exc)[:ERROR_CHARS]


__all__ = ["RESPONSE_LIMIT", "PushDispatcher"]
