"""Structured logs: one JSON object per record, with the task id and the trace and span ids.

    parley serve --log-format json

    {"time": "2025-01-01T12:00:00.123Z", "level": "INFO", "logger": "uvicorn.access",
     "message": "127.0.0.1:50514 - \\"POST /a2a/echo HTTP/1.1\\" 200", "agent_id": "echo",
     "a2a_method": "SendMessage", "task_id": "...", "trace_id": "4bf9...", "span_id": "00f0..."}

:class:`ContextFilter` adds the fields to every record that passes a handler it is on
(Parley's, the agents' and uvicorn's loggers alike): `task_id`, `context_id`, `agent_id`
and `a2a_method` from the request or run being served, `trace_id` and `span_id` from the
current OpenTelemetry span when telemetry is on. :func:`logging_config` is a
`logging.config.dictConfig` dictionary that routes the root logger and uvicorn's loggers
through one handler with the filter and a formatter (`json`, or `text`), so it can be
given to `uvicorn.run(log_config=...)` as is. Structured logs work without OpenTelemetry
(without trace ids then).
"""

from __future__ import annotations

import json
import logging
import logging.config
from datetime import UTC, datetime
from typing import Any

from parley.telemetry import setup
from parley.telemetry.context import LOG_FIELDS, REQUEST

try:  # the API alone is enough to read the current span
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - without the otel extra
    _trace = None  # type: ignore[assignment]

CONTEXT_FIELDS = ("task_id", "context_id", "agent_id", "a2a_method")
FIELDS = (*CONTEXT_FIELDS, "trace_id", "span_id")
_SCOPE_NAMES = {"a2a_method": "method"}  # log field -> RequestScope attribute, where they differ
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s%(context)s"

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = set(vars(logging.LogRecord("x", logging.INFO, "x", 0, "", None, None))) | {
    "message", "asctime", "context", "color_message", *FIELDS}


def current_ids() -> tuple[str | None, str | None]:
    """(trace id, span id) of the current span, as 32 and 16 hex digits; (None, None) without one."""
    if _trace is None:
        return None, None
    ctx = _trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None, None
    return format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")


class ContextFilter(logging.Filter):
    """Adds task_id, context_id, agent_id, a2a_method, trace_id and span_id to each record (None if unknown)."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = LOG_FIELDS.get()
        scope = REQUEST.get()
        for name in CONTEXT_FIELDS:
            if getattr(record, name, None) is None:
                value = fields.get(name)
                if value is None and scope is not None:  # what the request learnt since (e.g. a new task's id)
                    value = getattr(scope, _SCOPE_NAMES.get(name, name), None)
                setattr(record, name, value)
        if getattr(record, "trace_id", None) is None:
            record.trace_id, record.span_id = current_ids()
        known = [f"{name}={getattr(record, name)}" for name in ("task_id", "trace_id")
                 if getattr(record, name, None)]
        record.context = f" [{' '.join(known)}]" if known else ""
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the context fields, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                out[name] = value
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_") and name not in out:
                out[name] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def logging_config(fmt: str = "text", level: str | int = "info") -> dict[str, Any]:
    """A dictConfig for the root logger and uvicorn's loggers: one stderr handler, the context filter.

    `fmt` is "json" or "text"; `level` the root level (uvicorn's access log follows it).
    """
    if fmt not in ("json", "text"):
        raise ValueError(f"unknown log format {fmt!r}; use text or json")
    level_name = logging.getLevelName(level) if isinstance(level, int) else str(level).upper()
    formatter: dict[str, Any] = (
        {"()": f"{__name__}.JsonFormatter"} if fmt == "json" else {"format": TEXT_FORMAT}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"parley_context": {"()": f"{__name__}.ContextFilter"}},
        # "default" and "access": the names uvicorn's own options (use_colors) expect to find
        "formatters": {"parley": formatter, "default": dict(formatter), "access": dict(formatter)},
        "handlers": {
            "parley": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "parley",
                       "filters": ["parley_context"]},
        },
        "root": {"handlers": ["parley"], "level": level_name},
        "loggers": {
            # uvicorn's loggers come with handlers of their own in its default config: replace them
            "uvicorn": {"handlers": [], "level": level_name, "propagate": True},
            "uvicorn.error": {"handlers": [], "level": level_name, "propagate": True},
            "uvicorn.access": {"handlers": [], "level": level_name, "propagate": True},
        },
    }


def configure_logging(fmt: str = "text", level: str | int = "info") -> dict[str, Any]:
    """Apply :func:`logging_config` now and track request/task fields; returns the config (for uvicorn)."""
    config = logging_config(fmt, level)
    logging.config.dictConfig(config)
    setup.enable_log_context(True)
    return config
