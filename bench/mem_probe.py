"""What one open LLM-shaped stream costs in memory, and where (issue 25): one bench/llm_stream.py wave against
`parley serve` (bench/mem_probe_server.py) with memory dumps before the wave, at chosen moments of it and after.

    python bench/mem_probe.py --out /tmp/mp                          # SQLite, 100 streams x 200 tokens, 50 ms
    python bench/mem_probe.py --out /tmp/mp --streams 1000 --interval-ms 200
    python bench/mem_probe.py --out /tmp/mp --env MEMPROBE_CACHE=-256  # SQLite's page cache capped at 256 KiB
    python bench/mem_probe.py --out /tmp/mp --env PYTHONMALLOC=malloc --env MALLOC_ARENA_MAX=2
    python bench/mem_probe.py --out /tmp/mp --trace 12 --interval-ms 200   # + tracemalloc snapshots (slow)
    python bench/mem_probe.py --out /tmp/mp --src /path/to/other/src       # another checkout's parley

Prints, per dump, VmRSS, glibc's heap (arena, in use, free), SQLite's own memory, asyncio tasks and GC-tracked
objects, then llm_stream's RSS per stream ((peak - idle) / streams). The dumps stay in --out (see
mem_probe_server.py); `tracemalloc.Snapshot.load(...).statistics("lineno")` reads the snapshots. With --trace the
server is several times slower and falls behind: tokens then share commits, which changes what is held.
"""
import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import llm_stream
from compare import ServerProc, free_port

ap = argparse.ArgumentParser()
ap.add_argument("--store", default="sqlite")
ap.add_argument("--streams", type=int, default=100)
ap.add_argument("--tokens", type=int, default=200)
ap.add_argument("--interval-ms", type=int, default=50)
ap.add_argument("--at", default="0.3,0.6,0.95", help="fractions of the wave's length to dump at")
ap.add_argument("--trace", type=int, default=0)
ap.add_argument("--out", required=True)
ap.add_argument("--env", action="append", default=[])
ap.add_argument("--src", default=str(BENCH.parent / "src"), help="where parley is imported from")
a = ap.parse_args()
out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
for f in out.glob("dump*"): f.unlink()
tmp = Path(tempfile.mkdtemp(prefix="memprobe-"))
port = free_port()
py = sys.executable
cmd = ["taskset", "-c", "0", py, str(BENCH / "mem_probe_server.py"), "serve", "--app", "llm_agents:app", "--port", str(port),
       "--log-level", "warning"] + (["--db", str(tmp / "l.db")] if a.store == "sqlite" else ["--memory"])
env = {"PYTHONPATH": f"{BENCH}:{a.src}", "MEMPROBE_DIR": str(out), "MEMPROBE_TRACE": str(a.trace)}
for kv in a.env:
    k, v = kv.split("=", 1); env[k] = v
s = ServerProc(a.store, cmd, port, tmp / "server.log", env=env)
args = argparse.Namespace(gen_procs=0, stagger_ms=None, timeout=300.0, tmp=tmp, list_every=None)
llm_stream.raise_fd_limit()
os.sched_setaffinity(0, {1})
s.start()
n = [0]
def dump(label):
    n[0] += 1
    os.kill(s.pid, signal.SIGUSR1)
    p = out / f"dump{n[0]}.json"
    while not p.exists(): time.sleep(0.05)
    time.sleep(0.3)
    d = json.loads(p.read_text())
    print(f"dump{n[0]} {label}: VmRSS {d['VmRSS']} KiB, arena {d['mallinfo']['arena']//1024} KiB, "
          f"hblkhd {d['mallinfo']['hblkhd']//1024}, uord {d['mallinfo']['uordblks']//1024}, ford {d['mallinfo']['fordblks']//1024}, sqlite {d['sqlite_used']//1024} KiB, tasks {d['tasks']}, gc {d['gc_total']}"
          + (f", traced {d['traced'][0]//1024} KiB" if 'traced' in d else ""), flush=True)
    (out / f"dump{n[0]}.label").write_text(label)
try:
    w = llm_stream.wave(s, min(4, a.streams), 5, a.interval_ms, args, record=False)
    time.sleep(1.0)
    dump("idle")
    res = {}
    t = threading.Thread(target=lambda: res.update(llm_stream.wave(s, a.streams, a.tokens, a.interval_ms, args)))
    called = time.time()
    t.start()
    procs = max(1, -(-a.streams // 500))
    start_at = called + 2.0 + 0.3 * procs
    length = a.tokens * a.interval_ms / 1000
    for frac in [float(x) for x in a.at.split(",")]:
        time.sleep(max(0, start_at + frac * length - time.time()))
        dump(f"wave {frac:.2f}")
    t.join()
    dump("after")
    print(f"RSS idle {res['rss_idle_kib']} peak {res['rss_peak_kib']} per stream {res['rss_kib_per_stream']} KiB; "
          f"failed {res['streams_failed']}, delivered {res['tokens_delivered']}, delay p99 {res['delay_ms']['p99']}")
    (out / "wave.json").write_text(json.dumps(res, default=str))
finally:
    s.stop()
