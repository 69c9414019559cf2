"""An OpenAI-compatible chat-completions backend over httpx (OpenAI, vLLM, llama.cpp, Ollama, ...).

``POST {base_url}/chat/completions`` with ``stream: true``; the answer is an SSE
stream of ``data: {chunk}`` lines ending with ``data: [DONE]``. Text arrives in
``choices[0].delta.content``; tool calls arrive as ``delta.tool_calls`` fragments
joined by ``index``; usage arrives in a last chunk (``stream_options.include_usage``).

Failures before the stream starts (HTTP 429 and 5xx, connection errors and
timeouts) are retried with exponential backoff, honouring ``Retry-After``, for a
bounded number of attempts. Configuration comes from arguments or the environment:
``PARLEY_LLM_BASE_URL``, ``PARLEY_LLM_API_KEY``, ``PARLEY_LLM_MODEL``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import AsyncIterator, Mapping
from email.utils import parsedate_to_datetime
from time import time
from typing import Any

import httpx

from parley.agents.llm.backend import (
    ChatRequest,
    Finish,
    LLMBackend,
    LLMError,
    StreamEvent,
    TextDelta,
    ToolCallAccumulator,
    ToolCallDelta,
    Usage,
)

ENV_BASE_URL = "PARLEY_LLM_BASE_URL"
ENV_API_KEY = "PARLEY_LLM_API_KEY"
ENV_MODEL = "PARLEY_LLM_MODEL"
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 60.0
CHECK_TIMEOUT = 5.0  # seconds for the reachability check at start (and the background rechecks)


class OpenAICompatBackend(LLMBackend):
    """Streams chat completions from any server that speaks the OpenAI wire format."""

    provider = "openai"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float = 60.0,
        max_attempts: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 20.0,
        headers: Mapping[str, str] | None = None,
        options: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Arguments win over the environment (`env`, default `os.environ`).

        `timeout` bounds connecting and each wait for the next bytes of the stream;
        `max_attempts` counts the first try; `options` are extra body fields
        (temperature, max_tokens, ...) sent with every call.
        """
        env = os.environ if env is None else env
        base = base_url or env.get(ENV_BASE_URL)
        if not base:
            raise LLMError(f"no model server configured: pass base_url or set {ENV_BASE_URL}")
        self.base_url = base.rstrip("/")
        self.api_key = api_key if api_key is not None else env.get(ENV_API_KEY)
        self._model = model or env.get(ENV_MODEL)
        self.timeout = timeout
        self.max_attempts = max(1, max_attempts)
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.headers = dict(headers or {})
        self.options = dict(options or {})
        self._clients: dict[int, httpx.AsyncClient] = {}

    @classmethod
    def from_env(cls, **overrides: Any) -> OpenAICompatBackend:
        """A backend configured from PARLEY_LLM_* variables (overridable by keyword)."""
        return cls(**overrides)

    @property
    def model(self) -> str | None:
        return self._model

    async def check(self) -> str | None:
        """Whether the model server answers at all (GET {base_url}/models; any HTTP answer counts, a 401
        too): one line naming the URL when it cannot be reached."""
        try:
            async with httpx.AsyncClient(timeout=CHECK_TIMEOUT) as http:
                await http.get(f"{self.base_url}/models",
                               headers={"Authorization": f"Bearer {self.api_key}"} if self.api_key else None)
        except httpx.HTTPError as exc:
            return f"cannot reach the model server at {self.base_url}: {type(exc).__name__}: {exc}".rstrip(": ")
        return None

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _client(self) -> httpx.AsyncClient:
        """One connection pool per event loop (a pool cannot move between loops)."""
        key = id(asyncio.get_running_loop())
        client = self._clients.get(key)
        if client is None or client.is_closed:
            headers = {"Accept": "text/event-stream", **self.headers}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            client = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(self.timeout))
            self._clients = {key: client}
        return client

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients = {}

    def body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body of one call."""
        model = request.model or self._model
        if not model:
            raise LLMError(f"no model configured: pass model or set {ENV_MODEL}")
        body: dict[str, Any] = {
            "model": model,
            "messages": request.messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            **self.options,
            **request.options,
        }
        if request.tools:
            body["tools"] = [
                {"type": "function",
                 "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in request.tools
            ]
        return body

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        body = self.body(request)
        client = self._client()
        started = False  # once the answer streams, a failure cannot be retried (text went out)
        for attempt in range(1, self.max_attempts + 1):
            retry_after: str | None = None
            try:
                async with client.stream("POST", self.url, json=body) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        problem = _http_problem(response)
                        if response.status_code not in RETRY_STATUSES:
                            raise LLMError(problem)
                        retry_after = response.headers.get("retry-after")
                    else:
                        started = True
                        async for event in parse_stream(response.aiter_lines()):
                            yield event
                        return
            except httpx.TimeoutException:
                problem = f"the model server at {self.url} did not answer within {self.timeout:g} s"
            except httpx.TransportError as exc:
                problem = f"cannot reach the model server at {self.url} ({type(exc).__name__}: {exc})"
            if started:
                raise LLMError(f"the answer from the model server broke off: {problem}")
            if attempt == self.max_attempts:
                raise LLMError(_after(problem, attempt))
            await asyncio.sleep(self._delay(attempt, retry_after))

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait before attempt `attempt + 1`: Retry-After if given, else backoff with jitter."""
        hinted = parse_retry_after(retry_after)
        if hinted is not None:
            return min(hinted, MAX_RETRY_AFTER)
        base = min(self.backoff * 2 ** (attempt - 1), self.max_backoff)
        return base * (0.5 + random.random() / 2)


