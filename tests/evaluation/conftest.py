"""Fixtures for tests/evaluation. The rule for tests marked `@pytest.mark.docker` (HS24) and the
`docker_engine` fixture are the Docker gate plugin's (tests/docker_gate.py).

Works with and without pytest-django (`-p no:django`).
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


@pytest.fixture(scope="session")
def base_image(docker_engine):
    from evaluation import runner

    return runner.base_image_tag()


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



@pytest.fixture
def harbor_settings(settings):
    """A site that re-runs terminus-2 at 2.0.0 with an endpoint for openai/m (its key set) and
    one for openai/nokey (its key missing); no command agents."""
    settings.VERIFICATION_COMMAND_AGENTS = {}
    settings.VERIFICATION_HARBOR_AGENTS = {"terminus-2": ["2.0.0"]}
    settings.VERIFICATION_RERUN_MODEL_ENDPOINTS = {
        "openai/m": {"base_url": "http://10.9.8.7:8000/v1", "key_env": "OPENAI_API_KEY",
                     "key_secret": "SITE_M"},
        "openai/nokey": {"base_url": "http://10.9.8.7:8000/v1", "key_env": "OPENAI_API_KEY",
                         "key_secret": "ABSENT"}}
    settings.VERIFICATION_AGENT_SECRETS = {"SITE_M": "sk-site"}
    return settings
