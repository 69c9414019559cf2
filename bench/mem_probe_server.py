"""`parley serve ...` that writes a memory dump into $MEMPROBE_DIR at each SIGUSR1 (bench/mem_probe.py starts it).

Each dump N: dumpN.json (VmRSS, RssAnon, RssFile; glibc mallinfo2; SQLite's sqlite3_memory_used; GC-tracked objects
by type; asyncio tasks by coroutine), dumpN.pymalloc (sys._debugmallocstats: pymalloc's arenas and blocks) and, with
MEMPROBE_TRACE=F, dumpN.snap (a tracemalloc snapshot of F frames, tracing started right after the first dump).
MEMPROBE_CACHE=N runs `PRAGMA cache_size=N` on every SQLite connection (a diagnosis of the page cache's share).
Diagnosis only: nothing here is part of Parley.
"""
import collections
import ctypes
import gc
import json
import os
import signal
import sys
import time
import tracemalloc

OUT = os.environ["MEMPROBE_DIR"]
TRACE = int(os.environ.get("MEMPROBE_TRACE", "0"))
libc = ctypes.CDLL("libc.so.6")

class Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                 "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Mallinfo2
n = [0]
sq = ctypes.CDLL("libsqlite3.so.0")
sq.sqlite3_memory_used.restype = ctypes.c_int64
sq.sqlite3_memory_highwater.restype = ctypes.c_int64
sq.sqlite3_memory_highwater.argtypes = [ctypes.c_int]
CACHE = os.environ.get("MEMPROBE_CACHE")
if CACHE:
    import sqlite3
    _connect = sqlite3.connect
    def connect(*a, **k):
        db = _connect(*a, **k)
        db.execute(f"PRAGMA cache_size={CACHE}")
        return db
    sqlite3.connect = connect

def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "RssAnon", "RssFile")):
                yield line.split()[0].rstrip(":"), int(line.split()[1])

def dump(sig, frame):
    n[0] += 1
    base = f"{OUT}/dump{n[0]}"
    info = dict(rss())
    mi = libc.mallinfo2()
    info["sqlite_used"] = sq.sqlite3_memory_used(); info["sqlite_high"] = sq.sqlite3_memory_highwater(0)
    info["mallinfo"] = {f: getattr(mi, f) for f, _ in Mallinfo2._fields_}
    saved = os.dup(2)  # sys._debugmallocstats writes pymalloc's statistics to fd 2
    with open(base + ".pymalloc", "w") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    counts = collections.Counter(type(o).__name__ for o in gc.get_objects())
    info["gc_top"] = counts.most_common(40)
    info["gc_total"] = sum(counts.values())
    try:
        import asyncio
        info["tasks"] = len(asyncio.all_tasks(asyncio.get_running_loop()))
        coros = collections.Counter(getattr(t.get_coro(), "__qualname__", "?") for t in asyncio.all_tasks(asyncio.get_running_loop()))
        info["task_coros"] = coros.most_common(20)
    except RuntimeError as e:  # no running loop
        info["tasks"] = repr(e)
    if tracemalloc.is_tracing():
        info["traced"] = tracemalloc.get_traced_memory()
        tracemalloc.take_snapshot().dump(base + ".snap")
    info["t"] = time.time()
    with open(base + ".json", "w") as f:
        json.dump(info, f, indent=1)
    if TRACE and n[0] == 1:
        tracemalloc.start(TRACE)

signal.signal(signal.SIGUSR1, dump)
from parley.cli import main

sys.argv = ["parley", *sys.argv[1:]]
main()
