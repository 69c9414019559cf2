"""Every import the README and docs/*.md show works as the FIRST line of a fresh interpreter of the install a
user has for it: a module that only imports after another one (an import cycle hidden by the order of a test
run), or one that needs a package the install lacks, fails here.

Each line runs in the bare wheel install, except the few that document an extra's module, which run in that
extra's install (EXTRA_OF).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from shipkit import Install, documented_imports

IMPORTS = documented_imports()
# module -> the install (shipkit.RECIPES) that has its extra
EXTRA_OF = {"parley.agents.tools.mcp": "wheel-mcp"}


def _install_for(line: str) -> str:
    module = line.split()[1]
    return EXTRA_OF.get(module, "wheel")


def test_the_docs_show_imports() -> None:
    """The docs' imports were found (the pattern still matches how the docs write them)."""
    assert "from parley import Parley" in IMPORTS and "from parley.client import A2AClient" in IMPORTS
    assert len(IMPORTS) >= 8


@pytest.mark.parametrize("line", IMPORTS)
def test_documented_import_as_the_first_line(line: str, installs: Callable[[str], Install], workdir: Path) -> None:
    """`line`, alone, in a new interpreter of the install (no PYTHONPATH, outside the checkout), succeeds."""
    done = installs(_install_for(line)).run_python(line, cwd=workdir)
    assert done.returncode == 0, f"`{line}` fails as the first import:\n{done.stderr[-3000:]}"
