"""`AgentLoop`: an LLM and its tools as an A2A agent.

Each iteration calls the model (streaming: text chunks are yielded as they arrive,
so the engine sends them as artifact updates), runs the tools it asked for
concurrently, feeds the results back, and goes again until the model answers.
Client-side tools pause the task with `input-required` (see
:mod:`parley.agents.tools.client_side`) and the loop continues when the client
answers on the same task.

Limits end the task as failed with a message saying which one was hit:
`max_iterations` (model calls), `max_tool_calls`, `model_timeout` and
`tool_timeout` (per call), and `token_budget` (total tokens reported by the
model). Cancelling the task cancels the streaming HTTP call and running tools.

Observability goes out as internal events (never sent to A2A clients):
`internal:llm-call`, `internal:tool-start`, `internal:tool-complete` and
`internal:checkpoint` (the conversation state after each iteration; see
:mod:`parley.agents.llm.state` and :meth:`AgentLoop.resume_from`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from parley.agents.base import Agent, AgentOutput, RunContext, Status
from parley.agents.llm.backend import ChatRequest, Finish, LLMBackend, LLMError, TextDelta, ToolCall
from parley.agents.llm.registry import create_backend
from parley.agents.llm.state import Answer, Conversation
from parley.agents.tools.base import Tool, Toolset, render_error, render_result
from parley.agents.tools.client_side import ClientTool, extension, tool_call_part
from parley.agents.tools.python import PythonTool
from parley.protocol import models as m

log = logging.getLogger("parley.agents.llm")
MAX_WAITING = 1024
_END = object()

ToolLike = Tool | Toolset | Callable[..., Any]


class LoopFailure(Exception):
    """The loop cannot go on; the message is what the client is told."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one task's work; each, when hit, fails the task with a clear message."""

    max_iterations: int = 10
    max_tool_calls: int = 50
    model_timeout: float = 120.0
    tool_timeout: float = 60.0
    token_budget: int | None = None


