"""HTML for the dashboard: Jinja2 templates with autoescaping on, and agent text rendered as safe Markdown.

Agent output is untrusted. Templates escape every value (autoescape); Markdown goes through
markdown-it in CommonMark mode with raw HTML off, so `<script>` in a message or artifact is shown as
text. Links (and images) are made only to:

- an explicit `http://`, `https://` or `mailto:` URL, shown as the off-site link it is: it opens with
  `rel="noopener noreferrer nofollow"` (no window.opener, no Referer naming the dashboard page);
- a path of the dashboard's own server (`/ui/tasks/...`) or a fragment (`#...`).

Everything else stays text: other schemes (javascript:, data:, vbscript:), relative references, and the
forms a browser reads as another host although they start like a path: protocol-relative `//host`, and
`/\\host` (browsers treat a backslash as a slash), whatever whitespace or control characters they hide.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup

from parley.protocol import models as m

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
SAFE_SCHEMES = ("http://", "https://", "mailto:")

OFF_SITE_REL = "noopener noreferrer nofollow"
# Characters that must not start a local path: a second slash or a backslash (both make `//host`), in any
# spelling a browser decodes or ignores (percent-encoded, or behind whitespace and control characters).
_NOT_LOCAL = re.compile(r"^/(?:[\s\x00-\x1f\x7f]|%(?:2f|5c|0[9ad]|20))*(?:[/\\]|%(?:2f|5c))", re.IGNORECASE)


def safe_link(url: str) -> bool:
    """Whether a Markdown link or image may point at `url` (see the module docstring)."""
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return False
    if url.lower().startswith(SAFE_SCHEMES):
        return True
    if url.startswith("#"):
        return True
    return url.startswith("/") and "\\" not in url and not _NOT_LOCAL.match(url)


def _off_site_link(renderer, tokens, idx, options, env) -> str:  # a markdown-it render rule
    """Open every absolute link as an off-site one (rel noopener noreferrer nofollow)."""
    token = tokens[idx]
    href = str(token.attrGet("href") or "")
    if href.lower().startswith(("http://", "https://")):
        token.attrSet("rel", OFF_SITE_REL)
    return renderer.renderToken(tokens, idx, options, env)


_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
_markdown.validateLink = safe_link
_markdown.add_render_rule("link_open", _off_site_link)


def markdown(text: str) -> Markup:
    """`text` as HTML from Markdown, raw HTML escaped, links only as :func:`safe_link` allows."""
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
    """0.0004 -> `0.4 ms`, 0.0123 -> `12 ms`, 1.234 -> `1.2 s`, 75 -> `1 min 15 s`, 4000 -> `1 h 6 min`."""
    if seconds is None:
        return ""
    if seconds == 0:
        return "0 ms"
    if seconds < 0.01:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
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


__all__ = ["OFF_SITE_REL", "STATIC", "duration", "environment", "markdown", "pretty_json", "safe_link", "state_label", "when"]
