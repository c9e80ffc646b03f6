"""Shared test setup. DB fixtures live next to the tests that need them (tests/<app>/conftest.py),
so suites that run without pytest-django (pure grader tests) still import this file."""

from pathlib import Path


TEST_OUTPUT = Path(__file__).resolve().parent.parent / "test-output"
