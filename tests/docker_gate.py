"""The rule for tests marked `@pytest.mark.docker` (HS24), one pytest plugin registered from
tests/conftest.py for every test directory (tests/evaluation, tests/tasks).

Docker tests run against the real engine and the real base image. Where no engine answers (or the
base image is missing) they FAIL with a message saying how to fix it, unless the person running
them opts out explicitly with ALLOW_NO_DOCKER=1: then they are skipped and the opt-out is printed
in the test summary.

Works with and without pytest-django (`-p no:django`): Django is set up here, only when a Docker
test needs the engine, so the Docker-free tests never pay for it.
"""

import os

import pytest

OPT_OUT = "ALLOW_NO_DOCKER=1 (explicit opt-out)"
_ENGINE: dict = {}  # cached engine check: {"ok": bool, "why": str, "status": dict}


def _allow_no_docker() -> bool:
    return os.environ.get("ALLOW_NO_DOCKER", "").strip().lower() in ("1", "true", "yes")


def _engine_check() -> dict:
    if not _ENGINE:
        import django
        from django.apps import apps

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        os.environ.setdefault("DEBUG", "1")
        if not apps.ready:
            django.setup()
        from evaluation import runner

        status = runner.engine_status()
        if not status["reachable"]:
            _ENGINE.update(
                ok=False,
                why=(
                    f"no Docker engine answers at {status['docker_host']} ({status['error']}). "
                    "Start one with `scripts/ensure-docker` (as root), or set ALLOW_NO_DOCKER=1 "
                    "to skip Docker tests explicitly."
                ),
            )
        elif not status["base_image_present"]:
            _ENGINE.update(
                ok=False,
                why=(
                    f"the base image {status['base_image']} is missing: run `make images` "
                    "(or scripts/build-images --base), or set ALLOW_NO_DOCKER=1 to skip."
                ),
            )
        else:
            _ENGINE.update(ok=True, why="", status=status)
    return _ENGINE


def require_engine() -> dict:
    """engine_status() of the engine, or skip (ALLOW_NO_DOCKER=1) or fail saying how to fix it."""
    check = _engine_check()
    if not check["ok"]:
        if _allow_no_docker():
            pytest.skip(f"{OPT_OUT}: {check['why']}")
        pytest.fail(f"Docker test cannot run: {check['why']}", pytrace=False)
    return check["status"]


@pytest.fixture(autouse=True)
def _docker_required(request):
    if request.node.get_closest_marker("docker") is not None:
        require_engine()


@pytest.fixture(scope="session")
def docker_engine():
    """engine_status() of the engine the docker tests use (fails/skips like the marker)."""
    return require_engine()


def pytest_terminal_summary(terminalreporter):
    opted_out = [
        rep for rep in terminalreporter.stats.get("skipped", []) if OPT_OUT in str(rep.longrepr)
    ]
    if opted_out:
        terminalreporter.section("Docker tests skipped by explicit opt-out", sep="-", yellow=True)
        terminalreporter.write_line(
            f"ALLOW_NO_DOCKER=1 skipped {len(opted_out)} docker test(s): {_ENGINE.get('why', '')}"
        )
