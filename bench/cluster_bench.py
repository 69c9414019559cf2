#!/usr/bin/env python3
"""Scale-out (issue 13): cross-replica event latency, the a2a-sdk's cluster mode, and throughput of one
replica per store and of two replicas against one, in one run.

    python bench/cluster_bench.py                    # everything (~6 minutes)
    python bench/cluster_bench.py --quick            # a smoke run: 1 round, short runs
    python bench/cluster_bench.py --only latency     # or: throughput

Needs the real services: PostgreSQL (--postgres, default postgresql://postgres@127.0.0.1:5432/test)
and Redis (--redis, default redis://127.0.0.1:6379/0); wrk (`apt-get install -y wrk`) for unary
throughput; aiohttp (the bench extra); and for the a2a-sdk baseline `a2a-sdk[postgresql]`
(SQLAlchemy + asyncpg). Every deployment gets a fresh PostgreSQL schema (the URL carries
`?search_path=<schema>`) and a fresh bus namespace; both are removed at the end.

1. Cross-replica event latency. A deployment is two server processes, A and B, on one database.
   A task of the `stamper` agent (bench/cluster_agents.py) is started on A (SendMessage with
   `returnImmediately`, so it runs on A), waits --delay ms, then emits --events artifact chunks,
   one every --interval ms, each carrying `time.time_ns()` taken as it is emitted. Two SSE
   subscribers (A2A 1.0 JSON-RPC SubscribeToTask, aiohttp, in this process) follow it at once:
   one on B (cross-replica) and one on A (same replica, the reference). Latency = arrival time
   (time.time_ns() when the SSE frame is parsed here) - emit time. All processes run on this
   machine, so their CLOCK_REALTIME is one clock. Events emitted before a subscriber's first
   frame arrived (replayed from the store, not live) are counted apart and left out.
   Deployments: Parley with the Redis bus, Parley with the PostgreSQL (LISTEN/NOTIFY) bus, and
   the a2a-sdk in cluster mode (bench/sdk_cluster_server.py: VersionedDatabaseTaskStore +
   DatabaseTaskEventStream, which polls the task_events table every --sdk-poll s).
2. Throughput. `parley serve` (one uvicorn worker, built-in echo agent) with db memory, a SQLite
   file, PostgreSQL (bus postgres), and PostgreSQL + Redis with one replica loaded and with both
   replicas loaded. Unary SendMessage with wrk (C, one thread per process, a Lua script giving
   every request a fresh messageId and checking the answer is a completed task); streaming
   SendStreamingMessage with bench/loadgen.py. Two replicas: one generator process per replica,
   at the same concurrency per replica, started together.

Rounds alternate: in each round every configuration runs once, and the order rotates from
round to round; tables show medians over rounds (latency: percentiles over all events pooled).
Each run records the CPU (from /proc) of the loaded server(s), of the idle servers, of the
PostgreSQL backends serving our servers (told apart from other clients' backends by the client
port in each backend's process title), of PostgreSQL's own processes, of Redis, of the load
generator, and the whole machine's busy cores; `others' cores` is the rest: other users of the
machine. On a shared machine: before each run the benchmark waits (at most --quiet-wait s) until
the machine is busy for less than --quiet-threshold cores, and a run during which others took
more than --max-others cores is measured again (at most --retries times; the least contended
attempt is kept, and the count of repeats is reported).

Raw results go to bench/out/cluster-<UTC>.json and the tables to bench/out/cluster-<UTC>.md.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import os
import re
import resource
import secrets
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compare
from compare import ServerProc, cpu_pressure, environment, fmt, free_port, get
from loadgen import DEFAULT_TEXT, percentile, process_cpu, sse_events

OUT = compare.OUT
PEPPER = "bench-cluster-pepper-0123456789abcdef"
V1 = {"Content-Type": "application/json", "A2A-Version": "1.0"}
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
compare.PACKAGES += ["sqlalchemy", "asyncpg", "redis"]


# ----------------------------------------------------------------------------- services


async def _pg(url: str, *sql: str) -> list[Any]:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return [await conn.fetchval(q) for q in sql]
    finally:
        await conn.close()


def pg(url: str, *sql: str) -> list[Any]:
    return asyncio.run(_pg(url, *sql))


def with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}search_path={schema}"


async def _redis_cleanup(url: str, prefixes: list[str]) -> int:
    import redis.asyncio as redis

    client = redis.from_url(url)
    removed = 0
    try:
        for prefix in prefixes:
            keys = [k async for k in client.scan_iter(match=f"{prefix}*", count=1000)]
            if keys:
                removed += await client.delete(*keys)
    finally:
        await client.aclose()
    return removed


async def _redis_version(url: str) -> str | None:
    import redis.asyncio as redis

    client = redis.from_url(url)
    try:
        return (await client.info("server")).get("redis_version")
    finally:
        await client.aclose()


class Resources:
    """Schemas and namespaces this run made, dropped at the end."""

    def __init__(self, postgres: str, redis: str) -> None:
        self.postgres, self.redis = postgres, redis
        self.schemas: list[str] = []
        self.namespaces: list[str] = []

    def schema(self, label: str) -> str:
        name = f"bench_{label}_{secrets.token_hex(4)}"
        pg(self.postgres, f'CREATE SCHEMA "{name}"')
        self.schemas.append(name)
        return name

    def namespace(self, label: str) -> str:
        name = f"bench_{label}_{secrets.token_hex(4)}"
        self.namespaces.append(name)
        return name

    def cleanup(self) -> None:
        for name in self.schemas:
            with contextlib.suppress(Exception):
                pg(self.postgres, f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        if self.namespaces:
            with contextlib.suppress(Exception):
                asyncio.run(_redis_cleanup(self.redis, self.namespaces))


# ----------------------------------------------------------------------------- servers


class Server(ServerProc):
    """compare.ServerProc that is also ready only once GET /readyz says 200 (store and bus connected)."""

    def start(self) -> None:
        super().start()
        import urllib.request

        deadline = time.time() + 30
        while time.time() < deadline:
            with contextlib.suppress(OSError), urllib.request.urlopen(self.url + "readyz", timeout=2) as r:
                if r.status == 200:
                    return
            time.sleep(0.1)  # polling a starting process, with a deadline
        raise SystemExit(f"{self.name}: /readyz not 200 within 30 s; see {self.log_path}")


def parley_config(folder: Path, *, db: str, bus: str | None, namespace: str, stamper: bool) -> Path:
    """A parley.toml like tests/cluster/replicas.py writes: built-in agents (echo the default) [+ stamper]."""
    lines = ["[server]", f"db = {json.dumps(db)}"]
    if bus is not None:
        lines.append(f"bus = {json.dumps(bus)}")
    lines += [f"namespace = {json.dumps(namespace)}", "builtin_agents = true", 'default_agent = "echo"', ""]
    if stamper:
        lines += ["[[agents]]", 'id = "stamper"', 'type = "python"', 'entry = "cluster_agents:stamper"', ""]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "parley.toml"
    path.write_text("\n".join(lines))
    return path


def parley_replicas(name: str, config: Path, count: int, logs: Path) -> list[Server]:
    out = []
    for i in range(count):
        port = free_port()
        cmd = [sys.executable, "-m", "parley.cli", "serve", "--config", str(config), "--port", str(port),
               "--log-level", "warning"]
        out.append(Server(f"{name}:{'AB'[i]}", cmd, port, logs / f"{name}-{'AB'[i]}.log",
                          env={"PARLEY_KEY_PEPPER": PEPPER, "PYTHONPATH": str(HERE)}))
    return out


def sdk_replicas(name: str, postgres: str, schema: str, poll: float, logs: Path) -> list[Server]:
    out = []
    for i in range(2):
        port = free_port()
        cmd = [sys.executable, str(HERE / "sdk_cluster_server.py"), "--port", str(port), "--db", postgres,
               "--schema", schema, "--poll", str(poll)]
        out.append(Server(f"{name}:{'AB'[i]}", cmd, port, logs / f"{name}-{'AB'[i]}.log"))
    return out


def start_all(servers: list[Server]) -> None:
    for s in servers:  # one after the other: the first creates the tables, the next find them
        s.start()


def stop_all(servers: list[Server]) -> None:
    for s in servers:
        with contextlib.suppress(Exception):
            s.stop()


# ----------------------------------------------------------------------------- CPU accounting


def pids_named(*names: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            comm = (d / "comm").read_text().strip()
            if comm in names:
                out.append(int(d.name))
    return out


def machine_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return float(sum(fields) - idle), float(sum(fields))


class CpuWatch:
    """CPU used during a window: by groups of processes, by this process's children (the load generators,
    reaped inside the window) and by this process, and the whole machine's busy cores. `others_cores` is
    what none of these account for: other users of the machine (or processes that exited in the window)."""

    def __init__(self, groups: Callable[[], dict[str, list[int]]]) -> None:
        self.groups = groups  # looked up at each sample: PostgreSQL backends come and go

    def _sample(self) -> dict[str, dict[int, float]]:
        return {g: {p: process_cpu(p) or 0.0 for p in pids} for g, pids in self.groups().items()}

    @staticmethod
    def _own() -> tuple[float, float]:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime

    def __enter__(self) -> Self:
        self.t0, self.s0, self.m0, self.o0 = time.perf_counter(), self._sample(), machine_cpu(), self._own()
        return self

    def __exit__(self, *exc: object) -> None:
        self.t1, self.s1, self.m1, self.o1 = time.perf_counter(), self._sample(), machine_cpu(), self._own()

    def result(self) -> dict[str, Any]:
        elapsed = self.t1 - self.t0
        out: dict[str, Any] = {"window_s": round(elapsed, 3)}
        accounted = 0.0
        for g in self.s1:
            # processes alive at the end; one that started inside the window counts from 0
            used = sum(max(0.0, cpu - self.s0[g].get(p, 0.0)) for p, cpu in self.s1[g].items())
            if g != "postgres_theirs":
                accounted += used
            out[f"{g}_cpu_s"] = round(used, 3)
            out[f"{g}_cores"] = round(used / elapsed, 3)
        bench, generators = self.o1[0] - self.o0[0], self.o1[1] - self.o0[1]
        accounted += bench + generators
        out["bench_process_cores"] = round(bench / elapsed, 3)
        out["generator_cores"] = round(generators / elapsed, 3)
        busy, total = self.m1[0] - self.m0[0], self.m1[1] - self.m0[1]
        busy_cores = busy / total * (os.cpu_count() or 1) if total else 0.0
        out["machine_busy_cores"] = round(busy_cores, 3)
        out["others_cores"] = round(max(0.0, busy_cores - accounted / elapsed), 3)
        return out


PG_PORT = 5432


def client_ports(pids: list[int], server_port: int) -> set[int]:
    """Local ports of the TCP connections that processes `pids` hold to `server_port` (/proc/<pid>/fd, /proc/net/tcp)."""
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.scandir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    link = os.readlink(fd.path)
                    if link.startswith("socket:["):
                        inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                f = line.split()
                if len(f) > 9 and f[9] in inodes and int(f[2].rsplit(":", 1)[1], 16) == server_port:
                    ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def postgres_processes(ours: list[int]) -> dict[str, list[int]]:
    """PostgreSQL's processes split three ways: backends serving `ours` (their title names the client's
    address and port, e.g. `postgres: 15/main: postgres test 127.0.0.1(47072) idle`), PostgreSQL's own
    processes (postmaster, WAL writer, checkpointer, ...: shared work, ours included) and backends of
    other clients of the same server (other users of the machine)."""
    ports = client_ports(ours, PG_PORT)
    out: dict[str, list[int]] = {"postgres": [], "postgres_bg": [], "postgres_theirs": []}
    for pid in pids_named("postgres"):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        m = re.search(r"\((\d+)\)", title)
        if m is None:
            out["postgres_bg"].append(pid)
        else:
            out["postgres" if int(m[1]) in ports else "postgres_theirs"].append(pid)
    return out


def cpu_groups(loaded: list[Server], everyone: list[Server]) -> Callable[[], dict[str, list[int]]]:
    """Our servers (loaded, idle), PostgreSQL split by client (see postgres_processes) and Redis (one process,
    shared with anything else that uses it)."""

    def groups() -> dict[str, list[int]]:
        ours = [s.pid for s in everyone]
        return {
            "server": [s.pid for s in loaded],
            "idle_servers": [s.pid for s in everyone if s not in loaded],
            **postgres_processes(ours),
            "redis": pids_named("redis-server"),
        }

    return groups


def quiet(max_wait: float, threshold: float) -> dict[str, float]:
    """Wait (at most `max_wait` s) until the machine was busy for less than `threshold` cores over 1 s: other
    users' bursts (test suites, builds) pass before a run starts. Returns the wait and the last reading."""
    t0 = time.perf_counter()
    while True:
        m0 = machine_cpu()
        time.sleep(1.0)  # a measurement window, not synchronisation
        m1 = machine_cpu()
        busy = (m1[0] - m0[0]) / max(1.0, m1[1] - m0[1]) * (os.cpu_count() or 1)
        waited = time.perf_counter() - t0
        if busy < threshold or waited >= max_wait:
            return {"quiet_wait_s": round(waited, 1), "busy_before_cores": round(busy, 3)}


