#!/usr/bin/env python3
"""Soak: a fixed-rate mix of A2A operations against one real `parley serve` on SQLite, for a long time.

    python bench/soak.py                               # 30 minutes at 50 operations/s
    python bench/soak.py --minutes 120 --rate 100
    python bench/soak.py --seconds 60 --rate 10 --period 10    # a smoke test
    python bench/soak.py --mix unary=60,stream=25,multiturn=10,cancel=5
    python bench/soak.py --config bench/soak-retention.toml   # retention that engages within the run

Starts `parley serve --port P --db <tmp>/r.db --log-level warning` (built-in agents) and runs an
open-loop generator: operations start on a fixed schedule (--rate per second, the kind drawn from
--mix with a seeded RNG) whether or not earlier ones have finished, so a slower server gets the same
load and its slowness shows as latency, never as a lower rate. Latency is measured from the
scheduled start (a late start counts). Operations (A2A 1.0 JSON-RPC, aiohttp):

  unary      SendMessage to echo; must answer a completed task
  stream     SendStreamingMessage to echo, read to the end; must end with a completed status
  multiturn  SendMessage to interviewer (must be input-required), then the answer with the same
             taskId/contextId (must complete): one conversation, two requests
  cancel     SendMessage to interviewer (must be input-required), then CancelTask (must answer
             TASK_STATE_CANCELED). The built-in agents have no slow one, so the canceled task is
             one waiting for input: the agent is not running, and CancelTask ends the task.

Anything else (HTTP error, JSON-RPC error, another state, a timeout) is an error of that kind,
kept with a sample message. Every --period seconds (60: "per minute") a line: operations and
errors by kind, p50/p99 latency by kind, server RSS and fds, SQLite db + wal sizes. At the end a
Markdown summary for bench/RESULTS.md; bench/out/soak-<UTC>.json has every window and
bench/out/soak-<UTC>.md the summary plus the per-window table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import loadgen
from compare import OUT, fmt
from resources import V1, db_sizes, machine_info, message, proc_sample, raise_fd_limit, rpc, start_parley

KINDS = ("unary", "stream", "multiturn", "cancel")
DEFAULT_MIX = "unary=60,stream=25,multiturn=10,cancel=5"
REQUESTS_PER_OP = {"unary": 1, "stream": 1, "multiturn": 2, "cancel": 2}


class OpError(Exception):
    """An operation's unexpected outcome, with the message kept as its error sample."""


# ----------------------------------------------------------------------------- operations


class Ops:
    """The four operations, each returning normally when the outcome is the expected one."""

    def __init__(self, session: Any, base: str, text: str) -> None:
        self.session, self.base = session, base
        self.echo = loadgen.Protocol("1.0", text)  # bench/loadgen.py's bodies and checks for echo

    async def call(self, agent: str, method: str, params: dict[str, Any]) -> Any:
        """One JSON-RPC call to `agent`; its result, or OpError."""
        async with self.session.post(f"{self.base}a2a/{agent}", data=rpc(method, params), headers=V1) as r:
            body = await r.read()
        if r.status != 200:
            raise OpError(f"{method}: HTTP {r.status}")
        problem, result = self.echo.check_rpc(body)
        if problem:
            raise OpError(f"{method}: {problem}")
        return result

    async def unary(self) -> None:
        """SendMessage to echo: a completed task."""
        async with self.session.post(self.base, data=self.echo.send_body("SendMessage"), headers=V1) as r:
            body = await r.read()
        problem = f"HTTP {r.status}" if r.status != 200 else self.echo.check_task(body)[0]
        if problem:
            raise OpError(problem)

    async def stream(self) -> None:
        """SendStreamingMessage to echo, read to the end: it must end with a completed status."""
        body = self.echo.send_body("SendStreamingMessage")
        async with self.session.post(self.base, data=body, headers=V1) as r:
            if r.status != 200:
                raise OpError(f"HTTP {r.status}")
            final = False
            async for event, data in loadgen.sse_events(r.content.iter_any()):
                problem, result = ("SSE error event", None) if event == "error" else self.echo.check_rpc(data)
                if problem:
                    raise OpError(problem)
                final = final or self.echo.is_final(result)
        if not final:
            raise OpError("stream ended without a completed status")

    async def first_turn(self, text: str) -> dict[str, Any]:
        """Start an interviewer task; it must be waiting for input."""
        result = await self.call("interviewer", "SendMessage", {"message": message(text)})
        task = result.get("task") if isinstance(result, dict) else None
        state = ((task or {}).get("status") or {}).get("state")
        if state != "TASK_STATE_INPUT_REQUIRED":
            raise OpError(f"first turn: {state or 'not a task'}")
        return task

    async def multiturn(self) -> None:
        """An interviewer conversation: the question (input-required), then the answer, which completes it."""
        task = await self.first_turn("I want to learn Rust")
        result = await self.call("interviewer", "SendMessage", {"message": message(
            "because it is fast", taskId=task["id"], contextId=task["contextId"])})
        state = (((result or {}).get("task") or {}).get("status") or {}).get("state")
        if state != "TASK_STATE_COMPLETED":
            raise OpError(f"second turn: {state or 'not a task'}")

    async def cancel(self) -> None:
        """CancelTask on an interviewer task waiting for input: it must end canceled."""
        task = await self.first_turn("cancel me")
        result = await self.call("interviewer", "CancelTask", {"id": task["id"]})
        state = ((result or {}).get("status") or {}).get("state")
        if state != "TASK_STATE_CANCELED":
            raise OpError(f"CancelTask: {state or 'not a task'}")


