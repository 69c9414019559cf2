#!/usr/bin/env python3
"""Resource bounds of one real `parley serve` process: memory, file descriptors, disk, slow clients.

    python bench/resources.py                          # every section (~6 minutes on 2 cores)
    python bench/resources.py --quick                  # a smoke test: every count shrunk (~1 minute)
    python bench/resources.py --only unary-rss,wal

Every section starts its own server, `parley serve --port P --db <tmp>/r.db --log-level warning`
(open-streams and slow-reader: `--app resource_agents:app`, the agents of bench/resource_agents.py
next to the built-in ones), and reads the server's /proc/<pid>/status (VmRSS) and /proc/<pid>/fd.

  unary-rss     RSS and open fds every --unary-every requests over --unary-warmup + --unary-requests
                unary SendMessage to echo (wrk, one thread, a fresh messageId per request, the Lua
                script of bench/cluster_bench.py; bench/loadgen.py when wrk is missing). Target: RSS
                at most 10% above its value at the end of the warm-up, at every later sample.
  stream-rss    the same over SendStreamingMessage streams (bench/loadgen.py's stream scenario, run
                in this process, every stream read to its completed status).
  open-streams  --open-streams SendStreamingMessage streams to the `hold` agent open at once (each
                has its first event; the agent waits on a gate), then the `release` agent ends
                them all. RSS and fds before, with all open (and per stream), after they closed;
                --open-rounds (2) times, so memory reused by the next round tells from a leak.
  slow-reader   a raw socket asks the `flood` agent for a stream (a 32 KiB chunk every 20 ms) and
                stops reading after the first event; every second for --slow-seconds: server RSS,
                the server's and the client's kernel socket queues, the database files, and whether
                the server still holds the connection (an fd of the server process). Then the task
                is canceled and the connection watched up to --slow-close-wait s more. A control
                run (first) does the same with a client that reads everything: the memory the
                production itself costs, which a slow reader should not add to.
  wal           --wal-requests unary sends on SQLite; the sizes of r.db, r.db-wal and r.db-shm at
                every sample, the largest -wal, and the sizes at the end (the server still
                running). Target: (db + wal) / db at most 2.
  slowloris     --slowloris-connections TCP connections each send a request header one byte every
                --slowloris-interval s, for --slowloris-seconds; meanwhile one unary SendMessage
                every 0.5 s on a new connection. Reports how many slow connections the server
                closed (a read returns b'' or fails, or a write fails) and when, and how the
                normal requests fared.

Prints a summary and writes bench/out/resources-<UTC>.json (and .md) with the machine (uname,
nproc, CPU model, load average) and every sample.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import loadgen
from cluster_bench import Server, wrk_script
from compare import OUT, environment, fmt, free_port

V1 = {"Content-Type": "application/json", "A2A-Version": "1.0"}
SECTIONS = ("unary-rss", "stream-rss", "open-streams", "slow-reader", "wal", "slowloris")
RSS_TARGET_PCT = 10.0
WAL_TARGET_RATIO = 2.0

# Appended to cluster_bench's script: every EVERY answers (wrk ... -- RUN EVERY), a line "WRKPROGRESS n bad".
WRK_PROGRESS_LUA = r"""
local base_init, base_response = init, response
function init(args)
  base_init(args)
  every = tonumber(args[2]) or 1000
  answered = 0
end
function response(status, headers, body)
  base_response(status, headers, body)
  answered = answered + 1
  if answered % every == 0 then
    io.write(string.format("WRKPROGRESS %d %d\n", answered, bad))
    io.flush()
  end
end
"""

# ----------------------------------------------------------------------------- the server and /proc


def parley_cmd(port: int, db: Path, app: str | None = None, config: Path | None = None) -> list[str]:
    """`parley serve` on `port` over the SQLite file `db` (the venv's console script, as a user runs it)."""
    exe = Path(sys.executable).parent / "parley"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "parley.cli"]
    cmd += ["serve", "--port", str(port), "--db", str(db), "--log-level", "warning"]
    return cmd + (["--app", app] if app else []) + (["--config", str(config)] if config else [])