def measured(args: argparse.Namespace, run: Callable[[], dict]) -> dict:
    """`run()` after the machine is quiet; again (at most --retries more times) while processes other than
    this benchmark's took more than --max-others cores during it. The least contended attempt is kept; the
    others are summarised in its `discarded`."""
    attempts: list[dict] = []
    for _ in range(args.retries + 1):
        q = quiet(args.quiet_wait, args.quiet_threshold)
        r = run()
        r.update(q)
        attempts.append(r)
        if r.get("failed") or r.get("problem") or (r.get("others_cores") or 0) <= args.max_others:
            break
        print(f"    (other processes took {r['others_cores']} cores during the run: measuring again)", flush=True)
    ok = [r for r in attempts if not r.get("failed") and not r.get("problem")]
    kept = min(ok, key=lambda r: r.get("others_cores") or 0) if ok else attempts[-1]
    kept["attempts"] = len(attempts)
    kept["discarded"] = [{"others_cores": r.get("others_cores"), "rps": r.get("rps")} for r in attempts if r is not kept]
    return kept


# ----------------------------------------------------------------------------- 1. event latency


def status_of(result: dict) -> str | None:
    if "statusUpdate" in result:
        return result["statusUpdate"].get("status", {}).get("state")
    if "task" in result:
        return result["task"].get("status", {}).get("state")
    return None