# ----------------------------------------------------------------------------- bookkeeping


@dataclass
class Window:
    """Outcomes of the operations that ended during one report period."""

    started: int = 0
    lag_max: float = 0.0  # how late the generator started an operation (s): the client keeping up or not
    ops: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    samples: dict[str, str] = field(default_factory=dict)
    latency: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})

    def record(self, kind: str, seconds: float, problem: str | None) -> None:
        self.ops[kind] += 1
        if problem is None:
            self.latency[kind].append(seconds)
        else:
            self.errors[kind] += 1
            self.samples.setdefault(kind, problem)


@dataclass
class Soak:
    """One run: the schedule, the in-flight operations, the current window and the closed ones."""

    args: argparse.Namespace
    ops: Ops
    server: Any
    db: Path
    start: float = 0.0
    window: Window = field(default_factory=Window)
    windows: list[dict[str, Any]] = field(default_factory=list)
    in_flight: set[asyncio.Task] = field(default_factory=set)
    all_latency: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    error_messages: Counter = field(default_factory=Counter)

    async def run_op(self, kind: str, due: float) -> None:
        """One operation; its latency counts from `due`, the scheduled start."""
        problem = None
        try:
            async with asyncio.timeout(self.args.timeout):
                await getattr(self.ops, kind)()
        except OpError as exc:
            problem = str(exc)
        except TimeoutError:
            problem = f"timeout ({self.args.timeout:g} s)"
        except Exception as exc:  # noqa: BLE001 - any failure is this operation's error
            problem = f"{type(exc).__name__}: {exc}"[:200]
        seconds = time.perf_counter() - due
        self.window.record(kind, seconds, problem)
        if problem is None:
            self.all_latency[kind].append(seconds)
        elif len(self.error_messages) < 50 or f"{kind}: {problem}" in self.error_messages:
            self.error_messages[f"{kind}: {problem}"] += 1

    async def generate(self, end: float, kinds: list[str], weights: list[float]) -> None:
        """Start operations on a fixed schedule until `end` (open loop: never waits for earlier ones)."""
        rng = random.Random(self.args.seed)
        i = 0
        while (due := self.start + i / self.args.rate) < end:
            await asyncio.sleep(max(0.0, due - time.perf_counter()))  # pacing
            kind = rng.choices(kinds, weights)[0]
            i += 1
            self.window.started += 1
            self.window.lag_max = max(self.window.lag_max, time.perf_counter() - due)
            if len(self.in_flight) >= self.args.max_in_flight:
                self.window.record(kind, 0.0, f"not started: {self.args.max_in_flight} operations in flight")
                continue
            task = asyncio.ensure_future(self.run_op(kind, due))
            self.in_flight.add(task)
            task.add_done_callback(self.in_flight.discard)

    def close_window(self, k: int) -> dict[str, Any]:
        """Record the current window with a server and disk sample, print its line, start a new one."""
        w, self.window = self.window, Window()
        server, disk = proc_sample(self.server.pid), db_sizes(self.db)
        row = {"window": k, "t_s": round(time.perf_counter() - self.start, 1), "started": w.started,
               "start_lag_max_ms": round(w.lag_max * 1000, 1), "in_flight": len(self.in_flight),
               "ops": dict(w.ops), "errors": dict(w.errors), "error_samples": w.samples,
               "p50_ms": {k2: ms(w.latency[k2], 50) for k2 in KINDS},
               "p99_ms": {k2: ms(w.latency[k2], 99) for k2 in KINDS},
               **server, **disk, "loadavg1": os.getloadavg()[0]}
        self.windows.append(row)
        if row["rss_kib"] is None:  # /proc has no such process: the server is gone, and the soak with it
            code = self.server.proc.poll()
            raise SystemExit(f"the server (pid {self.server.pid}) is gone (exit code {code}) in window {k}; "
                             f"errors so far: {dict(w.errors)}")
        print(window_line(row), flush=True)
        return row

    async def report(self, end: float, generator: asyncio.Future) -> None:
        """Close a window every --period s; the last one after the schedule ended and the stragglers finished."""
        k = 0
        while True:
            k += 1
            tick = min(self.start + k * self.args.period, end)
            await asyncio.sleep(max(0.0, tick - time.perf_counter()))  # the report period
            if tick >= end:
                await generator
                while self.in_flight:  # the operations still running when the schedule ended (bounded by --timeout)
                    await asyncio.wait(set(self.in_flight))
                self.close_window(k)
                return
            self.close_window(k)


