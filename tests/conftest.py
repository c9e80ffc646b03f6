"""Shared test setup. DB fixtures live next to the tests that need them (tests/<app>/conftest.py),
so suites that run without pytest-django (pure grader tests) still import this file.

The Docker gate (tests/docker_gate.py) is registered here, once for every test directory."""

import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:  # `tests.docker_gate` below, whatever the import mode
    sys.path.insert(0, str(_REPO))

pytest_plugins = ["tests.docker_gate"]

TEST_OUTPUT = _REPO / "test-output"


@pytest.fixture(autouse=True)
def trajectory_judge(request):
    """The session's stand-in trajectory judge (tests/evaluation/trajectory_judge_standin.py,
    clean unless scripted) configured for every test: a site without one keeps its passes
    "awaiting trajectory judge". Tests of that state set TRAJECTORY_JUDGE_URL to "". make run's
    synthetic trajectory judge is off unless a test turns it on (TRAJECTORY_JUDGE_SYNTHETIC)."""
    from tests.evaluation.trajectory_judge_standin import MODEL, session_standin

    if not request.config.pluginmanager.hasplugin("django"):
        yield None
        return
    settings = request.getfixturevalue("settings")
    standin = session_standin()
    standin.reset()
    settings.TRAJECTORY_JUDGE_URL = standin.url
    settings.TRAJECTORY_JUDGE_MODEL = MODEL
    settings.TRAJECTORY_JUDGE_SYNTHETIC = False
    yield standin
    standin.reset()


@pytest.fixture(autouse=True)
def fresh_rate_limits(request):
    """Every test starts with no request counted against a rate limit: the API throttles'
    cache, and allauth's counters (the confirmation e-mail's cooldown per address) in the
    default cache, are per process and would otherwise carry one test's requests into the next.
    Only those keys go: cached pages an earlier test warmed stay."""
    if not request.config.pluginmanager.hasplugin("django"):
        yield
        return
    from django.core.cache import caches
    from django.core.cache.backends.locmem import LocMemCache

    caches["throttle"].clear()
    store = caches["default"]
    if isinstance(store, LocMemCache):
        with store._lock:
            for made in [k for k in store._cache if ":allauth:rl:" in k]:
                del store._cache[made]
                store._expire_info.pop(made, None)
    yield