async def follow(session: Any, url: str, task_id: str, timeout: float) -> dict[str, Any]:
    """SubscribeToTask on `url` until a terminal state: (index, emit ns, arrival ns) of every stamp."""
    import msgspec

    body = {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task_id}}
    first: int | None = None
    stamps: list[tuple[int, int, int]] = []
    final, problem = None, None
    try:
        async with asyncio.timeout(timeout), session.post(url, json=body, headers=V1) as r:
            if r.status != 200:
                return {"problem": f"HTTP {r.status}: {(await r.read())[:300]!r}", "stamps": []}
            async for _event, data in sse_events(r.content.iter_any()):
                now = time.time_ns()
                if first is None:
                    first = now
                obj = msgspec.json.decode(data)
                result = obj.get("result") if isinstance(obj, dict) else None
                if not isinstance(result, dict):
                    problem = f"not a result: {data[:300]!r}"
                    break
                update = result.get("artifactUpdate")
                if update:
                    for part in update["artifact"]["parts"]:
                        i, emit = part["text"].split()
                        stamps.append((int(i), int(emit), now))
                state = status_of(result)
                if state in TERMINAL:
                    final = state
                    break
    except TimeoutError:
        problem = f"no terminal state within {timeout:.0f} s"
    return {"first_frame_ns": first, "stamps": stamps, "final": final, "problem": problem}


