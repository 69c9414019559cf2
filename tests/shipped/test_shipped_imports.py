"""Every import the README and docs/*.md show works as the FIRST line of a fresh interpreter of the install a
user has for it: a module that only imports after another one (an import cycle hidden by the order of a test
run), or one that needs a package the install lacks, fails here.

Each line runs in the bare wheel install, except the few that document an extra's module, which run in that
extra's install (EXTRA_OF). Then the same for every module the wheel ships, documented or not: a user's code,
or a tool, may import any of them first.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from shipkit import Dist, Install, documented_imports

IMPORTS = documented_imports()
# module (or package prefix) -> the install (shipkit.RECIPES) with the extra it needs; the others need none
EXTRA_OF = {
    "parley.agents.tools.mcp": "wheel-mcp",
    "parley.grpc": "wheel-grpc",  # the generated code: protobuf, grpcio, googleapis-common-protos
    "parley.client.grpc": "wheel-grpc",
    "parley.server.grpc_server": "wheel-grpc",
    "parley.web.inspector_grpc": "wheel-grpc",  # loaded by the inspector only for a gRPC interface
    "parley.telemetry.metrics": "wheel-otel",
    "parley.telemetry.propagation": "wheel-otel",
    "parley.telemetry.push_spans": "wheel-otel",
    "parley.telemetry.spans": "wheel-otel",
}


def _install_for(module: str) -> str:
    for prefix, name in EXTRA_OF.items():
        if module == prefix or module.startswith(prefix + "."):
            return name
    return "wheel"


def _wheel_modules(wheel: Path) -> list[str]:
    """Every Python module the wheel ships, by its dotted name."""
    with zipfile.ZipFile(wheel) as z:
        files = [n for n in z.namelist() if n.startswith("parley/") and n.endswith(".py")]
    return sorted(n.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for n in files)


def test_the_docs_show_imports() -> None:
    """The docs' imports were found (the pattern still matches how the docs write them)."""
    assert "from parley import Parley" in IMPORTS and "from parley.client import A2AClient" in IMPORTS
    assert len(IMPORTS) >= 8


@pytest.mark.parametrize("line", IMPORTS)
def test_documented_import_as_the_first_line(line: str, installs: Callable[[str], Install], workdir: Path) -> None:
    """`line`, alone, in a new interpreter of the install (no PYTHONPATH, outside the checkout), succeeds."""
    done = installs(_install_for(line.split()[1])).run_python(line, cwd=workdir)
    assert done.returncode == 0, f"`{line}` fails as the first import:\n{done.stderr[-3000:]}"


def test_every_module_of_the_wheel_imports_first(dist: Dist, installs: Callable[[str], Install], workdir: Path) -> None:
    """`import M`, alone in a new interpreter, succeeds for every module M of the wheel, in the bare install or,
    for an extra's module, in that extra's install. All failures are listed at once."""
    modules = _wheel_modules(dist.wheel)
    assert "parley.cli" in modules and "parley.web.dashboard" in modules
    targets = [(installs(_install_for(m)), m) for m in modules]

    def first_import(target: tuple[Install, str]) -> str | None:
        install, module = target
        done = install.run_python(f"import {module}", cwd=workdir)
        last = (done.stderr.strip().splitlines() or [""])[-1]
        return None if done.returncode == 0 else f"{module} ({install.name}): {last}"

    with ThreadPoolExecutor(2) as pool:  # the machine has 2 cores; each import is its own interpreter
        failures = [f for f in pool.map(first_import, targets) if f]
    assert not failures, "modules that fail as the first import:\n" + "\n".join(failures)
