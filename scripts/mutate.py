#!/usr/bin/env python3
"""Mutation testing of Parley's pure core: does the test suite notice when the code changes?

For each target module (TARGETS below) this script makes mutants: copies of the module with
one small change each, found by walking its AST:

  compare      ==/!=, </<=/>=, >/>=/<=, in/not in, is/is not swapped
  boolop       and <-> or; one operand dropped (`a or b` -> `a`, `b`)
  binop        + <-> -, * <-> /, // and % -> *
  unary        `not x` -> `x`, `-x` -> `x`
  negate       the test of an if / while / conditional expression / comprehension negated
  constant     True <-> False; a number n -> n + 1; a string s -> "XX" s "XX"
  return       `return x` -> `return None`
  delete       a statement inside a function body -> `pass`
  element      one element of a list / tuple / set / dict literal removed (the transition
               table, the supported versions, response envelopes, ...)
  keyword      one keyword argument of a call dropped (the callee's default applies)
  unwrap       `f(x)` -> `x` (copy(), list(), frozenset(), int(), ...); `x.m()` -> `x`

Not mutated: docstrings, type annotations, decorators, imports, `Literal[...]` and the
prose of the messages of raised errors and assertions (their class, code and the values
they carry are mutated like everything else). Mutants whose source equals another's are
made once.

Each mutant is written into a private copy of the package (src/parley is never touched:
every worker copies it to a temporary directory put first on PYTHONPATH) and the module's
unit tests (TARGETS) run against it in a subprocess with a timeout: a child forked by the
worker's test server, so a mutant costs a fork, a few imports and its tests rather than a new
Python and pytest. A mutant is *killed* when a test fails (or the tests cannot be imported,
or time out), else it *survived*. Workers run in parallel, one per core; the outcome of
every mutant is deterministic.

Survivors that cannot change observable behaviour are listed, with a reason, in
scripts/mutate_equivalent.txt, one per line:

    <module> | <scope> | <mutation> | <why no test could ever tell it from the original>

The run fails (exit status 1) if a mutant survives that is not in that list, and also if
an entry of the list is killed (then it was not equivalent) or matches no mutant (stale).

    python scripts/mutate.py                    # everything, one worker per core
    python scripts/mutate.py -m tasks/turn.py   # one module (repeatable)
    python scripts/mutate.py --list             # the mutants, not run
    python scripts/mutate.py -v                 # and the outcome of each mutant
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import json
import math
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "parley"
EQUIVALENT_FILE = ROOT / "scripts" / "mutate_equivalent.txt"

# module (relative to src/parley) -> the tests that must kill its mutants
TARGETS: dict[str, list[str]] = {
    "protocol/states.py": ["tests/unit/test_states.py"],
    "tasks/log.py": ["tests/unit/test_log_and_stores.py"],
    "protocol/jsonrpc.py": ["tests/unit/test_jsonrpc_envelope.py"],
    "tasks/turn.py": ["tests/unit/test_turn.py"],
}

# A fast pytest: no conftest (these unit tests need none of its fixtures), no assertion rewriting
# (a failing assert fails the same), no cache, none of the plugins the tests do not use, stop at
# the first failure.
PYTEST_ARGS = ["-q", "-x", "--tb=no", "--no-header", "--noconftest", "--assert=plain", *[
    arg for plugin in ("cacheprovider", "hypothesispytest", "anyio", "unraisableexception", "threadexception",
                       "faulthandler", "junitxml", "doctest", "pastebin", "logging", "stepwise")
    for arg in ("-p", f"no:{plugin}")]]
DEFAULT_TIMEOUT = 60.0  # seconds per mutant; an unmutated selection takes well under one

# --- making mutants ---------------------------------------------------------------------------------------

COMPARE_SWAPS: dict[type, list[type]] = {
    ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq],
    ast.Lt: [ast.LtE, ast.GtE], ast.LtE: [ast.Lt, ast.Gt],
    ast.Gt: [ast.GtE, ast.LtE], ast.GtE: [ast.Gt, ast.Lt],
    ast.In: [ast.NotIn], ast.NotIn: [ast.In],
    ast.Is: [ast.IsNot], ast.IsNot: [ast.Is],
}
BINOP_SWAPS: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult, ast.Mod: ast.Mult, ast.Pow: ast.Mult,
}


@dataclass(frozen=True, slots=True)
class Mutant:
    module: str  # relative to src/parley
    line: int
    scope: str  # the enclosing class/function (dotted), or <module>
    mutation: str  # "before -> after"
    source: str  # the whole mutated module
    key: str  # module | scope | mutation (+ " #n" for the n-th alike): stable across line moves

    def where(self) -> str:
        return f"src/parley/{self.module}:{self.line} [{self.scope}]"


def _short(node: ast.AST | str, limit: int = 70) -> str:
    text = node if isinstance(node, str) else ast.unparse(node)
    lines = text.splitlines() or [""]
    text = lines[0] + (" ..." if len(lines) > 1 else "")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_docstring(body: list[ast.stmt], stmt: ast.stmt) -> bool:
    return (bool(body) and body[0] is stmt and isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str))


@dataclass(slots=True)
class _Slot:
    """Where a node sits: parent.field, or parent.field[index]."""

    parent: ast.AST
    field: str
    index: int | None

    def get(self) -> ast.AST:
        value = getattr(self.parent, self.field)
        return value if self.index is None else value[self.index]

    def set(self, node: ast.AST) -> None:
        if self.index is None:
            setattr(self.parent, self.field, node)
        else:
            getattr(self.parent, self.field)[self.index] = node


@dataclass(slots=True)
class _Ctx:
    scope: str = "<module>"
    in_function: bool = False
    prose: bool = False  # inside the message of a raise or an assert: strings are not mutated


class _Maker:
    def __init__(self, module: str, source: str) -> None:
        self.module = module
        self.tree = ast.parse(source)
        self.original = ast.unparse(self.tree)
        self.found: list[tuple[int, _Ctx, str, str]] = []  # line, where, mutation, source

    def run(self) -> list[Mutant]:
        self._visit(self.tree, None, _Ctx())
        seen = {self.original}
        counts: dict[str, int] = {}
        out = []
        for line, ctx, mutation, source in self.found:
            if source in seen:
                continue
            seen.add(source)
            base = f"{self.module} | {ctx.scope} | {mutation}"
            counts[base] = counts.get(base, 0) + 1
            key = base if counts[base] == 1 else f"{base} #{counts[base]}"
            out.append(Mutant(self.module, line, ctx.scope, mutation, source, key))
        return out

    def _try(self, slot: _Slot, new: ast.AST, mutation: str, ctx: _Ctx, line: int) -> None:
        old = slot.get()
        slot.set(new)
        try:
            source = ast.unparse(self.tree)
        finally:
            slot.set(old)
        self.found.append((line, ctx, mutation, source))

    # -- the walk --

    def _visit(self, node: ast.AST, slot: _Slot | None, ctx: _Ctx) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return
        if isinstance(node, ast.Subscript) and _name(node.value) == "Literal":
            return
        if slot is not None:
            self._mutate(node, slot, ctx)
        for field, value in ast.iter_fields(node):
            if field in ("decorator_list", "returns", "annotation", "type_comment"):
                continue
            child_ctx = ctx
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and field == "body":
                scope = node.name if ctx.scope == "<module>" else f"{ctx.scope}.{node.name}"
                child_ctx = _Ctx(scope, ctx.in_function or not isinstance(node, ast.ClassDef), ctx.prose)
            elif (isinstance(node, ast.Raise) and field == "exc") or (isinstance(node, ast.Assert) and field == "msg"):
                child_ctx = _Ctx(ctx.scope, ctx.in_function, True)
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if not isinstance(item, ast.AST):
                        continue
                    if isinstance(item, ast.stmt) and _is_docstring(value, item) and field == "body" and isinstance(
                            node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                        continue
                    self._visit(item, _Slot(node, field, i), child_ctx)
            elif isinstance(value, ast.AST):
                self._visit(value, _Slot(node, field, None), child_ctx)

    def _mutate(self, node: ast.AST, slot: _Slot, ctx: _Ctx) -> None:
        line = getattr(node, "lineno", 0) or getattr(slot.parent, "lineno", 0)
        # statements
        final_return = (isinstance(node, ast.Return) and isinstance(slot.parent, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and slot.index == len(slot.parent.body) - 1)  # deleting it is `return None`, below
        if isinstance(node, ast.stmt) and ctx.in_function and not final_return and not isinstance(
                node, (ast.Pass, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Global, ast.Nonlocal)):
            self._try(slot, ast.Pass(), f"{_short(node)} -> pass", ctx, line)
        if isinstance(node, ast.Return) and node.value is not None and not _is_none(node.value):
            self._try(slot, ast.Return(value=ast.Constant(None)), f"{_short(node)} -> return None", ctx, line)
        # (a test that is `not x` or a single comparison is negated by the unary and compare mutations)
        if isinstance(node, (ast.If, ast.While, ast.IfExp)) and not _negated_elsewhere(node.test):
            self._try(_Slot(node, "test", None), ast.UnaryOp(op=ast.Not(), operand=node.test),
                      f"{_short(node.test)} -> not ({_short(node.test)})", ctx, line)
        if isinstance(node, ast.comprehension):
            for i, cond in enumerate(node.ifs):
                if _negated_elsewhere(cond):
                    continue
                self._try(_Slot(node, "ifs", i), ast.UnaryOp(op=ast.Not(), operand=cond),
                          f"{_short(cond)} -> not ({_short(cond)})", ctx, line)
        if not isinstance(node, ast.expr):
            return
        # expressions
        for new, what in self._expr_mutations(node, ctx):
            self._try(slot, new, what or f"{_short(node)} -> {_short(new)}", ctx, line)

    def _expr_mutations(self, node: ast.expr, ctx: _Ctx) -> Iterator[tuple[ast.expr, str | None]]:
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                for swap in COMPARE_SWAPS.get(type(op), []):
                    ops = list(node.ops)
                    ops[i] = swap()
                    yield ast.Compare(left=node.left, ops=ops, comparators=node.comparators), None
        elif isinstance(node, ast.BoolOp):
            other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            yield ast.BoolOp(op=other, values=node.values), None
            for i in range(len(node.values)):
                rest = node.values[:i] + node.values[i + 1:]
                yield (rest[0] if len(rest) == 1 else ast.BoolOp(op=node.op, values=rest)), None
        elif isinstance(node, ast.BinOp) and type(node.op) in BINOP_SWAPS:
            yield ast.BinOp(left=node.left, op=BINOP_SWAPS[type(node.op)](), right=node.right), None
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub, ast.Invert)):
            yield node.operand, None
        elif isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool):
                yield ast.Constant(not value), None
            elif isinstance(value, (int, float)):
                yield ast.Constant(value + 1), None
            elif isinstance(value, str) and not ctx.prose:
                yield ast.Constant(f"XX{value}XX"), None
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)) and isinstance(getattr(node, "ctx", ast.Load()), ast.Load):
            kind = type(node).__name__.lower()
            for i, elt in enumerate(node.elts):
                rest = node.elts[:i] + node.elts[i + 1:]
                new = type(node)(elts=rest, ctx=ast.Load()) if not isinstance(node, ast.Set) else ast.Set(elts=rest)
                yield new, f"remove {_short(elt)} from {kind} {_short(node, 50)}"
        elif isinstance(node, ast.Dict):
            for i, key in enumerate(node.keys):
                new = ast.Dict(keys=node.keys[:i] + node.keys[i + 1:], values=node.values[:i] + node.values[i + 1:])
                entry = f"**{_short(node.values[i])}" if key is None else _short(key)
                yield new, f"remove entry {entry} from dict {_short(node, 50)}"
        elif isinstance(node, ast.Call):
            for i, kw in enumerate(node.keywords):
                new = ast.Call(func=node.func, args=node.args, keywords=node.keywords[:i] + node.keywords[i + 1:])
                yield new, f"drop {_short(kw)} from {_short(node.func)}(...)"
            if len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred):
                yield node.args[0], None
            if not node.args and not node.keywords and isinstance(node.func, ast.Attribute):
                yield node.func.value, None


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _negated_elsewhere(test: ast.expr) -> bool:
    return (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)) or (
        isinstance(test, ast.Compare) and len(test.ops) == 1)


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def make_mutants(module: str) -> list[Mutant]:
    """Every mutant of `module` (a path relative to src/parley), in source order."""
    return _Maker(module, (PACKAGE / module).read_text(encoding="utf-8")).run()


# --- running them -----------------------------------------------------------------------------------------
#
# Each worker has a private copy of the package and a test server: this script with --serve, the
# copy first on PYTHONPATH. The server imports the third-party modules the tested code needs (no
# parley module) and starts one pytest session; where pytest would collect, it waits for jobs
# instead and forks a child for each. The child collects the job's test files (importing parley
# from the copy, where the mutant is) and runs them; the server answers with the child's outcome.
# So a mutant costs a fork, an import of a few modules and its tests, not a new Python and pytest.


@dataclass(frozen=True, slots=True)
class Result:
    mutant: Mutant
    outcome: str  # killed | survived | timeout | error
    seconds: float


class Worker:
    """A private copy of the package and the test server over it."""

    def __init__(self, root: Path, timeout: float) -> None:
        self.root = root
        self.timeout = timeout
        shutil.copytree(PACKAGE, root / "parley", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        self.server: subprocess.Popen[str] | None = None

    def env(self, *, bytecode: bool) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(self.root), *filter(None, [env.get("PYTHONPATH")])])
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):  # the caller's pytest options are not ours
            env.pop(name, None)
        if not bytecode:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONHASHSEED"] = "0"
        return env

    def start(self, modules: list[str]) -> None:
        """Check that the copy is the parley imported (compiling it on the way), then start the server."""
        names = ["parley." + m.removesuffix(".py").replace("/", ".") for m in modules]
        probe = subprocess.run([sys.executable, "-c", PROBE, *names], cwd=ROOT, env=self.env(bytecode=True),
                               capture_output=True, text=True, check=False)
        lines = probe.stdout.splitlines()
        if probe.returncode != 0 or not lines or not lines[0].startswith(str(self.root)):
            raise SystemExit(f"mutate: the copy in {self.root} is not the parley imported:\n{probe.stdout}{probe.stderr}")
        config = {"timeout": self.timeout, "tests": sorted({t for m in modules for t in TARGETS[m]}),
                  "preload": lines[1:]}  # the tests only tell pytest its root: the jobs say what to run
        self.server = subprocess.Popen([sys.executable, __file__, "--serve", json.dumps(config)], cwd=ROOT,
                                       env=self.env(bytecode=False), text=True,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def test(self, tests: list[str]) -> str:
        """Run `tests` against the copy as it is now: survived (all passed), killed, timeout or error."""
        assert self.server is not None and self.server.stdin is not None and self.server.stdout is not None
        self.server.stdin.write(json.dumps(tests) + "\n")
        self.server.stdin.flush()
        answer = self.server.stdout.readline().strip()
        if not answer:
            raise SystemExit(f"mutate: the test server of {self.root} stopped")
        return answer

    def run(self, mutant: Mutant) -> Result:
        path = self.root / "parley" / mutant.module
        original = path.read_text(encoding="utf-8")
        started = time.monotonic()
        try:
            path.write_text(mutant.source, encoding="utf-8")
            # never the bytecode of the original (nor of another mutant): the children write none
            Path(importlib.util.cache_from_source(str(path))).unlink(missing_ok=True)
            return Result(mutant, self.test(TARGETS[mutant.module]), time.monotonic() - started)
        finally:
            path.write_text(original, encoding="utf-8")

    def stop(self) -> None:
        if self.server is None:
            return
        self.server.stdin.close()  # type: ignore[union-attr]  # end of jobs: the server ends
        try:
            self.server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()


# Run by each worker once, the copy first on PYTHONPATH: where parley comes from, then the
# non-parley modules that importing the target modules loads (the server preloads them).
PROBE = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(importlib.import_module("parley").__file__)
print("\\n".join(sorted(k for k in sys.modules if k.split(".")[0] not in ("parley", "__main__"))))
"""