def ms(values: list[float], q: float) -> float | None:
    """The q-th percentile (nearest rank) of seconds, in ms."""
    p = loadgen.percentile(sorted(values), q)
    return round(p * 1000, 2) if p is not None else None


def window_line(row: dict[str, Any]) -> str:
    """One window, one line."""
    ops = " ".join(f"{k} {row['ops'].get(k, 0)}" for k in KINDS)
    errs = sum(row["errors"].values())
    p99 = " ".join(f"{k[0]} {fmt(row['p99_ms'][k], 1)}" for k in KINDS)
    sample = f" e.g. {next(iter(row['error_samples'].items()))}" if row["error_samples"] else ""
    return (f"[{row['window']:3d}] t={row['t_s']:7.1f}s ops {sum(row['ops'].values()):6d} ({ops}) err {errs}{sample} | "
            f"p99 ms {p99} | RSS {row['rss_kib'] / 1024:.1f} MiB fds {row['fds']} | db {row['db'] / 2**20:.1f} "
            f"+ wal {row['wal'] / 2**20:.1f} MiB | lag max {row['start_lag_max_ms']} ms, in flight {row['in_flight']}")


# ----------------------------------------------------------------------------- report


def parse_mix(text: str) -> dict[str, float]:
    """"unary=60,stream=25,..." -> weights by kind (kinds left out get 0)."""
    mix: dict[str, float] = {}
    for item in text.split(","):
        kind, _, weight = item.partition("=")
        if kind.strip() not in KINDS or not weight:
            raise ValueError(f"--mix: {item!r} is not KIND=WEIGHT with KIND one of {', '.join(KINDS)}")
        mix[kind.strip()] = float(weight)
    if sum(mix.values()) <= 0:
        raise ValueError("--mix: the weights add up to 0")
    return mix


