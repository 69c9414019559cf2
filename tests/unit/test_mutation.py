"""Mutation testing of the pure core (scripts/mutate.py): no mutant that changes behaviour survives.

The slow test runs the whole mutation run in a subprocess; the others check the mutator and the
list of equivalent mutants (scripts/mutate_equivalent.txt) without running any mutant.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "mutate.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("parley_mutate", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


mutate = _load()


@pytest.mark.slow
def test_no_mutant_of_the_pure_core_survives() -> None:
    run = subprocess.run([sys.executable, str(SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=900,
                         check=False)
    report = [line for line in run.stdout.splitlines()
              if line.startswith(("SURVIVED", "          allowlist key", "ERROR", "LISTED", "FAILED"))]
    assert run.returncode == 0, (
        "mutants of the pure core that the tests do not notice (add a test that does; list a mutant in "
        "scripts/mutate_equivalent.txt only if no test could ever tell it from the original):\n"
        + "\n".join(report or [run.stdout[-4000:], run.stderr[-4000:]])
    )
    assert "OK: every mutant that changes behaviour is killed" in run.stdout


@pytest.mark.parametrize("module", sorted(mutate.TARGETS))
def test_every_target_has_mutants_with_unique_keys(module: str) -> None:
    mutants = mutate.make_mutants(module)
    assert len(mutants) > 20
    assert len({mt.key for mt in mutants}) == len(mutants)
    assert len({mt.source for mt in mutants}) == len(mutants)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # `"started" is True` is a fine mutant
        for mt in mutants:
            compile(mt.source, mt.module, "exec")  # every mutant is valid Python
    for test in mutate.TARGETS[module]:
        assert (ROOT / test).is_file()


def test_equivalent_list_names_existing_mutants() -> None:
    listed = mutate.read_equivalent()
    keys = {mt.key for module in mutate.TARGETS for mt in mutate.make_mutants(module)}
    assert set(listed) <= keys, f"stale entries: {sorted(set(listed) - keys)}"
    assert all(len(reason) > 20 for reason in listed.values())


SAMPLE = '''
"""Docstring: not mutated."""
LIMIT: int = 3
TABLE = {"a": frozenset({1, 2})}


def f(x: int, items: list[str]) -> bool:
    """Not mutated either."""
    if x > LIMIT and items:
        raise ValueError("prose is not mutated")
    y = -x + 1
    return x == 2 or not items
'''


def test_the_mutator_on_a_sample() -> None:
    mutants = mutate._Maker("sample.py", SAMPLE).run()
    found = {mt.mutation for mt in mutants}
    expected = {
        "3 -> 4",  # constants
        "'a' -> 'XXaXX'",
        "remove entry 'a' from dict {'a': frozenset({1, 2})}",  # tables
        "remove 1 from set {1, 2}",
        "frozenset({1, 2}) -> {1, 2}",  # unwrapped calls
        "x > LIMIT -> x >= LIMIT",  # comparisons
        "x > LIMIT -> x <= LIMIT",
        "x > LIMIT and items -> x > LIMIT or items",  # boolean operators
        "x > LIMIT and items -> items",
        "x > LIMIT and items -> not (x > LIMIT and items)",  # negated conditions
        "-x + 1 -> -x - 1",  # arithmetic
        "-x -> x",
        "not items -> items",
        "y = -x + 1 -> pass",  # deleted statements
        "return x == 2 or not items -> return None",
    }
    assert expected <= found, sorted(expected - found)
    sources = "\n".join(mt.source for mt in mutants)
    assert "XXprose" not in sources and "XXDocstring" not in sources and "XXNot mutated" not in sources
    assert {mt.scope for mt in mutants} == {"<module>", "f"}
    assert not any(mt.mutation.endswith("-> pass") for mt in mutants if mt.scope == "<module>")
