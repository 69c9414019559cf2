#!/usr/bin/env python3
"""The speed targets of "Durable at in-memory speed", checked against baselines measured in the same run.

    python bench/targets.py                  # 3 rounds, 5 s per measurement
    python bench/targets.py --quick          # a smoke test: 1 round, 2 s per measurement

Servers (each started once, pinned to CPU 0 with taskset; the load generator runs on CPU 1):

  sqlite  `parley serve --db <tmp>/t.db`: Parley with its default (SQLite) store
  memory  `parley serve --memory`
  sdk     bench/sdk_echo_server.py: the official a2a-sdk server with an echo agent
  floor   bench/floor_server.py: a bare ASGI app that returns a completed task (unary only)
  js      bench/js/echo_server.mjs: the @a2a-js/sdk server (Node) with the same echo agent, tasks in memory
  pg      `parley serve --db postgresql://...?search_path=<schema> --bus postgres`: Parley on PostgreSQL
  sdk-pg  bench/sdk_cluster_server.py: a2a-sdk's cluster mode (VersionedDatabaseTaskStore) on PostgreSQL
  js-pg   bench/js/echo_server.mjs --db ...: @a2a-js/sdk's DatabaseTaskStore on PostgreSQL (its table made by the
          SDK's own `a2a-db upgrade`)

The PostgreSQL servers share --postgres (default postgresql://postgres@127.0.0.1:5432/test), each in a schema of
its own, dropped at the end; PostgreSQL itself is not pinned. The Node servers need `npm install` in bench/js.

Scenarios, at each concurrency (default 1, 8, 32, 128):

  unary   JSON-RPC SendMessage (A2A 1.0) with wrk -t1 and the Lua script of bench/cluster_bench.py (a fresh
          messageId per request; an answer that is not HTTP 200 with TASK_STATE_COMPLETED counts as an error)
  stream  SendStreamingMessage with bench/loadgen.py --scenario stream (each SSE stream read to its end)

Each measurement follows a short unrecorded warm-up. In every round each (scenario, concurrency) runs on every
server, and the order of the servers rotates. Tables show the median over rounds. The generator's CPU use is
recorded; a run where it used >= 90% of its core is flagged, since there the generator may have set the pace.

Targets (those the chosen servers can decide): Parley-SQLite unary and stream throughput >= 6x the SDK's;
Parley-SQLite p50 and p99 below the SDK's at every concurrency; Parley-memory unary throughput >= 50% of the
floor's (issue 10); Parley-SQLite >= 2x @a2a-js/sdk in memory with lower p50 and p99; Parley on PostgreSQL >= 3x
a2a-sdk's cluster store and @a2a-js/sdk's DatabaseTaskStore on the same PostgreSQL (issue 25).

Raw results go to bench/out/targets-<UTC>.json and the tables to bench/out/targets-<UTC>.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cluster_bench import pg, with_schema, wrk_script
from compare import OUT, ServerProc, environment, fmt, free_port, get, median_of
from loadgen import process_cpu

SERVER_CPU, GEN_CPU = 0, 1
SERVERS = ("sqlite", "memory", "sdk", "floor", "js", "pg", "sdk-pg", "js-pg")
DEFAULT_SERVERS = ("sqlite", "memory", "sdk", "floor")
LABEL = {"sqlite": "Parley SQLite", "memory": "Parley memory", "sdk": "a2a-sdk", "floor": "floor",
         "js": "@a2a-js/sdk", "pg": "Parley PostgreSQL", "sdk-pg": "a2a-sdk PostgreSQL",
         "js-pg": "@a2a-js/sdk PostgreSQL"}
JS = HERE / "js"
SCENARIOS = ("unary", "stream")
GEN_BUSY = 0.9  # generator cores at or above which a run is flagged as possibly generator-bound
V1 = {"Content-Type": "application/json", "A2A-Version": "1.0"}


# ----------------------------------------------------------------------------- servers


class Server(ServerProc):
    """compare.ServerProc made ready by a SendMessage that comes back as a completed task (the floor has no
    agent card to poll)."""

    def start(self) -> None:
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(self.cmd, stdout=self._log, stderr=subprocess.STDOUT, cwd=HERE.parent,
                                     env={**os.environ, **self.env})
        deadline = time.time() + 30
        problem = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited at start; see {self.log_path}")
            problem = send_problem(self.url)
            if problem is None:
                return
            time.sleep(0.2)  # polling a starting process, with a deadline
        raise SystemExit(f"{self.name} not ready within 30 s ({problem}); see {self.log_path}")


def send_problem(url: str) -> str | None:
    """POST one SendMessage to `url`: None if the answer is a completed task, else what is wrong."""
    message = {"role": "ROLE_USER", "parts": [{"text": "ready?"}], "messageId": str(uuid.uuid4())}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}})
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body.encode(), V1), timeout=2) as r:
            answer = json.loads(r.read())
    except (OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    state = get(answer, "result.task.status.state") if isinstance(answer, dict) else None
    return None if state == "TASK_STATE_COMPLETED" else f"not a completed task: {str(answer)[:300]}"


def server_cmd(name: str, port: int, tmp: Path, schemas: Schemas) -> list[str]:
    """The command line of server `name`, pinned to SERVER_CPU (a PostgreSQL server's schema made first)."""
    parley = str(Path(sys.executable).parent / "parley")
    common = ["--port", str(port), "--log-level", "warning"]
    if name == "pg":
        return ["taskset", "-c", str(SERVER_CPU), parley, "serve", "--db",
                with_schema(schemas.postgres, schemas.make("parley")), "--bus", "postgres", *common]
    if name == "sdk-pg":
        return ["taskset", "-c", str(SERVER_CPU), sys.executable, str(HERE / "sdk_cluster_server.py"), "--port",
                str(port), "--db", schemas.postgres, "--schema", schemas.make("sdk")]
    if name in ("js", "js-pg"):
        db = []
        if name == "js-pg":
            url = schemas.database("js")  # a database of its own: kysely's migrator finds its tables in any schema
            subprocess.run(["npx", "a2a-db", "upgrade", "--url", url, "--store", "tasks"], cwd=JS, check=True,
                           capture_output=True)  # the SDK's own migration tool makes its table
            db = ["--db", url]
        return ["taskset", "-c", str(SERVER_CPU), "node", str(JS / "echo_server.mjs"), "--port", str(port), *db]
    cmd = {
        "sqlite": [parley, "serve", "--db", str(tmp / "t.db"), *common],
        "memory": [parley, "serve", "--memory", *common],
        "sdk": [sys.executable, str(HERE / "sdk_echo_server.py"), *common],
        "floor": [sys.executable, str(HERE / "floor_server.py"), *common],
    }[name]
    return ["taskset", "-c", str(SERVER_CPU), *cmd]


class Schemas:
    """The PostgreSQL schemas (and databases) this run made, one per server, dropped at the end."""

    def __init__(self, postgres: str) -> None:
        self.postgres = postgres
        self.made: list[str] = []
        self.databases: list[str] = []

    def database(self, label: str) -> str:
        """A new database; its URL (the server's, another database name)."""
        name = f"targets_{label}_{uuid.uuid4().hex[:8]}"
        pg(self.postgres, f'CREATE DATABASE "{name}"')
        self.databases.append(name)
        base, _, query = self.postgres.partition("?")
        return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")

    def make(self, label: str) -> str:
        name = f"targets_{label}_{uuid.uuid4().hex[:8]}"
        pg(self.postgres, f'CREATE SCHEMA "{name}"')
        self.made.append(name)
        return name

    def drop(self) -> None:
        for name in self.made:
            with contextlib.suppress(Exception):
                pg(self.postgres, f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        for name in self.databases:
            with contextlib.suppress(Exception):
                pg(self.postgres, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def make_servers(names: list[str], tmp: Path, schemas: Schemas) -> dict[str, Server]:
    out = {}
    for name in names:
        port = free_port()
        env = {"PARLEY_KEY_PEPPER": uuid.uuid4().hex} if name == "pg" else None  # needed on PostgreSQL
        out[name] = Server(name, server_cmd(name, port, tmp, schemas), port, tmp / f"{name}.log", env=env)
    return out


# ----------------------------------------------------------------------------- measurements


def run_wrk(server: Server, script: Path, concurrency: int, seconds: int) -> dict[str, Any]:
    """Unary SendMessage with wrk on GEN_CPU; the generator's CPU is wrk's rusage (the only child that exits)."""
    cmd = ["taskset", "-c", str(GEN_CPU), "wrk", "-t1", f"-c{concurrency}", f"-d{seconds}s", "--timeout", "30s",
           "-s", str(script), server.url, "--", uuid.uuid4().hex[:12]]
    ru0, s0 = resource.getrusage(resource.RUSAGE_CHILDREN), process_cpu(server.pid)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=False)
    ru1, s1 = resource.getrusage(resource.RUSAGE_CHILDREN), process_cpu(server.pid)
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if res.returncode != 0 or line is None:
        return {"failed": True, "stdout": res.stdout[-1500:], "stderr": res.stderr[-1500:], "cmd": shlex.join(cmd)}
    w = json.loads(line.removeprefix("WRKJSON "))
    elapsed = w["duration_us"] / 1e6
    gen_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return {
        "rps": round(w["requests"] / elapsed, 1),
        "requests": w["requests"],
        "errors": w["bad"] + w["err_connect"] + w["err_read"] + w["err_write"] + w["err_timeout"],
        "latency_ms": {k: round(w[f"{k}_us"] / 1000, 3) for k in ("p50", "p90", "p99", "max")},
        "gen_cores": round(gen_cpu / elapsed, 3),
        "server_cores": round((s1 - s0) / elapsed, 3) if s0 is not None and s1 is not None else None,
        "wrk": w,
        "cmd": shlex.join(cmd),
    }


def run_stream(server: Server, concurrency: int, seconds: int, warmup: int) -> dict[str, Any]:
    """SendStreamingMessage with bench/loadgen.py on GEN_CPU; CPU figures are loadgen's, over its measured phase."""
    cmd = ["taskset", "-c", str(GEN_CPU), sys.executable, str(HERE / "loadgen.py"), server.url, "--scenario", "stream",
           "--protocol", "1.0", "-c", str(concurrency), "-d", str(seconds), "--warmup", str(warmup),
           "--server-pid", str(server.pid), "--compact"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + warmup + 120, check=False)
    if res.returncode != 0:
        return {"failed": True, "stderr": res.stderr[-2000:], "cmd": shlex.join(cmd)}
    out = json.loads(res.stdout)
    return {
        "rps": out["rps"],
        "requests": out["requests"],
        "errors": out["errors"],
        "error_samples": out.get("error_samples"),
        "latency_ms": out["latency_ms"],
        "gen_cores": out["client_cpu_util"],
        "server_cores": out.get("server_cpu_util"),
        "loadgen": out,
        "cmd": shlex.join(cmd),
    }


def measure(server: Server, scenario: str, concurrency: int, args: argparse.Namespace, script: Path) -> dict:
    """One measurement after an unrecorded warm-up of --warmup seconds at the same concurrency."""
    if scenario == "stream":
        return run_stream(server, concurrency, args.duration, args.warmup)
    if args.warmup > 0:
        run_wrk(server, script, concurrency, args.warmup)
    return run_wrk(server, script, concurrency, args.duration)


def make_plan(args: argparse.Namespace) -> list[tuple[int, str, int, list[str]]]:
    """(round, scenario, concurrency, servers in the order they run); the order rotates at every step."""
    plan, step = [], 0
    for rnd in range(args.rounds):
        for scenario in args.scenarios:
            names = [s for s in args.servers if not (scenario == "stream" and s == "floor")]
            for c in args.concurrency:
                shift = (rnd + step) % len(names)
                plan.append((rnd, scenario, c, names[shift:] + names[:shift]))
                step += 1
    return plan


def estimate_s(plan: list[tuple[int, str, int, list[str]]], args: argparse.Namespace) -> float:
    """Rough wall time of the plan: each measurement plus its warm-up plus about a second of process start-up."""
    return sum(len(names) for *_, names in plan) * (args.duration + args.warmup + 1.0)


# ----------------------------------------------------------------------------- summary


def summarise(runs: list[dict]) -> dict[str, Any]:
    """Medians over the rounds of one (scenario, concurrency, server)."""
    ok = [r for r in runs if not r.get("failed")]
    gen = [r["gen_cores"] for r in ok if r.get("gen_cores") is not None]
    return {
        "rounds": len(runs),
        "failed_runs": len(runs) - len(ok),
        "errors": sum(r["errors"] for r in ok),
        "rps": median_of(ok, "rps"),
        "p50_ms": median_of(ok, "latency_ms.p50"),
        "p99_ms": median_of(ok, "latency_ms.p99"),
        "rps_all": [r["rps"] for r in ok],
        "server_cores": median_of(ok, "server_cores"),
        "gen_cores": statistics.median(gen) if gen else None,
        "gen_cores_max": max(gen) if gen else None,
    }


def key(scenario: str, concurrency: int, server: str) -> str:
    return f"{scenario}/c{concurrency}/{server}"


def suspect(s: dict | None) -> list[str]:
    """Why a summary's numbers are in doubt: errors, failed runs, a saturated generator."""
    if s is None:
        return ["not measured"]
    out = []
    if s["errors"]:
        out.append(f"{s['errors']} errors")
    if s["failed_runs"]:
        out.append(f"{s['failed_runs']} failed runs")
    if (s["gen_cores_max"] or 0) >= GEN_BUSY:
        out.append(f"generator at {s['gen_cores_max']:.2f} cores")
    return out


def check(summary: dict, scenario: str, concurrency: list[int], a: str, b: str,
          test: Callable[[dict, dict], bool], show: Callable[[dict, dict], str]) -> dict[str, Any]:
    """Whether test(summary of a, summary of b) holds at every concurrency, with the per-concurrency values."""
    parts, results, doubts = [], [], []
    for c in concurrency:
        sa, sb = summary.get(key(scenario, c, a)), summary.get(key(scenario, c, b))
        ok = test(sa, sb) if sa and sb and sa["rps"] and sb["rps"] else None
        results.append(ok)
        parts.append(f"c={c}: {show(sa, sb) if ok is not None else '–'} {mark(ok)}")
        doubts += [f"{LABEL[n]} c={c}: {d}" for n, s in ((a, sa), (b, sb)) for d in suspect(s)]
    holds = None if None in results else all(results)
    return {"holds": holds, "detail": "; ".join(parts), "doubts": doubts}


def mark(ok: bool | None) -> str:
    return "–" if ok is None else ("✓" if ok else "✗")


def targets(summary: dict, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The issue's targets that this run's servers and scenarios can decide."""
    out = []
    have = set(args.servers)

    def rps_ratio(sa: dict, sb: dict) -> str:
        return f"{sa['rps'] / sb['rps']:.2f}x"

    def lat(sa: dict, sb: dict) -> str:
        return f"p50 {sa['p50_ms']:.2f}/{sb['p50_ms']:.2f}, p99 {sa['p99_ms']:.2f}/{sb['p99_ms']:.2f} ms"

    for sc in args.scenarios:
        if {"sqlite", "sdk"} <= have:
            out.append({"target": f"{sc}: Parley SQLite throughput >= 6x a2a-sdk",
                        **check(summary, sc, args.concurrency, "sqlite", "sdk",
                                lambda a, b: a["rps"] >= 6 * b["rps"], rps_ratio)})
            out.append({"target": f"{sc}: Parley SQLite p50 and p99 below a2a-sdk's (SQLite/SDK)",
                        **check(summary, sc, args.concurrency, "sqlite", "sdk",
                                lambda a, b: a["p50_ms"] < b["p50_ms"] and a["p99_ms"] < b["p99_ms"], lat)})
    if "unary" in args.scenarios and {"memory", "floor"} <= have:
        out.append({"target": "unary: Parley memory throughput >= 50% of the floor",
                    **check(summary, "unary", args.concurrency, "memory", "floor",
                            lambda a, b: a["rps"] >= 0.5 * b["rps"], rps_ratio)})
    for sc in args.scenarios:
        if {"sqlite", "js"} <= have:
            out.append({"target": f"{sc}: Parley SQLite throughput >= 2x @a2a-js/sdk in memory",
                        **check(summary, sc, args.concurrency, "sqlite", "js",
                                lambda a, b: a["rps"] >= 2 * b["rps"], rps_ratio)})
            out.append({"target": f"{sc}: Parley SQLite p50 and p99 below @a2a-js/sdk's (SQLite/js)",
                        **check(summary, sc, args.concurrency, "sqlite", "js",
                                lambda a, b: a["p50_ms"] < b["p50_ms"] and a["p99_ms"] < b["p99_ms"], lat)})
        for peer in ("sdk-pg", "js-pg"):
            if {"pg", peer} <= have:
                out.append({"target": f"{sc}: Parley PostgreSQL throughput >= 3x {LABEL[peer]}",
                            **check(summary, sc, args.concurrency, "pg", peer,
                                    lambda a, b: a["rps"] >= 3 * b["rps"], rps_ratio)})
    return out


# ----------------------------------------------------------------------------- report


def results_table(summary: dict, args: argparse.Namespace) -> str:
    lines = ["| scenario | c | server | req/s | per round | p50 ms | p99 ms | server cores | generator cores | errors |",
             "|---|---:|---|---:|---|---:|---:|---:|---:|---:|"]
    for sc in args.scenarios:
        for c in args.concurrency:
            for name in args.servers:
                s = summary.get(key(sc, c, name))
                if s is None:
                    continue
                gen = fmt(s["gen_cores"], 2) + (" ⚠" if (s["gen_cores_max"] or 0) >= GEN_BUSY else "")
                errs = f"{s['errors']}" + (" ⚠" if s["errors"] else "")
                errs += f" ({s['failed_runs']} failed)" if s["failed_runs"] else ""
                lines.append(f"| {sc} | {c} | {LABEL[name]} | {fmt(s['rps'], 0)} | "
                             f"{', '.join(fmt(x, 0) for x in s['rps_all'])} | {fmt(s['p50_ms'], 2)} | "
                             f"{fmt(s['p99_ms'], 2)} | {fmt(s['server_cores'], 2)} | {gen} | {errs} |")
    return "\n".join(lines)


def ratio(summary: dict, sc: str, c: int, a: str, b: str, metric: str = "rps") -> float | None:
    sa, sb = summary.get(key(sc, c, a)), summary.get(key(sc, c, b))
    return sa[metric] / sb[metric] if sa and sb and sa[metric] and sb[metric] else None


def ratios_table(summary: dict, args: argparse.Namespace) -> str:
    """Throughput ratios and latency comparisons per scenario and concurrency (✓: the target holds there)."""
    lines = [("| scenario | c | SQLite/SDK req/s (>= 6x) | memory/SDK req/s | memory/floor req/s (>= 0.5) | "
             "SQLite/SDK p50 (< 1) | SQLite/SDK p99 (< 1) |"), "|---|---:|---:|---:|---:|---:|---:|"]

    def cell(v: float | None, ok: bool | None = None) -> str:
        return "–" if v is None else f"{v:.2f}" + ("" if ok is None else f" {mark(ok)}")

    for sc in args.scenarios:
        for c in args.concurrency:
            qs, ms = ratio(summary, sc, c, "sqlite", "sdk"), ratio(summary, sc, c, "memory", "sdk")
            mf = ratio(summary, sc, c, "memory", "floor") if sc == "unary" else None
            p50, p99 = (ratio(summary, sc, c, "sqlite", "sdk", m) for m in ("p50_ms", "p99_ms"))
            lines.append(f"| {sc} | {c} | {cell(qs, qs is not None and qs >= 6)} | {cell(ms)} | "
                         f"{cell(mf, mf is not None and mf >= 0.5)} | {cell(p50, p50 is not None and p50 < 1)} | "
                         f"{cell(p99, p99 is not None and p99 < 1)} |")
    return "\n".join(lines)


def verdict_lines(checks: list[dict]) -> list[str]:
    out = []
    for t in checks:
        word = {True: "MET", False: "NOT MET", None: "UNDECIDED"}[t["holds"]]
        doubt = f" [in doubt: {', '.join(t['doubts'])}]" if t["doubts"] else ""
        out.append(f"{t['target']}: {word} ({t['detail']}){doubt}")
    return out


def report(summary: dict, checks: list[dict], args: argparse.Namespace, env: dict, stamp: str,
           elapsed: float, errors: bool) -> str:
    head = (f"Run {stamp} ({elapsed:.0f} s){' — SMOKE TEST (--quick), not a measurement' if args.quick else ''}"
            f"{' — RUN HAD ERRORS' if errors else ''}: {args.rounds} round(s), {args.duration} s per measurement "
            f"after {args.warmup} s warm-up, median over rounds; servers on CPU {SERVER_CPU}, generator on CPU "
            f"{GEN_CPU}; {env['nproc']} cores ({env['cpu_model']}); load average "
            f"{' '.join(f'{x:.2f}' for x in env['loadavg_start'])} before, "
            f"{' '.join(f'{x:.2f}' for x in env['loadavg_end'])} after; Parley at {env['git'].get('commit', '?')[:10]}"
            f"{' (src modified)' if env['git'].get('dirty_src') else ''}, a2a-sdk {env['packages'].get('a2a-sdk')}.")
    return "\n".join([head, "", results_table(summary, args), "", ratios_table(summary, args), "",
                      *[f"- {line}" for line in verdict_lines(checks)],
                      (f"- legend (where a cell shows ⚠): generator used >= {GEN_BUSY:.0%} of its core in a round (it may have set the pace); "
                      "errors: answers that were not HTTP 200 with a completed task, or failed requests")])


# ----------------------------------------------------------------------------- main


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5, help="seconds per measurement (whole seconds: wrk)")
    ap.add_argument("--warmup", type=int, default=1, help="unrecorded seconds before each measurement")
    ap.add_argument("--concurrency", default="1,8,32,128", help="comma-separated requests in flight")
    ap.add_argument("--only", choices=SCENARIOS, default=None, help="one scenario only")
    ap.add_argument("--servers", default=",".join(DEFAULT_SERVERS), help=f"comma-separated, of {','.join(SERVERS)}")
    ap.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test",
                    help="the PostgreSQL of the pg, sdk-pg and js-pg servers")
    ap.add_argument("--quick", action="store_true", help="1 round, 2 s per measurement: a smoke test")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.duration = 1, 2
    args.concurrency = [int(c) for c in args.concurrency.split(",")]
    asked = args.servers.split(",")
    args.servers = [s for s in SERVERS if s in asked]  # canonical order
    unknown = set(asked) - set(SERVERS)
    if unknown or not args.servers:
        ap.error(f"--servers: unknown {', '.join(sorted(unknown)) or '(none given)'}; choose from {','.join(SERVERS)}")
    args.scenarios = [args.only] if args.only else list(SCENARIOS)
    if "unary" in args.scenarios and shutil.which("wrk") is None:
        ap.error("the unary scenario needs wrk (apt-get install -y wrk)")
    if not {SERVER_CPU, GEN_CPU} <= os.sched_getaffinity(0):
        ap.error(f"needs CPUs {SERVER_CPU} and {GEN_CPU} (this process may use {sorted(os.sched_getaffinity(0))})")
    return args


def machine() -> dict[str, Any]:
    """compare.environment() plus `uname -a` and the wrk version."""
    env = environment()
    env["uname"] = subprocess.run(["uname", "-a"], capture_output=True, text=True, check=False).stdout.strip()
    if shutil.which("wrk"):
        wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True, check=False)
        env["wrk"] = ((wrk.stdout or wrk.stderr).splitlines() or ["?"])[0]
    return env


def main() -> None:
    args = parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    tmp = Path(tempfile.mkdtemp(prefix="parley-targets-"))
    env = machine()
    plan = make_plan(args)
    print(f"# targets {stamp}: {len(plan)} steps, about {estimate_s(plan, args) / 60:.0f} min; {env['nproc']} cores, "
          f"{env['cpu_model']}, load average {env['loadavg_start'][0]:.2f}; logs in {tmp}", flush=True)
    schemas = Schemas(args.postgres)
    servers: dict[str, Server] = {}
    script = wrk_script(tmp)
    runs: list[dict] = []
    t0 = time.time()
    try:
        servers.update(make_servers(args.servers, tmp, schemas))
        for s in servers.values():
            s.start()
        for rnd, sc, c, order in plan:
            for name in order:
                r = measure(servers[name], sc, c, args, script)
                r.update(server=name, scenario=sc, concurrency=c, round=rnd, loadavg=os.getloadavg()[0])
                runs.append(r)
                print(f"  [{rnd}] {sc:6s} c={c:<3d} {LABEL[name]:13s} " + (
                    f"FAILED: {(r.get('stderr') or r.get('stdout') or '')[-300:]}" if r.get("failed") else
                    f"{r['rps']:>8.0f}/s p50={get(r, 'latency_ms.p50')} p99={get(r, 'latency_ms.p99')} ms "
                    f"err={r['errors']} server={r['server_cores']} gen={r['gen_cores']}"), flush=True)
        rss = {name: s.rss_mb() for name, s in servers.items()}
    finally:
        for s in servers.values():
            with contextlib.suppress(Exception):
                s.stop()
        for f in tmp.glob("t.db*"):  # the SQLite store can grow large; the logs stay
            f.unlink()
        schemas.drop()
    elapsed = time.time() - t0
    env["loadavg_end"] = os.getloadavg()
    summary = {key(sc, c, name): summarise(mine)
               for sc in args.scenarios for c in args.concurrency for name in args.servers
               if (mine := [r for r in runs if (r["scenario"], r["concurrency"], r["server"]) == (sc, c, name)])}
    checks = targets(summary, args)
    errors = any(r.get("failed") or r.get("errors") for r in runs)
    text = report(summary, checks, args, env, stamp, elapsed, errors)
    print()
    print(text)
    result = {"stamp": stamp, "command": shlex.join([Path(sys.executable).name, *sys.argv]), "config": vars(args),
              "smoke_test": args.quick, "had_errors": errors, "environment": env, "elapsed_s": round(elapsed, 1),
              "servers": {name: s.cmd for name, s in servers.items()}, "rss_mb_end": rss, "summary": summary,
              "targets": checks, "runs": runs, "logs": str(tmp)}
    (OUT / f"targets-{stamp}.json").write_text(json.dumps(result, indent=2, default=str))
    (OUT / f"targets-{stamp}.md").write_text(text + "\n")
    print(f"\nraw results: {OUT / f'targets-{stamp}.json'}")


if __name__ == "__main__":
    main()
