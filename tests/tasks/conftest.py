"""Task-package tests need no Docker and no database: they run with `-p no:django`
(manage.py validate_task covers the Docker side)."""

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for path in (_HERE, _HERE.parents[1]):  # task_package_paths, and the repo for `evaluation`
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import pytest  # noqa: E402
from task_package_paths import SYNTHETIC  # noqa: E402


@pytest.fixture(params=sorted(SYNTHETIC), ids=str)
def category(request) -> str:
    return request.param


def pytest_ignore_collect(collection_path, config):
    # The sync and registry tests need the database; skip collecting them under `-p no:django`.
    if collection_path.name in ("test_sync_tasks.py", "test_harbor_registry.py") and \
            not config.pluginmanager.hasplugin("django"):
        return True
    return None


# --- Docker-marked task tests (tests/tasks/test_validate_task_docker.py, test_harbor_compat.py) ---
# The same rule as tests/evaluation/conftest.py: where no engine answers or the base image is
# missing, a `@pytest.mark.docker` test FAILS with a message saying how to fix it, unless
# ALLOW_NO_DOCKER=1 opts out explicitly (then it is skipped and the summary says so). Django is set
# up here only for those tests, so the Docker-free package tests keep running with -p no:django.
import os  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DEBUG", "1")

_ENGINE: dict = {}  # cached engine check: {"ok": bool, "why": str, "status": dict}
_OPT_OUT = "ALLOW_NO_DOCKER=1 (explicit opt-out)"


def _allow_no_docker() -> bool:
    return os.environ.get("ALLOW_NO_DOCKER", "").strip().lower() in ("1", "true", "yes")


def _engine_check() -> dict:
    if not _ENGINE:
        import django
        from django.apps import apps

        if not apps.ready:
            django.setup()
        from django.conf import settings

        from evaluation import runner

        status = runner.engine_status()
        if not status["reachable"]:
            why = (
                f"no Docker engine answers at {status['docker_host']} ({status['error']}). "
                "Start one with `scripts/ensure-docker` (as root), or set ALLOW_NO_DOCKER=1 "
                "to skip Docker tests explicitly."
            )
            _ENGINE.update(ok=False, why=why)
        elif not status["base_image_present"]:
            why = (
                f"the base image {status['base_image']} is missing: run `make images` "
                "(or scripts/build-images --base), or set ALLOW_NO_DOCKER=1 to skip."
            )
            _ENGINE.update(ok=False, why=why)
        else:
            _ENGINE.update(ok=True, why="", status=status)
    return _ENGINE


def _require_engine() -> dict:
    check = _engine_check()
    if not check["ok"]:
        if _allow_no_docker():
            pytest.skip(f"{_OPT_OUT}: {check['why']}")
        pytest.fail(f"Docker test cannot run: {check['why']}", pytrace=False)
    return check["status"]


@pytest.fixture(autouse=True)
def _docker_required(request):
    if request.node.get_closest_marker("docker") is not None:
        _require_engine()


@pytest.fixture(scope="session")
def task_docker_engine():
    """engine_status() of the engine the Docker task tests use (fails/skips like the marker)."""
    return _require_engine()


def pytest_terminal_summary(terminalreporter, config):
    # tests/evaluation/conftest.py prints the same section for every opted-out test when it is
    # loaded too; print it here only when it is not.
    for plugin in config.pluginmanager.get_plugins():
        if str(getattr(plugin, "__file__", "")).endswith(os.path.join("evaluation", "conftest.py")):
            return
    opted_out = [
        rep for rep in terminalreporter.stats.get("skipped", []) if _OPT_OUT in str(rep.longrepr)
    ]
    if opted_out:
        terminalreporter.section("Docker tests skipped by explicit opt-out", sep="-", yellow=True)
        terminalreporter.write_line(
            f"ALLOW_NO_DOCKER=1 skipped {len(opted_out)} docker test(s): {_ENGINE.get('why', '')}"
        )