async def latency_round(dep: dict, events: int, interval_ms: int, delay_ms: int) -> dict[str, Any]:
    """One stamper task on replica A, followed at once from B (cross) and from A (same)."""
    import aiohttp

    a, b = dep["servers"]
    path, text = dep["path"], f"{dep['prefix']}{events} {interval_ms} {delay_ms}"
    timeout = delay_ms / 1000 + events * interval_ms / 1000 + 60
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as session:
        send = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]},
                           "configuration": {"returnImmediately": True}}}
        async with session.post(a.url.rstrip("/") + path, json=send, headers=V1) as r:
            answer = await r.json(content_type=None)
        task = (answer.get("result") or {}).get("task")
        if not task:
            return {"problem": f"SendMessage did not return a task: {str(answer)[:300]}"}
        cross, same = await asyncio.gather(follow(session, b.url.rstrip("/") + path, task["id"], timeout),
                                           follow(session, a.url.rstrip("/") + path, task["id"], timeout))
    out: dict[str, Any] = {"task_id": task["id"]}
    for label, res in (("cross", cross), ("same", same)):
        first = res.get("first_frame_ns") or 0
        live = [(i, (arr - emit) / 1e6) for i, emit, arr in res["stamps"] if emit >= first]
        seen = [i for i, _, _ in res["stamps"]]
        out[label] = {
            "latencies_ms": [round(x, 3) for _, x in sorted(live)],
            "replayed": sum(1 for _, emit, _ in res["stamps"] if emit < first),
            "missing": len(set(range(events)) - set(seen)),
            "duplicates": len(seen) - len(set(seen)),
            "out_of_order": sum(1 for x, y in itertools.pairwise(seen) if y < x),
            "final": res.get("final"),
            "problem": res.get("problem"),
        }
    return out


def lat_summary(values: list[float]) -> dict[str, Any]:
    v = sorted(values)
    if not v:
        return {"events": 0}
    return {"events": len(v), "p50": percentile(v, 50), "p90": percentile(v, 90), "p99": percentile(v, 99),
            "max": v[-1], "mean": round(statistics.fmean(v), 3)}


def run_latency(args: argparse.Namespace, res: Resources, logs: Path) -> dict[str, Any]:
    deployments: list[dict] = []
    for bus_label, bus in (("redis", args.redis), ("postgres", "postgres")):
        schema, ns = res.schema(f"lat_{bus_label}"), res.namespace(f"lat_{bus_label}")
        config = parley_config(logs / f"lat-{bus_label}", db=with_schema(args.postgres, schema), bus=bus,
                               namespace=ns, stamper=True)
        deployments.append({"name": f"parley+{bus_label}", "label": f"Parley, {bus_label} bus",
                            "servers": parley_replicas(f"lat-{bus_label}", config, 2, logs),
                            "path": "/a2a/stamper", "prefix": "", "schema": schema, "namespace": ns})
    sdk_problem = sdk_unavailable() if not args.skip_sdk else "skipped (--skip-sdk)"
    if sdk_problem is None:
        schema = res.schema("lat_sdk")
        deployments.append({"name": "a2a-sdk", "label": f"a2a-sdk cluster mode (poll {args.sdk_poll:g} s)",
                            "servers": sdk_replicas("lat-sdk", args.postgres, schema, args.sdk_poll, logs),
                            "path": "/", "prefix": "stamp ", "schema": schema})
    rounds: list[dict] = []
    everyone = [s for d in deployments for s in d["servers"]]
    try:
        for d in deployments:
            start_all(d["servers"])
        # warm-up: one short task per deployment (connections, code paths), not recorded
        for d in deployments:
            w = asyncio.run(latency_round(d, 20, args.interval, args.delay))
            if w.get("problem") or w["cross"]["problem"] or w["same"]["problem"]:
                raise SystemExit(f"latency warm-up failed on {d['name']}: {json.dumps(w)[:1000]}")
        print(f"# latency: {len(deployments)} deployments warmed up", flush=True)
        for rep in range(args.rounds):
            shift = rep % len(deployments)
            for d in deployments[shift:] + deployments[:shift]:
                def one(d: dict = d) -> dict:
                    with CpuWatch(cpu_groups(d["servers"], everyone)) as cw:
                        r = asyncio.run(latency_round(d, args.events, args.interval, args.delay))
                    r.update(cw.result())
                    return r

                r = measured(args, one)
                r.update(deployment=d["name"], round=rep, loadavg=os.getloadavg()[0], cpu_pressure_avg10=cpu_pressure())
                rounds.append(r)
                if r.get("problem"):
                    print(f"  [{rep}] {d['name']:16s} FAILED: {r['problem']}", flush=True)
                    continue
                c, s = lat_summary(r["cross"]["latencies_ms"]), lat_summary(r["same"]["latencies_ms"])
                print(f"  [{rep}] {d['name']:16s} cross p50={fmt(c.get('p50'), 2)} p99={fmt(c.get('p99'), 2)} "
                      f"max={fmt(c.get('max'), 2)} ms (n={c['events']}, missing={r['cross']['missing']}) | same "
                      f"p50={fmt(s.get('p50'), 2)} p99={fmt(s.get('p99'), 2)} ms | servers {r['server_cores']} cores, "
                      f"pg {r['postgres_cores']}, others {r['others_cores']}; attempt {r['attempts']}", flush=True)
    finally:
        stop_all(everyone)
    summary: dict[str, Any] = {}
    for d in deployments:
        mine = [r for r in rounds if r.get("deployment") == d["name"] and not r.get("problem")]
        summary[d["name"]] = {"label": d["label"]}
        for side in ("cross", "same"):
            pooled = [x for r in mine for x in r[side]["latencies_ms"]]
            s = lat_summary(pooled)
            s["round_p50s"] = [lat_summary(r[side]["latencies_ms"]).get("p50") for r in mine]
            s["round_p99s"] = [lat_summary(r[side]["latencies_ms"]).get("p99") for r in mine]
            for k in ("replayed", "missing", "duplicates", "out_of_order"):
                s[k] = sum(r[side][k] for r in mine)
            s["problems"] = [r[side]["problem"] for r in mine if r[side]["problem"]]
            s["not_completed"] = sum(1 for r in mine if r[side]["final"] != "TASK_STATE_COMPLETED")
            summary[d["name"]][side] = s
        summary[d["name"]]["server_cores_median"] = compare.median_of(mine, "server_cores")
        summary[d["name"]]["postgres_cores_median"] = compare.median_of(mine, "postgres_cores")
        summary[d["name"]]["others_cores_median"] = compare.median_of(mine, "others_cores")
    return {"summary": summary, "rounds": rounds, "sdk_problem": sdk_problem,
            "deployments": {d["name"]: {"cmds": [s.cmd for s in d["servers"]], "schema": d["schema"]}
                            for d in deployments}}


