"""The docs agree with the code and with each other (issue 26).

- Every `parley ...` command line the docs show (in shell blocks and in inline code) names a command that
  exists, with options that command has: its `--help`, run as a user would (a subprocess of the installed
  `parley`), lists each one. A renamed or removed flag fails here, not in a reader's terminal.
- The docs write `parley` where the README writes `.venv/bin/parley`: the README says how to put the venv's
  `parley` on the PATH.
- Claims found stale once stay gone (each with the fact that replaced it).
"""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from docblocks import DOCUMENTS, REPO

PARLEY = [str(Path(sys.executable).parent / "parley")]  # the command the venv installed
FENCE = re.compile(r"^```")
INLINE = re.compile(r"`((?:\.venv/bin/)?parley [^`]+)`")
GROUPS = {"tasks", "keys", "push", "cards"}  # commands with subcommands
SUBGROUPS = {("cards", "keys")}  # subcommands with subcommands of their own


def command_lines() -> list[tuple[str, str]]:
    """(where, command line) of each `parley` command in a shell block or an inline code span."""
    found: list[tuple[str, str]] = []
    for path in DOCUMENTS:
        in_block = False
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            where = f"{path.relative_to(REPO)}:{i + 1}"
            if FENCE.match(line):
                in_block = not in_block
                i += 1
                continue
            if in_block:
                text = line.split(" #", 1)[0].strip()
                while text.endswith("\\") and i + 1 < len(lines):  # continued on the next line
                    i += 1
                    text = text[:-1] + " " + lines[i].split(" #", 1)[0].strip()
                if re.match(r"^(\.venv/bin/)?parley\s", text):
                    found.append((where, text))
            else:
                found += [(where, m.group(1)) for m in INLINE.finditer(line)]
            i += 1
    return found


@functools.cache
def help_of(*words: str) -> str:
    done = subprocess.run([*PARLEY, *words, "--help"], capture_output=True, text=True, timeout=60, check=False,
                          env={"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, f"`parley {' '.join(words)} --help` exited {done.returncode}: {done.stderr[-500:]}"
    return done.stdout


def words_of(line: str) -> tuple[list[str], list[str]]:
    """(the command's words: `keys create`, `serve`, ...; the options given) of one `parley` command line."""
    try:
        argv = shlex.split(line.split(" | ", 1)[0].split(" && ", 1)[0])
    except ValueError:  # an inline span with an unbalanced quote: read it plainly
        argv = line.split()
    argv = argv[1:]
    global_options = []
    while argv and argv[0].startswith("--"):  # `parley --api-key K send ...`
        global_options.append(argv.pop(0).split("=", 1)[0])
        if argv and not argv[0].startswith("-"):
            argv.pop(0)
    if not argv:
        return [], global_options
    command = [argv[0]]
    if argv[0] in GROUPS and len(argv) > 1 and re.fullmatch(r"[a-z][a-z-]*", argv[1]):
        command.append(argv[1])
        if tuple(command) in SUBGROUPS and len(argv) > 2 and re.fullmatch(r"[a-z][a-z-]*", argv[2]):
            command.append(argv[2])
    options = [a.split("=", 1)[0] for a in argv if re.fullmatch(r"--[a-z][a-z-]*(=.*)?", a)]
    return command, options + global_options


LINES = command_lines()


def test_the_docs_show_parley_commands() -> None:
    assert len(LINES) >= 40, LINES


@pytest.mark.parametrize("where, line", LINES, ids=[w for w, _ in LINES])
def test_every_documented_command_and_option_exists(where: str, line: str) -> None:
    command, options = words_of(line)
    if not command or command[0].startswith("-"):  # `parley --version`, or prose like `parley ...`
        for option in options:
            assert option in help_of(), f"{where}: `{line}`: parley has no option {option}"
        return
    if command[0] in ("...", "…") or not re.fullmatch(r"[a-z][a-z-]*", command[0]):
        pytest.fail(f"{where}: `{line}` does not name a command")
    text = help_of(*command)
    top = help_of()
    for option in options:
        assert option in text or option in top, f"{where}: `{line}`: `parley {' '.join(command)}` has no {option}"


def test_the_readme_says_how_to_put_parley_on_the_path() -> None:
    """docs/ write `parley`; the README's commands write `.venv/bin/parley`: it must say how the two meet."""
    paragraphs = (REPO / "README.md").read_text().split("\n\n")
    said = [p for p in paragraphs if "source .venv/bin/activate" in p]
    assert said, "the README should say how to activate the venv"
    assert "`docs/`" in said[0] and "`parley`" in said[0], said[0]


@pytest.mark.parametrize("stale, fact", [
    ("The full dashboard is not implemented yet", "docs/dashboard.md describes the dashboard that ships"),
    ("held back to mark lastChunk", "text is written at once; the turn's end marks lastChunk (issue 25)"),
    ("the bytes still grow with the square", "snapshot rewrites are linear in the answer's length"),
])
def test_stale_claims_stay_gone(stale: str, fact: str) -> None:
    for path in DOCUMENTS:
        assert stale not in path.read_text(), f"{path.relative_to(REPO)} still says {stale!r}; {fact}"