def summary(soak: Soak, env: dict[str, Any], stamp: str, mix: dict[str, float], elapsed: float) -> dict[str, Any]:
    """Totals, errors, per-window p99 ranges, RSS and disk first vs last."""
    rows = soak.windows
    totals = Counter()
    errors = Counter()
    for r in rows:
        totals.update(r["ops"])
        errors.update(r["errors"])
    p99_range = {k: [v for v in (r["p99_ms"][k] for r in rows) if v is not None] for k in KINDS}
    first, last = rows[0], rows[-1]
    return {
        "stamp": stamp, "elapsed_s": round(elapsed, 1), "ops": dict(totals), "errors": dict(errors),
        "http_requests": sum(REQUESTS_PER_OP[k] * n for k, n in totals.items()),
        "p50_ms": {k: ms(soak.all_latency[k], 50) for k in KINDS},
        "p99_ms": {k: ms(soak.all_latency[k], 99) for k in KINDS},
        "p99_per_window_ms": {k: {"min": min(v), "max": max(v)} if v else None for k, v in p99_range.items()},
        "rss_kib": {"first": first["rss_kib"], "last": last["rss_kib"], "max": max(r["rss_kib"] or 0 for r in rows)},
        "fds": {"first": first["fds"], "last": last["fds"], "max": max(r["fds"] or 0 for r in rows)},
        "disk": {"first": first["db"] + first["wal"], "last": last["db"] + last["wal"],
                 "db_last": last["db"], "wal_last": last["wal"], "wal_max": max(r["wal"] for r in rows)},
        "start_lag_max_ms": max(r["start_lag_max_ms"] for r in rows),
        "error_messages": dict(soak.error_messages.most_common(10)), "mix": mix,
    }


