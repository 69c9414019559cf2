"""The LLM-shaped benchmarks of bench/README.md run as users run them (subprocesses against a real `parley serve`),
at a smoke test's size: a change to the bench's shared code broke `bench/mem_probe.py` for a session without a test
noticing. Nothing here is timed; each run must deliver every token, in order, and report what it measured."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def run(*args: str) -> str:
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_llm_stream_quick_delivers_every_token_and_counts_the_tail_file_bytes() -> None:
    """`bench/llm_stream.py --quick` (bench/README.md) against SQLite: every token delivered, in order, and the
    streamed tokens' disk writes counted (the tail file's records included: tail_file)."""
    out = run(str(BENCH / "llm_stream.py"), "--quick", "--servers", "sqlite")
    raw = re.search(r"raw results: (\S+)", out)
    assert raw, out
    runs = json.loads(Path(raw.group(1)).read_text())["runs"]
    assert [r["server"] for r in runs] == ["sqlite"]
    r = runs[0]
    assert r["streams_failed"] == 0 and r["order_errors"] == 0, r
    assert r["tokens_delivered"] == r["tokens_expected"] == r["streams"] * r["tokens_per_stream"], r
    assert r["disk_bytes_per_token"] > 0


def test_mem_probe_reports_the_memory_of_a_small_wave(tmp_path: Path) -> None:
    """`bench/mem_probe.py` (bench/README.md) at 5 streams x 10 tokens: a dump before, during and after the wave,
    and every token delivered."""
    out = run(str(BENCH / "mem_probe.py"), "--streams", "5", "--tokens", "10", "--interval-ms", "20",
              "--out", str(tmp_path / "mp"))
    assert re.search(r"dump1 idle: VmRSS \d+ KiB", out) and "after: VmRSS" in out, out
    assert re.search(r"failed 0, delivered 50\b", out), out
