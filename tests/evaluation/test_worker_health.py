"""R12 (reliability matrix): worker health. A worker whose disk is nearly full or whose images
are missing (or not the expected ones) reports it, claims no job, and a job it held when an
image went away is released as an infrastructure error, never scored."""

import shutil

import pytest

from tests.evaluation import verification_support as vs

pytestmark = [pytest.mark.docker]

CT = "ct-abnormality-classification/synthetic_01"


def _names(report):
    return {c["name"]: c for c in report["checks"]}


def test_r12_health_reports_disk_engine_runc_and_images(docker_engine, settings, tmp_path):
    """R12: this worker is healthy; each failure is reported by name with its reason: disk
    below the floor, the base image missing or not the expected id, a task image missing
    under its content-digest tag. `manage.py worker_health` exits 1 when unhealthy."""
    from django.core.management import CommandError, call_command

    from evaluation import runner
    from evaluation.health import worker_health

    report = worker_health()
    assert report["healthy"], report["problems"]
    checks = _names(report)
    assert checks["docker engine"]["ok"] and checks["runc patched (CVE-2024-21626)"]["ok"]
    assert checks["task images (content-digest tags)"]["detail"].endswith("present")

    settings.VERIFICATION_MIN_FREE_DISK_MB = 10**9
    report = worker_health()
    assert not report["healthy"]
    assert any(p.startswith("disk ") and "needs 1000000000 MB" in p for p in report["problems"])
    with pytest.raises(CommandError, match="unhealthy: disk"):
        call_command("worker_health")
    settings.VERIFICATION_MIN_FREE_DISK_MB = 1

    settings.VERIFICATION_EXPECTED_BASE_IMAGE_ID = "sha256:" + "0" * 64
    report = worker_health()
    assert not report["healthy"]
    assert f"is not the expected sha256:{'0' * 64}" in " ".join(report["problems"])
    settings.VERIFICATION_EXPECTED_BASE_IMAGE_ID = ""

    # A task package whose image was never built (pruned, or a new version not built yet).
    package = tmp_path / "ct-abnormality-classification" / "synthetic_01"
    shutil.copytree(vs.REPO / "tasks" / CT, package)
    (package / "environment" / "data" / "r12.txt").write_text("not built\n")
    report = worker_health(task_dirs=[vs.REPO / "tasks" / CT, package])
    assert not report["healthy"]
    problem = " ".join(report["problems"])
    assert "task images" in problem and "run scripts/build-images" in problem

    # The base image is resolved by its content tag (recipe + grader files) in its repository.
    settings.TASK_BASE_IMAGE = "healthagentbench/base-r12-never-built:bookworm"
    tag = runner.base_image_tag()
    assert tag.startswith("healthagentbench/base-r12-never-built:")
    report = worker_health()
    assert report["problems"] == [
        f"base image {tag}: missing: run scripts/build-images (this checkout's recipe and "
        "grader files are not built)"]


@pytest.mark.django_db(transaction=True)
def test_r12_unhealthy_worker_claims_nothing_and_a_held_job_is_requeued_unscored(
        docker_engine, settings, tmp_path, monkeypatch):
    """R12: with its disk nearly full the worker claims nothing (job pending, attempt 0, the
    reason on the status page, the task retried); a job it held when the base image went away
    is released as an infrastructure error (pending again, no verified reward, no verdict);
    once healthy, the next claim verifies it."""
    from django.db import transaction

    from evaluation import health, runner
    from submissions.models import TrialCheck, VerificationJob
    from submissions.verification import verification_enqueue, verification_progress, \
        verification_run

    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.VERIFICATION_QUEUE = vs.INPROC_QUEUE
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    settings.VERIFICATION_CHECKS = ["regrade"]
    vs.point_celery_at(vs.BROKER_URL)
    oracle = vs.oracle_outputs(tmp_path / "oracle", only=[CT])
    with transaction.atomic():
        sub = vs.make_submission(vs.synthetic_version(), outputs=oracle, tasks=[CT], attempts=1)
        job = verification_enqueue(submission=sub)

    settings.VERIFICATION_MIN_FREE_DISK_MB = 10**9
    with pytest.raises(runner.InfrastructureError, match="worker unhealthy: disk"):
        verification_run(job_id=job.pk, worker="r12-unhealthy")
    j = VerificationJob.objects.get(pk=job.pk)
    assert (j.status, j.attempt, j.claimed_by) == ("pending", 0, "")
    assert "unhealthy, not claimed" in verification_progress(submission=sub)["waiting_because"]
    settings.VERIFICATION_MIN_FREE_DISK_MB = 1

    # Healthy when it claims; the base image disappears while it holds the job.
    at_claim = health.worker_health()
    assert at_claim["healthy"], at_claim["problems"]
    monkeypatch.setattr(health, "worker_health", lambda **kw: at_claim)
    real_base = settings.TASK_BASE_IMAGE
    settings.TASK_BASE_IMAGE = "healthagentbench/base-r12-gone:bookworm"
    with pytest.raises(runner.InfrastructureError, match="r12-gone"):
        verification_run(job_id=job.pk, worker="r12-held")
    j.refresh_from_db()
    assert (j.status, j.attempt, j.verdict) == ("pending", 1, "")
    assert "r12-gone" in j.last_error
    assert not TrialCheck.objects.filter(job=j, verified_reward__isnull=False).exists()
    assert all(t.verified_reward is None for t in sub.trials.all())
    sub.refresh_from_db()
    assert sub.status not in ("verified", "discrepancy")

    settings.TASK_BASE_IMAGE = real_base
    monkeypatch.undo()
    assert verification_run(job_id=job.pk, worker="r12-healthy") == "done"
    j.refresh_from_db()
    sub.refresh_from_db()
    # Only the re-grade ran, so the passes were not replayed or re-run: "consistent", the honest
    # level for a clean re-grade, reached exactly once after the requeue.
    assert (j.status, j.attempt) == ("done", 2) and sub.status == "consistent"
    vs.redis_client().delete(vs.INPROC_QUEUE)