def markdown(s: dict[str, Any], args: argparse.Namespace, env: dict[str, Any], command: str) -> str:
    """The summary as a Markdown snippet for bench/RESULTS.md."""
    period = "minute" if args.period == 60 else f"{args.period:g} s window"
    total_ops, total_err = sum(s["ops"].values()), sum(s["errors"].values())
    lines = [
        (f"Soak run {s['stamp']} ({s['elapsed_s'] / 60:.1f} min, `{command}`): {args.rate:g} operations/s open loop "
         f"({', '.join(f'{k} {w:g}' for k, w in s['mix'].items())}), one `parley serve` on SQLite; {env['nproc']} cores "
         f"({env['cpu_model']}), load average {' '.join(f'{x:.2f}' for x in env['loadavg_start'])} before, "
         f"{' '.join(f'{x:.2f}' for x in env['loadavg_end'])} after; Parley at {env['git'].get('commit', '?')[:10]}"
         f"{' (src modified)' if env['git'].get('dirty_src') else ''}."),
        "",
        f"| kind | operations | errors | p50 ms | p99 ms | p99 per {period}: min / max |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for k in KINDS:
        rng = s["p99_per_window_ms"][k]
        lines.append(f"| {k} | {s['ops'].get(k, 0):,} | {s['errors'].get(k, 0):,} | {fmt(s['p50_ms'][k], 2)} | "
                     f"{fmt(s['p99_ms'][k], 2)} | {fmt(rng['min'], 2) if rng else '–'} / "
                     f"{fmt(rng['max'], 2) if rng else '–'} |")
    lines.append(f"| all | {total_ops:,} ({s['http_requests']:,} HTTP requests) | {total_err:,} | | | |")
    rss, fds, disk = s["rss_kib"], s["fds"], s["disk"]
    growth = (rss["last"] - rss["first"]) / rss["first"] * 100 if rss["first"] else 0.0
    lines += [
        "",
        (f"- server RSS: first {period} {rss['first'] / 1024:.1f} MiB, last {rss['last'] / 1024:.1f} MiB "
         f"({growth:+.1f}%), max {rss['max'] / 1024:.1f} MiB; fds {fds['first']} -> {fds['last']} (max {fds['max']})"),
        (f"- disk (db + wal): first {period} {disk['first'] / 2**20:.1f} MiB, last {disk['last'] / 2**20:.1f} MiB "
         f"(db {disk['db_last'] / 2**20:.1f} + wal {disk['wal_last'] / 2**20:.1f}; largest wal "
         f"{disk['wal_max'] / 2**20:.1f} MiB)"),
        f"- the generator started operations at most {s['start_lag_max_ms']} ms late",
    ]
    if s["error_messages"]:
        lines.append("- errors: " + "; ".join(f"{msg} ({n})" for msg, n in s["error_messages"].items()))
    return "\n".join(lines)


def window_table(rows: list[dict[str, Any]]) -> str:
    """Every window as a Markdown table row."""
    out = ["| window | t s | ops | errors | " + " | ".join(f"p99 {k} ms" for k in KINDS)
           + " | RSS MiB | fds | db MiB | wal MiB |", "|" + "---:|" * (9 + len(KINDS) - 1)]
    for r in rows:
        out.append(f"| {r['window']} | {r['t_s']} | {sum(r['ops'].values())} | {sum(r['errors'].values())} | "
                   + " | ".join(fmt(r["p99_ms"][k], 1) for k in KINDS)
                   + f" | {r['rss_kib'] / 1024:.1f} | {r['fds']} | {r['db'] / 2**20:.1f} | {r['wal'] / 2**20:.1f} |")
    return "\n".join(out)


# ----------------------------------------------------------------------------- main


async def soak_run(args: argparse.Namespace, server: Any, db: Path, mix: dict[str, float]) -> Soak:
    """The generator and the reporter against `server` for --seconds."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=args.connections, limit_per_host=args.connections)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as session:
        soak = Soak(args, Ops(session, server.url, args.text), server, db)
        soak.start = time.perf_counter()  # the clock of schedule and latencies (uvloop's loop.time() has ms steps)
        end = soak.start + args.seconds
        kinds = [k for k in KINDS if mix.get(k, 0) > 0]
        generator = asyncio.ensure_future(soak.generate(end, kinds, [mix[k] for k in kinds]))
        await soak.report(end, generator)
    return soak


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--seconds", type=float, default=None, help="the run's length in seconds (instead of --minutes)")
    ap.add_argument("--rate", type=float, default=50.0, help="operations started per second (open loop)")
    ap.add_argument("--mix", default=DEFAULT_MIX, help=f"KIND=WEIGHT,... of {', '.join(KINDS)} (default {DEFAULT_MIX})")
    ap.add_argument("--period", type=float, default=60.0, help="seconds per report line (a window)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds one operation may take (then an error)")
    ap.add_argument("--max-in-flight", type=int, default=2000,
                    help="operations running at once; one due beyond it is not started and counts as an error")
    ap.add_argument("--connections", type=int, default=64, help="the client's connection pool")
    ap.add_argument("--text", default=loadgen.DEFAULT_TEXT, help="the echo message")
    ap.add_argument("--seed", type=int, default=1, help="the RNG drawing each operation's kind")
    ap.add_argument("--config", type=Path, default=None,
                    help="a parley.toml for the server (with `[server] builtin_agents = true`: the soak needs echo "
                         "and interviewer), e.g. bench/soak-retention.toml")
    args = ap.parse_args(argv)
    if args.seconds is None:
        args.seconds = args.minutes * 60
    if args.seconds <= 0 or args.rate <= 0 or args.period <= 0:
        ap.error("--seconds/--minutes, --rate and --period must be positive")
    try:
        args.mix_weights = parse_mix(args.mix)
    except ValueError as exc:
        ap.error(str(exc))
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        raise SystemExit("needs aiohttp: pip install -e '.[bench]'") from None
    raise_fd_limit()
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    tmp = Path(tempfile.mkdtemp(prefix="parley-soak-"))
    env = machine_info()
    command = shlex.join([Path(sys.executable).name, *sys.argv])
    mix = args.mix_weights
    total = sum(mix.values())
    print(f"# soak {stamp}: {args.seconds:g} s at {args.rate:g} ops/s ("
          f"{', '.join(f'{k} {w / total:.0%}' for k, w in mix.items())}); {env['nproc']} cores, {env['cpu_model']}, "
          f"load {env['loadavg_start']}; server in {tmp}", flush=True)
    server = start_parley("soak", tmp, config=args.config)
    runner = asyncio.run
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        pass
    t0 = time.time()
    try:
        soak = runner(soak_run(args, server, tmp / "r.db", mix))
    finally:
        server.stop()
    env["loadavg_end"] = os.getloadavg()
    s = summary(soak, env, stamp, mix, time.time() - t0)
    md = markdown(s, args, env, command)
    print("\n" + md)
    config = {k: v for k, v in vars(args).items()}
    (OUT / f"soak-{stamp}.json").write_text(json.dumps(
        {"stamp": stamp, "command": command, "config": config, "environment": env, "server": server.cmd,
         "summary": s, "windows": soak.windows}, indent=2, default=str))
    (OUT / f"soak-{stamp}.md").write_text(md + "\n\n" + window_table(soak.windows) + "\n")
    print(f"\nraw results: {OUT / f'soak-{stamp}.json'} (per-window table: soak-{stamp}.md)")


if __name__ == "__main__":
    main()