async def parse_stream(lines: AsyncIterator[str]) -> AsyncIterator[StreamEvent]:
    """Chat-completion SSE lines -> deltas, then one Finish with the joined tool calls."""
    calls = ToolCallAccumulator()
    reason: str | None = None
    usage: Usage | None = None
    data: list[str] = []

    def dispatch(payload: str) -> list[StreamEvent] | None:
        nonlocal reason, usage
        if payload.strip() == "[DONE]":
            return None
        try:
            chunk = json.loads(payload)
        except json.JSONDecodeError:
            raise LLMError(f"the model server sent a chunk that is not JSON: {payload[:200]!r}") from None
        if not isinstance(chunk, dict):
            raise LLMError("the model server sent a chunk that is not a JSON object")
        if chunk.get("error"):
            raise LLMError(f"the model server reported an error: {_error_text(chunk['error'])}")
        if chunk.get("usage"):
            usage = _usage(chunk["usage"])
        out: list[StreamEvent] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                out.append(TextDelta(delta["content"]))
            for tc in delta.get("tool_calls") or []:
                fn = tc.get("function") or {}
                d = ToolCallDelta(index=int(tc.get("index", 0)), id=tc.get("id"), name=fn.get("name"),
                                  arguments=fn.get("arguments") or "")
                calls.add(d)
                out.append(d)
            if choice.get("finish_reason"):
                reason = choice["finish_reason"]
        return out

    done = False
    async for line in lines:
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            continue
        if line.strip() or not data:
            continue  # comments (": ping"), event:/id: fields, stray blank lines
        events, data = dispatch("\n".join(data)), []
        if events is None:
            done = True
            break
        for ev in events:
            yield ev
    if not done and data:
        for ev in dispatch("\n".join(data)) or []:
            yield ev
    yield Finish(reason=reason, usage=usage, tool_calls=calls.calls())


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date); None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time())
    except (TypeError, ValueError):
        return None


def _usage(raw: dict[str, Any]) -> Usage:
    prompt = int(raw.get("prompt_tokens") or 0)
    completion = int(raw.get("completion_tokens") or 0)
    return Usage(prompt, completion, int(raw.get("total_tokens") or prompt + completion))


def _error_text(err: Any) -> str:
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err)
    return str(err)


def _http_problem(response: httpx.Response) -> str:
    detail = ""
    try:
        payload = response.json()
        if isinstance(payload, dict) and payload.get("error"):
            detail = _error_text(payload["error"])
    except (json.JSONDecodeError, UnicodeDecodeError):
        detail = response.text[:200].strip()
    what = "rate limited" if response.status_code == 429 else "error"
    text = f"the model server answered HTTP {response.status_code} ({what})"
    return f"{text}: {detail}" if detail else text


def _after(problem: str, attempts: int) -> str:
    return f"{problem} (after {attempts} attempts)" if attempts > 1 else problem

