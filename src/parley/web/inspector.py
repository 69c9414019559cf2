"""The dashboard's inspector: reach any A2A agent from the server, through the webhooks' SSRF guard, and say
what its card and its answers get right and wrong (docs/dashboard.md, "Inspect any agent").

It calls every binding a card offers: JSON-RPC (1.0 and 0.3), HTTP+JSON (1.0, and 0.3's ProtoJSON of the 0.3
proto) and gRPC (1.0, through parley.web.inspector_grpc, which needs the `parley-a2a[grpc]` extra).

Every request goes to an address parley.push.ssrf.UrlGuard checked and pinned (public addresses only, unless
`[server.dashboard] inspect_allow` lists them; no redirects followed), within a time limit, and reads at most
MAX_BYTES of an answer (a stream: of each frame, and MAX_FRAMES frames); a gRPC call the same, per message.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import httpx

from parley.client.rest import ROUTES
from parley.protocol import v0_3, v0_3_rest, v1_0
from parley.protocol.errors import A2AError
from parley.protocol.operations import Operation
from parley.push.ssrf import UnsafeUrl, UrlGuard, parse_allow
from parley.web.card_check import Check, check_v03, check_v1
from parley.web.response_check import check_grpc, check_response, check_rest, check_rest_v03

CARD_PATH = "/.well-known/agent-card.json"
TIMEOUT_SECONDS = 15.0  # a unary call, or the wait for a stream's next frame
MAX_BYTES = 2_000_000  # of a card or a response body, or one SSE frame
MAX_FRAMES = 1_000  # of one stream
MAX_HEADERS = 20  # extra request headers the user may add
GRPC_EXTRA = "gRPC needs the parley-a2a[grpc] extra on this server (pip install 'parley-a2a[grpc]')"


def grpc_installed() -> bool:
    """Whether this install can call gRPC: the `grpc` extra's grpcio, protobuf and googleapis-common-protos."""
    try:
        return all(importlib.util.find_spec(name) is not None
                   for name in ("grpc", "google.protobuf", "google.rpc.status_pb2"))
    except ModuleNotFoundError:  # `google` itself is absent
        return False


class InspectError(Exception):
    """Why the inspector cannot reach an agent (a refused address, a timeout, a body too large...)."""


@dataclass(slots=True)
class Endpoint:
    """One way to call the agent: its binding, URL and protocol version, from the card."""

    binding: str
    url: str
    version: str
    tenant: str = ""

    @property
    def why_not(self) -> str | None:
        """Why the inspector cannot call it (None: it can): an unknown binding, gRPC in 0.3, gRPC without the
        grpc extra."""
        if self.binding in ("JSONRPC", "HTTP+JSON"):
            return None
        if self.binding != "GRPC":
            return f"the inspector does not know the binding {self.binding!r}"
        if self.version != "1.0":
            return "the inspector calls gRPC in A2A 1.0 only"
        return None if grpc_installed() else GRPC_EXTRA

    @property
    def callable(self) -> bool:
        """Whether the inspector can call it: JSON-RPC and HTTP+JSON (1.0, 0.3), gRPC 1.0 (with the grpc extra)."""
        return self.why_not is None

    @property
    def key(self) -> str:
        """How the page names it: binding, version and URL (one URL may serve 1.0 and 0.3, JSON-RPC and REST)."""
        return f"{self.binding} {self.version} {self.url}"


@dataclass(slots=True)
class CardReport:
    """The fetched card, its version, the checks of that version and the endpoints it offers."""

    url: str
    card: Any
    version: str
    checks: list[Check]
    endpoints: list[Endpoint] = field(default_factory=list)


@dataclass(slots=True)
class Exchange:
    """One call and what came back: the request sent, the response (or a stream's frames), each checked."""

    request: dict[str, Any]
    status: int | str  # the HTTP status, or the gRPC status's name ("OK", "NOT_FOUND"...)
    frames: list[dict[str, Any]]  # {"body": JSON or text, "checks": [Check...]}


