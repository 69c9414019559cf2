"""bench/fault_run.py (docs/operations.md, "The fault run"), run as a user runs it, at a small scale: real
replicas on the local PostgreSQL and Redis, SIGKILLs, dropped connections, a Redis stopped and restarted, a
SQLite server SIGKILLed. Nothing acknowledged is lost, no task fails, no subscriber misses or repeats an event
(A2A 1.0 section 3.1.6: SubscribeToTask resumed with Last-Event-ID)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from services import require_postgres, require_redis

REPO = Path(__file__).resolve().parents[2]


def test_fault_run_at_small_scale_loses_and_fails_nothing() -> None:
    require_postgres()
    require_redis()
    proc = subprocess.Popen([sys.executable, str(REPO / "bench" / "fault_run.py"), "--clients", "2", "--faults", "2",
                             "--interval", "1", "--ticks", "5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        stdout, stderr = proc.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        proc.terminate()  # the run stops its replicas on SIGTERM
        stdout, stderr = proc.communicate(timeout=120)
        raise AssertionError(f"the fault run did not end within 900 s:\n{stdout}") from None
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    lines = {m.group(1): dict(re.findall(r"(\w+)=(\d+)", m.group(0)))
             for m in re.finditer(r"^(kills|drops|bus|sqlite)\s+acknowledged=.*$", done.stdout, re.MULTILINE)}
    assert set(lines) == {"kills", "drops", "bus", "sqlite"}, done.stdout
    for scenario, counts in lines.items():
        assert int(counts["acknowledged"]) > 0, (scenario, done.stdout)
        for name in ("lost", "failed", "unfinished", "missed", "duplicated"):
            assert counts[name] == "0", (scenario, name, done.stdout)
    assert "OK: nothing acknowledged lost" in done.stdout
