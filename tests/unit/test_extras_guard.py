"""support.require / support.needs: a test that needs a module of an optional extra (gRPC, MCP, OpenTelemetry)
is skipped without it, and FAILS under CI=true (the CI installs every extra through the dev extra)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import in_ci, require

TESTS = Path(__file__).resolve().parents[1]
MISSING = "parley_tests_no_such_module"


def test_require_returns_the_module() -> None:
    assert require("json", "dev") is json


@pytest.mark.parametrize("value", ["true", "True", " TRUE "])
def test_a_missing_extra_fails_under_ci(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    assert in_ci()
    with pytest.raises((pytest.fail.Exception, pytest.skip.Exception)) as info:  # a skip must not escape
        require(MISSING, "grpc")
    assert info.type is pytest.fail.Exception, info.value
    assert f"{MISSING} cannot be imported" in str(info.value)
    assert "parley-a2a[grpc]" in str(info.value) and "CI=true" in str(info.value)


@pytest.mark.parametrize("value", [None, "", "false", "0"])
def test_a_missing_extra_skips_outside_ci(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert not in_ci()
    with pytest.raises(pytest.skip.Exception) as info:
        require(MISSING, "otel")
    assert f"{MISSING} cannot be imported" in str(info.value) and "parley-a2a[otel]" in str(info.value)


def test_a_module_that_fails_to_import_counts_as_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A broken install (the module is there but its import fails) is not silently skipped under CI=true."""
    (tmp_path / "parley_tests_broken.py").write_text("raise ImportError('a missing shared library')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("CI", "true")
    with pytest.raises((pytest.fail.Exception, pytest.skip.Exception)) as info:  # a skip must not escape
        require("parley_tests_broken", "grpc")
    assert info.type is pytest.fail.Exception, info.value
    assert "a missing shared library" in str(info.value)


# The three ways the suite guards a test, in a pytest run of their own (tests/conftest.py loaded as a plugin, which
# is what makes support.needs work): a module-level require, a needs mark, a require inside the test.
GUARDED = {
    "test_module_level.py": f"""
from support import require

require({MISSING!r}, "otel")


def test_never_runs():
    pass
""",
    "test_marked.py": f"""
import pytest
from support import needs


@needs({MISSING!r}, "grpc")
def test_needs_it():
    pass


@pytest.mark.parametrize("binding", [pytest.param("GRPC", marks=needs({MISSING!r}, "grpc")), "JSONRPC"])
def test_param_needs_it(binding):
    assert binding == "JSONRPC"
""",
    "test_inside.py": f"""
from support import require


def test_requires_it_inside():
    require({MISSING!r}, "mcp")


def test_unguarded():
    pass
""",
}


def _run(tmp_path: Path, ci: str | None) -> dict[str, str]:
    for name, source in GUARDED.items():
        (tmp_path / name).write_text(source)
    report = tmp_path / "report.json"
    plugin = tmp_path / "outcomes.py"
    plugin.write_text(f"""
import json

outcomes = {{}}


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        outcomes.setdefault(report.nodeid, report.outcome if report.when == "call" else f"{{report.when}} {{report.outcome}}")


def pytest_collectreport(report):
    if report.outcome != "passed":
        outcomes[report.nodeid] = f"collect {{report.outcome}}"


def pytest_sessionfinish(session):
    with open({str(report)!r}, "w") as f:
        json.dump(outcomes, f)
""")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(tmp_path), env.get("PYTHONPATH", "")])
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest", "-p", "outcomes",
                    "--rootdir", str(tmp_path), "--continue-on-collection-errors", str(tmp_path)],
                   cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    return {k.split("::", 1)[-1] if "::" in k else k: v for k, v in json.loads(report.read_text()).items()}


def test_guards_skip_outside_ci(tmp_path: Path) -> None:
    assert _run(tmp_path, None) == {
        "test_module_level.py": "collect skipped",
        "test_needs_it": "setup skipped",
        "test_param_needs_it[GRPC]": "setup skipped",
        "test_param_needs_it[JSONRPC]": "passed",
        "test_requires_it_inside": "skipped",
        "test_unguarded": "passed",
    }


def test_guards_fail_under_ci(tmp_path: Path) -> None:
    assert _run(tmp_path, "true") == {
        "test_module_level.py": "collect failed",
        "test_needs_it": "setup failed",
        "test_param_needs_it[GRPC]": "setup failed",
        "test_param_needs_it[JSONRPC]": "passed",
        "test_requires_it_inside": "failed",
        "test_unguarded": "passed",
    }
