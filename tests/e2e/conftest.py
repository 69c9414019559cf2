"""Fixtures shared by the end-to-end tests: `launch` starts real `parley serve` processes."""

from test_serve_processes import launch  # noqa: F401 - a fixture, found by name
