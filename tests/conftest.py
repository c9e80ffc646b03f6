"""Shared test setup. DB fixtures live next to the tests that need them (tests/<app>/conftest.py),
so suites that run without pytest-django (pure grader tests) still import this file.

The Docker gate (tests/docker_gate.py) is registered here, once for every test directory."""

import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:  # `tests.docker_gate` below, whatever the import mode
    sys.path.insert(0, str(_REPO))

pytest_plugins = ["tests.docker_gate"]

TEST_OUTPUT = _REPO / "test-output"