class AgentLoop(Agent):
    """An agent whose answers come from an LLM that may call tools."""

    def __init__(
        self,
        *,
        id: str,
        name: str | None = None,
        description: str | None = None,
        skills: Iterable[m.AgentSkill | Mapping[str, Any]] | None = None,
        backend: LLMBackend | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        tools: Iterable[ToolLike] = (),
        limits: Limits | None = None,
        options: Mapping[str, Any] | None = None,
        version: str = "1.0.0",
    ) -> None:
        """Declare the agent; `backend` defaults to the OpenAI-compatible one configured from PARLEY_LLM_*."""
        self.id = id
        self.name = name or id
        self.description = description or f"The {self.name} agent"
        self.skills = [s if isinstance(s, m.AgentSkill) else m.AgentSkill(**s) for s in skills or []] or [
            m.AgentSkill(id=id, name=self.name, description=self.description, tags=["llm"])
        ]
        self.version = version
        self._backend = backend
        self.model = model
        self.system_prompt = system_prompt
        self.limits = limits or Limits()
        self.options = dict(options or {})
        self.tools: list[Tool] = []
        self.toolsets: list[Toolset] = []
        for t in tools:
            if isinstance(t, Toolset):
                self.toolsets.append(t)
            elif isinstance(t, Tool):
                self.tools.append(t)
            elif callable(t):
                self.tools.append(PythonTool(t))
            else:
                raise TypeError(f"agent {id!r}: {t!r} is not a tool, a toolset or a function")
        _unique(self.tools, id)
        client = [t for t in self.tools if isinstance(t, ClientTool)]
        self.input_modes = ["text/plain", "application/json"] if client else ["text/plain"]
        self.output_modes = ["text/plain"]
        self.extensions = [extension(client)] if client else []
        self._waiting: OrderedDict[str, dict[str, Any]] = OrderedDict()

    async def check_at_start(self) -> None:
        """Ask the backend whether its model server answers, and each toolset (an MCP server) for its tools:
        one line in `problem` when either cannot work."""
        self.problem = await self._problem()

    async def recheck(self) -> bool:
        """Ask again (the server does, in the background, while `problem` is set)."""
        self.problem = await self._problem()
        return self.problem is None

    async def _problem(self) -> str | None:
        problem = await self.backend.check()
        if problem is not None:
            return problem
        for toolset in self.toolsets:
            try:
                await toolset.list_tools()
            except Exception as exc:  # noqa: BLE001 - any failure to list tools makes the agent unavailable
                return str(exc) or type(exc).__name__
        return None

    @property
    def backend(self) -> LLMBackend:
        """The model backend (built from the environment on first use if none was given)."""
        if self._backend is None:
            self._backend = create_backend("openai")
        return self._backend

    # --- checkpoints -------------------------------------------------------------

    @staticmethod
    def resume_from(checkpoint: Mapping[str, Any]) -> Conversation:
        """Rebuild the conversation an `internal:checkpoint` event carried (its `state`)."""
        return Conversation.from_checkpoint(dict(checkpoint))

    def restore(self, task_id: str, checkpoint: Mapping[str, Any]) -> None:
        """Continue task `task_id` from `checkpoint` on its next run (e.g. after a restart)."""
        self._remember(task_id, dict(checkpoint))

    def _remember(self, task_id: str, checkpoint: dict[str, Any]) -> None:
        self._waiting[task_id] = checkpoint
        self._waiting.move_to_end(task_id)
        while len(self._waiting) > MAX_WAITING:
            self._waiting.popitem(last=False)

    def _begin(self, ctx: RunContext) -> tuple[Conversation, list[Answer]]:
        """The conversation this turn starts from, and the pending calls its message answered."""
        remembered = self._waiting.pop(ctx.task_id, None)
        saved = getattr(ctx, "checkpoint", None) or remembered
        if saved is not None:
            conv = Conversation.from_checkpoint(saved)
        else:
            prior = ctx.history
            if prior and prior[-1].message_id == ctx.message.message_id:
                prior = prior[:-1]
            conv = Conversation.from_history([*getattr(ctx, "context_history", []), *prior])
        return conv, conv.add_user(ctx.message)

    # --- the loop ----------------------------------------------------------------

    async def run(self, ctx: RunContext) -> AsyncIterator[AgentOutput]:
        try:
            tools = await self._resolve_tools()
            conv, answers = self._begin(ctx)
            for a in answers:
                yield _event(ctx, "tool-complete", toolName=a.call.name, toolCallId=a.call.id, success=a.ok,
                             iteration=conv.iterations)
            pending = conv.pending()
            if pending:  # resumed with calls unanswered: ours run again (at least once), the client's are asked
                on_client = [_is_client(tools.get(c.name)) and _valid(c) for c in pending]
                server = [c for c, on in zip(pending, on_client) if not on]
                client = [c for c, on in zip(pending, on_client) if on]
                if server:
                    async with aclosing(self._run_tools(ctx, conv, server, tools)) as running:
                        async for ev in running:
                            yield ev
                if client:
                    for out in self._ask_client(ctx, conv, client):
                        yield out
                    return
                yield _checkpoint(ctx, conv)
            said = False
            while True:
                self._check_iterations(conv)
                conv.iterations += 1
                yield _event(ctx, "llm-call", iteration=conv.iterations, model=self.model or self.backend.model,
                             messages=len(conv.messages) + bool(self.system_prompt))
                texts: list[str] = []
                finish = Finish()
                async with aclosing(self._call_model(conv, tools)) as stream:
                    async for item in stream:
                        if isinstance(item, Finish):
                            finish = item
                            continue
                        texts.append(item)
                        yield "\n\n" + item if said and len(texts) == 1 else item
                said = said or bool(texts)
                conv.add_assistant("".join(texts) or None, finish.tool_calls)
                if finish.usage is not None:
                    conv.usage = conv.usage + finish.usage
                self._check_budget(conv)
                if not finish.tool_calls:
                    yield _checkpoint(ctx, conv)
                    return
                self._check_tool_calls(conv, finish.tool_calls)
                conv.tool_calls += len(finish.tool_calls)
                yield _checkpoint(ctx, conv, "tools")  # a restart during the tools resumes by running them again
                runs_on_client = [_is_client(tools.get(c.name)) and _valid(c) for c in finish.tool_calls]
                client = [c for c, on in zip(finish.tool_calls, runs_on_client) if on]
                server = [c for c, on in zip(finish.tool_calls, runs_on_client) if not on]
                async with aclosing(self._run_tools(ctx, conv, server, tools)) as running:
                    async for ev in running:
                        yield ev
                if client:
                    for out in self._ask_client(ctx, conv, client):
                        yield out
                    return
                yield _checkpoint(ctx, conv)
        except LoopFailure as exc:
            yield ctx.fail(str(exc))
        except LLMError as exc:
            yield ctx.fail(f"The model call failed: {exc}")
        except Exception as exc:  # tools could not be listed, a corrupt checkpoint, ...
            log.exception("agent %s failed on task %s", self.id, ctx.task_id)
            yield ctx.fail(f"The agent failed: {exc}")

    def _ask_client(self, ctx: RunContext, conv: Conversation, calls: list[ToolCall]) -> list[AgentOutput]:
        """Remember the state, then pause with `input-required` asking the client to run `calls`."""
        checkpoint = _checkpoint(ctx, conv)
        self._remember(ctx.task_id, checkpoint.data["state"])
        parts = [m.Part(text="Run these client-side tools and reply with their results: "
                             + ", ".join(c.name for c in calls))]
        events: list[AgentOutput] = [checkpoint]
        for c in calls:
            parts.append(tool_call_part(c.id, c.name, _arguments(c)))
            events.append(_event(ctx, "tool-start", toolName=c.name, toolCallId=c.id, clientSide=True,
                                 iteration=conv.iterations))
        events.append(Status(m.TaskState.INPUT_REQUIRED, parts=parts))
        return events

    async def _resolve_tools(self) -> dict[str, Tool]:
        found = list(self.tools)
        for ts in self.toolsets:
            found.extend(await ts.list_tools())
        _unique(found, self.id)
        return {t.name: t for t in found}

    # --- one model call ----------------------------------------------------------

    async def _call_model(self, conv: Conversation, tools: dict[str, Tool]) -> AsyncIterator[str | Finish]:
        """Stream one model call from a producer task, so a deadline or a cancel can stop it at any await."""
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        request = ChatRequest(messages=system + conv.messages, tools=[t.spec() for t in tools.values()],
                              model=self.model, options=self.options)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        backend = self.backend

        async def produce() -> None:
            try:
                async for ev in backend.stream(request):
                    queue.put_nowait(ev)
            except Exception as exc:  # noqa: BLE001 - handed to the reader, which logs it and raises LLMError
                queue.put_nowait(exc)
            else:
                queue.put_nowait(_END)

        producer = asyncio.create_task(produce(), name="parley-llm-call")
        deadline = asyncio.get_running_loop().time() + self.limits.model_timeout
        finish = Finish()
        try:
            while True:
                try:  # not asyncio.wait_for: on 3.11 it can swallow a cancel that races with a result
                    async with asyncio.timeout_at(deadline):
                        item = await queue.get()
                except TimeoutError:
                    raise LoopFailure(f"The model did not finish answering within {self.limits.model_timeout:g} s "
                                      "(model_timeout).") from None
                if item is _END:
                    break
                if isinstance(item, LLMError):
                    raise item
                if isinstance(item, Exception):
                    log.error("LLM backend %r failed", backend, exc_info=item)
                    raise LLMError(f"{type(item).__name__}: {item}")
                if isinstance(item, TextDelta) and item.text:
                    yield item.text
                elif isinstance(item, Finish):
                    finish = item
        finally:
            producer.cancel()
            await asyncio.gather(producer, return_exceptions=True)
        yield finish

    # --- tools -------------------------------------------------------------------

    async def _run_tools(self, ctx: RunContext, conv: Conversation, calls: list[ToolCall],
                         tools: dict[str, Tool]) -> AsyncIterator[AgentOutput]:
        """Run `calls` concurrently; add their results to the conversation in call order."""
        if not calls:
            return
        tasks: dict[asyncio.Task[tuple[str, bool]], ToolCall] = {}
        for c in calls:
            yield _event(ctx, "tool-start", toolName=c.name, toolCallId=c.id, iteration=conv.iterations)
            tasks[asyncio.create_task(_invoke(tools.get(c.name), c, tools), name=f"parley-tool-{c.name}")] = c
        results: dict[str, str] = {}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.tool_timeout
        try:
            pending = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, timeout=max(0.0, deadline - loop.time()),
                                                   return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    late = ", ".join(sorted({tasks[t].name for t in pending}))
                    raise LoopFailure(f"Tool {late} did not finish within {self.limits.tool_timeout:g} s "
                                      "(tool_timeout).")
                for t in done:
                    call, (content, ok) = tasks[t], t.result()
                    results[call.id] = content
                    yield _event(ctx, "tool-complete", toolName=call.name, toolCallId=call.id, success=ok,
                                 iteration=conv.iterations)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for c in calls:
            conv.add_tool_result(c.id, results[c.id])

    # --- limits ------------------------------------------------------------------

    def _check_iterations(self, conv: Conversation) -> None:
        if conv.iterations >= self.limits.max_iterations:
            raise LoopFailure(f"The agent stopped after {conv.iterations} model calls without a final answer "
                              f"(max_iterations={self.limits.max_iterations}).")

    def _check_tool_calls(self, conv: Conversation, calls: list[ToolCall]) -> None:
        wanted = conv.tool_calls + len(calls)
        if wanted > self.limits.max_tool_calls:
            raise LoopFailure(f"The model asked for {wanted} tool calls in this task, more than the limit of "
                              f"{self.limits.max_tool_calls} (max_tool_calls).")

    def _check_budget(self, conv: Conversation) -> None:
        budget = self.limits.token_budget
        if budget is not None and conv.usage.total_tokens > budget:
            raise LoopFailure(f"The agent used {conv.usage.total_tokens} tokens, more than its budget of "
                              f"{budget} (token_budget).")


