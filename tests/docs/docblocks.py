"""The shell blocks of README.md and docs/*.md, and how each one is run by tests/docs.

A fenced block's info string says what it is:

    ```sh run      the harness runs it, line by line, against servers it starts (test_documented_commands.py)
    ```sh setup    installing Parley or running the whole suite: CI itself runs these (.ci/run, a fresh clone)

Any other `sh`, `bash` or `console` block is an error: a command in the docs is either run by a test
or explicitly setup. In a `run` block:

* `\\` continues a command on the next line; blank lines and comments are skipped, except
* `# => TEXT` after a command: its output must contain TEXT;
* `#   you> TEXT` after a `parley chat`: TEXT is typed at its prompt; the other indented comment lines
  after it (`#   [input-required] ...`, `#   ... TEXT`) are what it must print;
* `export NAME=VALUE` sets a variable for the rest of the block.

A Python block whose first line is `# NAME.py` is a file the commands may use (`--app NAME:app`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELLS = {"sh", "bash", "console", "shell"}
FENCE = re.compile(r"^```(\S*)(?:[ \t]+(\S+))?[ \t]*$")


@dataclass
class Command:
    """One command of a block, with what the docs say it prints and what is typed at it."""

    text: str
    expect: list[str] = field(default_factory=list)
    typed: list[str] = field(default_factory=list)


@dataclass
class Block:
    """A fenced block of a document."""

    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    mode: str  # run | setup | "" (a shell block must say)
    body: str
    files: dict[str, str] = field(default_factory=dict)  # `# NAME.py` Python blocks above it in the document

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    def commands(self) -> list[Command]:
        """The block's commands, continuations joined, with their expectations and typed input."""
        out: list[Command] = []
        pending = ""
        for raw in self.body.splitlines():
            line = raw.rstrip()
            stripped = line.strip()
            if pending:
                pending += " " + stripped.removesuffix("\\").strip()
                if not stripped.endswith("\\"):
                    out.append(Command(pending))
                    pending = ""
                continue
            if not stripped:
                continue
            if stripped.startswith("#"):
                comment = stripped[1:]
                if comment.startswith(" =>") and out:
                    out[-1].expect.append(comment[len(" =>"):].strip())
                elif comment.startswith("   you>") and out:
                    out[-1].typed.append(comment[len("   you>"):].strip())
                elif comment.startswith("   ") and out and out[-1].typed:
                    shown = comment.strip()
                    out[-1].expect.append(shown.removeprefix("... ").strip())
                continue
            text = _strip_comment(stripped)
            if text.endswith("\\"):
                pending = text.removesuffix("\\").strip()
                continue
            out.append(Command(text))
        return out


def _strip_comment(line: str) -> str:
    """A command without its trailing `# ...` comment (a `#` inside quotes stays)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line


def blocks(path: Path) -> list[Block]:
    """Every fenced block of one document, in order."""
    found: list[Block] = []
    files: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened is None or not opened.group(1):
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        text = "\n".join(body) + "\n"
        language, mode = opened.group(1), opened.group(2) or ""
        if language == "python" and body and re.fullmatch(r"# [\w.]+\.py", body[0].strip()):
            files[body[0].strip()[2:]] = text
        found.append(Block(path, start + 1, language, mode, text, dict(files)))
        i += 1
    return found


def shell_blocks() -> list[Block]:
    """The shell blocks of every document."""
    return [b for path in DOCUMENTS for b in blocks(path) if b.language in SHELLS]


__all__ = ["DOCUMENTS", "REPO", "Block", "Command", "blocks", "shell_blocks"]