def sdk_unavailable() -> str | None:
    """Why the a2a-sdk cluster baseline cannot run here, or None."""
    try:
        import sqlalchemy  # noqa: F401
        from a2a.server.cluster.database_event_stream import DatabaseTaskEventStream  # noqa: F401
        from a2a.server.cluster.database_task_store import VersionedDatabaseTaskStore  # noqa: F401
    except ImportError as exc:
        return f"a2a-sdk cluster mode not importable: {exc} (pip install 'a2a-sdk[postgresql]')"
    return None


# ----------------------------------------------------------------------------- 2. throughput

WRK_LUA = r"""
-- SendMessage (A2A 1.0 JSON-RPC) with a fresh messageId per request: "wrk-<run>-<thread>-<n>", where <run> is
-- this process's argument (`wrk ... URL -- RUN`), unique per wrk process. A repeated messageId would be
-- answered from the stored task (A2A: messageId identifies the message), which is not the same work.
-- An answer that is not HTTP 200 with a completed task counts as bad.
local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function init(args)
  run = args[1]
  assert(run, "pass a run id: wrk ... URL -- RUN")
  n = 0
  bad = 0
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["A2A-Version"] = "1.0"
end
function request()
  n = n + 1
  return wrk.format(nil, nil, nil, string.format(BODY, run, tid, n))
end
function response(status, headers, body)
  if status ~= 200 or not string.find(body, '"TASK_STATE_COMPLETED"', 1, true) then
    bad = bad + 1
  end
end
function done(summary, latency, requests)
  local b = 0
  for _, t in ipairs(threads) do b = b + t:get("bad") end
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"bad":%d,"err_connect":%d,"err_read":%d,' ..
    '"err_write":%d,"err_status":%d,"err_timeout":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, b, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
"""


def wrk_script(folder: Path) -> Path:
    body = ('{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","parts":[{"text":'
            + json.dumps(DEFAULT_TEXT) + '}],"messageId":"wrk-%s-%d-%d"}}}')  # same text as bench/loadgen.py
    path = folder / "send.lua"
    path.write_text(f"BODY = {json.dumps(body)}\n" + WRK_LUA)
    return path


def run_wrk(targets: list[Server], everyone: list[Server], script: Path, concurrency: int,
            duration: int) -> dict[str, Any]:
    """One wrk process (1 thread, `concurrency` connections) per target, all at once."""
    cmds = [["wrk", "-t1", f"-c{concurrency}", f"-d{duration}s", "--timeout", "30s", "-s", str(script), t.url, "--",
             uuid.uuid4().hex[:12]] for t in targets]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with CpuWatch(cpu_groups(targets, everyone)) as cw:
        env = {**os.environ}
        procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                 for c in cmds]
        outs = [p.communicate(timeout=duration + 60) for p in procs]
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    per: list[dict] = []
    for (stdout, stderr), p in zip(outs, procs, strict=True):
        line = next((ln for ln in stdout.splitlines() if ln.startswith("WRKJSON ")), None)
        if p.returncode != 0 or line is None:
            return {"failed": True, "stdout": stdout[-1500:], "stderr": stderr[-1500:], "cmds": cmds}
        per.append(json.loads(line.removeprefix("WRKJSON ")))
    client_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    elapsed = max(w["duration_us"] for w in per) / 1e6
    requests = sum(w["requests"] for w in per)
    errors = sum(w["bad"] + w["err_connect"] + w["err_read"] + w["err_write"] + w["err_timeout"] for w in per)
    out = {
        "rps": round(sum(w["requests"] / (w["duration_us"] / 1e6) for w in per), 1),
        "requests": requests,
        "errors": errors,
        # several generators: the worst replica's percentile (wrk's histograms cannot be merged from here)
        "latency_ms": {k: round(max(w[f"{k}_us"] for w in per) / 1000, 3) for k in ("p50", "p90", "p99", "max")},
        "per_target": per,
        "client_cpu_s": round(client_cpu, 3),
        "client_cpu_util": round(client_cpu / elapsed, 3),
        "cmds": [" ".join(shlex.quote(x) for x in c) for c in cmds],
        **cw.result(),
    }
    out["server_cpu_us_per_request"] = round(out["server_cpu_s"] / requests * 1e6, 1) if requests else None
    return out