def start_parley(name: str, folder: Path, app: str | None = None, config: Path | None = None) -> Server:
    """A started `parley serve` (ready: agent card 200 and /readyz 200) with its SQLite file in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {"PYTHONPATH": str(HERE)} if app else {}  # --app resource_agents:app imports bench/resource_agents.py
    server = Server(name, parley_cmd(port, folder / "r.db", app, config), port, folder / f"{name}.log", env=env)
    server.start()
    return server


def proc_sample(pid: int) -> dict[str, Any]:
    """VmRSS (KiB), open fds and threads of process `pid`, read from /proc."""
    out: dict[str, Any] = {"rss_kib": None, "fds": None, "threads": None}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                out["rss_kib"] = int(line.split()[1])
            elif line.startswith("Threads:"):
                out["threads"] = int(line.split()[1])
    with contextlib.suppress(OSError):
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


def db_sizes(db: Path) -> dict[str, int]:
    """Bytes of the SQLite file `db` and its -wal and -shm files (0 when absent)."""

    def size(p: Path) -> int:
        try:
            return p.stat().st_size
        except OSError:
            return 0

    return {"db": size(db), "wal": size(db.with_name(db.name + "-wal")), "shm": size(db.with_name(db.name + "-shm"))}


def raise_fd_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to the hard limit (servers started later inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 65536
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def machine_info() -> dict[str, Any]:
    """compare.environment() (git, CPU model, nproc, packages, load average) plus uname and the fd limit."""
    env = environment()
    env["uname"] = " ".join(os.uname())
    env["fd_soft_limit"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return env


def mib(kib: float | None) -> str:
    """KiB as MiB for the summary lines ("–" when unread)."""
    return "–" if kib is None else f"{kib / 1024:.1f}"


def pct(a: float | None, b: float | None) -> float | None:
    """How much `a` is above `b`, in % of `b`."""
    return None if not a or not b else round((a - b) / b * 100, 2)


# ----------------------------------------------------------------------------- load drivers


Sampler = Callable[[int], None]  # called with the number of requests answered so far


def drive_wrk(url: str, total: int, every: int, concurrency: int, folder: Path, on_progress: Sampler) -> dict:
    """At least `total` unary SendMessage with wrk (-t1), `on_progress(n)` every `every` answers; wrk's summary."""
    base = wrk_script(folder)
    script = folder / "progress.lua"
    script.write_text(base.read_text() + WRK_PROGRESS_LUA)
    limit = max(600, total // 50)  # a deadline (s) for a server that stops answering: at least 50 requests/s
    cmd = ["wrk", "-t1", f"-c{concurrency}", f"-d{limit}s", "--timeout", "30s", "-s", str(script), url, "--",
           uuid.uuid4().hex[:12], str(every)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    summary: dict[str, Any] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("WRKPROGRESS "):
            n = int(line.split()[1])
            on_progress(n)
            if n >= total:
                proc.send_signal(signal.SIGINT)  # wrk stops, prints its summary (done()) and exits
        elif line.startswith("WRKJSON "):
            summary = json.loads(line.removeprefix("WRKJSON "))
    proc.wait(timeout=60)
    if not summary:
        raise RuntimeError(f"wrk gave no summary: {proc.stderr.read()[-1000:] if proc.stderr else ''}")
    errors = sum(summary[k] for k in ("bad", "err_connect", "err_read", "err_write", "err_timeout"))
    return {"driver": "wrk", "cmd": shlex.join(cmd), "requests": summary["requests"], "errors": errors,
            "rps": round(summary["requests"] / (summary["duration_us"] / 1e6), 1),
            "latency_ms": {k: round(summary[f"{k}_us"] / 1000, 2) for k in ("p50", "p99", "max")}}


async def _drive_loadgen(url: str, scenario: str, total: int, every: int, concurrency: int,
                         on_progress: Sampler) -> dict:
    """drive_loadgen's body: loadgen's closed loop as a task, its answer count watched every 20 ms."""
    gen = loadgen.LoadGen(loadgen.parse_args([url, "--scenario", scenario, "-c", str(concurrency), "--warmup", "0",
                                              "--duration", "3600", "--requests", str(total)]))
    client = loadgen.make_client("auto", concurrency, 30.0)
    stats = loadgen.Stats()
    t0 = time.perf_counter()
    run = asyncio.ensure_future(gen.phase(client, 3600, total, stats))
    mark = every
    try:
        while not run.done():
            await asyncio.sleep(0.02)  # sampling period: the load runs on meanwhile
            answered = stats.ok + stats.errors
            if answered >= mark:
                on_progress(answered)
                mark = (answered // every + 1) * every
        await run
    finally:
        await client.close()
    elapsed = time.perf_counter() - t0
    return {"driver": f"loadgen ({loadgen.client_name('auto')}, in process)", "requests": stats.ok,
            "errors": stats.errors, "error_samples": stats.error_samples, "rps": round(stats.ok / elapsed, 1),
            "latency_ms": loadgen.summary_ms(stats.latencies)}


def drive_loadgen(url: str, scenario: str, total: int, every: int, concurrency: int, on_progress: Sampler) -> dict:
    """`total` requests of bench/loadgen.py's `scenario` in this process, `on_progress(n)` every `every` answers."""
    return asyncio.run(_drive_loadgen(url, scenario, total, every, concurrency, on_progress))


def drive_unary(args: argparse.Namespace, url: str, total: int, every: int, folder: Path, on_progress: Sampler) -> dict:
    """Unary load with wrk when it is installed (the server, not the client, sets the pace), else loadgen."""
    if shutil.which("wrk") and args.driver != "loadgen":
        return drive_wrk(url, total, every, args.concurrency, folder, on_progress)
    return drive_loadgen(url, "unary", total, every, args.concurrency, on_progress)


# ----------------------------------------------------------------------------- unary-rss, stream-rss


def rss_summary(samples: list[dict], warmup: int) -> dict[str, Any]:
    """RSS at the end of the warm-up, the largest and the last after it, and the growth in % of the first."""
    after = [s for s in samples if s["n"] >= warmup]
    if not after:
        return {"problem": "no samples after the warm-up"}
    base, last = after[0], after[-1]
    top = max(after, key=lambda s: s["rss_kib"] or 0)
    out = {"warmup_end_kib": base["rss_kib"], "max_kib": top["rss_kib"], "max_at": top["n"],
           "final_kib": last["rss_kib"], "growth_final_pct": pct(last["rss_kib"], base["rss_kib"]),
           "growth_max_pct": pct(top["rss_kib"], base["rss_kib"]), "fds_warmup_end": base["fds"],
           "fds_max": max(s["fds"] or 0 for s in after), "fds_final": last["fds"], "samples_after_warmup": len(after)}
    out["met"] = out["growth_max_pct"] is not None and out["growth_max_pct"] <= RSS_TARGET_PCT
    return out


def rss_run(args: argparse.Namespace, tmp: Path, name: str, scenario: str, warmup: int, total: int,
            every: int) -> dict[str, Any]:
    """One fresh server loaded with warmup + total requests of `scenario`, sampled every `every` answers."""
    server = start_parley(name, tmp / name)
    samples: list[dict] = []
    t0 = time.perf_counter()

    def sample(n: int) -> None:
        samples.append({"n": n, "t": round(time.perf_counter() - t0, 2), **proc_sample(server.pid)})

    try:
        sample(0)
        if scenario == "unary":
            load = drive_unary(args, server.url, warmup + total, every, tmp / name, sample)
        else:
            load = drive_loadgen(server.url, scenario, warmup + total, every, args.concurrency, sample)
        sample(load["requests"])  # after the load, the server still running
        samples[-1]["after_load"] = True
    finally:
        server.stop()
    res = {"warmup": warmup, "measured": total, "every": every, "load": load, "samples": samples,
           "elapsed_s": round(time.perf_counter() - t0, 1), **rss_summary(samples, warmup)}
    res["summary"] = [
        (f"{name}: {load['requests']:,} {scenario} requests ({warmup:,} warm-up) in {res['elapsed_s']} s, "
         f"{load['rps']}/s, {load['errors']} errors, driver {load['driver']}"),
        (f"  RSS MiB: warm-up end {mib(res.get('warmup_end_kib'))}, max {mib(res.get('max_kib'))} (at "
         f"{res.get('max_at', 0):,}), final {mib(res.get('final_kib'))}; growth final {res.get('growth_final_pct')}%, "
         f"max {res.get('growth_max_pct')}% (target <= {RSS_TARGET_PCT:g}%) -> "
         f"{'MET' if res.get('met') else 'NOT MET'}"),
        f"  fds: warm-up end {res.get('fds_warmup_end')}, max {res.get('fds_max')}, final {res.get('fds_final')}",
    ]
    return res


def section_unary_rss(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """RSS and fds over many unary SendMessage on SQLite (leaks show as growth after the warm-up)."""
    return rss_run(args, tmp, "unary-rss", "unary", args.unary_warmup, args.unary_requests, args.unary_every)


def section_stream_rss(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """RSS and fds over many SendStreamingMessage streams on SQLite."""
    return rss_run(args, tmp, "stream-rss", "stream", args.stream_warmup, args.stream_requests, args.stream_every)


# ----------------------------------------------------------------------------- open-streams


def rpc(method: str, params: dict[str, Any], rid: int | str = 1) -> bytes:
    """An A2A 1.0 JSON-RPC request body."""
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()


def message(text: str, **ids: str) -> dict[str, Any]:
    """A user message with a fresh messageId (and taskId/contextId when given)."""
    return {"role": "ROLE_USER", "parts": [{"text": text}], "messageId": uuid.uuid4().hex, **ids}


def post_json(url: str, body: bytes, timeout: float = 30) -> dict[str, Any]:
    """POST a JSON-RPC body (A2A 1.0) with urllib; the decoded answer."""
    req = urllib.request.Request(url, data=body, headers=V1, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


class StreamGroup:
    """`n` SendStreamingMessage streams to the `hold` agent, opened at most `opening` at a time and kept open."""

    def __init__(self, base: str, n: int, opening: int, gate: str) -> None:
        self.base, self.n, self.gate = base, n, gate
        self.opening = asyncio.Semaphore(opening)
        self.opened = self.failed = self.completed = 0
        self.settled = asyncio.Event()  # every stream open (its first event read) or failed
        self.errors: dict[str, int] = {}

    def _count(self, attr: str) -> None:
        setattr(self, attr, getattr(self, attr) + 1)
        if self.opened + self.failed >= self.n:
            self.settled.set()

    def _error(self, reason: str) -> None:
        self.errors[reason] = self.errors.get(reason, 0) + 1

    async def one(self, session: Any) -> None:
        """Open one stream, count it open at its first event, then read it to the end."""
        await self.opening.acquire()
        holding = True
        body = rpc("SendStreamingMessage", {"message": message(self.gate)})
        try:
            async with session.post(f"{self.base}a2a/hold", data=body, headers=V1) as r:
                if r.status != 200:
                    raise RuntimeError(f"HTTP {r.status}")
                events = loadgen.sse_events(r.content.iter_any())
                await anext(events)
                self._count("opened")
                self.opening.release()
                holding = False
                final = None
                async for _event, data in events:
                    final = data
                if final is None or b"TASK_STATE_COMPLETED" not in final:
                    self._error("stream ended without a completed status")
                else:
                    self.completed += 1
        except Exception as exc:  # noqa: BLE001 - one stream's failure is counted, the others go on
            self._error(f"{type(exc).__name__}: {exc}"[:200])
            if holding:
                self._count("failed")
        finally:
            if holding:
                self.opening.release()


async def hold_streams(base: str, n: int, opening: int, pid: int, settle_s: float) -> dict[str, Any]:
    """Open `n` held streams, sample the server with all open, release them, sample after they closed."""
    import aiohttp

    group = StreamGroup(base, n, opening, f"gate-{uuid.uuid4().hex[:8]}")
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as session:
        before = proc_sample(pid)
        t0 = time.perf_counter()
        tasks = [asyncio.ensure_future(group.one(session)) for _ in range(n)]
        await asyncio.wait_for(group.settled.wait(), timeout=300)
        open_s = time.perf_counter() - t0
        during = proc_sample(pid)
        async with session.post(f"{base}a2a/release", data=rpc("SendMessage", {"message": message(group.gate)}),
                                headers=V1) as r:
            released = await r.json(content_type=None)
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=300)
        closed_s = time.perf_counter() - t0 - open_s
    # the server closes its sockets a moment after the clients saw the streams end: poll (with a deadline)
    deadline = time.perf_counter() + settle_s
    after = proc_sample(pid)
    while (after["fds"] or 0) > (before["fds"] or 0) + 5 and time.perf_counter() < deadline:
        await asyncio.sleep(0.1)
        after = proc_sample(pid)
    state = (((released.get("result") or {}).get("task") or {}).get("status") or {}).get("state")
    return {"streams": n, "opened": group.opened, "failed": group.failed, "completed": group.completed,
            "errors": group.errors, "open_s": round(open_s, 2), "close_s": round(closed_s, 2),
            "release_state": state, "before": before, "all_open": during, "after": after}


def section_open_streams(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Memory and fds of many SSE streams open at once on one process (held by the `hold` agent).

    The open-all/close-all cycle runs twice: memory kept after the first close and reused by the second round
    is the allocator's, memory that grows again with every round would be a leak."""
    server = start_parley("open-streams", tmp / "open-streams", app="resource_agents:app")
    try:
        warm = asyncio.run(hold_streams(server.url, min(50, args.open_streams), 50, server.pid, 10))  # not reported
        rounds = [asyncio.run(hold_streams(server.url, args.open_streams, 50, server.pid, 30))
                  for _ in range(args.open_rounds)]
    finally:
        server.stop()
    res = {**rounds[0], "warmup_streams": warm["streams"], "rounds": rounds}
    n = res["streams"]
    b, d, a = res["before"], res["all_open"], res["after"]
    per = (d["rss_kib"] - b["rss_kib"]) / n if n and d["rss_kib"] and b["rss_kib"] else None
    res["per_stream_kib"] = round(per, 1) if per is not None else None
    later = "; ".join(f"round {i}: all open {mib(r['all_open']['rss_kib'])}, after close {mib(r['after']['rss_kib'])}"
                      for i, r in enumerate(rounds[1:], 2))
    res["summary"] = [
        (f"open-streams: {res['opened']}/{n} opened in {res['open_s']} s ({res['failed']} failed), "
         f"{res['completed']} completed after release ({res['close_s']} s); errors {res['errors'] or 'none'}"),
        (f"  RSS MiB: before {mib(b['rss_kib'])}, all open {mib(d['rss_kib'])} ({fmt(per)} KiB per stream), "
         f"after close {mib(a['rss_kib'])}" + (f"; {later}" if later else "")),
        (f"  fds: before {b['fds']}, all open {d['fds']}, after close {a['fds']}; threads {b['threads']} -> "
         f"{d['threads']} -> {a['threads']}"),
    ]
    return res


# ----------------------------------------------------------------------------- slow-reader


def socket_inodes(pid: int) -> set[str]:
    """Inodes of the sockets process `pid` holds open."""
    out = set()
    with contextlib.suppress(OSError):
        for fd in os.scandir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(fd.path)
                if link.startswith("socket:["):
                    out.add(link[8:-1])
    return out


def tcp_entries(local_port: int, remote_port: int) -> list[dict[str, Any]]:
    """/proc/net/tcp rows from `local_port` to `remote_port`: state, send and receive queue (bytes), inode."""
    rows = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            f = line.split()
            if int(f[1].rsplit(":", 1)[1], 16) == local_port and int(f[2].rsplit(":", 1)[1], 16) == remote_port:
                tx, rx = (int(x, 16) for x in f[4].split(":"))
                rows.append({"state": f[3], "tx_queue": tx, "rx_queue": rx, "inode": f[9]})
    return rows


TCP_STATES = {"01": "ESTABLISHED", "04": "FIN_WAIT1", "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE",
              "08": "CLOSE_WAIT", "09": "LAST_ACK", "0B": "CLOSING"}


def connection_view(server: Server, client_port: int) -> dict[str, Any]:
    """The server's side of our connection: does the server still hold it (an fd), its state and queues."""
    mine = tcp_entries(server.port, client_port)
    theirs = tcp_entries(client_port, server.port)
    held = bool(mine) and mine[0]["inode"] in socket_inodes(server.pid)
    return {"server_holds": held, "server_state": TCP_STATES.get(mine[0]["state"], mine[0]["state"]) if mine else None,
            "server_send_queue": mine[0]["tx_queue"] if mine else None,
            "client_recv_queue": theirs[0]["rx_queue"] if theirs else None}


def raw_stream(server: Server, path: str, text: str) -> tuple[socket.socket, str, bytes]:
    """A raw HTTP/1.1 SendStreamingMessage on a new socket; (socket, task id, bytes read up to the first event)."""
    body = rpc("SendStreamingMessage", {"message": message(text)})
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
            f"A2A-Version: 1.0\r\nAccept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.sendall(head + body)
    got = b""
    while (found := re.search(rb'"task":\{"id":"([^"]+)"', got)) is None:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError(f"the server closed the stream at once: {got[:300]!r}")
        got += chunk
    return sock, found.group(1).decode(), got


def drain(sock: socket.socket, stop: threading.Event, counter: list[int]) -> None:
    """Read `sock` until `stop` is set or it closes, counting the bytes (the control run's reading client)."""
    sock.settimeout(0.5)
    while not stop.is_set():
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            continue
        except OSError:
            return
        if not chunk:
            return
        counter[0] += len(chunk)


def flood_run(args: argparse.Namespace, tmp: Path, name: str, read: bool) -> dict[str, Any]:
    """One fresh server; a flood stream whose client reads (`read`) or stops reading after its first event.

    Samples every second: --slow-seconds while the agent produces, then (not reading) the task is canceled
    and the connection watched up to --slow-close-wait s more for the server to let it go."""
    server = start_parley(name, tmp / name, app="resource_agents:app")
    kib, interval_ms, seconds = args.flood_kib, args.flood_interval_ms, args.slow_seconds
    db = tmp / name / "r.db"
    samples: list[dict] = []
    try:
        before = proc_sample(server.pid)
        sock, task_id, first = raw_stream(server, "/a2a/flood", f"{kib} {interval_ms} {int(seconds) + 120}")
        client_port = sock.getsockname()[1]
        stop, received = threading.Event(), [len(first)]
        reader = threading.Thread(target=drain, args=(sock, stop, received), daemon=True) if read else None
        if reader:
            reader.start()
        t0 = time.perf_counter()

        def watch(first_k: int, last_k: int, phase: str, until_closed: bool) -> None:
            for k in range(first_k, last_k + 1):
                time.sleep(max(0.0, t0 + k - time.perf_counter()))  # the sampling period
                view = connection_view(server, client_port)
                samples.append({"t": k, "phase": phase, **proc_sample(server.pid), **view, **db_sizes(db),
                                "client_read_bytes": received[0]})
                if until_closed and not view["server_holds"]:
                    return

        watch(0, int(seconds), "producing", until_closed=False)
        canceled = post_json(server.url + "a2a/flood", rpc("CancelTask", {"id": task_id}))
        cancel_state = ((canceled.get("result") or {}).get("status") or {}).get("state")
        if not read and samples[-1]["server_holds"]:
            watch(int(seconds) + 1, int(seconds + args.slow_close_wait), "canceled", until_closed=True)
        stop.set()
        if reader:
            reader.join(timeout=5)
        sock.close()
    finally:
        server.stop()
    producing = [s for s in samples if s["phase"] == "producing"]
    closed = next((s["t"] for s in samples if not s["server_holds"]), None)
    top = max(producing, key=lambda s: s["rss_kib"] or 0)
    return {"reads": read, "task_id": task_id, "before": before, "samples": samples, "cancel_state": cancel_state,
            "closed_by_server_at_s": closed, "watched_s": samples[-1]["t"],
            "produced_bytes_approx": int(seconds * 1000 / interval_ms) * kib * 1024,
            "client_read_bytes": received[0], "rss_start_kib": producing[0]["rss_kib"], "rss_max_kib": top["rss_kib"],
            "rss_end_kib": producing[-1]["rss_kib"], "rss_last_kib": samples[-1]["rss_kib"],
            "rss_growth_kib": (producing[-1]["rss_kib"] or 0) - (producing[0]["rss_kib"] or 0),
            "max_server_send_queue": max(s["server_send_queue"] or 0 for s in samples),
            "max_client_recv_queue": max(s["client_recv_queue"] or 0 for s in samples),
            "max_wal": max(s["wal"] for s in samples), "db_end": producing[-1]["db"]}


def section_slow_reader(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """What a client that stops reading a busy stream costs the server, and whether the server lets it go."""
    runs = {"reading": flood_run(args, tmp, "flood-reading", read=True) if args.slow_control else None,
            "not-reading": flood_run(args, tmp, "flood-slow", read=False)}
    s, c = runs["not-reading"], runs["reading"]
    closed = s["closed_by_server_at_s"]
    lines = [
        (f"slow-reader: flood agent {args.flood_kib} KiB every {args.flood_interval_ms} ms for {args.slow_seconds:g} s "
         f"(~{s['produced_bytes_approx'] / 2**20:.0f} MiB on schedule; an agent behind schedule produces less), "
         "then CancelTask"),
        (f"  not reading: RSS MiB {mib(s['rss_start_kib'])} -> {mib(s['rss_end_kib'])} while producing (max "
         f"{mib(s['rss_max_kib'])}, {s['rss_growth_kib'] / 1024:+.1f}), {mib(s['rss_last_kib'])} at the last sample; "
         f"client read {s['client_read_bytes'] / 1024:.0f} KiB; kernel queues max: server send "
         f"{s['max_server_send_queue'] / 1024:.0f} KiB, client receive {s['max_client_recv_queue'] / 1024:.0f} KiB; "
         f"db {s['db_end'] / 2**20:.0f} MiB, wal max {s['max_wal'] / 2**20:.0f} MiB"),
        "  server let go of the connection: "
        + (f"after {closed} s (the task was canceled at {args.slow_seconds:g} s: {s['cancel_state']})"
           if closed is not None else f"NO, still held after {s['watched_s']} s (canceled at {args.slow_seconds:g} s: "
           f"{s['cancel_state']})"),
    ]
    if c:
        lines.append(f"  control (reading client): RSS MiB {mib(c['rss_start_kib'])} -> {mib(c['rss_end_kib'])} "
                     f"(max {mib(c['rss_max_kib'])}, {c['rss_growth_kib'] / 1024:+.1f}); client read "
                     f"{c['client_read_bytes'] / 2**20:.1f} MiB; db {c['db_end'] / 2**20:.0f} MiB, wal max "
                     f"{c['max_wal'] / 2**20:.0f} MiB")
    return {**runs, "summary": lines}


# ----------------------------------------------------------------------------- wal


def section_wal(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """SQLite file and WAL sizes over many unary sends (a WAL never checkpointed grows without bound)."""
    server = start_parley("wal", tmp / "wal")
    db = tmp / "wal" / "r.db"
    samples: list[dict] = []
    t0 = time.perf_counter()

    def sample(n: int) -> None:
        samples.append({"n": n, "t": round(time.perf_counter() - t0, 2), **db_sizes(db), **proc_sample(server.pid)})

    try:
        load = drive_unary(args, server.url, args.wal_requests, args.wal_every, tmp / "wal", sample)
        sample(load["requests"])  # the end, while the server still runs
    finally:
        server.stop()
    stopped = db_sizes(db)
    final = samples[-1]
    max_wal = max(s["wal"] for s in samples)
    ratio = (final["db"] + final["wal"]) / final["db"] if final["db"] else None
    ratio_max = (final["db"] + max_wal) / final["db"] if final["db"] else None
    res = {"load": load, "samples": samples, "final": {k: final[k] for k in ("db", "wal", "shm")},
           "max_wal": max_wal, "ratio_final": round(ratio, 2) if ratio else None,
           "ratio_with_max_wal": round(ratio_max, 2) if ratio_max else None, "after_stop": stopped,
           "met": ratio is not None and ratio_max is not None and max(ratio, ratio_max) <= WAL_TARGET_RATIO}
    res["summary"] = [
        f"wal: {load['requests']:,} unary sends, {load['rps']}/s, {load['errors']} errors",
        (f"  at the end (server running): db {final['db'] / 2**20:.1f} MiB, wal {final['wal'] / 2**20:.1f} MiB "
         f"(max seen {max_wal / 2**20:.1f} MiB), shm {final['shm'] / 1024:.0f} KiB"),
        (f"  (db + wal) / db = {fmt(ratio, 2)} at the end, {fmt(ratio_max, 2)} with the largest wal "
         f"(target <= {WAL_TARGET_RATIO:g}) -> {'MET' if res['met'] else 'NOT MET'}; after the server stopped: "
         f"db {stopped['db'] / 2**20:.1f} MiB, wal {stopped['wal'] / 2**20:.1f} MiB"),
    ]
    return res


# ----------------------------------------------------------------------------- slowloris


async def slow_connection(port: int, start: float, interval: float, deadline: float) -> dict[str, Any]:
    """One slowloris client: a request header sent one byte every `interval` s until `deadline` or closed."""
    header = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
              "X-Slow: " + "a" * 10_000).encode()
    await asyncio.sleep(max(0.0, start - time.monotonic()))  # staggered starts
    t0 = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent, answer, closed_at, how = 0, b"", None, None
    read = asyncio.ensure_future(reader.read(4096))
    try:
        while time.monotonic() < deadline and closed_at is None:
            try:
                writer.write(header[sent:sent + 1])
                await writer.drain()
                sent += 1
            except OSError as exc:
                closed_at, how = time.monotonic(), f"write failed: {type(exc).__name__}"
                break
            done, _ = await asyncio.wait({read}, timeout=max(0.0, min(interval, deadline - time.monotonic())))
            if not done:
                continue
            try:
                data = read.result()
            except OSError as exc:
                closed_at, how = time.monotonic(), f"read failed: {type(exc).__name__}"
                break
            if not data:
                closed_at, how = time.monotonic(), "closed (read returned b'')"
                break
            answer += data  # the server answered (e.g. 408/400); keep reading until it closes
            read = asyncio.ensure_future(reader.read(4096))
    finally:
        read.cancel()
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    return {"bytes_sent": sent, "closed_after_s": round(closed_at - t0, 1) if closed_at else None, "how": how,
            "answer": answer[:120].decode(errors="replace") or None}


async def normal_requests(url: str, deadline: float, period: float) -> dict[str, Any]:
    """A unary SendMessage every `period` s on a new connection until `deadline`: ok, failed, latency."""
    import aiohttp

    ok, failed, lat, errors = 0, 0, [], {}
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=10)) as session:
        k, t0 = 0, time.monotonic()
        while time.monotonic() < deadline:
            await asyncio.sleep(max(0.0, t0 + k * period - time.monotonic()))  # pacing
            k += 1
            start = time.perf_counter()
            try:
                async with session.post(url, data=rpc("SendMessage", {"message": message("hello there")}),
                                        headers=V1) as r:
                    body = await r.read()
                good = r.status == 200 and b"TASK_STATE_COMPLETED" in body
                reason = None if good else f"HTTP {r.status}: {body[:100]!r}"
            except Exception as exc:  # noqa: BLE001 - counted
                reason = f"{type(exc).__name__}: {exc}"[:150]
            if reason is None:
                ok += 1
                lat.append(time.perf_counter() - start)
            else:
                failed += 1
                errors[reason] = errors.get(reason, 0) + 1
    return {"ok": ok, "failed": failed, "errors": errors, "latency_ms": loadgen.summary_ms(lat)}


async def slowloris_run(server: Server, n: int, seconds: float, interval: float) -> dict[str, Any]:
    """`n` slow connections and the normal requests side by side; server fds sampled at the middle."""
    now = time.monotonic()
    deadline = now + seconds
    slow = [asyncio.ensure_future(slow_connection(server.port, now + i * interval / n, interval, deadline))
            for i in range(n)]
    normal = asyncio.ensure_future(normal_requests(server.url, deadline, 0.5))
    await asyncio.sleep(seconds / 2)  # the middle of the run: a sample, not synchronisation
    middle = proc_sample(server.pid)
    conns = await asyncio.gather(*slow, return_exceptions=True)
    return {"middle": middle, "connections": [c if isinstance(c, dict) else {"error": repr(c)} for c in conns],
            "normal": await normal}


def section_slowloris(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Whether connections that never finish their request header are closed, and normal requests still served."""
    server = start_parley("slowloris", tmp / "slowloris")
    try:
        before = proc_sample(server.pid)
        res = asyncio.run(slowloris_run(server, args.slowloris_connections, args.slowloris_seconds,
                                        args.slowloris_interval))
        res["after"] = proc_sample(server.pid)
    finally:
        server.stop()
    conns = res["connections"]
    closed = sorted(c["closed_after_s"] for c in conns if c.get("closed_after_s") is not None)
    answered = [c["answer"] for c in conns if c.get("answer")]
    normal = res["normal"]
    res.update(before=before, slow_closed=len(closed), slow_total=len(conns),
               closed_after_s={"first": closed[0], "last": closed[-1]} if closed else None,
               answers=sorted({a.splitlines()[0] for a in answered})[:5],
               connect_errors=sum(1 for c in conns if "error" in c))
    res["met"] = len(closed) == len(conns) and normal["failed"] == 0
    res["summary"] = [
        (f"slowloris: {len(conns)} connections, one header byte every {args.slowloris_interval:g} s for "
         f"{args.slowloris_seconds:g} s (up to {max((c.get('bytes_sent', 0) for c in conns), default=0)} bytes each)"),
        f"  closed by the server: {len(closed)}/{len(conns)}"
        + (f" (first after {closed[0]} s, last after {closed[-1]} s; answers: {res['answers'] or 'none'})"
           if closed else "")
        + f" -> {'MET' if len(closed) == len(conns) else 'NOT MET'}",
        f"  normal requests meanwhile: {normal['ok']} ok, {normal['failed']} failed, p50 "
        f"{normal['latency_ms']['p50']} ms, p99 {normal['latency_ms']['p99']} ms"
        + (f"; errors {normal['errors']}" if normal["errors"] else ""),
        (f"  server fds: before {before['fds']}, middle {res['middle']['fds']}, end {res['after']['fds']}; RSS MiB "
         f"{mib(before['rss_kib'])} -> {mib(res['after']['rss_kib'])}"),
    ]
    return res


# ----------------------------------------------------------------------------- main

RUNNERS: dict[str, Callable[[argparse.Namespace, Path], dict[str, Any]]] = {
    "unary-rss": section_unary_rss, "stream-rss": section_stream_rss, "open-streams": section_open_streams,
    "slow-reader": section_slow_reader, "wal": section_wal, "slowloris": section_slowloris,
}
QUICK = {"unary_requests": 5_000, "unary_warmup": 1_000, "unary_every": 500, "stream_requests": 1_000,
         "stream_warmup": 200, "stream_every": 100, "open_streams": 100, "slow_seconds": 8.0, "slow_close_wait": 15.0,
         "wal_requests": 5_000, "wal_every": 500, "slowloris_connections": 20, "slowloris_seconds": 12.0,
         "slowloris_interval": 2.0}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help=f"comma-separated sections: {', '.join(SECTIONS)}")
    ap.add_argument("--quick", action="store_true", help="every count shrunk (e.g. 100k -> 5k): a smoke test")
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight (unary-rss, stream-rss, wal)")
    ap.add_argument("--driver", choices=("wrk", "loadgen"), default="wrk", help="unary load (wrk when installed)")
    ap.add_argument("--unary-requests", type=int, default=100_000)
    ap.add_argument("--unary-warmup", type=int, default=10_000)
    ap.add_argument("--unary-every", type=int, default=2_000, help="unary-rss: a sample every this many answers")
    ap.add_argument("--stream-requests", type=int, default=20_000)
    ap.add_argument("--stream-warmup", type=int, default=2_000)
    ap.add_argument("--stream-every", type=int, default=500)
    ap.add_argument("--open-streams", type=int, default=1_000)
    ap.add_argument("--open-rounds", type=int, default=2, help="open-streams: open-all/close-all cycles")
    ap.add_argument("--slow-seconds", type=float, default=30.0, help="slow-reader: how long the client does not read")
    ap.add_argument("--flood-kib", type=int, default=32, help="slow-reader: KiB per chunk of the flood agent")
    ap.add_argument("--flood-interval-ms", type=int, default=20, help="slow-reader: ms between chunks")
    ap.add_argument("--slow-close-wait", type=float, default=90.0,
                    help="slow-reader: after the cancel, how long to watch for the server closing the connection")
    ap.add_argument("--no-slow-control", dest="slow_control", action="store_false",
                    help="slow-reader: skip the control run with a reading client")
    ap.add_argument("--wal-requests", type=int, default=50_000)
    ap.add_argument("--wal-every", type=int, default=1_000)
    ap.add_argument("--slowloris-connections", type=int, default=100)
    ap.add_argument("--slowloris-seconds", type=float, default=60.0)
    ap.add_argument("--slowloris-interval", type=float, default=5.0, help="seconds between a slow client's bytes")
    args = ap.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            if getattr(args, key) == ap.get_default(key):  # an explicit option wins over --quick
                setattr(args, key, value)
    args.sections = [s.strip() for s in args.only.split(",")] if args.only else list(SECTIONS)
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown section(s) in --only: {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        raise SystemExit("needs aiohttp: pip install -e '.[bench]'") from None
    fd_limit = raise_fd_limit()
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    tmp = Path(tempfile.mkdtemp(prefix="parley-resources-"))
    env = machine_info()
    command = shlex.join([Path(sys.executable).name, *sys.argv])
    print(f"# resources {stamp}: {env['nproc']} cores, {env['cpu_model']}, load {env['loadavg_start']}, "
          f"fd limit {fd_limit}, {'quick' if args.quick else 'full'} run; servers in {tmp}", flush=True)
    results: dict[str, Any] = {}
    t0 = time.time()
    for name in args.sections:
        t1 = time.time()
        print(f"## {name} ...", flush=True)
        try:
            results[name] = RUNNERS[name](args, tmp)
        except Exception as exc:  # noqa: BLE001 - one section failing does not lose the others
            results[name] = {"failed": f"{type(exc).__name__}: {exc}", "summary": [f"{name}: FAILED: {exc}"]}
        results[name]["section_s"] = round(time.time() - t1, 1)
        print("\n".join(results[name]["summary"]), flush=True)
    env["loadavg_end"] = os.getloadavg()
    elapsed = time.time() - t0
    head = (f"Resources run {stamp} ({elapsed:.0f} s, `{command}`): {env['nproc']} cores ({env['cpu_model']}), "
            f"{env['uname']}, load average {' '.join(f'{x:.2f}' for x in env['loadavg_start'])} before, "
            f"{' '.join(f'{x:.2f}' for x in env['loadavg_end'])} after; Parley at {env['git'].get('commit', '?')[:10]}"
            f"{' (src modified)' if env['git'].get('dirty_src') else ''}.")
    report = "\n".join([head, "", *(line for name in args.sections for line in results[name]["summary"])])
    print("\n" + report)
    config = {k: v for k, v in vars(args).items()}
    (OUT / f"resources-{stamp}.json").write_text(json.dumps(
        {"stamp": stamp, "command": command, "config": config, "environment": env, "elapsed_s": round(elapsed, 1),
         "tmp": str(tmp), "sections": results}, indent=2, default=str))
    (OUT / f"resources-{stamp}.md").write_text(report + "\n")
    print(f"\nraw results: {OUT / f'resources-{stamp}.json'}")


if __name__ == "__main__":
    main()
