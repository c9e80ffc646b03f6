"""Fixtures for tests/evaluation, and the rule for tests marked `@pytest.mark.docker` (HS24).

Docker tests run against the real engine and the real base image. Where no engine answers (or the
base image is missing) they FAIL with a message saying how to fix it, unless the person running
them opts out explicitly with ALLOW_NO_DOCKER=1: then they are skipped and the opt-out is printed
in the test summary.

Works with and without pytest-django (`-p no:django`): Django is set up here when needed.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DEBUG", "1")

_ENGINE = {}  # cached engine check: {"ok": bool, "why": str}


def _django_ready():
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()


def _allow_no_docker() -> bool:
    return os.environ.get("ALLOW_NO_DOCKER", "").strip().lower() in ("1", "true", "yes")


def _engine_check() -> dict:
    if not _ENGINE:
        _django_ready()
        from django.conf import settings

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


@pytest.fixture(autouse=True)
def _docker_required(request):
    if request.node.get_closest_marker("docker") is None:
        return
    check = _engine_check()
    if check["ok"]:
        return
    if _allow_no_docker():
        pytest.skip(f"ALLOW_NO_DOCKER=1 (explicit opt-out): {check['why']}")
    pytest.fail(f"Docker test cannot run: {check['why']}", pytrace=False)


@pytest.fixture(scope="session")
def docker_engine():
    """engine_status() of the engine the docker tests use (fails/skips like the marker)."""
    check = _engine_check()
    if not check["ok"]:
        if _allow_no_docker():
            pytest.skip(f"ALLOW_NO_DOCKER=1 (explicit opt-out): {check['why']}")
        pytest.fail(f"Docker test cannot run: {check['why']}", pytrace=False)
    return check["status"]


@pytest.fixture(scope="session")
def base_image(docker_engine):
    from evaluation import runner

    return runner.base_image_tag()


def pytest_terminal_summary(terminalreporter):
    opted_out = [
        rep
        for rep in terminalreporter.stats.get("skipped", [])
        if "ALLOW_NO_DOCKER=1 (explicit opt-out)" in str(rep.longrepr)
    ]
    if opted_out:
        terminalreporter.section("Docker tests skipped by explicit opt-out", sep="-", yellow=True)
        terminalreporter.write_line(
            f"ALLOW_NO_DOCKER=1 skipped {len(opted_out)} docker test(s): {_ENGINE.get('why', '')}"
        )


# The verification worker most Docker modules here share (test_verification, test_reliability,
# test_screen_docker, test_infra_reattempt): one `celery worker` process on the session's queue
# and one media root, started when the first of them needs it and stopped at the end of the
# session (before the test database goes), instead of one cold start per module. Each job's
# checks are fixed when it is enqueued (job_config), so the modules' different
# VERIFICATION_CHECKS settings need no separate worker. Modules whose worker needs another
# environment (re-run endpoints, one trial at a time) start their own.
@pytest.fixture(scope="session")
def media_root(tmp_path_factory):
    return tmp_path_factory.mktemp("verification-media")


@pytest.fixture(scope="session")
def worker(django_db_setup, django_db_blocker, media_root, docker_engine):
    from tests.evaluation import verification_support as vs

    with django_db_blocker.unblock():
        vs.shared_database_url()  # skips on SQLite
    vs.redis_client().delete(vs.QUEUE)
    w = vs.Worker(media_root=media_root, concurrency=1).start()
    yield w
    w.stop()
    vs.redis_client().delete(vs.QUEUE, vs.INPROC_QUEUE)


@pytest.fixture
def on_worker(settings, worker):
    """The shared worker, with this test publishing verification jobs to its queue."""
    settings.VERIFICATION_QUEUE = worker.queue
    return worker


@pytest.fixture(scope="session")
def harbor_ready(docker_engine):
    """The pinned Harbor CLI (scripts/harbor-venv), the base and task images and the baked
    mini-swe-agent harness image (scripts/build-images --harness mini-swe-agent), once per
    session for the Harbor re-run modules. scripts/run-tests makes them before pytest starts and
    says so with HAB_TEST_IMAGES_READY=1; a run by hand makes them here (both scripts are cached:
    seconds when nothing changed; the first harness build downloads its wheels)."""
    if os.environ.get("HAB_TEST_IMAGES_READY") == "1":
        return True
    for cmd, timeout in ((["scripts/harbor-venv"], 900),
                         (["scripts/build-images", "--harness", "mini-swe-agent"], 2400)):
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout,  # noqa: S603
                              check=False)
        assert done.returncode == 0, f"{cmd}: {done.stdout}{done.stderr}"
    return True
