"""HTML for the dashboard: Jinja2 templates with autoescaping on, and agent text rendered as safe Markdown.

Agent output is untrusted. Templates escape every value (autoescape); Markdown goes through
markdown-it in CommonMark mode with raw HTML off, so `<script>` in a message or artifact is shown as
text, and links whose scheme is not http(s) or mailto (javascript:, data:, vbscript:) are not made.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup

from parley.protocol import models as m

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
SAFE_SCHEMES = ("http:", "https:", "mailto:")

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
_markdown.validateLink = lambda url: url.strip().lower().startswith(SAFE_SCHEMES) or url.startswith(("#", "/"))


def markdown(text: str) -> Markup:
    """`text` as HTML from Markdown, raw HTML escaped, only safe link schemes."""
    return Markup(_markdown.render(text))  # markdown-it escapes all raw HTML (html=False)


def pretty_json(value: Any) -> str:
    """Indented JSON of a value, for <pre> blocks (escaped by the template)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def state_label(state: m.TaskState | str) -> str:
    """TASK_STATE_INPUT_REQUIRED -> input-required."""
    value = state.value if isinstance(state, m.TaskState) else state
    return value.removeprefix("TASK_STATE_").lower().replace("_", "-")


def when(ts: float | None) -> str:
    """A Unix time as `2026-11-26 16:20:58Z`, or an empty string."""
    if not ts:
        return ""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def duration(seconds: float | None) -> str:
    """1.234 -> `1.2 s`, 75 -> `1 min 15 s`, 4000 -> `1 h 6 min`."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def environment() -> Environment:
    """The dashboard's template environment (autoescape on for every template)."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(markdown=markdown, pretty_json=pretty_json, state=state_label, when=when,
                       duration=duration)
    return env


__all__ = ["STATIC", "duration", "environment", "markdown", "pretty_json", "state_label", "when"]