LLMAgent = AgentLoop
"""The name to declare LLM agents with: ``app.add_agent(LLMAgent(id=..., model=..., tools=[...]))``."""


async def _invoke(tool: Tool | None, call: ToolCall, tools: Mapping[str, Tool]) -> tuple[str, bool]:
    """Run one tool call; every failure becomes an `error: ...` result the model reads."""
    if tool is None:
        return render_error(f"there is no tool named {call.name!r}; the tools are {', '.join(tools) or 'none'}"), False
    try:
        args = call.parsed_arguments()
    except (TypeError, ValueError) as exc:
        return render_error(str(exc)), False
    try:
        return render_result(await tool.call(args)), True
    except Exception as exc:  # noqa: BLE001 - a failing tool is an error result the model reads
        return render_error(exc), False


def _is_client(tool: Tool | None) -> bool:
    return tool is not None and tool.client_side


def _valid(call: ToolCall) -> bool:
    """Whether the call's arguments parse (a client is never asked to run a malformed call)."""
    try:
        call.parsed_arguments()
    except (TypeError, ValueError):
        return False
    return True


def _arguments(call: ToolCall) -> dict[str, Any]:
    try:
        return call.parsed_arguments()
    except (TypeError, ValueError):
        return {}


def _unique(tools: list[Tool], agent_id: str) -> None:
    seen: set[str] = set()
    for t in tools:
        if t.name in seen:
            raise ValueError(f"agent {agent_id!r}: two tools are named {t.name!r}")
        seen.add(t.name)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _event(ctx: RunContext, kind: str, **data: Any) -> AgentOutput:
    return ctx.internal(kind, taskId=ctx.task_id, timestamp=_now(), **data)


def _checkpoint(ctx: RunContext, conv: Conversation, phase: str = "iteration") -> Any:
    """`phase` is "iteration" (an iteration finished) or "tools" (the model asked for tools, not yet run)."""
    return ctx.internal("checkpoint", taskId=ctx.task_id, timestamp=_now(), iteration=conv.iterations,
                        phase=phase, state=conv.to_checkpoint())
