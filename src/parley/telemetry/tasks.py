"""Task, model-call and tool-call spans, from the task engine's listeners and observers.

    a2a task {agent}      INTERNAL  one per turn of a task: from its creation (or the message that
                                    continued it) until it settles (terminal, input-required,
                                    auth-required); parent: the request span that started the turn;
                                    a2a.task.state is the state it settled in
    chat {model}          CLIENT    one per model call of an LLM agent (internal:llm-call ... the next
                                    tool-start or checkpoint); GenAI attributes, token usage
    execute_tool {name}   INTERNAL  one per tool call (internal:tool-start ... tool-complete)

Inside the run (the asyncio task that drives the agent) the task span is made the current
span as soon as the run reports its first event, so that the calls an agent makes
(delegations through parley.client) are children of the task; while a model call or
tool calls are in progress their span is current instead, so a delegation made by a tool
is a child of that tool's span. The run's log records get its task id the same way.

The engine tells listeners of every appended batch and observers of every internal
event; both run synchronously on the event loop and must stay cheap.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from parley.protocol import models as m
from parley.protocol.states import is_settled, is_terminal
from parley.telemetry import context as tctx

log = logging.getLogger("parley.telemetry")

LLM_CALL = "internal:llm-call"
TOOL_START = "internal:tool-start"
TOOL_COMPLETE = "internal:tool-complete"
CHECKPOINT = "internal:checkpoint"
DELEGATION = "internal:delegation"
ROUTE = "internal:route"
MAX_USAGE_MEMORY = 4096  # tasks whose last token usage is remembered across turns

GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_SYSTEM = "gen_ai.system"
GEN_AI_PROVIDER = "gen_ai.provider.name"
GEN_AI_MODEL = "gen_ai.request.model"
GEN_AI_INPUT = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT = "gen_ai.usage.output_tokens"
GEN_AI_TOOL = "gen_ai.tool.name"
GEN_AI_TOOL_CALL = "gen_ai.tool.call.id"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"


def state_name(state: m.TaskState) -> str:
    """completed, input-required, ... (the 0.3 spelling, readable in dashboards)."""
    return state.value.removeprefix("TASK_STATE_").lower().replace("_", "-")


@dataclass(eq=False)
class ModelCall:
    span: Any
    start_ns: int
    model: str | None
    system: str | None
    end_ns: int | None = None  # when the answer was complete (the span ends once the usage is known)


@dataclass(eq=False)
class TaskTurn:
    """One turn of a task being traced."""

    task_id: str
    agent_id: str
    span: Any
    start_ns: int
    measured: bool  # started when the turn started (not made up when it settled)
    entered: bool = False  # the run's context has it (current span, log fields)
    model: ModelCall | None = None
    tools: dict[str, Any] = field(default_factory=dict)


class TaskTelemetry:
    """Listener and observer of one TaskEngine; `tel` None: log fields only (no OpenTelemetry)."""

    def __init__(self, engine: Any, tel: Any) -> None:
        self.engine = engine
        self.tel = tel
        self.turns: dict[str, TaskTurn] = {}
        self.usage: OrderedDict[str, dict[str, int]] = OrderedDict()
        engine.listeners.append(self.on_entries)
        engine.observers.append(self.on_internal)
        if tel is not None:
            tel.metrics.watch(engine)

    def close(self) -> None:
        """Stop listening; end the spans of turns still open (the server is stopping)."""
        for hooks, fn in ((self.engine.listeners, self.on_entries), (self.engine.observers, self.on_internal)):
            if fn in hooks:
                hooks.remove(fn)
        if self.tel is not None:
            self.tel.metrics.unwatch(self.engine)
        for turn in list(self.turns.values()):
            self._end(turn, None, "the server stopped while the task was running")
        self.turns.clear()

    # --- the engine's callbacks ----------------------------------------------------------

    def on_entries(self, rec: Any, entries: list[Any]) -> None:
        task = rec.task
        turn = self.turns.get(task.id)
        if turn is None:
            turn = self._begin(rec, entries)
        if not turn.entered and self._in_run(task.id):
            self._enter(turn, rec)
        scope = tctx.REQUEST.get()
        if scope is not None and scope.task_id is None:  # the request that created the task
            scope.task_id = task.id
            if scope.span is not None:
                from parley.telemetry.spans import annotate

                annotate(scope)
        state = task.status.state
        if is_settled(state):
            message = task.status.message
            self._end(turn, state, message.text() if message is not None else None)

    def on_internal(self, task_id: str, event: Any) -> None:
        turn = self.turns.get(task_id)
        if turn is None:
            return
        if not turn.entered and self._in_run(task_id):
            run = self.engine.runs.get(task_id)
            if run is not None:
                self._enter(turn, run.record)
        if turn.span is None:
            return
        try:
            self._internal(turn, event.kind, event.data or {})
        except Exception:  # a malformed event must not break the run
            log.exception("telemetry: cannot trace %s of task %s", event.kind, task_id)

    # --- turns -----------------------------------------------------------------------------

    def _in_run(self, task_id: str) -> bool:
        run = self.engine.runs.get(task_id)
        if run is None or run.aio is None:
            return False
        try:
            return asyncio.current_task() is run.aio
        except RuntimeError:
            return False

    def _begin(self, rec: Any, entries: list[Any]) -> TaskTurn:
        task = rec.task
        fresh = bool(entries) and entries[0].seq == 2  # the first append after the creation entry
        measured = fresh or not is_settled(task.status.state)
        start_ns = int(rec.created_at * 1e9) if fresh else time.time_ns()
        span = None
        if self.tel is not None:
            from opentelemetry.trace import SpanKind

            from parley.telemetry.spans import A2A_AGENT, A2A_CONTEXT, A2A_TASK

            span = self.tel.tracer.start_span(
                f"a2a task {rec.agent_id}", kind=SpanKind.INTERNAL, start_time=start_ns,
                attributes={A2A_TASK: task.id, A2A_CONTEXT: task.context_id, A2A_AGENT: rec.agent_id,
                            "a2a.task.turn": sum(1 for msg in task.history or [] if msg.role is m.Role.USER)},
            )
            from parley.telemetry.push_spans import remember_task

            remember_task(task.id, span)  # its webhook deliveries are traced as its children
        turn = TaskTurn(task.id, rec.agent_id, span, start_ns, measured)
        self.turns[task.id] = turn
        return turn

    def _enter(self, turn: TaskTurn, rec: Any) -> None:
        """Inside the run's own asyncio task: its context gets the task span and the log fields."""
        turn.entered = True
        tctx.bind(task_id=turn.task_id, context_id=rec.task.context_id, agent_id=turn.agent_id)
        if turn.span is not None:
            self._make_current(turn.span)

    @staticmethod
    def _make_current(span: Any) -> None:
        """Set the current span of the run's context (which ends with the run: nothing to undo)."""
        from opentelemetry import context as otel_context
        from opentelemetry import trace

        otel_context.attach(trace.set_span_in_context(span))

    def _end(self, turn: TaskTurn, state: m.TaskState | None, reason: str | None) -> None:
        self.turns.pop(turn.task_id, None)
        if state is not None and is_terminal(state):
            self.usage.pop(turn.task_id, None)
        span = turn.span
        if span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        from parley.telemetry.spans import A2A_AGENT, A2A_STATE

        now = time.time_ns()
        failed = state in (m.TaskState.FAILED, m.TaskState.REJECTED)
        if turn.model is not None:
            self._end_model(turn, error=reason if failed else None)
        for call_id in list(turn.tools):
            self._end_tool(turn, call_id, None, now)
        name = state_name(state) if state is not None else "unknown"
        span.set_attribute(A2A_STATE, name)
        if failed:
            span.set_status(Status(StatusCode.ERROR, reason or name))
        elif state is None:
            span.set_status(Status(StatusCode.ERROR, reason or "unfinished"))
        span.end(end_time=now)
        if turn.measured and state is not None:
            self.tel.metrics.task_duration.record(max(0, now - turn.start_ns) / 1e9,
                                                  {A2A_STATE: name, A2A_AGENT: turn.agent_id})

    # --- internal events: model calls, tools, delegations -------------------------------------

    def _internal(self, turn: TaskTurn, kind: str, data: dict[str, Any]) -> None:
        now = time.time_ns()
        if kind == LLM_CALL:
            if turn.model is not None:
                self._end_model(turn)
            self._start_model(turn, data, now)
        elif kind == TOOL_START:
            if turn.model is not None and turn.model.end_ns is None:
                turn.model.end_ns = now
            self._start_tool(turn, data, now)
        elif kind == TOOL_COMPLETE:
            self._end_tool(turn, str(data.get("toolCallId") or ""), bool(data.get("success", True)), now)
            if not turn.tools:
                self._make_current(turn.span)
        elif kind == CHECKPOINT:
            if turn.model is not None:
                if turn.model.end_ns is None:
                    turn.model.end_ns = min(now, max(turn.model.start_ns, _timestamp_ns(data) or now))
                self._usage(turn, data.get("state"))
                self._end_model(turn)
            elif isinstance(data.get("state"), dict) and "usage" in data["state"]:
                self._remember_usage(turn.task_id, data["state"]["usage"])
            self._make_current(turn.span)
        elif kind == DELEGATION:
            attrs = {k: str(v) for k, v in (("a2a.delegate.agent", data.get("agent")),
                                            ("a2a.delegate.url", data.get("url")),
                                            ("a2a.delegate.task_id", data.get("taskId")),
                                            ("a2a.delegate.context_id", data.get("contextId"))) if v}
            turn.span.add_event("a2a.delegation", attrs)
        elif kind == ROUTE:
            attrs = {k: str(v) for k, v in (("a2a.route.to", data.get("to")), ("a2a.route.reason", data.get("reason")),
                                            ("a2a.route.priority", data.get("priority"))) if v is not None}
            turn.span.add_event("a2a.route", attrs)

    def _backend_system(self, agent_id: str) -> str | None:
        """The provider of an LLM agent's backend (gen_ai.system), looking through wrappers."""
        agent = self.engine.agents.get(agent_id)
        for _ in range(5):
            if agent is None:
                return None
            backend = getattr(agent, "__dict__", {}).get("_backend")
            if backend is not None:
                return getattr(backend, "provider", None) or type(backend).__name__
            agent = getattr(agent, "inner", None)
        return None

    def _start_model(self, turn: TaskTurn, data: dict[str, Any], now: int) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind

        model = data.get("model")
        system = self._backend_system(turn.agent_id)
        attrs: dict[str, Any] = {GEN_AI_OPERATION: "chat"}
        if system:
            attrs[GEN_AI_SYSTEM] = system
            attrs[GEN_AI_PROVIDER] = system
        if model:
            attrs[GEN_AI_MODEL] = str(model)
        if data.get("iteration") is not None:
            attrs["parley.llm.iteration"] = int(data["iteration"])
        if data.get("messages") is not None:
            attrs["parley.llm.messages"] = int(data["messages"])
        span = self.tel.tracer.start_span(f"chat {model}" if model else "chat", kind=SpanKind.CLIENT,
                                          context=trace.set_span_in_context(turn.span), start_time=now,
                                          attributes=attrs)
        turn.model = ModelCall(span, now, str(model) if model else None, system)
        self._make_current(span)

    def _remember_usage(self, task_id: str, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        self.usage[task_id] = {k: int(usage.get(k) or 0) for k in ("promptTokens", "completionTokens")}
        self.usage.move_to_end(task_id)
        while len(self.usage) > MAX_USAGE_MEMORY:
            self.usage.popitem(last=False)

    def _usage(self, turn: TaskTurn, state: Any) -> None:
        """Tokens of the model call just finished: the checkpoint's running total minus the last one seen."""
        usage = state.get("usage") if isinstance(state, dict) else None
        if not isinstance(usage, dict):
            return
        before = self.usage.get(turn.task_id, {})
        used_in = int(usage.get("promptTokens") or 0) - before.get("promptTokens", 0)
        used_out = int(usage.get("completionTokens") or 0) - before.get("completionTokens", 0)
        self._remember_usage(turn.task_id, usage)
        call = turn.model
        if call is None or (used_in <= 0 and used_out <= 0):
            return
        call.span.set_attribute(GEN_AI_INPUT, max(0, used_in))
        call.span.set_attribute(GEN_AI_OUTPUT, max(0, used_out))
        attrs = self._model_metric_attrs(call)
        self.tel.metrics.token_usage.record(max(0, used_in), {**attrs, GEN_AI_TOKEN_TYPE: "input"})
        self.tel.metrics.token_usage.record(max(0, used_out), {**attrs, GEN_AI_TOKEN_TYPE: "output"})

    @staticmethod
    def _model_metric_attrs(call: ModelCall) -> dict[str, Any]:
        attrs: dict[str, Any] = {GEN_AI_OPERATION: "chat"}
        if call.system:
            attrs[GEN_AI_SYSTEM] = call.system
        if call.model:
            attrs[GEN_AI_MODEL] = call.model
        return attrs

    def _end_model(self, turn: TaskTurn, error: str | None = None) -> None:
        call, turn.model = turn.model, None
        if call is None:
            return
        end = call.end_ns or time.time_ns()
        if error is not None:
            from opentelemetry.trace import Status, StatusCode

            call.span.set_status(Status(StatusCode.ERROR, error))
        call.span.end(end_time=end)
        attrs = self._model_metric_attrs(call)
        if error is not None:
            attrs["error.type"] = "model_call_failed"
        self.tel.metrics.operation_duration.record(max(0, end - call.start_ns) / 1e9, attrs)

    def _start_tool(self, turn: TaskTurn, data: dict[str, Any], now: int) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind

        name = str(data.get("toolName") or "tool")
        call_id = str(data.get("toolCallId") or "")
        attrs: dict[str, Any] = {GEN_AI_OPERATION: "execute_tool", GEN_AI_TOOL: name}
        if call_id:
            attrs[GEN_AI_TOOL_CALL] = call_id
        if data.get("clientSide"):
            attrs["parley.tool.client_side"] = True
        if data.get("iteration") is not None:
            attrs["parley.llm.iteration"] = int(data["iteration"])
        span = self.tel.tracer.start_span(f"execute_tool {name}", kind=SpanKind.INTERNAL,
                                          context=trace.set_span_in_context(turn.span), start_time=now,
                                          attributes=attrs)
        old = turn.tools.pop(call_id, None)
        if old is not None:
            old.end(end_time=now)
        turn.tools[call_id] = span
        self._make_current(span)  # the tool's asyncio task is created next, with this context

    def _end_tool(self, turn: TaskTurn, call_id: str, ok: bool | None, now: int) -> None:
        span = turn.tools.pop(call_id, None)
        if span is None:
            return
        if ok is not None:
            span.set_attribute("parley.tool.success", ok)
        if ok is False:
            from opentelemetry.trace import Status, StatusCode

            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR, "the tool call failed"))
        span.end(end_time=now)


def _timestamp_ns(data: dict[str, Any]) -> int | None:
    raw = data.get("timestamp")
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return int(datetime.fromisoformat(raw).timestamp() * 1e9)
    except ValueError:
        return None