def run_stream(targets: list[Server], everyone: list[Server], concurrency: int, duration: float,
               warmup: float) -> dict[str, Any]:
    """One bench/loadgen.py (stream, 1.0) per target, all at once."""
    with CpuWatch(cpu_groups(targets, everyone)) as cw, concurrent.futures.ThreadPoolExecutor(len(targets)) as pool:
        futures = [pool.submit(compare.loadgen, t.url, "stream", "1.0", concurrency=concurrency, duration=duration,
                               warmup=warmup, server_pid=t.pid) for t in targets]
        per = [f.result() for f in futures]
    if any(p.get("failed") for p in per):
        return {"failed": True, "per_target": per}
    requests = sum(p["requests"] for p in per)
    out = {
        "rps": round(sum(p["rps"] for p in per), 1),
        "requests": requests,
        "errors": sum(p["errors"] for p in per),
        "latency_ms": {k: max(get(p, f"latency_ms.{k}") or 0 for p in per) for k in ("p50", "p90", "p99", "max")},
        "ttfe_ms": {k: max(get(p, f"ttfe_ms.{k}") or 0 for p in per) for k in ("p50", "p99")},
        "events_per_s": round(sum(p["events_per_s"] for p in per), 1),
        "per_target": per,
        "client_cpu_util": round(sum(p["client_cpu_util"] for p in per), 3),
        **cw.result(),
    }
    # the CpuWatch window includes each loadgen's start-up and warm-up; loadgen's own per-server figure does not
    out["server_cpu_us_per_request"] = round(
        sum(p.get("server_cpu_s") or 0 for p in per) / requests * 1e6, 1) if requests else None
    return out


def run_throughput(args: argparse.Namespace, res: Resources, logs: Path) -> dict[str, Any]:
    tmp = logs / "tp"
    tmp.mkdir(parents=True, exist_ok=True)
    mem = parley_replicas("tp-memory", parley_config(tmp / "memory", db="memory", bus=None,
                                                     namespace=res.namespace("tp_mem"), stamper=False), 1, logs)
    sqlite = parley_replicas("tp-sqlite", parley_config(tmp / "sqlite", db=str(tmp / "sqlite" / "parley.db"), bus=None,
                                                        namespace=res.namespace("tp_sqlite"), stamper=False), 1, logs)
    pg_only = parley_replicas("tp-postgres", parley_config(
        tmp / "postgres", db=with_schema(args.postgres, res.schema("tp_pg")), bus="postgres",
        namespace=res.namespace("tp_pg"), stamper=False), 1, logs)
    pgr = parley_replicas("tp-pg+redis", parley_config(
        tmp / "pgredis", db=with_schema(args.postgres, res.schema("tp_pgredis")), bus=args.redis,
        namespace=res.namespace("tp_pgredis"), stamper=False), 2, logs)
    everyone = [*mem, *sqlite, *pg_only, *pgr]
    configs = [  # (name, label, loaded servers)
        ("memory", "memory, 1 replica", mem),
        ("sqlite", "SQLite file, 1 replica", sqlite),
        ("postgres", "PostgreSQL (bus postgres), 1 replica", pg_only),
        ("pg+redis x1", "PostgreSQL + Redis, 1 of 2 replicas loaded", pgr[:1]),
        ("pg+redis x2", "PostgreSQL + Redis, 2 replicas loaded", pgr),
    ]
    scenarios = ["unary", "stream"]
    if shutil.which("wrk") is None:
        print("# wrk not found (apt-get install -y wrk): unary throughput skipped", flush=True)
        scenarios = ["stream"]
    script = wrk_script(tmp)
    runs: list[dict] = []
    try:
        start_all(everyone)
        for name, _label, servers in configs:  # warm-up, not recorded
            if "unary" in scenarios:
                run_wrk(servers, everyone, script, args.concurrency, 2)
            run_stream(servers, everyone, args.concurrency, 1.0, 0)
        print("# throughput: warmed up", flush=True)
        plan = [(rep, sc) for rep in range(args.rounds) for sc in scenarios]
        for k, (rep, sc) in enumerate(plan):
            shift = (rep + k) % len(configs)
            for name, _label, servers in configs[shift:] + configs[:shift]:
                if sc == "unary":
                    r = measured(args, lambda s=servers: run_wrk(s, everyone, script, args.concurrency, args.duration))
                else:
                    r = measured(args, lambda s=servers: run_stream(s, everyone, args.concurrency, args.duration,
                                                                    args.warmup))
                r.update(config=name, scenario=sc, replicas=len(servers), round=rep,
                         loadavg=os.getloadavg()[0], cpu_pressure_avg10=cpu_pressure())
                runs.append(r)
                if r.get("failed"):
                    print(f"  [{rep}] {sc:6s} {name:12s} FAILED: {json.dumps(r)[:800]}", flush=True)
                    continue
                print(f"  [{rep}] {sc:6s} {name:12s} rps={r['rps']:>8.1f} p50={get(r, 'latency_ms.p50')}ms "
                      f"p99={get(r, 'latency_ms.p99')}ms err={r['errors']} server={r['server_cores']} "
                      f"pg={r['postgres_cores']} redis={r['redis_cores']} gen={r['client_cpu_util']} "
                      f"machine={r['machine_busy_cores']} others={r['others_cores']} (busy before "
                      f"{r['busy_before_cores']}, waited {r['quiet_wait_s']} s; attempt {r['attempts']})", flush=True)
        rss = {s.name: s.rss_mb() for s in everyone}
    finally:
        stop_all(everyone)
    summary: dict[str, dict] = {}
    for sc in scenarios:
        for name, label, servers in configs:
            mine = [r for r in runs if r["config"] == name and r["scenario"] == sc and not r.get("failed")]
            s = {"label": label, "replicas": len(servers), "runs": len(mine),
                 "failed_runs": sum(1 for r in runs if r["config"] == name and r["scenario"] == sc and r.get("failed")),
                 "errors": sum(r["errors"] for r in mine), "rps_all": [r["rps"] for r in mine]}
            for path in ("rps", "latency_ms.p50", "latency_ms.p99", "ttfe_ms.p50", "events_per_s",
                         "server_cpu_us_per_request", "server_cores", "idle_servers_cores", "postgres_cores",
                         "postgres_bg_cores", "postgres_theirs_cores",
                         "redis_cores", "client_cpu_util", "machine_busy_cores", "others_cores"):
                s[path] = compare.median_of(mine, path)
            summary[f"{sc}/{name}"] = s
    return {"summary": summary, "runs": runs, "rss_mb": rss, "scenarios": scenarios,
            "servers": {s.name: s.cmd for s in everyone}}


