#!/usr/bin/env python3
"""A closed-loop load generator for any A2A endpoint: JSON-RPC, HTTP+JSON (REST) or gRPC.

    python bench/loadgen.py URL --scenario unary|stream|get|card --protocol 1.0|0.3 \
        [--binding jsonrpc|rest|grpc] --concurrency N --duration S [--requests N]

`URL` is the agent's JSON-RPC endpoint (e.g. http://127.0.0.1:9001/), its REST base URL
with `--binding rest`, or the gRPC target host:port with `--binding grpc`. Scenarios
(JSON-RPC binding):

  unary   message/send (0.3, kind-tagged message) or SendMessage (1.0, header
          `A2A-Version: 1.0`, parts [{"text": ...}], role ROLE_USER); every request has a
          fresh messageId and must come back as a completed task.
  stream  message/stream / SendStreamingMessage; the SSE body is read to the end and
          must end with a completed status. Reports time-to-first-event and events/s.
  get     tasks/get / GetTask of one task created (by a unary send) during warm-up.
  card    GET /.well-known/agent-card.json at the URL's origin (or --card-url).

Other bindings (unary only):

  --binding rest   POST {URL}/message:send, header `A2A-Version: 1.0`, body {"message": {...}}
                   (1.0, `parts`), or POST {URL}/v1/message:send without the header and the
                   0.3 ProtoJSON message (`content`, role ROLE_USER) (0.3). The answer must be
                   {"task": {...}} in state TASK_STATE_COMPLETED.
  --binding grpc   lf.a2a.v1.A2AService/SendMessage (A2A 1.0 only) over grpc.aio, metadata
                   `a2a-version: 1.0`, `tenant` from --tenant (empty: the default agent). The
                   protobuf messages come from the a2a-sdk's generated a2a_pb2 (or Parley's
                   when the SDK is not installed); the call is made with
                   `channel.unary_unary`, so no service stub module is imported. All N workers
                   share --grpc-channels channels (default 1: one HTTP/2 connection).

N workers each keep one request in flight (closed loop) over a shared keep-alive
connection pool of N connections (HTTP bindings). The run stops by itself after --duration seconds
or --requests requests, whichever comes first; requests still in flight at the
deadline are allowed to finish (bounded by --timeout) and counted.

Prints one JSON object: requests/s, latency p50/p90/p99 (ms), errors (with a few
samples), and for `stream` ttfe p50/p90/p99 (ms) and events/s. Client CPU use is
reported too, so a saturated client can be told from a slow server.

HTTP clients: aiohttp (default when installed; markedly cheaper per request) or
httpx (`--client httpx`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

try:  # a fast JSON decoder when available (Parley depends on msgspec); stdlib json otherwise
    import msgspec

    _decode = msgspec.json.decode
except ImportError:  # pragma: no cover
    _decode = json.loads

DEFAULT_TEXT = "the quick brown fox jumps over the lazy dog and runs away"  # 12 words: 4 echo chunks
SCENARIOS = ("unary", "stream", "get", "card")
BINDINGS = ("jsonrpc", "rest", "grpc")

# ----------------------------------------------------------------------------- requests


class Protocol:
    """How to phrase each operation in one A2A protocol version."""

    def __init__(self, version: str, text: str) -> None:
        self.version = version
        text_json = json.dumps(text)
        if version == "1.0":
            self.headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
            self.send_method, self.stream_method, self.get_method = "SendMessage", "SendStreamingMessage", "GetTask"
            self._msg_head = '{"role":"ROLE_USER","parts":[{"text":' + text_json + '}],"messageId":"'
        else:
            self.headers = {"Content-Type": "application/json"}
            self.send_method, self.stream_method, self.get_method = "message/send", "message/stream", "tasks/get"
            self._msg_head = (
                '{"kind":"message","role":"user","parts":[{"kind":"text","text":' + text_json + '}],"messageId":"'
            )
        self._run = uuid.uuid4().hex[:12]
        self._n = 0

    def _message_id(self) -> str:
        self._n += 1
        return f"lg-{self._run}-{self._n}"

    def send_body(self, method: str) -> bytes:
        """A JSON-RPC request carrying a fresh message (a new messageId every call)."""
        self._n += 1
        return (
            '{"jsonrpc":"2.0","id":'
            + str(self._n)
            + ',"method":"'
            + method
            + '","params":{"message":'
            + self._msg_head
            + self._message_id()
            + '"}}}'
        ).encode()

    def get_body(self, task_id: str) -> bytes:
        self._n += 1
        return json.dumps(
            {"jsonrpc": "2.0", "id": self._n, "method": self.get_method, "params": {"id": task_id}}
        ).encode()

    # --- response checks: None when fine, else a short reason --------------------

    def task_of(self, result: Any) -> dict | None:
        if not isinstance(result, dict):
            return None
        if self.version == "1.0":  # SendMessage wraps the task ({"task": ...}); GetTask returns it bare
            task = result.get("task", result)
            return task if isinstance(task, dict) and "id" in task and "status" in task else None
        return result if result.get("kind", "task") == "task" and "id" in result else None

    def completed(self, status: Any) -> bool:
        state = status.get("state") if isinstance(status, dict) else None
        return state == ("TASK_STATE_COMPLETED" if self.version == "1.0" else "completed")

    def check_rpc(self, body: bytes) -> tuple[str | None, Any]:
        try:
            obj = _decode(body)
        except (ValueError, TypeError):  # json.JSONDecodeError and msgspec.DecodeError are ValueErrors
            return "invalid JSON response", None
        if not isinstance(obj, dict):
            return "response is not a JSON object", None
        if "error" in obj:
            err = obj["error"]
            return f"JSON-RPC error {err.get('code') if isinstance(err, dict) else err}", None
        if "result" not in obj:
            return "no result", None
        return None, obj["result"]

    def check_task(self, body: bytes, want_completed: bool = True) -> tuple[str | None, str | None]:
        """(problem, task id) of a unary response that should be a (completed) task."""
        problem, result = self.check_rpc(body)
        if problem:
            return problem, None
        task = self.task_of(result)
        if not task:
            return "result is not a task", None
        if want_completed and not self.completed(task.get("status")):
            return f"task not completed: {task.get('status')}", task.get("id")
        return None, task.get("id")

    def is_final(self, result: Any) -> bool:
        """Whether a stream event is the completed status update."""
        if not isinstance(result, dict):
            return False
        if self.version == "1.0":
            su = result.get("statusUpdate")
            return isinstance(su, dict) and self.completed(su.get("status"))
        return result.get("kind") == "status-update" and self.completed(result.get("status"))


class RestUnary:
    """SendMessage over the HTTP+JSON (REST) binding: 1.0 at {base}/message:send, 0.3 at {base}/v1/message:send."""

    def __init__(self, base_url: str, version: str, text: str) -> None:
        base = base_url.rstrip("/")
        text_json = json.dumps(text)
        if version == "1.0":
            self.url = base + "/message:send"
            self.headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
            parts = '"parts":[{"text":' + text_json + "}]"
        else:  # 0.3 HTTP+JSON: the ProtoJSON of the 0.3 proto (`content`, ROLE_USER), no A2A-Version header
            self.url = base + "/v1/message:send"
            self.headers = {"Content-Type": "application/json"}
            parts = '"content":[{"text":' + text_json + "}]"
        self._head = '{"message":{"role":"ROLE_USER",' + parts + ',"messageId":"'
        self._run = uuid.uuid4().hex[:12]
        self._n = 0

    def body(self) -> bytes:
        self._n += 1
        return (self._head + f"lg-{self._run}-{self._n}" + '"}}').encode()

    @staticmethod
    def check(body: bytes) -> str | None:
        """None when the body is {"task": {...}} in state TASK_STATE_COMPLETED, else a short reason."""
        try:
            obj = _decode(body)
        except (ValueError, TypeError):
            return "invalid JSON response"
        task = obj.get("task") if isinstance(obj, dict) else None
        if not isinstance(task, dict) or "id" not in task:
            return "response is not {task}"
        status = task.get("status")
        state = status.get("state") if isinstance(status, dict) else None
        return None if state == "TASK_STATE_COMPLETED" else f"task not completed: {state}"


class GrpcUnary:
    """SendMessage over gRPC (A2A 1.0, lf.a2a.v1.A2AService) on grpc.aio channels shared by all workers.

    Uses the a2a-sdk's generated messages (Parley's when the SDK is missing; each process loads only one
    of the two, so their shared proto symbols never clash) and `channel.unary_unary` directly.
    """

    METHOD = "/lf.a2a.v1.A2AService/SendMessage"

    def __init__(self, target: str, text: str, tenant: str, channels: int, timeout: float) -> None:
        import grpc
        import grpc.aio

        try:
            from a2a.types import a2a_pb2 as pb
        except ImportError:  # pragma: no cover
            from parley.grpc import a2a_pb2 as pb
        self.grpc = grpc
        self.pb = pb
        self.text, self.tenant, self.timeout = text, tenant, timeout
        self.metadata = (("a2a-version", "1.0"),)
        # separate channels get separate connections only with a local subchannel pool
        options = [("grpc.use_local_subchannel_pool", 1)] if channels > 1 else []
        target = target.removeprefix("grpc://").rstrip("/")
        self.channels = [grpc.aio.insecure_channel(target, options=options) for _ in range(channels)]
        self.calls = [
            ch.unary_unary(
                self.METHOD,
                request_serializer=pb.SendMessageRequest.SerializeToString,
                response_deserializer=pb.SendMessageResponse.FromString,
            )
            for ch in self.channels
        ]
        self._run = uuid.uuid4().hex[:12]
        self._n = 0

    async def send(self) -> str | None:
        """One SendMessage; None when the answer is a completed task, else a short reason."""
        pb = self.pb
        self._n += 1
        call = self.calls[self._n % len(self.calls)]
        request = pb.SendMessageRequest(
            tenant=self.tenant,
            message=pb.Message(
                message_id=f"lg-{self._run}-{self._n}", role=pb.ROLE_USER, parts=[pb.Part(text=self.text)]
            ),
        )
        try:
            response = await call(request, metadata=self.metadata, timeout=self.timeout)
        except self.grpc.aio.AioRpcError as exc:
            return f"gRPC {exc.code().name}: {exc.details()}"[:200]
        if not response.HasField("task"):
            return "response is not a task"
        state = response.task.status.state
        return None if state == pb.TASK_STATE_COMPLETED else f"task not completed: {pb.TaskState.Name(state)}"

    async def close(self) -> None:
        for ch in self.channels:
            await ch.close()


# ----------------------------------------------------------------------------- HTTP clients


class Client:
    async def post(self, url: str, body: bytes, headers: dict) -> tuple[int, bytes]: ...
    async def get(self, url: str, headers: dict) -> tuple[int, bytes]: ...
    def post_stream(self, url: str, body: bytes, headers: dict) -> Any: ...  # async ctx -> (status, chunks)
    async def close(self) -> None: ...


class AiohttpClient(Client):
    def __init__(self, concurrency: int, timeout: float) -> None:
        import aiohttp

        self._aiohttp = aiohttp
        connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency, ttl_dns_cache=None)
        self.session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=timeout),
            auto_decompress=False,
        )

    async def post(self, url: str, body: bytes, headers: dict) -> tuple[int, bytes]:
        async with self.session.post(url, data=body, headers=headers) as r:
            return r.status, await r.read()

    async def get(self, url: str, headers: dict) -> tuple[int, bytes]:
        async with self.session.get(url, headers=headers) as r:
            return r.status, await r.read()

    def post_stream(self, url: str, body: bytes, headers: dict):
        session = self.session

        class _Ctx:
            async def __aenter__(self):
                self.cm = session.post(url, data=body, headers=headers)
                r = await self.cm.__aenter__()
                return r.status, r.content.iter_any()

            async def __aexit__(self, *exc):
                return await self.cm.__aexit__(*exc)

        return _Ctx()

    async def close(self) -> None:
        await self.session.close()


class HttpxClient(Client):
    def __init__(self, concurrency: int, timeout: float) -> None:
        import httpx

        self.client = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
            timeout=httpx.Timeout(timeout),
        )

    async def post(self, url: str, body: bytes, headers: dict) -> tuple[int, bytes]:
        r = await self.client.post(url, content=body, headers=headers)
        return r.status_code, r.content

    async def get(self, url: str, headers: dict) -> tuple[int, bytes]:
        r = await self.client.get(url, headers=headers)
        return r.status_code, r.content

    def post_stream(self, url: str, body: bytes, headers: dict):
        client = self.client

        class _Ctx:
            async def __aenter__(self):
                self.cm = client.stream("POST", url, content=body, headers=headers)
                r = await self.cm.__aenter__()
                return r.status_code, r.aiter_raw()

            async def __aexit__(self, *exc):
                return await self.cm.__aexit__(*exc)

        return _Ctx()

    async def close(self) -> None:
        await self.client.aclose()


def make_client(name: str, concurrency: int, timeout: float) -> Client:
    if name == "auto":
        try:
            import aiohttp  # noqa: F401

            name = "aiohttp"
        except ImportError:
            name = "httpx"
    return AiohttpClient(concurrency, timeout) if name == "aiohttp" else HttpxClient(concurrency, timeout)


def client_name(name: str) -> str:
    if name != "auto":
        return name
    try:
        import aiohttp  # noqa: F401

        return "aiohttp"
    except ImportError:
        return "httpx"


# ----------------------------------------------------------------------------- SSE


async def sse_events(chunks: AsyncIterator[bytes]) -> AsyncIterator[tuple[str | None, bytes]]:
    """(event type, data) of each SSE frame carrying data; handles \\n and \\r\\n line ends."""
    buf = b""
    done = False
    while not done:
        try:
            chunk = await chunks.__anext__()
            buf += chunk
        except StopAsyncIteration:
            done = True
        if b"\r" in buf:
            if buf.endswith(b"\r") and not done:
                continue  # maybe half of a \r\n
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        while True:
            i = buf.find(b"\n\n")
            if i < 0:
                break
            frame, buf = buf[:i], buf[i + 2 :]
            event, data = _parse_frame(frame)
            if data is not None:
                yield event, data
        if done and buf.strip():
            event, data = _parse_frame(buf)
            if data is not None:
                yield event, data


def _parse_frame(frame: bytes) -> tuple[str | None, bytes | None]:
    event = None
    data: list[bytes] = []
    for line in frame.split(b"\n"):
        if line.startswith(b"data:"):
            v = line[5:]
            data.append(v[1:] if v.startswith(b" ") else v)
        elif line.startswith(b"event:"):
            event = line[6:].strip().decode()
    return event, (b"\n".join(data) if data else None)


# ----------------------------------------------------------------------------- the run


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    ttfe: list[float] = field(default_factory=list)
    events: int = 0
    ok: int = 0
    errors: int = 0
    error_samples: dict[str, int] = field(default_factory=dict)

    def error(self, reason: str) -> None:
        self.errors += 1
        if reason in self.error_samples or len(self.error_samples) < 10:
            self.error_samples[reason] = self.error_samples.get(reason, 0) + 1


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, math.ceil(q / 100.0 * len(sorted_values)) - 1))
    return sorted_values[k]


def summary_ms(values: list[float]) -> dict[str, float | None]:
    v = sorted(values)
    out: dict[str, float | None] = {}
    for name, q in (("p50", 50), ("p90", 90), ("p99", 99)):
        p = percentile(v, q)
        out[name] = round(p * 1000, 3) if p is not None else None
    out["mean"] = round(sum(v) / len(v) * 1000, 3) if v else None
    out["max"] = round(v[-1] * 1000, 3) if v else None
    return out


class LoadGen:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.url = args.url
        self.proto = Protocol(args.protocol, args.text)
        parts = urlsplit(args.url)
        self.card_url = args.card_url or urlunsplit(
            (parts.scheme, parts.netloc, "/.well-known/agent-card.json", "", "")
        )
        self.card_headers = {"A2A-Version": "1.0"} if args.protocol == "1.0" else {}
        self.task_id: str | None = None
        self.rest = RestUnary(args.url, args.protocol, args.text) if args.binding == "rest" else None
        self.grpc: GrpcUnary | None = None  # made in run(), on the event loop

    async def one(self, client: Client, stats: Stats | None) -> None:
        """One request of the scenario; records into `stats` (None: warm-up, not recorded)."""
        p = self.proto
        sc = self.args.scenario
        t0 = time.perf_counter()
        ttfe = None
        n_events = 0
        problem: str | None = None
        try:
            if self.grpc is not None:  # binding grpc (unary)
                problem = await self.grpc.send()
            elif self.rest is not None:  # binding rest (unary)
                status, body = await client.post(self.rest.url, self.rest.body(), self.rest.headers)
                problem = f"HTTP {status}" if status != 200 else self.rest.check(body)
            elif sc == "unary":
                status, body = await client.post(self.url, p.send_body(p.send_method), p.headers)
                problem = f"HTTP {status}" if status != 200 else p.check_task(body)[0]
            elif sc == "get":
                status, body = await client.post(self.url, p.get_body(self.task_id or ""), p.headers)
                problem = f"HTTP {status}" if status != 200 else p.check_task(body, want_completed=False)[0]
            elif sc == "card":
                status, body = await client.get(self.card_url, self.card_headers)
                if status != 200:
                    problem = f"HTTP {status}"
                elif not body.startswith(b"{"):
                    problem = "card is not a JSON object"
            else:  # stream
                async with client.post_stream(self.url, p.send_body(p.stream_method), p.headers) as (status, chunks):
                    if status != 200:
                        problem = f"HTTP {status}"
                        async for _ in chunks:
                            pass
                    else:
                        final = False
                        async for event, data in sse_events(chunks):
                            if ttfe is None:
                                ttfe = time.perf_counter() - t0
                            n_events += 1
                            if event == "error":
                                problem = problem or "SSE error event"
                                continue
                            err, result = p.check_rpc(data)
                            if err:
                                problem = problem or err
                            elif p.is_final(result):
                                final = True
                        if problem is None and not final:
                            problem = "stream ended without a completed status"
        except TimeoutError:
            problem = "timeout"
        except Exception as exc:  # noqa: BLE001 - any failure of one request is counted, not raised
            problem = f"{type(exc).__name__}: {exc}"[:200]
        elapsed = time.perf_counter() - t0
        if stats is None:
            return
        if problem is None:
            stats.ok += 1
            stats.latencies.append(elapsed)
            if ttfe is not None:
                stats.ttfe.append(ttfe)
            stats.events += n_events
        else:
            stats.error(problem)
            stats.events += n_events

    async def phase(self, client: Client, seconds: float, max_requests: int | None, stats: Stats | None) -> float:
        """Run the closed loop for `seconds` or `max_requests`; returns the elapsed wall time."""
        deadline = time.perf_counter() + seconds
        budget = [max_requests if max_requests is not None else -1]

        async def worker() -> None:
            while time.perf_counter() < deadline:
                if budget[0] == 0:
                    return
                if budget[0] > 0:
                    budget[0] -= 1
                await self.one(client, stats)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(self.args.concurrency)))
        return time.perf_counter() - t0

    async def prepare(self, client: Client) -> None:
        """For `get`: create the task to read (a completed unary send)."""
        if self.args.scenario != "get" or self.task_id:
            return
        p = self.proto
        status, body = await client.post(self.url, p.send_body(p.send_method), p.headers)
        problem, task_id = p.check_task(body, want_completed=False) if status == 200 else (f"HTTP {status}", None)
        if problem or not task_id:
            raise SystemExit(f"loadgen: could not create a task for the get scenario: {problem}: {body[:300]!r}")
        self.task_id = task_id

    async def run(self) -> dict[str, Any]:
        a = self.args
        if a.binding == "grpc":
            self.grpc = GrpcUnary(a.url, a.text, a.tenant, a.grpc_channels, a.timeout)
            client: Any = None
        else:
            client = make_client(a.client, a.concurrency, a.timeout)
        try:
            await self.prepare(client)
            if a.warmup > 0:
                await self.phase(client, a.warmup, None, None)
            stats = Stats()
            srv0 = process_cpu(a.server_pid)
            ru0 = resource.getrusage(resource.RUSAGE_SELF)
            elapsed = await self.phase(client, a.duration, a.requests, stats)
            ru1 = resource.getrusage(resource.RUSAGE_SELF)
            srv1 = process_cpu(a.server_pid)
        finally:
            if client is not None:
                await client.close()
            if self.grpc is not None:
                await self.grpc.close()
        cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        out: dict[str, Any] = {
            "url": a.url,
            "scenario": a.scenario,
            "protocol": a.protocol,
            "binding": a.binding,
            "client": "grpc.aio" if a.binding == "grpc" else client_name(a.client),
            "concurrency": a.concurrency,
            "duration_s": round(elapsed, 3),
            "requests": stats.ok,
            "errors": stats.errors,
            "error_samples": stats.error_samples,
            "rps": round(stats.ok / elapsed, 2) if elapsed > 0 else 0.0,
            "latency_ms": summary_ms(stats.latencies),
            "client_cpu_s": round(cpu, 3),
            "client_cpu_util": round(cpu / elapsed, 3) if elapsed > 0 else None,
        }
        if srv0 is not None and srv1 is not None:
            server_cpu = srv1 - srv0
            out["server_cpu_s"] = round(server_cpu, 3)
            out["server_cpu_util"] = round(server_cpu / elapsed, 3) if elapsed > 0 else None
            out["server_cpu_us_per_request"] = round(server_cpu / stats.ok * 1e6, 1) if stats.ok else None
        if a.scenario == "stream":
            out["ttfe_ms"] = summary_ms(stats.ttfe)
            out["events"] = stats.events
            out["events_per_s"] = round(stats.events / elapsed, 2) if elapsed > 0 else 0.0
            out["events_per_stream"] = round(stats.events / max(1, stats.ok + stats.errors), 2)
        if a.scenario == "get":
            out["task_id"] = self.task_id
        if a.binding == "grpc":
            out["grpc_channels"] = a.grpc_channels
            out["tenant"] = a.tenant
        return out


def process_cpu(pid: int | None) -> float | None:
    """CPU seconds (user + system) used so far by process `pid` (Linux /proc), or None."""
    split = process_cpu_split(pid)
    return None if split is None else split[0] + split[1]


def process_cpu_split(pid: int | None) -> tuple[float, float] | None:
    """(user, system) CPU seconds used so far by process `pid`, every thread (Linux /proc/PID/stat), or None."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick
    except (OSError, ValueError, IndexError):
        return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Closed-loop load generator for an A2A endpoint (JSON-RPC, REST, gRPC).")
    ap.add_argument(
        "url",
        help="the agent's JSON-RPC URL (e.g. http://127.0.0.1:9001/), its REST base URL (--binding rest) "
        "or the gRPC target host:port (--binding grpc)",
    )
    ap.add_argument("--scenario", choices=SCENARIOS, default="unary")
    ap.add_argument("--protocol", choices=("1.0", "0.3"), default="1.0")
    ap.add_argument(
        "--binding", choices=BINDINGS, default="jsonrpc", help="rest and grpc: the unary scenario only; grpc: 1.0 only"
    )
    ap.add_argument("--tenant", default="", help="gRPC: the request's tenant (Parley: the agent id; empty: default)")
    ap.add_argument("--grpc-channels", type=int, default=1, help="gRPC: channels (connections) the workers share")
    ap.add_argument("--concurrency", "-c", type=int, default=16, help="requests in flight (and connections)")
    ap.add_argument("--duration", "-d", type=float, default=10.0, help="seconds to measure (upper bound)")
    ap.add_argument("--requests", "-n", type=int, default=None, help="stop after this many requests")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of unrecorded load first (0: none)")
    ap.add_argument("--timeout", type=float, default=30.0, help="per-request timeout, seconds")
    ap.add_argument("--text", default=DEFAULT_TEXT, help="message text (unary/stream)")
    ap.add_argument("--card-url", default=None, help="agent card URL (default: URL origin + /.well-known/...)")
    ap.add_argument("--client", choices=("auto", "aiohttp", "httpx"), default="auto")
    ap.add_argument(
        "--server-pid",
        type=int,
        default=None,
        help="also report the CPU time this (local) server process used while measuring",
    )
    ap.add_argument("--compact", action="store_true", help="print the JSON on one line")
    ap.add_argument("--no-uvloop", action="store_true", help="use the default asyncio loop")
    args = ap.parse_args(argv)
    if args.concurrency < 1:
        ap.error("--concurrency must be >= 1")
    if args.duration <= 0 or args.duration > 3600:
        ap.error("--duration must be in (0, 3600]")
    if args.requests is not None and args.requests < 1:
        ap.error("--requests must be >= 1")
    if args.binding != "jsonrpc" and args.scenario != "unary":
        ap.error(f"--binding {args.binding} supports only --scenario unary")
    if args.binding == "grpc" and args.protocol != "1.0":
        ap.error("--binding grpc is A2A 1.0 only (lf.a2a.v1.A2AService)")
    if args.grpc_channels < 1:
        ap.error("--grpc-channels must be >= 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    gen = LoadGen(args)
    runner = asyncio.run
    if not args.no_uvloop:
        try:
            import uvloop

            runner = uvloop.run
        except ImportError:
            pass
    result = runner(gen.run())
    json.dump(result, sys.stdout, indent=None if args.compact else 2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
