#!/usr/bin/env python3
"""LLM-shaped streaming (issue 25): many concurrent streams, each an agent relaying a model's tokens with pauses.

    python bench/llm_stream.py                  # 100 streams x 200 tokens, one every 50 ms (20/s); 3 rounds
    python bench/llm_stream.py --preset wide    # 1,000 streams x 200 tokens, one every 200 ms (5/s); 3 rounds
    python bench/llm_stream.py --quick          # smoke test: 10 streams x 20 tokens, 1 round (about 30 s)
    python bench/llm_stream.py --preset wide --servers sqlite --list-every 5   # and a ListTasks every 5 s
    python bench/llm_stream.py --servers memory,js --streams 50 --tokens 100 --interval-ms 20

Servers (a fresh process for every wave, pinned to CPU 0 with taskset; the load generator runs on CPU 1):

  sqlite  `parley serve --app llm_agents:app --db <tmp>/l.db`: Parley with its default (SQLite) store
  memory  `parley serve --app llm_agents:app --memory`
  sdk     bench/sdk_llm_server.py: the official a2a-sdk (Python) server, InMemoryTaskStore
  js      bench/js/llm_server.mjs: the official @a2a-js/sdk server (express, JSON-RPC), InMemoryTaskStore
          (`cd bench/js && npm install` first)
  floor   bench/floor_server.py: a bare ASGI app under uvicorn (uvloop, httptools) sending the same SSE events
          with no A2A logic, task or store: what any Python server spends per token (not in the default list;
          `--servers sqlite,memory,js,floor`)

Every server runs the same agent (bench/llm_agents.py; its request and tokens: bench/llm_tokens.py): the request
text "N INTERVAL_MS" asks for N tokens, one every INTERVAL_MS on a fixed schedule, each an artifact update whose
text " t<i>:<ns>" carries its index and the wall clock (time.time_ns) at the moment the agent emitted it. The
client is A2A 1.0 JSON-RPC SendStreamingMessage over SSE (aiohttp on uvloop); every server speaks it.

A round runs one wave per server (the order rotates from round to round), each on a freshly started server
after an unrecorded warm-up of 4 short streams (so no wave inherits a heap or a store another one grew):
--streams streams, their starts
spread evenly over one token interval (as independent users' requests are; --stagger-ms), each read to its
end. Per wave, over the window from the first send to the last stream's end:

  CPU per token     server process user+sys CPU (/proc/PID/stat, every thread) / tokens delivered, and each of
                    the two alone (system: the kernel's work for the process: sockets, file writes, syncs)
  delivery delay    client receive time - the token's emit time, over every token (p50, p99, max)
  TTFE              send -> first complete SSE event
  disk per token    /proc/PID/io write_bytes delta of the server process / tokens delivered (0 in memory)
  RSS per stream    (largest VmRSS sampled every 0.2 s during the wave - VmRSS just before it) / streams
  ListTasks         with --list-every S: a JSON-RPC ListTasks (10 a page) every S seconds during the wave, from
                    CPU 1, as a dashboard polls: each call's time (p50, max) and errors, in the notes under the table
  errors            streams that failed, timed out, ended without a completed status or with missing tokens;
                    tokens out of order
  generator CPU     user+sys of the load generator processes / the window (flagged at >= 0.9 of its core),
                    and their event-loop lag (a 5 ms ticker): a busy generator delays receipt, so delay grows

The table shows medians over rounds (max: the largest of any round) and, next to each value, its ratio to the
best server of the run (1.00 = best; lower is better for every column). With many streams
(--gen-procs 0: one process per 500 streams) several generator processes share CPU 1; their results are
merged. Raw results go to bench/out/llm-stream-<UTC>.json, the table to bench/out/llm-stream-<UTC>.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from compare import OUT, ServerProc, cpu_pressure, fmt, free_port
from loadgen import percentile, process_cpu_split, sse_events
from resources import raise_fd_limit
from targets import GEN_CPU, SERVER_CPU, machine

DEFAULT_SERVERS = ("sqlite", "memory", "sdk", "js")
SERVERS = (*DEFAULT_SERVERS, "floor")
LABEL = {"sqlite": "Parley SQLite", "memory": "Parley memory", "sdk": "a2a-sdk (Python)", "js": "@a2a-js/sdk",
         "floor": "floor (bare ASGI)"}
PRESETS = {  # streams, tokens per stream, ms between tokens
    "default": (100, 200, 50),
    "wide": (1000, 200, 200),
    "quick": (10, 20, 50),
}
GEN_BUSY = 0.9
JS_DIR = HERE / "js"
TOKEN = re.compile(rb" t(\d+):(\d{19})")  # the stamp of bench/llm_tokens.token_text
V1 = {"Content-Type": "application/json", "A2A-Version": "1.0"}


# ----------------------------------------------------------------------------- the generator (a subprocess)


async def gen_main(a: argparse.Namespace) -> dict[str, Any]:
    """Open `a.count` streams (global indexes a.first...) starting at a.start_at + index * stagger; read each."""
    import aiohttp
    import msgspec

    decode = msgspec.json.decode
    body_head = '{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"role":"ROLE_USER",'
    text = f"{a.tokens} {a.interval_ms}"
    delays: list[float] = []
    emitted: list[int] = []  # each token's emit time (ns), beside its delay
    opened: list[int] = []  # each stream's first event (wall clock ns)
    ttfe: list[float] = []
    errors: dict[str, int] = {}
    state = {"ok": 0, "tokens": 0, "order": 0, "events": 0}
    lag: list[float] = []

    def error(reason: str) -> None:
        errors[reason] = errors.get(reason, 0) + 1

    async def ticker() -> None:  # the generator's own event-loop lag
        period = 0.005
        nxt = time.perf_counter() + period
        while True:
            await asyncio.sleep(max(0.0, nxt - time.perf_counter()))
            now = time.perf_counter()
            lag.append(now - nxt)
            nxt = max(nxt + period, now)

    async def one(session: aiohttp.ClientSession, index: int) -> None:
        await asyncio.sleep(max(0.0, a.start_at + index * a.stagger - time.time()))
        body = (body_head + f'"parts":[{{"text":"{text}"}}],"messageId":"llm-{a.run}-{index}"}}}}}}').encode()
        expected, final, problem, first = 0, False, None, None
        t0 = time.perf_counter()
        try:
            async with session.post(a.url, data=body, headers=V1) as r:
                if r.status != 200:
                    problem = f"HTTP {r.status}"
                else:
                    async for event, data in sse_events(r.content.iter_any()):
                        now_ns = time.time_ns()
                        if first is None:
                            first = time.perf_counter() - t0
                            opened.append(now_ns)
                        state["events"] += 1
                        if b'"artifactUpdate"' in data:
                            for i, ns in TOKEN.findall(data):
                                delays.append((now_ns - int(ns)) / 1e6)
                                emitted.append(int(ns))
                                if int(i) != expected:
                                    state["order"] += 1
                                    problem = problem or "token out of order"
                                expected = int(i) + 1
                                state["tokens"] += 1
                            continue
                        obj = decode(data)
                        if event == "error" or "error" in obj:
                            problem = problem or f"error event: {str(obj.get('error'))[:120]}"
                        elif (obj.get("result") or {}).get("statusUpdate", {}).get("status", {}).get(
                                "state") == "TASK_STATE_COMPLETED":
                            final = True
        except TimeoutError:
            problem = "timeout"
        except Exception as exc:  # noqa: BLE001 - one stream's failure is counted, not raised
            problem = f"{type(exc).__name__}: {exc}"[:160]
        if problem is None and not final:
            problem = "ended without a completed status"
        if problem is None and expected != a.tokens:
            problem = f"{expected} of {a.tokens} tokens"
        if problem is None:
            state["ok"] += 1
            ttfe.append((first or 0.0) * 1000)
        else:
            error(problem)

    tick = asyncio.get_running_loop().create_task(ticker())
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    w0 = time.perf_counter()
    timeout = aiohttp.ClientTimeout(total=a.tokens * a.interval_ms / 1000 + a.stagger * a.total + a.timeout)
    connector = aiohttp.TCPConnector(limit=a.count, limit_per_host=a.count)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False) as session:
        await asyncio.gather(*(one(session, a.first + k) for k in range(a.count)))
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    tick.cancel()
    lag_sorted = sorted(lag)
    return {
        "streams": a.count, "ok": state["ok"], "tokens": state["tokens"], "events": state["events"],
        "order_errors": state["order"], "errors": errors,
        "delays_ms": [round(d, 3) for d in delays], "emitted_ns": emitted, "last_open_ns": max(opened, default=0),
        "ttfe_ms": [round(t, 3) for t in ttfe],
        "cpu_s": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime), "wall_s": time.perf_counter() - w0,
        "lag_ms": {"p99": round((percentile(lag_sorted, 99) or 0) * 1000, 2),
                   "max": round((lag_sorted[-1] if lag_sorted else 0) * 1000, 2)},
    }


def gen_entry(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="llm_stream.py _gen")
    for name, typ in (("url", str), ("run", str), ("first", int), ("count", int), ("total", int), ("tokens", int),
                      ("interval_ms", int), ("start_at", float), ("stagger", float), ("timeout", float)):
        ap.add_argument(f"--{name.replace('_', '-')}", type=typ, required=True)
    a = ap.parse_args(argv)
    import uvloop

    out = uvloop.run(gen_main(a))
    sys.stdout.write(json.dumps(out))


# ----------------------------------------------------------------------------- servers


def server_cmd(name: str, port: int, tmp: Path, parley_args: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The command line of server `name` (pinned to SERVER_CPU) and its extra environment; `parley_args` are added
    to `parley serve`'s (e.g. --group-commit-seconds 0)."""
    parley = str(Path(sys.executable).parent / "parley")
    app = [parley, "serve", "--app", "llm_agents:app", "--port", str(port), "--log-level", "warning",
           *(parley_args or [])]
    # bench/ (the agents) first, then the caller's PYTHONPATH: `PYTHONPATH=<a checkout>/src` runs that code
    path = {"PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)}
    cmd, env = {
        "sqlite": ([*app, "--db", str(tmp / "l.db")], path),
        "memory": ([*app, "--memory"], path),
        "sdk": ([sys.executable, str(HERE / "sdk_llm_server.py"), "--port", str(port)], {}),
        "js": (["node", str(JS_DIR / "llm_server.mjs"), "--port", str(port)], {}),
        "floor": ([sys.executable, str(HERE / "floor_server.py"), "--port", str(port)], {}),
    }[name]
    return ["taskset", "-c", str(SERVER_CPU), *cmd], env


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def write_bytes(pid: int) -> int | None:
    """Bytes process `pid` caused to be written to storage (/proc/PID/io write_bytes, every thread)."""
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


# ----------------------------------------------------------------------------- ListTasks during a wave


class ListPoller(threading.Thread):
    """A2A 1.0 JSON-RPC ListTasks (10 tasks a page) every `every` seconds while a wave runs, as a dashboard or a
    client polling its tasks does, each call timed (`--list-every`); on GEN_CPU, not the server's."""

    BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageSize": 10}}).encode()

    def __init__(self, url: str, every: float) -> None:
        super().__init__(name="list-poller", daemon=True)
        self.url, self.every = url, every
        self.ms: list[float] = []
        self.errors: dict[str, int] = {}
        self.done = threading.Event()

    def run(self) -> None:
        os.sched_setaffinity(0, {GEN_CPU})  # this thread only
        while not self.done.wait(self.every):
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(urllib.request.Request(self.url, self.BODY, V1), timeout=30) as r:
                    answer = json.loads(r.read())
                error = None if isinstance(answer.get("result", {}).get("tasks"), list) else "no tasks in the answer"
            except (OSError, ValueError) as exc:
                error = type(exc).__name__
            if error is None:
                self.ms.append(round((time.perf_counter() - started) * 1000, 2))
            else:
                self.errors[error] = self.errors.get(error, 0) + 1

    def result(self) -> dict[str, Any]:
        self.done.set()
        self.join(timeout=35)
        ms = sorted(self.ms)
        return {"every_s": self.every, "calls": len(ms), "errors": self.errors,
                "p50": percentile(ms, 50), "max": ms[-1] if ms else None}


# ----------------------------------------------------------------------------- one wave


def wave(server: ServerProc, streams: int, tokens: int, interval_ms: int, args: argparse.Namespace,
         record: bool = True) -> dict[str, Any]:
    """`streams` streams of `tokens` tokens against `server`, from args.gen_procs processes on GEN_CPU."""
    procs = args.gen_procs or max(1, math.ceil(streams / 500))
    procs = min(procs, streams)
    stagger = (args.stagger_ms if args.stagger_ms is not None else interval_ms) / 1000 / streams
    start_at = time.time() + 2.0 + 0.3 * procs  # the generators import aiohttp and uvloop first
    run = f"{os.getpid():x}{int(start_at * 1000) % 10**8:x}"
    share = [streams // procs + (1 if k < streams % procs else 0) for k in range(procs)]
    gens, files, first = [], [], 0
    folder = Path(tempfile.mkdtemp(prefix="gen-", dir=args.tmp))
    for k, count in enumerate(share):
        cmd = ["taskset", "-c", str(GEN_CPU), sys.executable, str(Path(__file__).resolve()), "_gen",
               "--url", server.url, "--run", run, "--first", str(first), "--count", str(count),
               "--total", str(streams), "--tokens", str(tokens), "--interval-ms", str(interval_ms),
               "--start-at", repr(start_at), "--stagger", repr(stagger), "--timeout", str(args.timeout)]
        files.append((folder / f"{k}.json", folder / f"{k}.err"))
        with open(files[-1][0], "wb") as out, open(files[-1][1], "wb") as err:  # files: no pipe to fill up
            gens.append(subprocess.Popen(cmd, stdout=out, stderr=err))
        first += count
    pid = server.pid
    idle_rss = rss_kib(pid)
    time.sleep(max(0.0, start_at - time.time()))
    cpu0, io0, t0 = process_cpu_split(pid), write_bytes(pid), time.time()
    poller = ListPoller(server.url, args.list_every) if record and args.list_every else None
    if poller is not None:
        poller.start()
    peak, samples, outs = idle_rss or 0, [], []
    deadline = t0 + tokens * interval_ms / 1000 + streams * stagger + args.timeout + 60
    while any(g.poll() is None for g in gens) and time.time() < deadline:
        r = rss_kib(pid)
        if r is not None:
            peak = max(peak, r)
            samples.append((round(time.time() - t0, 2), r))
        time.sleep(0.2)  # RSS sampling while the generators run
    cpu1, io1, t1 = process_cpu_split(pid), write_bytes(pid), time.time()
    listed = poller.result() if poller is not None else None
    for g, (out_path, err_path) in zip(gens, files, strict=True):
        try:
            g.wait(timeout=30)
        except subprocess.TimeoutExpired:
            g.kill()
            g.wait()
        out, err = out_path.read_bytes(), err_path.read_text(errors="replace")
        if g.returncode != 0 or not out:
            outs.append({"failed": True, "stderr": f"exit {g.returncode}: {err[-1500:]}"})
        else:
            outs.append(json.loads(out))
    shutil.rmtree(folder, ignore_errors=True)
    if not record:
        return {"failed": any(o.get("failed") for o in outs), "outs": outs}
    good = [o for o in outs if not o.get("failed")]
    delays = sorted(d for o in good for d in o["delays_ms"])
    # Once every stream is open (the last one's first event): the steady state, without the opening burst of
    # --streams connections within one interval, which TTFE measures.
    all_open = max((o["last_open_ns"] for o in good), default=0)
    steady = sorted(d for o in good for d, at in zip(o["delays_ms"], o["emitted_ns"], strict=True) if at >= all_open)
    ttfe = sorted(t for o in good for t in o["ttfe_ms"])
    delivered = sum(o["tokens"] for o in good)
    errors: dict[str, int] = {}
    for o in good:
        for k, v in o["errors"].items():
            errors[k] = errors.get(k, 0) + v
    failed_gens = len(outs) - len(good)
    if failed_gens:
        errors["generator process failed"] = failed_gens
    window = t1 - t0
    gen_cpu = sum(o["cpu_s"] for o in good)
    user, system = ((cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]) if cpu0 is not None and cpu1 is not None
                    else (None, None))
    cpu = user + system if user is not None and system is not None else None
    wrote = (io1 - io0) if io0 is not None and io1 is not None else None
    return {
        "streams": streams, "tokens_per_stream": tokens, "interval_ms": interval_ms, "gen_procs": procs,
        "window_s": round(window, 3),
        "streams_ok": sum(o["ok"] for o in good),
        "streams_failed": streams - sum(o["ok"] for o in good),
        "tokens_expected": streams * tokens, "tokens_delivered": delivered,
        "order_errors": sum(o["order_errors"] for o in good), "errors": errors,
        "server_cpu_s": round(cpu, 3) if cpu is not None else None,
        "server_cores": round(cpu / window, 3) if cpu is not None else None,
        "cpu_us_per_token": round(cpu / delivered * 1e6, 1) if cpu is not None and delivered else None,
        "cpu_user_us_per_token": round(user / delivered * 1e6, 1) if user is not None and delivered else None,
        "cpu_sys_us_per_token": round(system / delivered * 1e6, 1) if system is not None and delivered else None,
        "delay_ms": {"p50": percentile(delays, 50), "p99": percentile(delays, 99),
                     "max": delays[-1] if delays else None},
        "steady_delay_ms": {"p99": percentile(steady, 99), "max": steady[-1] if steady else None,
                            "tokens": len(steady)},
        "ttfe_ms": {"p50": percentile(ttfe, 50), "p99": percentile(ttfe, 99)},
        "write_bytes": wrote,
        "disk_bytes_per_token": round(wrote / delivered, 1) if wrote is not None and delivered else None,
        "rss_idle_kib": idle_rss, "rss_peak_kib": peak,
        "rss_kib_per_stream": round((peak - idle_rss) / streams, 1) if idle_rss else None,
        "rss_samples": samples,
        "gen_cpu_s": round(gen_cpu, 3), "gen_cores": round(gen_cpu / window, 3),
        "gen_lag_ms": {"p99": max((o["lag_ms"]["p99"] for o in good), default=None),
                       "max": max((o["lag_ms"]["max"] for o in good), default=None)},
        "gen_stderr": [o["stderr"] for o in outs if o.get("failed")],
        "loadavg": os.getloadavg()[0], "cpu_pressure_avg10": cpu_pressure(),
        "list_tasks_ms": listed,
    }


# ----------------------------------------------------------------------------- summary and report

# (key, column title, path in a wave's result, digits); every column: lower is better
COLUMNS = [
    ("cpu", "CPU µs/token", "cpu_us_per_token", 1),
    ("cpu_user", "of which user", "cpu_user_us_per_token", 1),
    ("cpu_sys", "of which system", "cpu_sys_us_per_token", 1),
    ("d50", "delay p50 ms", "delay_ms.p50", 1),
    ("d99", "delay p99 ms", "delay_ms.p99", 1),
    ("dmax", "delay max ms", "delay_ms.max", 1),
    ("s99", "all open: delay p99 ms", "steady_delay_ms.p99", 1),
    ("t50", "TTFE p50 ms", "ttfe_ms.p50", 1),
    ("t99", "TTFE p99 ms", "ttfe_ms.p99", 1),
    ("disk", "disk B/token", "disk_bytes_per_token", 0),
    ("rss", "RSS KiB/stream", "rss_kib_per_stream", 1),
]


def pick(d: dict, path: str) -> Any:
    for k in path.split("."):
        d = d.get(k) if isinstance(d, dict) else None
    return d


def summarise(runs: list[dict]) -> dict[str, Any]:
    """Medians over the rounds of one server (delay max: the largest of any round)."""
    out: dict[str, Any] = {"rounds": len(runs)}
    for key, _, path, _ in COLUMNS:
        vals = [v for v in (pick(r, path) for r in runs) if isinstance(v, (int, float))]
        out[key] = (max(vals) if key == "dmax" else statistics.median(vals)) if vals else None
        out[key + "_all"] = vals
    errs: dict[str, int] = {}
    for r in runs:
        for k, v in r["errors"].items():
            errs[k] = errs.get(k, 0) + v
    out.update(
        streams_failed=sum(r["streams_failed"] for r in runs), order_errors=sum(r["order_errors"] for r in runs),
        tokens_delivered=sum(r["tokens_delivered"] for r in runs),
        tokens_expected=sum(r["tokens_expected"] for r in runs), errors=errs,
        server_cores=statistics.median(r["server_cores"] for r in runs if r["server_cores"] is not None)
        if any(r["server_cores"] is not None for r in runs) else None,
        gen_cores=statistics.median(r["gen_cores"] for r in runs), gen_cores_max=max(r["gen_cores"] for r in runs),
        list_tasks=_listed(runs),
        gen_lag_max=max((r["gen_lag_ms"]["max"] or 0) for r in runs),
        gen_lag_p99=max((r["gen_lag_ms"]["p99"] or 0) for r in runs),
        gen_us_per_token=statistics.median(r["gen_cpu_s"] / r["tokens_delivered"] * 1e6
                                           for r in runs if r["tokens_delivered"]) if any(
                                               r["tokens_delivered"] for r in runs) else None,
    )
    return out


def _listed(runs: list[dict]) -> dict[str, Any] | None:
    """The ListTasks calls of a server's waves (--list-every): median p50, largest max, calls and errors."""
    waves = [r["list_tasks_ms"] for r in runs if r.get("list_tasks_ms")]
    if not waves:
        return None
    errors: dict[str, int] = {}
    for w in waves:
        for k, v in w["errors"].items():
            errors[k] = errors.get(k, 0) + v
    p50s = [w["p50"] for w in waves if w["p50"] is not None]
    return {"every_s": waves[0]["every_s"], "calls": sum(w["calls"] for w in waves), "errors": errors,
            "p50": statistics.median(p50s) if p50s else None,
            "max": max((w["max"] for w in waves if w["max"] is not None), default=None)}


def table(summary: dict[str, dict], names: list[str]) -> str:
    best = {key: min((s[key] for s in summary.values() if s[key] is not None), default=None)
            for key, *_ in COLUMNS}
    head = "| server | " + " | ".join(title for _, title, _, _ in COLUMNS) + \
        " | server cores | generator cores | failed streams / order errors |"
    lines = [head, "|---|" + "---:|" * (len(COLUMNS) + 3)]
    for name in names:
        s = summary.get(name)
        if s is None:
            continue
        cells = []
        for key, _, _, digits in COLUMNS:
            v, b = s[key], best[key]
            if v is None:
                cells.append("–")
            elif b is None or b == 0:
                cells.append(fmt(v, digits) + ("" if v == 0 else " (best 0)"))
            else:
                cells.append(f"{fmt(v, digits)} ({v / b:.2f})")
        gen = fmt(s["gen_cores"], 2) + (" ⚠" if s["gen_cores_max"] >= GEN_BUSY else "")
        bad = f"{s['streams_failed']} / {s['order_errors']}" + (" ⚠" if s["streams_failed"] or s["order_errors"] else "")
        lines.append(f"| {LABEL[name]} | " + " | ".join(cells) + f" | {fmt(s['server_cores'], 2)} | {gen} | {bad} |")
    return "\n".join(lines)


def report(summary: dict, args: argparse.Namespace, env: dict, stamp: str, elapsed: float, runs: list[dict]) -> str:
    smoke = " — SMOKE TEST (--quick), not a measurement" if args.quick else ""
    head = (f"Run {stamp} ({elapsed:.0f} s){smoke}: {args.streams} streams x {args.tokens} tokens, one every "
            f"{args.interval_ms} ms ({1000 / args.interval_ms:g} tokens/s per stream), starts spread over "
            f"{args.stagger_ms if args.stagger_ms is not None else args.interval_ms} ms; {args.rounds} round(s), "
            f"median over rounds (delay max: the largest of any round); ratio to the best server in brackets; "
            f"servers on CPU {SERVER_CPU}, generator ({runs[0]['gen_procs'] if runs else '?'} process(es)) on CPU "
            f"{GEN_CPU}; {env['nproc']} cores ({env['cpu_model']}); load average "
            f"{' '.join(f'{x:.2f}' for x in env['loadavg_start'])} before, "
            f"{' '.join(f'{x:.2f}' for x in env['loadavg_end'])} after; Parley at {env['git'].get('commit', '?')[:10]}"
            f"{' (src modified)' if env['git'].get('dirty_src') else ''}"
            f"{' (PYTHONPATH=' + os.environ['PYTHONPATH'] + ' first)' if os.environ.get('PYTHONPATH') else ''}, a2a-sdk {env['packages'].get('a2a-sdk')}, "
            f"@a2a-js/sdk {env.get('a2a_js_sdk')} on Node {env.get('node')}.")
    notes = [f"- {LABEL[n]}: errors {s['errors']}; {s['tokens_delivered']:,} of {s['tokens_expected']:,} tokens; "
             f"generator: {fmt(s['gen_us_per_token'])} µs CPU per token, cores max {s['gen_cores_max']:.2f}, "
             f"event-loop lag p99 {s['gen_lag_p99']:.1f} ms, max {s['gen_lag_max']:.1f} ms"
             + (f"; ListTasks every {lt['every_s']:g} s: {lt['calls']} calls, p50 {fmt(lt['p50'])} ms (median of the "
                f"rounds), max {fmt(lt['max'])} ms, errors {lt['errors']}" if (lt := s.get("list_tasks")) else "")
             for n, s in summary.items()]
    return "\n".join([head, "", table(summary, [n for n in args.servers if n in summary]), "", *notes])


# ----------------------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=tuple(PRESETS), default="default",
                    help="default: 100 streams x 200 tokens every 50 ms; wide: 1,000 x 200 every 200 ms")
    ap.add_argument("--quick", action="store_true", help="smoke test: the quick preset (10 x 20 tokens), 1 round")
    ap.add_argument("--streams", type=int, default=None, help="concurrent streams (overrides the preset)")
    ap.add_argument("--tokens", type=int, default=None, help="tokens per stream (overrides the preset)")
    ap.add_argument("--interval-ms", type=int, default=None, help="ms between tokens (overrides the preset)")
    ap.add_argument("--stagger-ms", type=float, default=None,
                    help="spread the streams' starts over this many ms (default: one token interval; 0: all at once)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds a stream may take beyond its length before it counts as failed (timeout)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--list-every", type=float, default=0.0, metavar="SECONDS",
                    help="also call ListTasks every SECONDS during each wave (a dashboard polling) and time it")
    ap.add_argument("--servers", default=",".join(DEFAULT_SERVERS),
                    help=f"comma-separated, of {','.join(SERVERS)} (default: {','.join(DEFAULT_SERVERS)})")
    ap.add_argument("--gen-procs", type=int, default=0, help="load generator processes (0: one per 500 streams)")
    ap.add_argument("--parley-args", default="", help="extra `parley serve` arguments for sqlite and memory, "
                    "e.g. '--group-commit-seconds 0'")
    args = ap.parse_args(argv)
    if args.quick:
        args.preset, args.rounds = "quick", 1
    streams, tokens, interval = PRESETS[args.preset]
    args.streams = args.streams or streams
    args.tokens = args.tokens or tokens
    args.interval_ms = args.interval_ms or interval
    asked = args.servers.split(",")
    args.servers = [s for s in SERVERS if s in asked]
    unknown = set(asked) - set(SERVERS)
    if unknown or not args.servers:
        ap.error(f"--servers: unknown {', '.join(sorted(unknown)) or '(none given)'}; choose from {','.join(SERVERS)}")
    if "js" in args.servers and not (JS_DIR / "node_modules" / "@a2a-js" / "sdk").is_dir():
        ap.error(f"the js server needs its packages: cd {JS_DIR} && npm install (or leave js out of --servers)")
    if "js" in args.servers and shutil.which("node") is None:
        ap.error("the js server needs Node.js (20 or later) on PATH")
    if not {SERVER_CPU, GEN_CPU} <= os.sched_getaffinity(0):
        ap.error(f"needs CPUs {SERVER_CPU} and {GEN_CPU} (this process may use {sorted(os.sched_getaffinity(0))})")
    return args


