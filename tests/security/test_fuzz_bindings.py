"""Fuzzing every binding of a secured server with malformed and hostile requests.

For each binding (JSON-RPC 1.0 and 0.3, HTTP+JSON 1.0 and 0.3, gRPC) this sends FUZZ_REQUESTS requests
(10,000 by default; `PARLEY_FUZZ_REQUESTS` changes it) to a real uvicorn server on 127.0.0.1 and its gRPC
port (in a process of its own, so that client and server do not share one interpreter; its log goes to a
file the test reads), 16 in flight over one persistent client (httpx, or one gRPC channel): every other
request carries the valid API key of principal P2, the others none or a bad one (unknown, revoked,
malformed, another scheme, or the valid key of a principal P3 that only opens another agent). Principal
P1 owns tasks on the same server: two completed ones and one waiting in input-required; the generators aim
at them (P1's task and context ids are in the pool of ids every mutation draws from).

The requests start from valid requests of every operation and are mutated: fields dropped, replaced by
values Hypothesis generated (derandomized) or by hostile values (huge numbers, NaN, lone surrogates, NUL,
huge strings and lists, deep nesting), retyped, renamed, added; bodies truncated, bit-flipped, given invalid
UTF-8, duplicate keys, comments, a BOM; random bytes; wrong methods, paths, verbs, query parameters,
Content-Types and A2A-Versions; bodies over the size limit. gRPC gets random and corrupted protobuf bytes
(truncated, invalid UTF-8, bad wire types, overlong lengths, nesting past the parser's limit) and well-formed
messages with bad field values (out-of-range enums and timestamps, NaN in a Struct, 200 parts, ...).
Everything comes from seeded generators: every run sends the same requests.

Asserted for every binding: no HTTP 5xx, no JSON-RPC -32603, no google.rpc.Status INTERNAL, no gRPC
INTERNAL or UNKNOWN, no hang, no success without valid credentials (the public cards aside), no ERROR
record (or traceback, or "unexpected") in the server's log, no answer carrying P1's texts or one of P1's
tasks (a task, an update, a history message or a push config of it; a stranger's answer carries none of
P1's ids either), and afterwards P1's tasks read exactly as before (the same bytes) and every task P2 made
still lists and decodes.

`pytest -s` prints the outcome histogram of each binding; `PARLEY_FUZZ_REPORT=<file.json>` also writes them.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from parley.protocol import models as m
from parley.protocol.codec import from_wire
from parley.protocol.errors import A2AError
from support import needs

from .fuzzkit import (
    FUZZ_BODY_LIMIT,
    V1,
    Campaign,
    GrpcFuzzer,
    HttpFuzzer,
    Secured,
    Targets,
    alternating,
    hypothesis_pools,
    p1_snapshot,
    run_grpc,
    run_http,
    secured_server,
)

FUZZ_REQUESTS = int(os.environ.get("PARLEY_FUZZ_REQUESTS", "10000"))
SEED = int(os.environ.get("PARLEY_FUZZ_SEED", "20250601"))
CONCURRENCY = 16
BINDINGS = ["JSONRPC-1.0", "JSONRPC-0.3", "HTTP+JSON-1.0", "HTTP+JSON-0.3", "GRPC-1.0"]
CAMPAIGNS: dict[str, Campaign] = {}


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[Secured, list[bytes]]]:
    """The secured server, and P1's tasks as P1 reads them before any fuzzing."""
    with secured_server(max_body_bytes=FUZZ_BODY_LIMIT, child=True) as srv:
        before = p1_snapshot(srv)
        assert p1_snapshot(srv) == before, "reading P1's tasks twice must give the same bytes"
        yield srv, before
    report = os.environ.get("PARLEY_FUZZ_REPORT")
    if report and CAMPAIGNS:
        Path(report).write_text(json.dumps({"seed": SEED, "requests_per_binding": FUZZ_REQUESTS,
                                            "concurrency": CONCURRENCY,
                                            "campaigns": [c.as_dict() for c in CAMPAIGNS.values()]}, indent=2))


