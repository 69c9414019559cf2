"""Agent Markdown in the dashboard (parley.web.render.markdown): links stay on the dashboard's server, or are
explicit http(s) links that open as off-site ones.

Agent text is untrusted. A link that looks like a path but that a browser resolves to another host
(`//evil.example`, `/\\evil.example`, and their percent-encoded or whitespace-padded spellings) would send an
operator to a page of the agent's choosing under the dashboard's name: those stay text. What is rendered is
parsed with html.parser, so the assertions are about the anchors a browser would see, not about substrings.
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from parley.web.render import OFF_SITE_REL, markdown


class _Anchors(HTMLParser):
    """The href/src and rel of every <a> and <img> in a fragment."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("a", "img"):
            self.found.append({"tag": tag, **dict(attrs)})


def anchors(text: str) -> list[dict[str, str | None]]:
    parser = _Anchors()
    parser.feed(str(markdown(text)))
    return parser.found


OFF_SITE = [
    "[x](//evil.example)",
    "[x](/\\evil.example)",
    "[x](\\\\evil.example)",
    "<//evil>",
    "[x](<//evil.example>)",
    "[x]( //evil.example)",
    "[x](/%2F/evil.example)",
    "[x](/%5Cevil.example)",
    "[x](/%09/evil.example)",
    "[x](///evil.example)",
    "[x](http:/\\evil.example)",
    "[x](https:evil.example)",
    "![i](//evil.example/i.png)",
    "[x][r]\n\n[r]: //evil.example",
    "[x](javascript:alert(1))",
    "[x](data:text/html,hi)",
    "[x](evil.example)",
]


@pytest.mark.parametrize("text", OFF_SITE)
def test_links_a_browser_would_read_as_another_host_stay_text(text: str) -> None:
    """Protocol-relative and backslash links (in every spelling), other schemes and bare relative references
    make no link or image at all."""
    assert anchors(text) == [], markdown(text)


@pytest.mark.parametrize("url", ["https://example.com/page", "http://example.com/"])
def test_explicit_http_links_open_as_off_site_links(url: str) -> None:
    """An explicit http(s) link is made, and says what it is: rel="noopener noreferrer nofollow"."""
    for text in (f"[x]({url})", f"<{url}>"):
        [link] = anchors(text)
        assert link["href"] == url and link["rel"] == OFF_SITE_REL, link


@pytest.mark.parametrize("url", ["/ui/tasks/abc", "/ui/tasks?state=working", "#part-2"])
def test_links_to_the_dashboard_itself_stay_plain(url: str) -> None:
    """A path of the dashboard's own server (or a fragment) is a link, without the off-site rel."""
    [link] = anchors(f"[x]({url})")
    assert link["href"] == url and link.get("rel") is None, link


def test_mailto_links_are_kept() -> None:
    [link] = anchors("[mail](mailto:ops@example.com)")
    assert link["href"] == "mailto:ops@example.com"