class Inspector:
    """Talks to other agents on the dashboard user's behalf (see the module docstring)."""

    def __init__(self, allow: list[str]) -> None:
        self.guard = UrlGuard(parse_allow(allow, "dashboard.inspect_allow"), subject="agent",
                              allow_hint="[server.dashboard] inspect_allow")
        self._ids = itertools.count(1)

    async def card(self, url: str, headers: dict[str, str]) -> CardReport:
        """The agent card at `url` (the card's own URL, or the agent's base URL: the well-known path is added)."""
        parts = urlsplit(url.strip())
        if not parts.path.endswith(".json"):
            url = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + CARD_PATH, parts.query, ""))
        status, body = await self._send("GET", url, {"A2A-Version": "1.0", **headers}, None)
        if status != 200:
            raise InspectError(f"{url} answered HTTP {status}")
        try:
            card = json.loads(body)
        except ValueError as exc:
            raise InspectError(f"{url} did not answer JSON: {exc}") from None
        if not isinstance(card, dict):
            raise InspectError(f"{url} answered JSON that is not an object (an agent card is one)")
        if "supportedInterfaces" in card:
            checks = check_v1(card, strict=False)
            endpoints = [Endpoint(str(i.get("protocolBinding")), str(i.get("url")),
                                  str(i.get("protocolVersion") or "1.0"), str(i.get("tenant") or ""))
                         for i in card.get("supportedInterfaces") or [] if isinstance(i, dict)]
            version = "1.0"
        else:
            checks = check_v03(card)
            endpoints = [Endpoint(str(card.get("preferredTransport") or "JSONRPC"), str(card.get("url")), "0.3")]
            endpoints += [Endpoint(str(i.get("transport")), str(i.get("url")), "0.3")
                          for i in card.get("additionalInterfaces") or [] if isinstance(i, dict)
                          and i.get("url") != card.get("url")]
            version = "0.3"
        for endpoint in endpoints:  # "1.0" interfaces may say "1.0.0"; 0.3 servers "0.3.0"
            endpoint.version = "0.3" if endpoint.version.startswith("0.") else "1.0"
        return CardReport(url, card, version, checks, endpoints)

    def request(self, method: str, params: Any) -> dict[str, Any]:
        """A JSON-RPC request for `method` with a fresh id."""
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    async def call(self, endpoint: Endpoint, method: str, params: Any, headers: dict[str, str]) -> Exchange:
        """One unary call (JSON-RPC, HTTP+JSON, gRPC), its response checked against the endpoint's version."""
        if endpoint.binding == "GRPC":
            return await self._grpc_call(endpoint, method, params, headers)
        if endpoint.binding == "HTTP+JSON":
            verb, url, body = _rest_request(endpoint, method, params)
            status, raw = await self._send(verb, url, {**headers, "A2A-Version": endpoint.version}, body)
            shown = {"method": verb, "url": url, "body": json.loads(body) if body else None}
            return Exchange(shown, status, [_rest_frame(endpoint.version, method, status, raw)])
        request = self.request(method, params)
        status, body = await self._send("POST", endpoint.url, {**headers, "A2A-Version": endpoint.version},
                                        json.dumps(request).encode())
        return Exchange(request, status, [_frame(endpoint.version, method, request["id"], body)])

    async def stream(self, endpoint: Endpoint, method: str, params: Any,
                     headers: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        """A streaming call: first {"request": ...}, then each SSE frame (or gRPC message) checked, as it comes."""
        if endpoint.binding == "GRPC":
            async for item in self._grpc_stream(endpoint, method, params, headers):
                yield item
            return
        if endpoint.binding == "HTTP+JSON":
            verb, url, content = _rest_request(endpoint, method, params)
            request: dict[str, Any] = {"method": verb, "url": url, "body": json.loads(content) if content else None}

            def check(body: bytes, status: int) -> dict[str, Any]:
                return _rest_frame(endpoint.version, method, status, body)
        else:
            verb, url = "POST", endpoint.url
            request = self.request(method, params)
            content = json.dumps(request).encode()

            def check(body: bytes, status: int) -> dict[str, Any]:
                return _frame(endpoint.version, method, request["id"], body)
        yield {"request": request}
        target = await self._target(url)
        send = {**headers, "A2A-Version": endpoint.version, "Accept": "text/event-stream",
                "Content-Type": "application/json", "Host": urlsplit(url).netloc}
        timeout = httpx.Timeout(TIMEOUT_SECONDS)
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False) as http:
            built = http.build_request(verb, target.url, content=content, headers=send,
                                       extensions={"sni_hostname": target.host})
            try:
                response = await http.send(built, stream=True)
            except httpx.HTTPError as exc:
                raise InspectError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from None
            try:
                kind = response.headers.get("content-type", "")
                if not kind.startswith("text/event-stream"):
                    body = await _read_limited(response)
                    frame = check(body, response.status_code)
                    # an error before any event is one error response; a result must be a stream
                    refused = response.status_code >= 400 or isinstance(frame["body"], dict) and "error" in frame["body"]
                    frame["checks"].insert(0, Check(refused, (
                        "an error before the stream began, answered as one response" if refused else
                        f"the answer is a stream (text/event-stream); got HTTP {response.status_code} "
                        f"{kind or 'no type'}")))
                    yield frame
                    return
                count = 0
                async for data in _sse_data(response):
                    count += 1
                    yield check(data, 200)
                    if count >= MAX_FRAMES:
                        yield {"body": f"(the inspector stops after {MAX_FRAMES} frames)", "checks": []}
                        return
            finally:
                await response.aclose()

    async def _grpc_call(self, endpoint: Endpoint, method: str, params: Any, headers: dict[str, str]) -> Exchange:
        grpc_calls, place, message, shown = await self._grpc_prepare(endpoint, method, params)
        try:
            status, body = await grpc_calls.unary(place, method, message, headers, timeout=TIMEOUT_SECONDS,
                                                  max_bytes=MAX_BYTES)
        except grpc_calls.GrpcCallError as exc:
            raise InspectError(str(exc)) from None
        return Exchange(shown, status, [{"body": body, "checks": check_grpc(method, status, body)}])

    async def _grpc_stream(self, endpoint: Endpoint, method: str, params: Any,
                           headers: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        grpc_calls, place, message, shown = await self._grpc_prepare(endpoint, method, params)
        yield {"request": shown}
        try:
            async for body in grpc_calls.stream(place, method, message, headers, timeout=TIMEOUT_SECONDS,
                                                max_bytes=MAX_BYTES, max_frames=MAX_FRAMES):
                if "limit" in body:
                    yield {"body": body["limit"], "checks": []}
                    return
                status = str(body["error"]["status"]) if "error" in body else "OK"
                frame = {"body": body, "checks": check_grpc(method, status, body)}
                if "error" in body:
                    frame["checks"].insert(0, Check(True, f"the stream ended with gRPC status {status}"))
                yield frame
        except grpc_calls.GrpcCallError as exc:
            raise InspectError(str(exc)) from None

    async def _grpc_prepare(self, endpoint: Endpoint, method: str, params: Any) -> tuple[Any, Any, Any, dict]:
        """(the gRPC module, where to call, the request message, the request as the console shows it): the
        card's gRPC URL checked by the same guard as HTTP, as http(s)://host:port, and its address pinned."""
        if not grpc_installed():
            raise InspectError(GRPC_EXTRA)
        from parley.client.errors import ClientError
        from parley.client.grpc import parse_target
        from parley.web import inspector_grpc as grpc_calls

        try:
            authority, tls = parse_target(endpoint.url)
        except ClientError as exc:
            raise InspectError(str(exc)) from None
        target = await self._target(f"{'https' if tls else 'http'}://{authority}/")
        port = urlsplit(target.url).port or (443 if tls else 80)
        address = f"[{target.address}]" if ":" in target.address else target.address
        place = grpc_calls.GrpcPlace(f"{address}:{port}", authority, target.host, tls)
        try:
            message = grpc_calls.request_message(method, params, endpoint.tenant)
        except grpc_calls.GrpcCallError as exc:
            raise InspectError(str(exc)) from None
        shown = {"rpc": f"lf.a2a.v1.A2AService/{method}", "target": endpoint.url,
                 "message": grpc_calls.to_json(message)}
        return grpc_calls, place, message, shown

    async def _target(self, url: str) -> Any:
        try:
            return await self.guard.check(url)
        except UnsafeUrl as exc:
            raise InspectError(exc.message.removeprefix("Invalid params: ")) from None

    async def _send(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> tuple[int, bytes]:
        target = await self._target(url)
        send = {**headers, "Host": urlsplit(url).netloc}
        if body is not None:
            send["Content-Type"] = "application/json"
        try:
            async with asyncio.timeout(TIMEOUT_SECONDS), httpx.AsyncClient(
                    follow_redirects=False, trust_env=False) as http:
                built = http.build_request(method, target.url, content=body, headers=send,
                                           extensions={"sni_hostname": target.host})
                response = await http.send(built, stream=True)
                try:
                    return response.status_code, await _read_limited(response)
                finally:
                    await response.aclose()
        except TimeoutError:
            raise InspectError(f"{url} did not answer within {TIMEOUT_SECONDS:g} s") from None
        except httpx.HTTPError as exc:
            raise InspectError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from None


async def _read_limited(response: httpx.Response) -> bytes:
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_BYTES:
            raise InspectError(f"the answer is larger than {MAX_BYTES:,} bytes; the inspector reads no more")
        chunks.append(chunk)
    return b"".join(chunks)


async def _sse_data(response: httpx.Response) -> AsyncIterator[bytes]:
    """The `data` of each SSE event (lines joined by newlines), a frame at most MAX_BYTES."""
    data: list[str] = []
    size = 0
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield "\n".join(data).encode()
            data, size = [], 0
            continue
        if line.startswith("data:"):
            value = line[5:].removeprefix(" ")
            size += len(value)
            if size > MAX_BYTES:
                raise InspectError(f"an SSE frame is larger than {MAX_BYTES:,} bytes; the inspector reads no more")
            data.append(value)
    if data:
        yield "\n".join(data).encode()


def _frame(version: str, method: str, request_id: Any, body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body)
    except ValueError:
        text = body.decode("utf-8", "replace")
        return {"body": text, "checks": [Check(False, "the answer is not JSON (JSON-RPC 2.0 section 4)")]}
    return {"body": parsed, "checks": check_response(version, method, request_id, parsed)}


def _rest_frame(version: str, method: str, status: int, body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        return {"body": body.decode("utf-8", "replace"), "checks": [Check(False, "the answer is not JSON")]}
    checks = check_rest(method, status, parsed) if version == "1.0" else check_rest_v03(method, status, parsed)
    return {"body": parsed, "checks": checks}


def _rest_v03_fields(method: str, params: Any) -> tuple[Operation, dict[str, Any]]:
    """A 0.3 call's operation and HTTP+JSON fields: the console's 0.3 JSON-RPC params (kind-tagged parts) read by
    Parley's 0.3 dialect and written as the 0.3 proto's ProtoJSON (parley.protocol.v0_3_rest: `content`,
    `ROLE_USER`), as Parley's own 0.3 HTTP+JSON client sends them."""
    op = v0_3.METHODS.get(method)
    if op is None or op not in ROUTES["0.3"]:
        raise InspectError(f"unknown method {method!r}")
    try:
        request = v0_3.decode(op, params if isinstance(params, dict) else {})
    except A2AError as exc:
        raise InspectError(f"the {method} params are not A2A 0.3's: {exc.message}") from None
    return op, dict(v0_3_rest.encode_request(op, request) or {})


def _rest_request(endpoint: Endpoint, method: str, params: Any) -> tuple[str, str, bytes | None]:
    """(HTTP method, URL, JSON body) of an HTTP+JSON call: the routes of Parley's own client
    (parley.client.rest.ROUTES; A2A 1.0 section 11.3, and 0.3's `/v1/...`); an id goes in the path, a GET's
    other fields in the query."""
    if endpoint.version == "0.3":
        op, fields = _rest_v03_fields(method, params)
    else:
        op = v1_0.METHODS.get(method)
        if op is None or op not in ROUTES["1.0"]:
            raise InspectError(f"unknown method {method!r}")
        fields = dict(params) if isinstance(params, dict) else {}
    verb, path = ROUTES[endpoint.version][op]
    if "{id}" in path:
        task_id = fields.pop("id", None)
        if not isinstance(task_id, str) or not task_id:
            raise InspectError(f"{method} needs a task id")
        path = path.replace("{id}", quote(task_id, safe=""))
    url = endpoint.url.rstrip("/") + path
    if verb == "GET":
        query = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in fields.items()
                 if isinstance(v, str | int | float | bool)}
        return verb, url + (f"?{urlencode(query)}" if query else ""), None
    return verb, url, json.dumps(fields).encode() if fields or op is not Operation.SUBSCRIBE else None


def parse_headers(text: str) -> dict[str, str]:
    """`Name: value` lines (the form's header box) as a dict; InspectError naming a bad line."""
    headers: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        name = name.strip()
        if not sep or not name or any(c.isspace() or ord(c) < 0x21 or ord(c) > 0x7E for c in name):
            raise InspectError(f"header line {line[:80]!r} is not `Name: value`")
        if name.lower() in ("host", "content-length", "transfer-encoding", "connection"):
            raise InspectError(f"the inspector sets {name} itself")
        headers[name] = value.strip()
    if len(headers) > MAX_HEADERS:
        raise InspectError(f"at most {MAX_HEADERS} headers")
    return headers


__all__ = ["CardReport", "Endpoint", "Exchange", "InspectError", "Inspector", "parse_headers"]
