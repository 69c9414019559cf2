#!/usr/bin/env python3
"""Summarise a py-spy `--format raw` profile (collapsed stacks) of a server.

    py-spy record --pid PID --rate 250 --duration 12 --format raw -o prof.txt
    python bench/profile_report.py prof.txt [--top 25] [--focus parley/]

Prints, as percentages of all on-CPU samples:
  * time by component (the file of the innermost frame: parley's modules one by one,
    then starlette, uvicorn, asyncio, msgspec, ...), i.e. where the CPU actually is;
  * the functions with the most self time (innermost frame, with the line);
  * the functions with the most inclusive time (on the stack at all), optionally only
    those whose file contains --focus.

C code (sqlite3, uvloop, httptools, msgspec) has no frame of its own in py-spy without
--native: its time is counted at the Python line that called it.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^():]*?)(?::(?P<line>\d+))?\)$")


def parse(path: Path) -> list[tuple[list[tuple[str, str, str]], int]]:
    stacks = []
    for raw in path.read_text(errors="replace").splitlines():
        raw = raw.strip()
        stack, _, count = raw.rpartition(" ")
        if not count.isdigit():  # empty, or a stack py-spy read mid-change (a name with a line break in it)
            continue
        frames = []
        for f in stack.split(";"):
            m = FRAME.match(f)
            frames.append((m["func"], m["file"], m["line"] or "") if m else (f, "?", ""))
        stacks.append((frames, int(count)))
    return stacks


def component(file: str) -> str:
    if file.startswith("parley/"):
        return file.removesuffix(".py")
    for name in (
        "starlette",
        "uvicorn",
        "asyncio",
        "msgspec",
        "sqlite3",
        "anyio",
        "httptools",
        "uvloop",
        "email",
        "json",
        "uuid",
        "datetime",
        "a2a",
        "google",
        "sse_starlette",
        "pydantic",
    ):
        if file.startswith(name + "/") or file == name + ".py":
            return name
    return file


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", type=Path)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--focus", default=None, help="only list inclusive functions whose file contains this")
    args = ap.parse_args()

    stacks = parse(args.profile)
    total = sum(c for _, c in stacks)
    if not total:
        raise SystemExit("no samples")
    by_comp: Counter[str] = Counter()
    self_time: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    for frames, c in stacks:
        func, file, line = frames[-1]
        by_comp[component(file)] += c
        self_time[f"{func} ({file}:{line})"] += c
        seen = set()
        for func, file, _ in frames:
            key = f"{func} ({file})"
            if key not in seen:
                seen.add(key)
                incl[key] += c

    def pct(n: int) -> str:
        return f"{100.0 * n / total:5.1f}%"

    print(f"{args.profile}: {total} samples\n")
    print("## on-CPU time by component (innermost frame)")
    for name, c in by_comp.most_common(args.top):
        print(f"  {pct(c)}  {name}")
    print("\n## self time (innermost frame and line)")
    for name, c in self_time.most_common(args.top):
        print(f"  {pct(c)}  {name}")
    print("\n## inclusive time" + (f" (files containing {args.focus!r})" if args.focus else ""))
    shown = 0
    for name, c in incl.most_common():
        if args.focus and args.focus not in name:
            continue
        print(f"  {pct(c)}  {name}")
        shown += 1
        if shown >= args.top:
            break


if __name__ == "__main__":
    main()