def _params() -> list[Any]:
    skip = needs("grpc", "grpc")
    return [pytest.param(b, id=b, marks=[skip] if b.startswith("GRPC") else []) for b in BINDINGS]


@pytest.mark.parametrize("binding", _params())
def test_fuzz_binding(world: tuple[Secured, list[bytes]], binding: str) -> None:
    srv, before = world
    pools = hypothesis_pools()
    targets = Targets.of(srv)
    keys = {"p2": srv.p2_key, "other": srv.other_key, "revoked": srv.revoked_key}
    rng = random.Random(f"{SEED}-{binding}")
    campaign = Campaign(binding)
    CAMPAIGNS[binding] = campaign
    srv.log.clear()
    with srv.log.isolated():
        if binding.startswith("GRPC"):
            fuzzer = GrpcFuzzer(rng, pools, targets, keys)
            asyncio.run(run_grpc(srv, alternating(fuzzer.case, FUZZ_REQUESTS), campaign, concurrency=CONCURRENCY))
        else:
            http_fuzzer = HttpFuzzer(binding, rng, pools, targets, keys)
            asyncio.run(run_http(srv, alternating(http_fuzzer.case, FUZZ_REQUESTS), campaign,
                                 concurrency=CONCURRENCY))
    print("\n" + campaign.table())
    if os.environ.get("PARLEY_FUZZ_VERBOSE"):
        print(campaign.first_of_each())

    assert campaign.sent == FUZZ_REQUESTS
    assert sum(campaign.outcomes[False].values()) == sum(campaign.outcomes[True].values()) == FUZZ_REQUESTS // 2
    problems = []
    if campaign.violations:
        problems.append(f"{sum(campaign.violations.values())} answers broke the rules:\n" + campaign.table())
    bad_log = srv.log.bad()
    if bad_log:
        problems.append(f"{len(bad_log)} ERROR records (or tracebacks) in the server's log, e.g.:\n"
                        + srv.log.describe(bad_log, 3))
    after = p1_snapshot(srv)
    if after != before:
        changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
        problems.append(f"P1's tasks changed (reads {changed}): before {before[changed[0]][:500]!r}, "
                        f"after {after[changed[0]][:500]!r}")
    problems += _p2_tasks_readable(srv)
    assert not problems, "\n\n".join(problems)


def _p2_tasks_readable(srv: Secured) -> list[str]:
    """Every task P2 made (its own seed task and whatever the fuzzing created) still lists and reads."""
    problems = []
    with httpx.Client(base_url=srv.url, timeout=30, headers={"X-API-Key": srv.p2_key, **V1}) as http:
        token, pages, seen = None, 0, 0
        while pages < 200:
            params: dict[str, Any] = {"pageSize": 100, "includeArtifacts": True, "historyLength": 5}
            if token:
                params["pageToken"] = token
            body = http.post("/", json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": params}).json()
            if "result" not in body:
                return [f"P2's tasks no longer list: {body}"]
            page = body["result"]
            for task in page["tasks"]:
                try:
                    from_wire(task, m.Task, what="result")
                except A2AError as exc:
                    problems.append(f"a task of P2's no longer reads as a Task: {exc} - {json.dumps(task)[:300]}")
                if task["id"] in srv.p1_task_ids:
                    problems.append(f"P1's task {task['id']} is listed for P2")
            seen += len(page["tasks"])
            pages += 1
            token = page.get("nextPageToken")
            if not token:
                break
        for tid in srv.p2_task_ids:
            got = http.post("/", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": tid}}).json()
            if "result" not in got:
                problems.append(f"P2's seed task {tid} no longer reads: {got}")
        if seen < len(srv.p2_task_ids):
            problems.append(f"P2 lists {seen} tasks, fewer than it made before the fuzzing")
    return problems
