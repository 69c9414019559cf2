#!/usr/bin/env python3
"""Parley vs the official a2a-sdk server: same echo work, same uvicorn settings, same run.

    python bench/compare.py                      # the full comparison (~4-5 minutes)
    python bench/compare.py --quick              # a smoke run (~1 minute)

Starts both servers as separate subprocesses (uvicorn, one worker, same settings):

  parley   bench/parley_server.py: `default_app(db)` — the built-in echo agent over the
           SQLite store, in a fresh temp dir; JSON-RPC, REST and (with a gRPC port) gRPC
  a2a-sdk  bench/sdk_echo_server.py: a2a-sdk JSON-RPC and REST routes (v0.3 compat on),
           a gRPC GrpcHandler, DefaultRequestHandler, InMemoryTaskStore, an echo AgentExecutor

Both get a gRPC port when a gRPC scenario is selected (the full run); each scenario
uses the same binding on both servers.

warms both up, then runs every scenario against each server with bench/loadgen.py
(one subprocess per measurement), alternating which server goes first, repeated
--repeats times; the table shows the median of the repeats. Throughput ratios are
Parley/SDK, latency ratios SDK/Parley, so > 1 means Parley is better in both.

Raw results (every run, the environment, the command) go to bench/out/compare-<UTC>.json
and the table to bench/out/compare-<UTC>.md.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
SERVERS: tuple[str, ...] = ("parley", "sdk")  # + "before" with --baseline-src
LABEL = {"parley": "Parley", "sdk": "a2a-sdk", "before": "Parley before"}

# (name, loadgen scenario, protocol, binding)
SCENARIOS = [
    ("unary-1.0", "unary", "1.0", "jsonrpc"),
    ("unary-0.3", "unary", "0.3", "jsonrpc"),
    ("stream-1.0", "stream", "1.0", "jsonrpc"),
    ("stream-0.3", "stream", "0.3", "jsonrpc"),
    ("get-1.0", "get", "1.0", "jsonrpc"),
    ("card", "card", "0.3", "jsonrpc"),  # plain GET without an A2A-Version header
    ("unary-rest-1.0", "unary", "1.0", "rest"),  # POST {base}/message:send, A2A-Version: 1.0
    ("unary-rest-0.3", "unary", "0.3", "rest"),  # POST {base}/v1/message:send, 0.3 ProtoJSON
    ("unary-grpc-1.0", "unary", "1.0", "grpc"),  # lf.a2a.v1.A2AService/SendMessage, one channel
]
# Unloaded latency: one request in flight.
LATENCY_SCENARIOS = [
    ("unary-1.0@c1", "unary", "1.0", "jsonrpc"),
    ("stream-1.0@c1", "stream", "1.0", "jsonrpc"),
]
# Unary scenarios the verdict checks (throughput >= 3x and a lower p50), then streams (TTFE p50).
VERDICT = ("unary-1.0", "unary-0.3", "unary-rest-1.0", "unary-rest-0.3", "unary-grpc-1.0", "stream-1.0", "stream-0.3")
PACKAGES = [
    "parley",
    "a2a-sdk",
    "starlette",
    "uvicorn",
    "uvloop",
    "httptools",
    "msgspec",
    "sse-starlette",
    "protobuf",
    "pydantic",
    "aiohttp",
    "httpx",
    "grpcio",
]


# ----------------------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProc:
    def __init__(
        self,
        name: str,
        cmd: list[str],
        port: int,
        log: Path,
        env: dict[str, str] | None = None,
        grpc_port: int | None = None,
    ) -> None:
        self.name, self.cmd, self.port, self.log_path, self.env = name, cmd, port, log, env or {}
        self.url = f"http://127.0.0.1:{port}/"
        self.grpc_port = grpc_port
        self.grpc_target = f"127.0.0.1:{grpc_port}" if grpc_port else None
        self.proc: subprocess.Popen | None = None

    def target(self, binding: str) -> str:
        """What loadgen.py is pointed at for `binding`: the HTTP URL, or host:port for gRPC."""
        if binding == "grpc":
            if self.grpc_target is None:
                raise SystemExit(f"{self.name} server has no gRPC port")
            return self.grpc_target
        return self.url

    def start(self) -> None:
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            self.cmd, stdout=self._log, stderr=subprocess.STDOUT, cwd=HERE.parent, env={**os.environ, **self.env}
        )
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} server exited at start; see {self.log_path}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(self.url + ".well-known/agent-card.json", timeout=2) as r,
            ):
                if r.status == 200 and self._grpc_listening():
                    return
            time.sleep(0.2)
        raise SystemExit(f"{self.name} server did not answer within 30 s; see {self.log_path}")

    def _grpc_listening(self) -> bool:
        if self.grpc_port is None:
            return True
        try:
            with socket.create_connection(("127.0.0.1", self.grpc_port), timeout=2):
                return True
        except OSError:
            return False

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def rss_mb(self) -> float | None:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
        except OSError:
            return None
        return None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self._log.close()


# ----------------------------------------------------------------------------- runs


def loadgen(
    url: str,
    scenario: str,
    protocol: str,
    *,
    concurrency: int,
    duration: float,
    warmup: float,
    server_pid: int | None,
    binding: str = "jsonrpc",
) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(HERE / "loadgen.py"),
        url,
        "--scenario",
        scenario,
        "--protocol",
        protocol,
        "--binding",
        binding,
        "--concurrency",
        str(concurrency),
        "--duration",
        str(duration),
        "--warmup",
        str(warmup),
        "--compact",
    ]
    if server_pid:
        cmd += ["--server-pid", str(server_pid)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + warmup + 120, check=False)
    if res.returncode != 0:
        return {"failed": True, "returncode": res.returncode, "stderr": res.stderr[-2000:], "cmd": cmd}
    out = json.loads(res.stdout)
    out["cmd"] = " ".join(shlex.quote(c) for c in cmd)
    return out


def get(d: dict, path: str) -> float | None:
    cur: Any = d
    for k in path.split("."):
        if not isinstance(cur, dict) or k not in cur:
            return None
        cur = cur[k]
    return cur


def median_of(runs: list[dict], path: str) -> float | None:
    vals = [v for v in (get(r, path) for r in runs) if isinstance(v, (int, float))]
    return statistics.median(vals) if vals else None


def paired_ratios(runs: list[dict], path: str, higher_better: bool) -> list[float]:
    """Per repeat, Parley vs SDK measured back to back: the ratio (> 1 = Parley better)."""
    out = []
    for rep in sorted({r["repeat"] for r in runs}):
        pair = {r["server"]: get(r, path) for r in runs if r["repeat"] == rep and not r.get("failed")}
        p, s = pair.get("parley"), pair.get("sdk")
        if p and s:
            out.append(p / s if higher_better else s / p)
    return out


def summarise(runs: list[dict]) -> dict[str, Any]:
    ok = [r for r in runs if not r.get("failed")]
    s: dict[str, Any] = {
        "runs": len(runs),
        "failed_runs": len(runs) - len(ok),
        "errors": sum(r.get("errors", 0) for r in ok),
        "requests": sum(r.get("requests", 0) for r in ok),
    }
    for path in (
        "rps",
        "latency_ms.p50",
        "latency_ms.p90",
        "latency_ms.p99",
        "ttfe_ms.p50",
        "ttfe_ms.p90",
        "ttfe_ms.p99",
        "events_per_s",
        "server_cpu_us_per_request",
        "server_cpu_util",
        "client_cpu_util",
    ):
        s[path] = median_of(ok, path)
    s["rps_all"] = [get(r, "rps") for r in ok]
    return s


# ----------------------------------------------------------------------------- environment


def cpu_pressure() -> float | None:
    """The share of the last 10 s in which some runnable task waited for a CPU (Linux PSI), in %."""
    try:
        first = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        return float(dict(kv.split("=") for kv in first.split()[1:])["avg10"])
    except (OSError, KeyError, ValueError, IndexError):
        return None


def environment() -> dict[str, Any]:
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions = {}
    for p in PACKAGES:
        try:
            versions[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            versions[p] = None
    git = {}
    with contextlib.suppress(OSError, subprocess.SubprocessError):

        def run(*a: str) -> str:
            return subprocess.run(
                ["git", *a], cwd=HERE.parent, capture_output=True, text=True, check=False
            ).stdout.strip()

        diff = subprocess.run(["git", "diff", "HEAD", "--", "src"], cwd=HERE.parent, capture_output=True, check=False)
        git = {
            "commit": run("rev-parse", "HEAD"),
            "dirty_src": bool(run("status", "--porcelain", "--", "src")),
            # identifies uncommitted changes to src/ at the start of the run (empty diff: e3b0c442...)
            "src_diff_sha256": hashlib.sha256(diff.stdout).hexdigest(),
        }
    return {
        "git": git,
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_start": os.getloadavg(),
        "packages": versions,
    }


# ----------------------------------------------------------------------------- report


def fmt(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "–"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def ratio(num: float | None, den: float | None) -> str:
    if not num or not den:
        return "–"
    return f"{num / den:.2f}x"


ROWS = [
    # (metric label, path, digits, better: "higher" (ratio P/S) or "lower" (ratio S/P))
    ("requests/s", "rps", 0, "higher"),
    ("p50 latency ms", "latency_ms.p50", 2, "lower"),
    ("p99 latency ms", "latency_ms.p99", 2, "lower"),
    ("TTFE p50 ms", "ttfe_ms.p50", 2, "lower"),
    ("TTFE p99 ms", "ttfe_ms.p99", 2, "lower"),
    ("events/s", "events_per_s", 0, "higher"),
    ("server CPU µs/request", "server_cpu_us_per_request", 0, "lower"),
    ("server CPU util (1 = one core)", "server_cpu_util", 2, None),
]


def table(summary: dict[str, dict[str, dict]], names: list[str], runs: list[dict]) -> str:
    lines = [
        "| scenario | metric | Parley | a2a-sdk | ratio of medians | paired ratios (per repeat) |",
        "|---|---|---:|---:|---:|---|",
    ]
    for name in names:
        p, s = summary[name]["parley"], summary[name]["sdk"]
        mine = [r for r in runs if r.get("name") == name]
        for label, path, digits, better in ROWS:
            pv, sv = p.get(path), s.get(path)
            if pv is None and sv is None:
                continue
            if (path.startswith("ttfe") or path == "events_per_s") and not name.startswith("stream"):
                continue
            if better is None:
                r, pairs = "", ""
            else:
                r = ratio(pv, sv) if better == "higher" else ratio(sv, pv)
                pairs = ", ".join(f"{x:.2f}" for x in paired_ratios(mine, path, better == "higher"))
            lines.append(f"| {name} | {label} | {fmt(pv, digits)} | {fmt(sv, digits)} | {r} | {pairs} |")
        errs = p["errors"] + s["errors"] + p["failed_runs"] + s["failed_runs"]
        if errs:
            lines.append(
                f"| {name} | errors / failed runs | {p['errors']} / {p['failed_runs']} | "
                f"{s['errors']} / {s['failed_runs']} | | |"
            )
    return "\n".join(lines)


def baseline_table(summary: dict[str, dict[str, dict]], names: list[str]) -> str:
    """Parley now vs an earlier Parley tree (--baseline-src), both against the same a2a-sdk rounds."""
    lines = [
        "| scenario | requests/s now / before | ratio to a2a-sdk now / before | server CPU µs/request now / before |",
        "|---|---|---|---|",
    ]
    for name in names:
        p, b, s = summary[name]["parley"], summary[name]["before"], summary[name]["sdk"]
        lines.append(
            f"| {name} | {fmt(p.get('rps'), 0)} / {fmt(b.get('rps'), 0)} | {ratio(p.get('rps'), s.get('rps'))} / "
            f"{ratio(b.get('rps'), s.get('rps'))} | {fmt(p.get('server_cpu_us_per_request'), 0)} / "
            f"{fmt(b.get('server_cpu_us_per_request'), 0)} |"
        )
    return "\n".join(lines)


def verdict(summary: dict[str, dict[str, dict]]) -> list[str]:
    out = []
    for name in VERDICT:
        if name not in summary:
            continue
        p, s = summary[name]["parley"], summary[name]["sdk"]
        if not p.get("rps") or not s.get("rps"):
            continue
        tr = p["rps"] / s["rps"]
        lat = "latency_ms.p50" if name.startswith("unary") else "ttfe_ms.p50"
        lower = (p.get(lat) or 1e9) < (s.get(lat) or 0)
        ok = tr >= 3.0 and lower
        pc, sc = p.get("server_cpu_us_per_request"), s.get("server_cpu_us_per_request")
        cpu = f"; server CPU per request {sc / pc:.2f}x less" if pc and sc else ""
        out.append(
            f"{name}: throughput {tr:.2f}x (target >= 3x), {lat} {'lower' if lower else 'NOT lower'} "
            f"-> {'MET' if ok else 'NOT MET'}{cpu}"
        )
    return out


# ----------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description="Compare Parley with the a2a-sdk server on the echo workload.")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--duration", type=float, default=4.0, help="seconds measured per run")
    ap.add_argument("--warmup", type=float, default=0.5, help="unrecorded seconds at the start of each run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--latency-duration", type=float, default=2.5, help="seconds per concurrency-1 run (0: skip)")
    ap.add_argument("--only", default=None, help="comma-separated scenario names to run")
    ap.add_argument(
        "--sdk-otel",
        choices=("on", "off"),
        default="on",
        help="a2a-sdk's OpenTelemetry span wrappers (on: the SDK's default when opentelemetry-api "
        "is installed, as it is with a2a-sdk's dependencies)",
    )
    ap.add_argument("--quick", action="store_true", help="1 repeat, 2 s runs: a smoke test")
    ap.add_argument("--baseline-src", type=Path, default=None,
                    help="also measure the Parley of another checkout (its bench/parley_server.py and src/), "
                    "in the same rounds: e.g. a `git worktree` of an earlier commit")
    args = ap.parse_args()
    try:
        import aiohttp  # noqa: F401  the fast client of bench/loadgen.py; httpx alone is slower than Parley
    except ImportError:
        ap.error("the load generator needs aiohttp, or it measures itself: pip install -e '.[bench]'")
    global SERVERS
    if args.baseline_src is not None:
        SERVERS = ("parley", "sdk", "before")
    if args.quick:
        args.repeats, args.duration, args.latency_duration = 1, 2.0, 1.5

    scenarios = SCENARIOS
    lat_scenarios = LATENCY_SCENARIOS if args.latency_duration > 0 else []
    if args.only:
        keep = set(args.only.split(","))
        scenarios = [s for s in scenarios if s[0] in keep]
        lat_scenarios = [s for s in lat_scenarios if s[0] in keep]
        unknown = keep - {s[0] for s in SCENARIOS + LATENCY_SCENARIOS}
        if unknown:
            ap.error(f"unknown scenario(s) in --only: {', '.join(sorted(unknown))}")
    bindings = {s[3] for s in [*scenarios, *lat_scenarios]}
    with_grpc = "grpc" in bindings

    OUT.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    tmp = Path(tempfile.mkdtemp(prefix="parley-compare-"))
    env = environment()
    command = " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *sys.argv])
    print(
        f"# compare {stamp}: {env['nproc']} cores, {env['cpu_model']}, Python {env['python']}, "
        f"parley at {env['git'].get('commit', '?')[:10]}{' (src modified)' if env['git'].get('dirty_src') else ''}",
        flush=True,
    )

    # a2a-sdk wraps its handlers in OpenTelemetry spans whenever opentelemetry-api is importable, which
    # it is in a plain `pip install a2a-sdk` (google-api-core depends on it); "on" keeps that default.
    sdk_env = {"OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "true" if args.sdk_otel == "on" else "false"}
    with contextlib.suppress(ImportError):
        import opentelemetry  # noqa: F401

        env["sdk_otel_installed"] = True
    env.setdefault("sdk_otel_installed", False)
    env["sdk_otel"] = args.sdk_otel
    p_port, s_port = free_port(), free_port()
    pg_port, sg_port = (free_port(), free_port()) if with_grpc else (None, None)
    p_cmd = [sys.executable, str(HERE / "parley_server.py"), "--port", str(p_port), "--db", str(tmp / "bench.db")]
    s_cmd = [sys.executable, str(HERE / "sdk_echo_server.py"), "--port", str(s_port)]
    if with_grpc:
        p_cmd += ["--grpc-port", str(pg_port)]
        s_cmd += ["--grpc-port", str(sg_port)]
    env["grpc_served"] = with_grpc
    servers = {
        "parley": ServerProc("parley", p_cmd, p_port, tmp / "parley.log", grpc_port=pg_port),
        "sdk": ServerProc("sdk", s_cmd, s_port, tmp / "sdk.log", env=sdk_env, grpc_port=sg_port),
    }
    if args.baseline_src is not None:
        base = args.baseline_src.resolve()
        b_port, bg_port = free_port(), (free_port() if with_grpc else None)
        b_cmd = [sys.executable, str(base / "bench" / "parley_server.py"), "--port", str(b_port),
                 "--db", str(tmp / "before" / "bench.db")]
        if with_grpc:
            b_cmd += ["--grpc-port", str(bg_port)]
        servers["before"] = ServerProc("before", b_cmd, b_port, tmp / "before.log",
                                       env={"PYTHONPATH": str(base / "src")}, grpc_port=bg_port)
        env["baseline_src"] = str(base)
        env["baseline_commit"] = subprocess.run(["git", "-C", str(base), "rev-parse", "HEAD"], capture_output=True,
                                                text=True, check=False).stdout.strip()

    runs: list[dict[str, Any]] = []
    t_start = time.time()
    try:
        for srv in servers.values():
            srv.start()
        # Warm-up: every code path once under load, not recorded.
        warm = [("unary", "1.0", "jsonrpc"), ("unary", "0.3", "jsonrpc"), ("stream", "1.0", "jsonrpc"),
                ("get", "1.0", "jsonrpc"), ("card", "0.3", "jsonrpc")]  # fmt: skip
        warm += [(sc, proto, b) for _, sc, proto, b in scenarios if b != "jsonrpc"]
        for name in SERVERS:
            for sc, proto, binding in warm:
                loadgen(
                    servers[name].target(binding),
                    sc,
                    proto,
                    concurrency=args.concurrency,
                    duration=0.5,
                    warmup=0,
                    server_pid=None,
                    binding=binding,
                )
        print(f"# warmed up in {time.time() - t_start:.0f} s", flush=True)

        plan: list[tuple[int, str, str, str, str, int, float]] = []
        for rep in range(args.repeats):
            for name, sc, proto, binding in scenarios:
                plan.append((rep, name, sc, proto, binding, args.concurrency, args.duration))
            for name, sc, proto, binding in lat_scenarios:
                plan.append((rep, name, sc, proto, binding, 1, args.latency_duration))
        for k, (rep, name, sc, proto, binding, conc, dur) in enumerate(plan):
            shift = (rep + k) % len(SERVERS)  # rotate who goes first
            order = SERVERS[shift:] + SERVERS[:shift]
            for server in order:
                srv = servers[server]
                res = loadgen(
                    srv.target(binding),
                    sc,
                    proto,
                    concurrency=conc,
                    duration=dur,
                    warmup=args.warmup,
                    server_pid=srv.pid,
                    binding=binding,
                )
                res.update(
                    server=server,
                    name=name,
                    repeat=rep,
                    t=round(time.time() - t_start, 1),
                    loadavg=os.getloadavg()[0],
                    cpu_pressure_avg10=cpu_pressure(),
                )
                runs.append(res)
                if res.get("failed"):
                    print(f"  [{rep}] {name:14s} {server:6s} FAILED: {res.get('stderr', '')[-300:]}", flush=True)
                    continue
                extra = (
                    f" ttfe_p50={get(res, 'ttfe_ms.p50')}ms ev/s={res.get('events_per_s')}" if sc == "stream" else ""
                )
                print(
                    f"  [{rep}] {name:14s} {server:6s} rps={res['rps']:>9.1f} p50={get(res, 'latency_ms.p50')}ms "
                    f"p99={get(res, 'latency_ms.p99')}ms err={res['errors']} srv_cpu={res.get('server_cpu_util')} "
                    f"cli_cpu={res.get('client_cpu_util')}{extra}",
                    flush=True,
                )
        rss = {name: servers[name].rss_mb() for name in SERVERS}
    finally:
        for srv in servers.values():
            srv.stop()

    names = [s[0] for s in scenarios] + [s[0] for s in lat_scenarios]
    summary = {
        name: {
            server: summarise([r for r in runs if r["name"] == name and r["server"] == server]) for server in SERVERS
        }
        for name in names
    }
    elapsed = time.time() - t_start
    env["loadavg_end"] = os.getloadavg()
    lo_load, hi_load = min(r["loadavg"] for r in runs), max(r["loadavg"] for r in runs)
    psi = [r.get("cpu_pressure_avg10") or 0 for r in runs]
    busy = [r for r in runs if (r.get("client_cpu_util") or 0) >= 0.9]
    md = [
        (
            f"Run {stamp} ({elapsed:.0f} s): concurrency {args.concurrency}, {args.duration:g} s per run "
            f"(+{args.warmup:g} s warm-up), median of {args.repeats} repeat(s); `@c1` rows: concurrency 1, "
            f"{args.latency_duration:g} s per run. Parley at {env['git'].get('commit', '?')[:10]}"
            f"{' (src modified)' if env['git'].get('dirty_src') else ''}; a2a-sdk OpenTelemetry wrappers "
            f"{args.sdk_otel}{'' if env['sdk_otel_installed'] else ' (opentelemetry not installed: no-op)'}; "
            f"gRPC port {'on' if with_grpc else 'off'} on both servers."
        ),
        "",
        table(summary, names, runs),
        "",
        *[f"- {line}" for line in verdict(summary)],
        *(["", f"Parley now vs Parley before ({env.get('baseline_commit', '?')[:10]}), same rounds:", "",
            baseline_table(summary, names), ""] if "before" in SERVERS else []),
        f"- server RSS at the end (MB): Parley {rss.get('parley')}, a2a-sdk {rss.get('sdk')}",
        (
            f"- machine load during the run: 1-min loadavg {lo_load:.2f}..{hi_load:.2f}; "
            f"CPU pressure avg10 {fmt(min(psi), 0)}..{fmt(max(psi), 0)}%"
        ),
        (
            f"- load generator at >= 90% of a core in {len(busy)} of {len(runs)} runs"
            + (f" ({', '.join(sorted({r['name'] + ' ' + r['server'] for r in busy}))}: there the generator, not "
               "the server, may have set the pace)" if busy else "")
        ),
    ]
    report = "\n".join(md)
    print()
    print(report)
    result = {
        "stamp": stamp,
        "command": command,
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "environment": env,
        "servers": {
            name: {"cmd": servers[name].cmd, "url": servers[name].url, "grpc": servers[name].grpc_target}
            for name in SERVERS
        },
        "elapsed_s": round(elapsed, 1),
        "summary": summary,
        "rss_mb": rss,
        "runs": runs,
    }
    (OUT / f"compare-{stamp}.json").write_text(json.dumps(result, indent=2))
    (OUT / f"compare-{stamp}.md").write_text(report + "\n")
    print(f"\nraw results: {OUT / f'compare-{stamp}.json'}")


if __name__ == "__main__":
    main()