class _Server:
    """The pytest plugin of a worker's test server (see above)."""

    def __init__(self, jobs: Any, answers: Any, timeout: float) -> None:
        self.jobs = jobs
        self.answers = answers
        self.alarm = max(1, math.ceil(timeout))
        self.child = False

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: Any) -> bool:
        for line in self.jobs:
            tests = json.loads(line)
            pid = os.fork()
            if pid == 0:
                self.child = True
                signal.alarm(self.alarm)  # the default action ends the child: a timeout
                session.perform_collect(tests)  # imports parley from the copy, as it is now
                return True  # pytest goes on: runs session.items, then pytest.main returns in the child
            _, status = os.waitpid(pid, 0)
            if os.WIFSIGNALED(status):
                outcome = "timeout" if os.WTERMSIG(status) == signal.SIGALRM else "error"
            else:
                # 0: all passed; 1: a test failed; 2: interrupted (import or collection error); else pytest broke
                outcome = {0: "survived", 1: "killed", 2: "killed"}.get(os.WEXITSTATUS(status), "error")
            self.answers.write(outcome + "\n")
            self.answers.flush()
        session.items = []  # no more jobs: the server's own session runs nothing
        return True


def serve(config: dict[str, Any]) -> None:
    """A worker's test server: reads jobs (a JSON list of test files a line) on stdin, answers one outcome
    a line."""
    jobs = os.fdopen(os.dup(0), "r")
    answers = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # pytest's own output goes nowhere
        os.dup2(null, fd)
    for name in config["preload"]:
        with contextlib.suppress(Exception):  # one that cannot be preloaded is imported by the child
            importlib.import_module(name)
    assert not any(k.split(".")[0] == "parley" for k in sys.modules), "the server must not import parley"
    server = _Server(jobs, answers, config["timeout"])
    code = pytest.main([*PYTEST_ARGS, *config["tests"]], plugins=[server])
    if server.child:  # a child, its tests run: never go back to the caller
        os._exit(int(code))


