"""The site's /registry.json resolves under the real Harbor CLI.

A local git repository stands in for the public one: the repository's tasks/ copied into a
fresh repository and committed. With REPOSITORY_URL pointing at it (file://) and
REGISTRY_GIT_COMMIT at that commit, the site generates /registry.json for
healthagentbench-synthetic@1.0, and

    harbor run -d healthagentbench-synthetic@1.0 --registry-path registry.json -a oracle \
        -l 1 --env docker

clones the repository at the pinned commit (Harbor's sparse git checkout), runs the first task
of the version with the oracle and gets reward 1.0. `--registry-path` is the file form of the
`--registry-url <site>/registry.json` docs/api.md shows (the same JsonRegistryClient reads both).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from tests.harbor_cli import harbor_environment, run_all

pytestmark = [pytest.mark.docker, pytest.mark.django_db]

REPO = Path(__file__).resolve().parents[2]
SLUG = "healthagentbench-synthetic@1.0"
RUN_TIMEOUT_S = float(os.environ.get("HARBOR_RUN_TIMEOUT_S", "480"))


def _git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    done = subprocess.run(["git", "-c", "commit.gpgsign=false", *args],  # noqa: S603, S607
                          cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def local_repository(tmp_path) -> tuple[Path, str]:
    """A git repository holding a copy of tasks/, one commit; (its path, the commit id)."""
    repo = tmp_path / "healthagentbench"
    shutil.copytree(REPO / "tasks", repo / "tasks")
    _git("init", "-q", "-b", "main", cwd=repo)
    _git("add", "-A", cwd=repo)
    _git("commit", "-q", "-m", "tasks", cwd=repo)
    return repo, _git("rev-parse", "HEAD", cwd=repo)


def test_real_harbor_runs_the_oracle_from_the_sites_registry(
        local_repository, settings, tmp_path, docker_engine):
    repo, commit = local_repository
    settings.REPOSITORY_URL = f"file://{repo}"
    settings.REGISTRY_GIT_COMMIT = commit
    call_command("sync_tasks", verbosity=0)  # what `make run` and the release step do

    response = Client().get("/registry.json")
    assert response.status_code == 200
    datasets = response.json()
    (dataset,) = [d for d in datasets if f"{d['name']}@{d['version']}" == SLUG]
    assert len(dataset["tasks"]) == 7
    first = dataset["tasks"][0]
    assert (first["git_url"], first["git_commit_id"]) == (f"file://{repo}", commit)
    assert (repo / first["path"] / "task.toml").is_file()
    registry = tmp_path / "registry.json"
    registry.write_bytes(response.content)

    env = harbor_environment()
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    cmd = ["harbor", "run", "-d", SLUG, "--registry-path", str(registry), "-a", "oracle",
           "-l", "1", "--env", "docker", "-o", str(jobs), "--job-name", "registry",
           "-n", "1", "-q", "-y"]
    run = run_all({"registry": (cmd, jobs / "registry")}, cwd=jobs, env=env,
                  timeout_s=RUN_TIMEOUT_S)["registry"]

    assert run.returncode == 0, run.report()
    (trial,) = run.trials()
    result = json.loads((trial / "result.json").read_text())
    assert result["exception_info"] is None, run.report()
    assert run.rewards() == [1.0], run.report()
    # The task came from the registry's git source at the pinned commit, not from this checkout.
    task = result["config"]["task"]
    assert (task["git_url"], task["git_commit_id"]) == (f"file://{repo}", commit), task
    assert task["path"] == first["path"], task
    assert json.loads((trial / "verifier" / "reward.json").read_text())["reward"] == 1