# ----------------------------------------------------------------------------- report


def latency_table(lat: dict) -> str:
    lines = [("| deployment | subscriber | events | p50 ms | p99 ms | max ms | mean ms | p50 per round | "
              "missing / dup / replayed | others' cores |"), "|---|---|---:|---:|---:|---:|---:|---|---|---:|"]
    for d in lat["summary"].values():
        for side, label in (("cross", "B (other replica)"), ("same", "A (runs the task)")):
            s = d[side]
            lines.append(f"| {d['label']} | {label} | {s['events']} | {fmt(s.get('p50'), 2)} | {fmt(s.get('p99'), 2)} "
                         f"| {fmt(s.get('max'), 2)} | {fmt(s.get('mean'), 2)} | "
                         f"{', '.join(fmt(x, 2) for x in s['round_p50s'])} | {s['missing']} / {s['duplicates']} / "
                         f"{s['replayed']} | {fmt(d.get('others_cores_median'), 2)} |")
    return "\n".join(lines)


def throughput_table(tp: dict) -> str:
    lines = [("| scenario | configuration | requests/s | per round | p50 ms | p99 ms | server CPU µs/req | "
              "server cores | PostgreSQL cores: our backends / its own processes | Redis cores | generator cores | machine busy cores | others' cores | errors |"),
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, s in tp["summary"].items():
        sc = key.split("/", 1)[0]
        failed = f" ({s['failed_runs']} failed runs)" if s["failed_runs"] else ""
        lines.append(
            f"| {sc} | {s['label']} | {fmt(s.get('rps'), 0)} | {', '.join(fmt(x, 0) for x in s['rps_all'])} | "
            f"{fmt(s.get('latency_ms.p50'), 2)} | {fmt(s.get('latency_ms.p99'), 2)} | "
            f"{fmt(s.get('server_cpu_us_per_request'), 0)} | {fmt(s.get('server_cores'), 2)} | "
            f"{fmt(s.get('postgres_cores'), 2)} / {fmt(s.get('postgres_bg_cores'), 2)} | {fmt(s.get('redis_cores'), 2)} | {fmt(s.get('client_cpu_util'), 2)} | "
            f"{fmt(s.get('machine_busy_cores'), 2)} | {fmt(s.get('others_cores'), 2)} | {s['errors']}{failed} |")
    return "\n".join(lines)


def verdicts(lat: dict | None, tp: dict | None, args_max_others: float) -> list[str]:
    out = []
    if lat:
        for name, d in lat["summary"].items():
            c, s = d["cross"], d["same"]
            if not c.get("events"):
                continue
            ok = (c["p50"] or 1e9) < 10 and (c["p99"] or 1e9) < 50
            line = (f"{d['label']}: cross-replica p50 {c['p50']:.2f} ms (target < 10), p99 {c['p99']:.2f} ms "
                    f"(target < 50), max {c['max']:.2f} ms over {c['events']} events")
            line += f" -> {'MET' if ok else 'NOT MET'}" if name.startswith("parley") else ""
            line += f"; same replica p50 {s['p50']:.2f} / p99 {s['p99']:.2f} ms" if s.get("events") else ""
            line += f" (other processes on the machine: {fmt(d.get('others_cores_median'), 2)} cores, median)"
            out.append(line)
        hot = [r for r in lat["rounds"] if (r.get("others_cores") or 0) > args_max_others]
        out.append(f"latency rounds kept although other processes took > {args_max_others:g} cores during them: "
                   f"{len(hot)} of {len(lat['rounds'])}; repeated rounds: {sum(r['attempts'] - 1 for r in lat['rounds'])}")
        if lat.get("sdk_problem"):
            out.append(f"a2a-sdk cluster mode not measured: {lat['sdk_problem']}")
    if tp:
        for sc in tp["scenarios"]:
            one, two = tp["summary"].get(f"{sc}/pg+redis x1"), tp["summary"].get(f"{sc}/pg+redis x2")
            if one and two and one.get("rps") and two.get("rps"):
                out.append(f"{sc}: two replicas / one replica (PostgreSQL + Redis) = {two['rps'] / one['rps']:.2f}x "
                           f"requests/s; machine busy cores {fmt(one.get('machine_busy_cores'), 2)} -> "
                           f"{fmt(two.get('machine_busy_cores'), 2)} of {os.cpu_count()}")
            mem = tp["summary"].get(f"{sc}/memory")
            for other in ("sqlite", "postgres", "pg+redis x1"):
                o = tp["summary"].get(f"{sc}/{other}")
                if mem and o and mem.get("rps") and o.get("rps"):
                    out.append(f"{sc}: {o['label']} = {o['rps'] / mem['rps']:.2f}x of memory's requests/s")
        hot = [r for r in tp["runs"] if (r.get("others_cores") or 0) > args_max_others]
        out.append(f"throughput runs kept although other processes took > {args_max_others:g} cores during them: "
                   f"{len(hot)} of {len(tp['runs'])}; repeated runs: {sum(r['attempts'] - 1 for r in tp['runs'])}")
        busy = [r for r in tp["runs"] if (r.get("client_cpu_util") or 0) >= 0.9 * len(r.get("per_target", [1]))]
        out.append(f"load generator at >= 90% of a core per generator process in {len(busy)} of {len(tp['runs'])} runs"
                   + (f" ({', '.join(sorted({r['scenario'] + ' ' + r['config'] for r in busy}))})" if busy else ""))
    return out


# ----------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("latency", "throughput"), default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--events", type=int, default=400, help="stamps per latency task (per round)")
    ap.add_argument("--interval", type=int, default=20, help="ms between stamps")
    ap.add_argument("--delay", type=int, default=500, help="ms the stamper waits before the first stamp")
    ap.add_argument("--duration", type=int, default=5, help="seconds measured per throughput run")
    ap.add_argument("--warmup", type=float, default=0.5, help="unrecorded seconds at the start of each loadgen run")
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight per loaded replica")
    ap.add_argument("--sdk-poll", type=float, default=0.5, help="a2a-sdk DatabaseTaskEventStream poll interval (s)")
    ap.add_argument("--skip-sdk", action="store_true")
    ap.add_argument("--quiet-threshold", type=float, default=0.5,
                    help="before each run, wait until the machine is busier than this many cores for < 1 s")
    ap.add_argument("--quiet-wait", type=float, default=60, help="longest wait for that (s); then run anyway")
    ap.add_argument("--max-others", type=float, default=0.3,
                    help="a run during which other processes used more cores than this is measured again")
    ap.add_argument("--retries", type=int, default=2, help="at most this many repeats of a contended run")
    ap.add_argument("--postgres", default=os.environ.get("PARLEY_BENCH_POSTGRES",
                                                         "postgresql://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--redis", default=os.environ.get("PARLEY_BENCH_REDIS", "redis://127.0.0.1:6379/0"))
    ap.add_argument("--quick", action="store_true", help="1 round, 100 stamps, 2 s runs: a smoke test")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.events, args.duration = 1, 100, 2
    global PG_PORT
    PG_PORT = urlsplit(args.postgres).port or 5432
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        ap.error("needs aiohttp: pip install -e '.[bench]'")

    OUT.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    logs = Path(tempfile.mkdtemp(prefix="parley-cluster-bench-"))
    env = environment()
    env["postgres_version"] = pg(args.postgres, "SHOW server_version")[0]
    settings = ("autovacuum", "synchronous_commit", "fsync", "shared_buffers", "max_connections")
    env["postgres_settings"] = dict(zip(settings, pg(args.postgres, *[f"SHOW {k}" for k in settings]), strict=True))
    env["redis_version"] = asyncio.run(_redis_version(args.redis))
    env["wrk"] = (subprocess.run(["wrk", "--version"], capture_output=True, text=True, check=False).stdout
                  .splitlines() or ["?"])[0] if shutil.which("wrk") else None
    command = " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])
    print(f"# cluster bench {stamp}: {env['nproc']} cores, {env['cpu_model']}, loadavg {env['loadavg_start']}, "
          f"PostgreSQL {env['postgres_version']}, Redis {env['redis_version']}, logs in {logs}", flush=True)
    res = Resources(args.postgres, args.redis)
    t0 = time.time()
    lat = tp = None
    try:
        if args.only in (None, "latency"):
            lat = run_latency(args, res, logs)
        if args.only in (None, "throughput"):
            tp = run_throughput(args, res, logs)
    finally:
        res.cleanup()
    env["loadavg_end"] = os.getloadavg()
    elapsed = time.time() - t0
    md = [(f"Run {stamp} ({elapsed:.0f} s), `{command}`: {env['nproc']} cores ({env['cpu_model']}), load average "
          f"{' '.join(f'{x:.2f}' for x in env['loadavg_start'])} before, "
          f"{' '.join(f'{x:.2f}' for x in env['loadavg_end'])} after; Parley at {env['git'].get('commit', '?')[:10]}"
          f"{' (src modified)' if env['git'].get('dirty_src') else ''}; PostgreSQL {env['postgres_version']} "
          f"({', '.join(f'{k} {v}' for k, v in env['postgres_settings'].items())}), "
          f"Redis {env['redis_version']}, a2a-sdk {env['packages'].get('a2a-sdk')}, "
          f"SQLAlchemy {env['packages'].get('sqlalchemy')}."), ""]
    if lat:
        md += [(f"Event latency: {args.events} stamps per task, one every {args.interval} ms after {args.delay} ms, "
                f"{args.rounds} round(s); percentiles over all stamps of all rounds."), "", latency_table(lat), ""]
    if tp:
        md += [(f"Throughput: {args.duration} s per run, {args.concurrency} requests in flight per loaded replica "
               f"(unary: wrk -t1 -c{args.concurrency} per replica; stream: bench/loadgen.py -c{args.concurrency} per "
               f"replica), median of {args.rounds} round(s); with 2 replicas p50/p99 are the worse replica's."), "",
               throughput_table(tp), ""]
    md += [f"- {v}" for v in verdicts(lat, tp, args.max_others)]
    report = "\n".join(md)
    print()
    print(report)
    result = {"stamp": stamp, "command": command, "config": vars(args), "environment": env,
              "elapsed_s": round(elapsed, 1), "latency": lat, "throughput": tp, "logs": str(logs)}
    (OUT / f"cluster-{stamp}.json").write_text(json.dumps(result, indent=2, default=str))
    (OUT / f"cluster-{stamp}.md").write_text(report + "\n")
    print(f"\nraw results: {OUT / f'cluster-{stamp}.json'}")


if __name__ == "__main__":
    main()
