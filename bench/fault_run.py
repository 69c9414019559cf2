#!/usr/bin/env python3
"""The fault run (issue 27): real `parley serve` processes under clients while faults are injected, counting
what was acknowledged, lost, failed and taken over, and what surviving subscribers missed or saw twice.

    python bench/fault_run.py                                   # every scenario, 30 clients, 5 faults each
    python bench/fault_run.py --clients 4 --faults 2 --scenarios kills,drops --bus postgres

Scenarios (each on a deployment of its own, on the local PostgreSQL and Redis of tests/services.py):

  kills   3 replicas on PostgreSQL + a shared bus; a replica is SIGKILLed and a new one started, --faults times
  drops   3 replicas; every PostgreSQL connection of the deployment is terminated (pg_terminate_backend)
  bus     3 replicas on a Redis the run starts on a port of its own, stopped and started again --faults times
          (always the Redis bus, whatever --bus says)
  sqlite  one replica on SQLite, SIGKILLed and started again --faults times

Each client repeats: SendMessage (returnImmediately) of a `counter` task (tests/cluster/cluster_agents.py:
--ticks artifact updates, a checkpoint after each), sent again with the same messageId while it fails (a
retry); once answered the task is *acknowledged*. Then it follows the task with SubscribeToTask on any live
replica, resuming with Last-Event-ID when the stream breaks, until the task ends. At the end every
acknowledged task is read back: *lost* (not found), *failed*, *taken over* (resumed from its checkpoint by
recovery), *unfinished*; *missed* and *duplicated* count events the subscribers did not see or saw twice.
One line per scenario; the exit status is 1 if anything acknowledged was lost (or missed, or duplicated).
Reuses tests/cluster/replicas.py (the replicas) and tests/support.py (PrivateRedis).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "cluster")]

import httpx
from httpx_sse import connect_sse
from replicas import AGENTS, Replica, terminate_connections, write_config

from parley.tasks.engine import RESUME_MESSAGE
from services import POSTGRES, REDIS, PostgresSchema, drop_redis_keys, unique
from support import PrivateRedis

V1 = {"A2A-Version": "1.0"}
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
SCENARIOS = ("kills", "drops", "bus", "sqlite")
WAIT = 120.0  # the longest a client keeps trying one step (a failure detector)


@dataclass
class Tally:
    acknowledged: int = 0
    lost: int = 0
    failed: int = 0
    taken_over: int = 0
    unfinished: int = 0
    missed: int = 0
    duplicated: int = 0
    send_errors: int = 0  # answers to a send that were errors (the client sent it again)
    tasks: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # the status messages of failed tasks
    lock: threading.Lock = field(default_factory=threading.Lock)

    def line(self, scenario: str) -> str:
        return (f"{scenario:7} acknowledged={self.acknowledged} lost={self.lost} failed={self.failed} "
                f"taken_over={self.taken_over} unfinished={self.unfinished} missed={self.missed} "
                f"duplicated={self.duplicated} send_errors={self.send_errors}")


class Deployment:
    """The live replicas of one deployment; faults replace them (clients always pick among the live ones)."""

    def __init__(self, folder: Path, config: Path, app: str | None = None, bus_app: str | None = None) -> None:
        self.folder, self.config = folder, config
        self.app_names = [n for n in (app, bus_app) if n]
        self.started: list[Replica] = []  # every process started (all are stopped at the end)
        self.live: list[Replica] = []
        self.lock = threading.Lock()

    def start(self, count: int) -> Deployment:
        fresh = [self._new() for _ in range(count)]
        for r in fresh:
            r.wait_ready()
        self.live += fresh
        return self

    def _new(self) -> Replica:
        n = len(self.started) + 1
        replica = Replica(self.config, self.folder / f"replica-{n}.log", name=f"R{n}")
        self.started.append(replica)
        return replica

    def any(self) -> Replica:
        """A live replica (waits while the only one is being restarted)."""
        deadline = time.monotonic() + WAIT
        while True:
            with self.lock:
                if self.live or time.monotonic() > deadline:
                    return random.choice(self.live)
            time.sleep(0.05)  # a replica is being started: polled with a deadline

    def kill_one(self) -> None:
        """SIGKILL a replica and start another (it takes over what the dead one held once the leases expire)."""
        with self.lock:
            victim = random.choice(self.live)
            self.live.remove(victim)
        victim.kill()
        fresh = self._new().wait_ready()
        with self.lock:
            self.live.append(fresh)

    def stop(self) -> None:
        for r in self.started:
            r.stop()


def _call(replica: Replica, method: str, params: dict) -> dict:
    r = httpx.post(f"{replica.url}/a2a/counter", json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                       "params": params}, headers=V1, timeout=30)
    body = r.json()
    if "result" not in body:
        raise RuntimeError(f"{method}: HTTP {r.status_code} {body.get('error')}")
    return body["result"]


def _acknowledged(dep: Deployment, ticks: int, tally: Tally) -> str | None:
    """SendMessage until it is answered with a task (the same messageId each time: a retry); its id."""
    params = {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": str(ticks)}]},
              "configuration": {"returnImmediately": True}}
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            task_id = _call(dep.any(), "SendMessage", params)["task"]["id"]
        except (httpx.HTTPError, RuntimeError, ValueError):
            with tally.lock:
                tally.send_errors += 1
            time.sleep(0.1)  # the client's back-off before it sends again
            continue
        with tally.lock:
            tally.acknowledged += 1
            tally.tasks.append(task_id)
        return task_id
    return None


def _follow(dep: Deployment, task_id: str, tally: Tally) -> None:
    """SubscribeToTask from seq 0 until the task ends, resuming with Last-Event-ID; counts gaps and repeats."""
    last = 0
    deadline = time.monotonic() + WAIT
    sub = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
    missed = duplicated = 0
    while time.monotonic() < deadline:
        replica = dep.any()
        try:
            with httpx.Client(timeout=30) as client, connect_sse(
                    client, "POST", f"{replica.url}/a2a/counter", json=sub,
                    headers={**V1, "Last-Event-ID": str(last)}) as stream:
                for sse in stream.iter_sse():
                    if not sse.data:
                        continue
                    result = sse.json().get("result")
                    if result is None:
                        break  # an error frame: resubscribe
                    seq = int(sse.id)
                    if seq <= last:
                        duplicated += 1
                        continue
                    missed += seq - last - 1
                    last = seq
                    status = result.get("statusUpdate", {}).get("status") or result.get("task", {}).get("status")
                    if status and status.get("state") in TERMINAL:
                        with tally.lock:
                            tally.missed += missed
                            tally.duplicated += duplicated
                        return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.1)  # back-off before resubscribing
    with tally.lock:
        tally.missed += missed
        tally.duplicated += duplicated


def _client(dep: Deployment, ticks: int, stop: threading.Event, tally: Tally) -> None:
    while not stop.is_set():
        task_id = _acknowledged(dep, ticks, tally)
        if task_id is not None:
            _follow(dep, task_id, tally)


def _settle(dep: Deployment, tally: Tally) -> None:
    """Read every acknowledged task back once the clients are done."""
    for task_id in tally.tasks:
        task = None
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                task = _call(dep.any(), "GetTask", {"id": task_id})
            except RuntimeError as exc:
                if "-32001" in str(exc) or "'code': -32001" in str(exc):
                    break  # TaskNotFound: lost
                time.sleep(0.1)  # a replica not ready yet
                continue
            except httpx.HTTPError:
                time.sleep(0.1)
                continue
            if task["status"]["state"] in TERMINAL:
                break
            time.sleep(0.1)  # still running: polled with a deadline
        if task is None:
            tally.lost += 1
            continue
        state = task["status"]["state"]
        if state == "TASK_STATE_FAILED":
            tally.failed += 1
            message = task["status"].get("message") or {}
            tally.reasons.append("".join(p.get("text", "") for p in message.get("parts", []))
                                 or str(task["status"]))
        tally.unfinished += state not in TERMINAL
        texts = ["".join(p.get("text", "") for p in h.get("parts", [])) for h in task.get("history") or []]
        tally.taken_over += RESUME_MESSAGE in texts


def _inject(scenario: str, dep: Deployment, redis: PrivateRedis | None, url: str) -> None:
    if scenario in ("kills", "sqlite"):
        dep.kill_one()
    elif scenario == "drops":
        terminate_connections(url, dep.app_names)
    elif scenario == "bus" and redis is not None:
        redis.stop()
        time.sleep(1.0)  # the bus stays away this long
        redis.start()


def run(scenario: str, *, clients: int, faults: int, interval: float, ticks: int, bus: str,
        logs: Path | None = None) -> Tally:
    """One scenario on a deployment of its own; returns its tally."""
    tally = Tally()
    schema = PostgresSchema().create() if scenario != "sqlite" else None
    redis: PrivateRedis | None = None
    prefix = unique("parley_fault")
    with TemporaryDirectory(prefix=f"fault-{scenario}-") as tmp:
        folder = Path(tmp) if logs is None else logs / scenario
        folder.mkdir(parents=True, exist_ok=True)
        app = unique("parley_fault") if schema is not None else None
        dep: Deployment | None = None
        try:
            if scenario == "sqlite":
                config = folder / "parley.toml"
                config.write_text(f'[server]\ndb = "{folder / "parley.db"}"\nlease_seconds = 2.0\n'
                                  f'builtin_agents = true\ndefault_agent = "echo"\n{AGENTS}')
                dep = Deployment(folder, config)
                dep.start(1)
                url = ""
            else:
                assert schema is not None
                url = schema.url
                if scenario == "bus":
                    redis = PrivateRedis().start()
                    shared: tuple[str, str] | None = (redis.url, prefix)
                else:
                    shared = (REDIS, prefix) if bus == "redis" else None
                namespace = prefix
                config = write_config(folder, f"{url}&application_name={app}", redis=shared, namespace=namespace)
                dep = Deployment(folder, config, app, f"parley-bus {namespace}" if shared is None else None)
                dep.start(3)
            stop = threading.Event()
            threads = [threading.Thread(target=_client, args=(dep, ticks, stop, tally), daemon=True)
                       for _ in range(clients)]
            for t in threads:
                t.start()
            try:
                for _ in range(faults):
                    time.sleep(interval)  # the workload runs this long between two faults
                    _inject(scenario, dep, redis, url)
                time.sleep(interval)
            finally:
                stop.set()  # the clients finish the task they follow
            for t in threads:
                t.join(WAIT * 3)
            _settle(dep, tally)
        finally:
            if dep is not None:
                dep.stop()
            if redis is not None:
                redis.stop()
            if schema is not None:
                schema.drop()
            if scenario != "sqlite" and bus == "redis":
                drop_redis_keys(prefix)
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"comma-separated, of {SCENARIOS}")
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--faults", type=int, default=5, help="faults injected per scenario")
    parser.add_argument("--interval", type=float, default=3.0, help="seconds of workload between two faults")
    parser.add_argument("--ticks", type=int, default=40, help="artifact updates per task (one every 50 ms)")
    parser.add_argument("--bus", choices=("redis", "postgres"), default="redis",
                        help="the shared bus of kills and drops")
    parser.add_argument("--logs", type=Path, help="keep the replicas' logs in this folder (one per scenario)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the replicas are stopped too (finally)
    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; choose among {SCENARIOS}")
    print(f"fault run: {args.clients} clients, {args.faults} faults per scenario, bus {args.bus}, "
          f"PostgreSQL {POSTGRES}, pid {os.getpid()}", flush=True)
    bad = False
    for scenario in scenarios:
        tally = run(scenario, clients=args.clients, faults=args.faults, interval=args.interval, ticks=args.ticks,
                    bus=args.bus, logs=args.logs)
        print(tally.line(scenario), flush=True)
        for reason in sorted(set(tally.reasons))[:3]:
            print(f"        failed: {reason[:300]}", flush=True)
        bad |= bool(tally.lost or tally.missed or tally.duplicated)
    print("FAIL: something acknowledged was lost, missed or duplicated" if bad else "OK: nothing acknowledged lost")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
