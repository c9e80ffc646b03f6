"""A second benchmark version from a private task source ("task sources").

A temporary directory stands in for the licensed tasks present only on evaluation machines: one
package (a copy of the synthetic CT task whose hidden answer carries a canary string) and its
manifest `benchmarks/hab-licensed@1.0.toml`. With TASK_SOURCES listing the repository's tasks/
and that directory, `sync_tasks` registers both versions apart. The REAL Harbor CLI runs the
oracle on the private package (3 attempts); the job directory is uploaded through the API by a
maintainer as a labelled reference run (`reference: true`: the oracle is one of the site's own
agents, never a submitter's harness on a ranked version), and verification (re-grade, replay, re-run, in Docker, the in-process worker path) gives the
verdict `verified`. Throughout, the canary never reaches the database (every row, dumped) or the
file storage (every stored byte), the staging folder keeps nothing, and /registry.json does not
list the private version.
"""

import io
import json
import os
import shutil
import tarfile
import uuid
from pathlib import Path

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from evaluation.models import BenchmarkVersion
from evaluation.task_specs import package_digest, write_benchmark_manifest
from submissions.models import Submission
from submissions.services import token_issue
from submissions.verification import verification_run
from tests.evaluation import verification_support as vs
from tests.harbor_cli import harbor_environment, run_all

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

TASK = "ct-abnormality-classification/synthetic_01"
SLUG = "hab-licensed@1.0"
CANARY = f"LICENSED-ANSWER-CANARY-{uuid.uuid4().hex}"
RUN_TIMEOUT_S = float(os.environ.get("HARBOR_RUN_TIMEOUT_S", "480"))


@pytest.fixture
def private_source(tmp_path) -> Path:
    source = tmp_path / "hab-private-tasks"
    package = source / TASK
    shutil.copytree(vs.REPO / "tasks" / TASK, package)
    answer = package / "tests" / "answer.json"
    doc = json.loads(answer.read_text())
    doc["licence"] = CANARY  # the grader reads "labels" only; the canary marks the hidden file
    answer.write_text(json.dumps(doc, indent=2) + "\n")
    write_benchmark_manifest(source, name="hab-licensed", version="1.0",
                             tasks={TASK: package_digest(package)}, title="Licensed (test)",
                             attempts_per_task=3)
    return source


@pytest.fixture
def test_broker():
    """Publish to the tests' Redis broker (the job is run in-process; nobody consumes it)."""
    from config.celery import app

    before = app.conf.broker_url
    vs.point_celery_at(vs.BROKER_URL)
    yield
    vs.redis_client().delete(vs.INPROC_QUEUE)
    vs.point_celery_at(before)


def _stored_files(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.is_file()]


def test_a_private_source_version_is_verified_and_its_answers_stay_on_the_worker(
        private_source, settings, tmp_path, docker_engine, test_broker):
    media, staging = tmp_path / "media", tmp_path / "staging"
    settings.MEDIA_ROOT = str(media)
    settings.SUBMISSION_STAGING_DIR = staging
    settings.VERIFICATION_QUEUE = vs.INPROC_QUEUE  # this test runs the job itself
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    settings.VERIFICATION_CHECKS = ["regrade", "replay", "rerun"]
    # The task's 3 attempts all re-run by the site (the reference harness is the site's
    # oracle): every counted pass re-run, so the verdict can be "verified".
    settings.VERIFICATION_RERUN_FIRST_TASKS = 1
    settings.VERIFICATION_RERUN_PER_TASK = 3
    settings.VERIFICATION_RERUN_MAX_TRIALS = 3
    # One task reaches no power floor; this test is about the private source, not the floor.
    settings.VERIFICATION_RERUN_POWER_FLOOR = 0.0
    settings.TASK_SOURCES = [vs.REPO / "tasks", private_source]
    out = io.StringIO()
    call_command("sync_tasks", stdout=out)
    assert "benchmark version hab-licensed@1.0" in out.getvalue(), out.getvalue()
    bv = BenchmarkVersion.objects.get(name="hab-licensed", version="1.0")
    (task,) = bv.tasks.all()
    assert task.package_path == str((private_source / TASK).resolve())
    assert BenchmarkVersion.objects.get(name="healthagentbench-synthetic",
                                        version="1.0").tasks.count() == 7
    registry = Client().get("/registry.json").json()
    assert [f"{d['name']}@{d['version']}" for d in registry] == [
        "healthagentbench-synthetic@1.0", "healthagentbench-synthetic@2.0"]

    # The real Harbor CLI runs the oracle on the private package, 3 attempts.
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    cmd = ["harbor", "run", "-p", str(private_source / TASK.split("/")[0]), "-a", "oracle",
           "-k", "3", "--env", "docker", "--artifact", "/workspace/submission.json",
           "-o", str(jobs), "--job-name", "private", "-y", "-q"]
    run = run_all({"private": (cmd, jobs / "private")}, cwd=jobs, env=harbor_environment(),
                  timeout_s=RUN_TIMEOUT_S)["private"]
    assert run.returncode == 0 and run.rewards() == [1.0, 1.0, 1.0], run.report()

    # Uploaded through the API with a token, as a submitter does.
    owner = get_user_model().objects.create_user("licensed-maintainer", password="x",
                                                 is_staff=True)
    token = token_issue(user=owner)[1]
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        tar.add(jobs / "private", arcname="private")
    archive.seek(0)
    archive.name = "run.tar.gz"
    meta = io.BytesIO(yaml.safe_dump({
        "agent_url": "https://github.com/harbor-framework/harbor",
        "agent_display_name": "Oracle (licensed test)", "agent_org_display_name": "Harbor",
        "models": [{"model_name": "none", "model_provider": "none",
                    "model_display_name": "no model", "model_org_display_name": "none"}],
        "harness": "oracle", "harness_version": "1.0.0", "benchmark": SLUG,
        "reference": True}).encode())
    meta.name = "metadata.yaml"
    response = Client(HTTP_AUTHORIZATION=f"Token {token}").post(
        "/api/v1/submissions/", {"archive": archive, "metadata": meta})
    assert response.status_code == 202, response.content[:3000]
    from submissions.intake import submission_intake  # the intake worker's service (HS32)

    assert submission_intake(submission_id=response.json()["id"]) == "queued"
    sub = Submission.objects.get(owner=owner)
    assert sub.benchmark_version == bv and sub.status == "queued" and sub.is_reference

    job = sub.verification_jobs.get()
    assert verification_run(job_id=job.pk) == "done"
    sub.refresh_from_db()
    assert sub.status == "verified", type(job).objects.get(pk=job.pk).summary
    assert sub.trials.filter(verified_reward=1.0).count() == 3

    # The hidden answer stayed in the private source: not in any row, not in any stored file.
    dump = io.StringIO()
    call_command("dumpdata", stdout=dump)
    assert CANARY not in dump.getvalue()
    hidden = {p.read_bytes() for p in (private_source / TASK / "tests").rglob("*") if p.is_file()}
    stored = _stored_files(media, staging)
    assert stored, "the upload stored nothing?"
    for path in stored:
        data = path.read_bytes()
        assert CANARY.encode() not in data and data not in hidden, path
    assert not _stored_files(staging), "staging keeps nothing once the upload is stored"
