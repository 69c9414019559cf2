"""Fixtures of the shipped-product tests: the session's build and its installs (see shipkit.py), a working
directory outside the checkout, and one headless chromium."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from shipkit import REPO, Dist, Install, build, install

from support import chromium_browser


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """The sdist and the wheel built from it, once per session (docs/install.md's build command)."""
    return build(tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="session")
def installs(dist: Dist) -> Callable[[str], Install]:
    """`installs(name)`: the install `name` of shipkit.RECIPES, made (or taken from the cache) once a session."""
    made: dict[str, Install] = {}

    def get(name: str) -> Install:
        if name not in made:
            made[name] = install(name, dist)
        return made[name]

    return get


@pytest.fixture(scope="session")
def bare(installs: Callable[[str], Install]) -> Install:
    """The wheel installed with no extras: what `pip install parley-a2a` gives a user."""
    return installs("wheel")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A user's working directory: a fresh directory outside the checkout."""
    assert not tmp_path.resolve().is_relative_to(REPO)
    return tmp_path


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One headless Debian chromium for a test module (skipped without it, failed under CI=true)."""
    with chromium_browser() as chromium:
        yield chromium
