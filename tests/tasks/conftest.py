"""Task-package tests need no Docker and no database: they run with `-p no:django`
(manage.py validate_task covers the Docker side). The Docker-marked ones here
(test_validate_task_docker.py, test_harbor_compat.py) are gated by tests/docker_gate.py."""

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