def read_equivalent(path: Path = EQUIVALENT_FILE) -> dict[str, str]:
    """The allowlist: mutant key -> reason. Blank lines and lines starting with # are ignored."""
    out: dict[str, str] = {}
    if not path.exists():
        return out
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        module, scope, rest = (line.split(" | ", 2) + ["", ""])[:3]
        mutation, _, reason = rest.rpartition(" | ")
        if not (module and scope and mutation and reason.strip()):
            raise SystemExit(f"{path}:{n}: expected `module | scope | mutation | reason`, got {raw!r}")
        out[f"{module} | {scope} | {mutation}"] = reason.strip()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--module", action="append", choices=sorted(TARGETS),
                        help="mutate only this module (repeatable; default: all)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="parallel workers (default: cores)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per mutant")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every mutant's outcome")
    parser.add_argument("--serve", help=argparse.SUPPRESS)  # internal: a worker's test server (JSON config)
    args = parser.parse_args(argv)
    if args.serve:
        serve(json.loads(args.serve))
        return 0
    modules = args.module or list(TARGETS)

    mutants = [mt for module in modules for mt in make_mutants(module)]
    if args.list:
        for mt in mutants:
            print(f"{mt.where()}  {mt.mutation}")
        print(f"{len(mutants)} mutants")
        return 0
    equivalent = read_equivalent()

    if not hasattr(os, "fork"):
        raise SystemExit("mutate: needs os.fork (Linux, macOS)")
    started = time.monotonic()
    jobs = max(1, args.jobs)
    tmp = Path(tempfile.mkdtemp(prefix="parley-mutate-"))
    workers = [Worker(tmp / f"w{i}", args.timeout) for i in range(jobs)]
    try:
        for worker in workers:
            worker.start(modules)
        for module in modules:  # the tests pass unmutated, in every copy
            for worker in workers:
                if (outcome := worker.test(TARGETS[module])) != "survived":
                    raise SystemExit(f"mutate: the tests of {module} do not pass without a mutation ({outcome}): "
                                     f"run pytest {' '.join(TARGETS[module])}")
        free: queue.Queue[Worker] = queue.Queue()
        for worker in workers:
            free.put(worker)

        def run(mutant: Mutant) -> Result:
            worker = free.get()
            try:
                return worker.run(mutant)
            finally:
                free.put(worker)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(run, mutants))
    finally:
        for worker in workers:
            worker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - started

    print(f"{'module':<22} {'mutants':>7} {'killed':>7} {'survived':>8} {'equivalent':>10} {'errors':>6}")
    for module in modules:
        mine = [r for r in results if r.mutant.module == module]
        killed = sum(r.outcome in ("killed", "timeout") for r in mine)
        equiv = sum(r.outcome == "survived" and r.mutant.key in equivalent for r in mine)
        survived = sum(r.outcome == "survived" for r in mine) - equiv
        errors = sum(r.outcome == "error" for r in mine)
        print(f"{module:<22} {len(mine):>7} {killed:>7} {survived:>8} {equiv:>10} {errors:>6}")
    print(f"{len(results)} mutants in {elapsed:.1f}s with {jobs} workers")

    if args.verbose:
        for r in results:
            print(f"{r.outcome:<9} {r.seconds:5.2f}s  {r.mutant.where()}  {r.mutant.mutation}")

    survivors = [r for r in results if r.outcome == "survived" and r.mutant.key not in equivalent]
    errors = [r for r in results if r.outcome == "error"]
    keys = {r.mutant.key: r for r in results}
    wrongly_listed = [k for k in equivalent if k in keys and keys[k].outcome != "survived"]
    stale = [k for k in equivalent if k.split(" | ", 1)[0] in modules and k not in keys]
    for r in survivors:
        print(f"SURVIVED  {r.mutant.where()}  {r.mutant.mutation}\n          allowlist key: {r.mutant.key}")
    for r in errors:
        print(f"ERROR     {r.mutant.where()}  {r.mutant.mutation} (pytest could not run)")
    for k in wrongly_listed:
        print(f"LISTED AS EQUIVALENT BUT {keys[k].outcome.upper()}: {k}")
    for k in stale:
        print(f"LISTED AS EQUIVALENT BUT NO SUCH MUTANT: {k}")
    problems = len(survivors) + len(errors) + len(wrongly_listed) + len(stale)
    if problems:
        print(f"FAILED: {len(survivors)} surviving mutants, {len(errors)} errors, "
              f"{len(wrongly_listed) + len(stale)} wrong entries in {EQUIVALENT_FILE.relative_to(ROOT)}")
        return 1
    print("OK: every mutant that changes behaviour is killed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
