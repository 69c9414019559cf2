"""The layers docs/architecture.md draws, checked on the source: which package may import which, and no import
cycles. A cycle makes a module importable only after another one (the bug a user meets as the first line of a
fresh interpreter); a lower layer that imports a higher one is how cycles start.
"""

from __future__ import annotations

import ast
from functools import cache
from itertools import pairwise
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# package -> the parley packages it may import besides itself (docs/architecture.md, "Where things live")
ALLOWED = {
    "parley.protocol": set(),  # sans-IO: knows nothing of HTTP, tasks or agents
    "parley.agents": {"parley.protocol"},  # the agent contract and runtime: no server, no store
    "parley.grpc": {"parley.protocol"},
}
# (importer prefix, imported prefix) pairs that must never occur
FORBIDDEN = [
    ("parley.agents.tools", "parley.agents.llm"),  # tools are below the LLM loop and its backends
    ("parley.tasks", "parley.server"),  # the engine knows no binding
    ("parley.tasks", "parley.web"),
    ("parley.tasks", "parley.hub"),
    ("parley.protocol", "parley.server"),
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(path: Path, top_level_only: bool) -> set[str]:
    """The parley modules `path` imports (TYPE_CHECKING blocks left out; with `top_level_only`, also imports
    inside functions, which run later and cannot make an import cycle)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if top_level_only and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from pkg import module`
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {module for module in found if module == "parley" or module.startswith("parley.")}


@cache
def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((SRC / "parley").rglob("*.py")) if not p.name.endswith("_pb2.py")
            and not p.name.endswith("_pb2_grpc.py")}


def _resolve(imported: str) -> str | None:
    """The module an imported name is (a name imported from a module resolves to that module)."""
    known = modules()
    while imported and imported not in known:
        imported = imported.rpartition(".")[0]
    return imported or None


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_lower_layer_imports_only_what_it_may(package: str) -> None:
    wrong = []
    for name, path in modules().items():
        if not _within(name, package):
            continue
        for imported in filter(None, map(_resolve, _imports(path, top_level_only=False))):
            if not _within(imported, package) and not any(_within(imported, ok) for ok in ALLOWED[package]):
                wrong.append(f"{name} imports {imported}")
    assert wrong == [], f"{package} may import only {sorted(ALLOWED[package])}: " + "; ".join(sorted(set(wrong)))


@pytest.mark.parametrize(("importer", "imported"), FORBIDDEN, ids=[f"{a}-x-{b}" for a, b in FORBIDDEN])
def test_a_forbidden_import_does_not_occur(importer: str, imported: str) -> None:
    wrong = sorted({f"{name} imports {target}" for name, path in modules().items() if _within(name, importer)
                    for target in filter(None, map(_resolve, _imports(path, top_level_only=False)))
                    if _within(target, imported)})
    assert wrong == []


def test_there_are_no_import_cycles() -> None:
    graph = {name: {t for t in map(_resolve, _imports(path, top_level_only=True)) if t and t != name}
             for name, path in modules().items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                # a package importing its own module, which implicitly imports the package back, is no cycle
                if not all(_within(b, a) or _within(a, b) for a, b in pairwise(cycle)):
                    cycles.append(cycle)
            elif nxt not in state:
                walk(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node)
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)
