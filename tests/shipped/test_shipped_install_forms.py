"""docs/install.md's ways of installing Parley into one's own project, each done by this suite exactly as written
(shipkit.RECIPES runs the page's commands, placeholders filled in), and what each gives the user: from a checkout
(then adding an extra), editable, from the wheel, from the wheel with an extra (`'parley-a2a[grpc] @ file:///...'`).
The wheel installs are the ones every other test here uses; this module checks the page and the checkout forms.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from shipkit import DOCUMENTED, FROM_WHEEL, RECIPES, REPO, Dist, Install, documented_install_commands

from support import free_port


def test_the_install_page_shows_exactly_the_commands_the_suite_runs(dist: Dist) -> None:
    """Every command of docs/install.md's `sh setup` blocks is one this suite runs, and the other way round; the
    wheel the page names is the one the build makes (the page follows a version change)."""
    documented = documented_install_commands()
    assert sorted(set(documented)) == sorted(set(DOCUMENTED))
    run = {command for recipe in RECIPES.values() for command in recipe}
    assert set(DOCUMENTED) - run == {DOCUMENTED[1]}  # the build, which the `dist` fixture runs
    assert FROM_WHEEL.endswith(f"dist/{dist.wheel.name}")


def _where_parley_is(install: Install, workdir: Path) -> Path:
    done = install.run_python("import parley; print(parley.__file__)", cwd=workdir)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip()).resolve()


def test_install_from_a_checkout_then_add_an_extra(installs: Callable[[str], Install], workdir: Path) -> None:
    """`pip install /path/to/parley`, then `pip install '/path/to/parley[grpc]'`: Parley is copied into the
    project's environment (not linked to the checkout), and the extra added later works: a send over gRPC."""
    checkout = installs("checkout")
    module = _where_parley_is(checkout, workdir)
    assert "site-packages" in module.parts and not module.is_relative_to(REPO)
    with checkout.serve("--grpc-port", str(free_port()), cwd=workdir) as served:
        sent = checkout.parley("send", "--binding", "grpc", served.url, "hello over gRPC", cwd=workdir)
        assert sent.returncode == 0 and "hello over gRPC" in sent.stdout, sent.stdout + sent.stderr


def test_an_editable_install_runs_the_checkouts_code(installs: Callable[[str], Install], workdir: Path) -> None:
    """`pip install -e /path/to/parley`: the project's `import parley` is the checkout's src/parley (so edits
    apply without installing again), and its `parley serve` answers."""
    editable = installs("editable")
    assert _where_parley_is(editable, workdir) == (REPO / "src" / "parley" / "__init__.py").resolve()
    with editable.serve(cwd=workdir) as served:
        sent = editable.parley("send", served.url, "hello from the checkout", cwd=workdir)
        assert sent.returncode == 0 and "hello from the checkout" in sent.stdout, sent.stdout + sent.stderr