def versions(env: dict) -> None:
    with contextlib.suppress(OSError, ValueError):
        env["a2a_js_sdk"] = json.loads((JS_DIR / "node_modules/@a2a-js/sdk/package.json").read_text())["version"]
    with contextlib.suppress(OSError, ValueError):
        env["express"] = json.loads((JS_DIR / "node_modules/express/package.json").read_text())["version"]
    if shutil.which("node"):
        env["node"] = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    if shutil.which("lscpu"):
        env["lscpu_head"] = subprocess.run(["lscpu"], capture_output=True, text=True,
                                           check=False).stdout.splitlines()[:10]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_gen":
        gen_entry(sys.argv[2:])
        return
    args = parse_args(sys.argv[1:])
    raise_fd_limit()  # 1,000 streams: the servers and generators inherit it
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    tmp = Path(tempfile.mkdtemp(prefix="parley-llm-"))
    args.tmp = tmp
    env = machine()
    versions(env)
    per_wave = args.tokens * args.interval_ms / 1000 + 4
    print(f"# llm-stream {stamp}: {args.streams} streams x {args.tokens} tokens every {args.interval_ms} ms, "
          f"{args.rounds} round(s) x {len(args.servers)} servers, about "
          f"{args.rounds * len(args.servers) * (per_wave + 4) / 60:.1f} min; load average "
          f"{env['loadavg_start'][0]:.2f}; logs in {tmp}", flush=True)
    commands: dict[str, list[str]] = {}
    runs: list[dict] = []
    t0 = time.time()
    with contextlib.suppress(OSError):
        os.sched_setaffinity(0, {GEN_CPU})  # this process only samples; keep it off the servers' core
    for rnd in range(args.rounds):
        shift = rnd % len(args.servers)
        for name in args.servers[shift:] + args.servers[:shift]:
            port = free_port()
            cmd, extra = server_cmd(name, port, tmp, args.parley_args.split())
            commands[name] = cmd
            s = ServerProc(name, cmd, port, tmp / f"{name}-{rnd}.log", env=extra)  # a fresh process per wave
            try:
                s.start()
                w = wave(s, min(4, args.streams), 5, args.interval_ms, args, record=False)  # unrecorded warm-up
                if w["failed"] or any(o.get("ok") != o.get("streams") for o in w["outs"]):
                    raise SystemExit(f"warm-up against {name} failed: {json.dumps(w['outs'])[:1500]}; "
                                     f"see {s.log_path}")
                time.sleep(1.0)  # the warm-up's connections close before the idle RSS is read
                r = wave(s, args.streams, args.tokens, args.interval_ms, args)
            finally:
                with contextlib.suppress(Exception):
                    s.stop()
                for f in tmp.glob("l.db*"):
                    f.unlink()
            r.update(server=name, round=rnd)
            runs.append(r)
            print(f"  [{rnd}] {LABEL[name]:17s} cpu {fmt(r['cpu_us_per_token'])} µs/token (user "
                  f"{fmt(r['cpu_user_us_per_token'])}, sys {fmt(r['cpu_sys_us_per_token'])}), delay p50/p99/max "
                  f"{fmt(r['delay_ms']['p50'])}/{fmt(r['delay_ms']['p99'])}/{fmt(r['delay_ms']['max'])} ms "
                  f"(all open: p99 {fmt(r['steady_delay_ms']['p99'])} ms), "
                  f"ttfe p50 {fmt(r['ttfe_ms']['p50'])} ms, disk {fmt(r['disk_bytes_per_token'], 0)} B/token, "
                  f"rss {fmt(r['rss_kib_per_stream'])} KiB/stream, server {r['server_cores']} cores, "
                  f"gen {r['gen_cores']} cores (lag max {r['gen_lag_ms']['max']} ms), "
                  f"failed {r['streams_failed']}, order {r['order_errors']}"
                  + (f" {r['errors']}" if r["errors"] else "")
                  + (f", ListTasks p50/max {fmt(lt['p50'])}/{fmt(lt['max'])} ms ({lt['calls']} calls, errors "
                     f"{lt['errors']})" if (lt := r.get("list_tasks_ms")) else ""), flush=True)
    elapsed = time.time() - t0
    env["loadavg_end"] = os.getloadavg()
    summary = {name: summarise(mine) for name in args.servers if (mine := [r for r in runs if r["server"] == name])}
    text = report(summary, args, env, stamp, elapsed, runs)
    print()
    print(text)
    result = {"stamp": stamp, "command": shlex.join([Path(sys.executable).name, *sys.argv]), "config": vars(args),
              "smoke_test": args.quick, "environment": env, "elapsed_s": round(elapsed, 1),
              "servers": commands, "summary": summary, "runs": runs,
              "logs": str(tmp)}
    (OUT / f"llm-stream-{stamp}.json").write_text(json.dumps(result, indent=1, default=str))
    (OUT / f"llm-stream-{stamp}.md").write_text(text + "\n")
    print(f"\nraw results: {OUT / f'llm-stream-{stamp}.json'}")


if __name__ == "__main__":
    main()
