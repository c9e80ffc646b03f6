"""R11, re-score after a grader update, end to end: a REAL Celery worker process, a REAL Redis
broker, PostgreSQL and REAL verifier containers.

The grader update is real code running in Docker: a temporary copy of the CT task package whose
image carries the repository's grader package with the CT grader's VERSION bumped and its pass
rule changed (one wrong finding is tolerated). The repository's registry is bumped to match in
this process (what the commit that changes a grader does), so `manage.py rescore --category`
finds what the old version graded.

Needs PostgreSQL (the worker shares the test database) and Docker. Run:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hab_rescore \
        .venv/bin/python -m pytest tests/evaluation/test_rescore.py
"""

import io
import json
import shutil
import time

import pytest

from tests.evaluation import verification_support as vs

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

CT = "ct-abnormality-classification"
CT_TASK = f"{CT}/synthetic_01"


@pytest.fixture(scope="module")
def media_root(tmp_path_factory):
    return tmp_path_factory.mktemp("rescore-media")


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, docker_engine):
    return vs.oracle_outputs(tmp_path_factory.mktemp("oracle-outputs"), only=[CT_TASK])


@pytest.fixture(autouse=True)
def _media_and_broker(settings, media_root):
    settings.MEDIA_ROOT = str(media_root)
    settings.VERIFICATION_QUEUE = vs.INPROC_QUEUE
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    settings.XRAY_JUDGE_URL = vs.judge_stub().url
    settings.XRAY_JUDGE_MODEL = vs.JUDGE_MODEL
    settings.VERIFICATION_HEARTBEAT_S = 1
    vs.point_celery_at(vs.BROKER_URL)


@pytest.fixture(scope="module")
def worker(django_db_setup, django_db_blocker, media_root, docker_engine):
    with django_db_blocker.unblock():
        vs.shared_database_url()  # skips on SQLite
    queue = f"{vs.QUEUE}-rescore"
    vs.redis_client().delete(queue)
    # One trial at a time, so the re-score's window (new check rows, old leaderboard) is wide.
    w = vs.Worker(media_root=media_root, queue=queue,
                  env={"VERIFICATION_PARALLEL_TRIALS": "1"}).start()
    yield w
    w.stop()
    vs.redis_client().delete(queue)


@pytest.fixture
def on_worker(settings, worker):
    settings.VERIFICATION_QUEUE = worker.queue
    return worker


def _grader_package_files():
    """What scripts/build-images copies to /opt/hab: the graders' command line and what it
    imports (the shared kit, the category registry, each category's spec and grader)."""
    ev = vs.REPO / "evaluation"
    files = [ev / "__init__.py", ev / "grading.py"]
    files += [p for p in (ev / "graders").rglob("*")
              if p.is_file() and "__pycache__" not in p.parts]
    files += sorted((ev / "categories").glob("*.py"))
    files += sorted((ev / "categories").glob("*/__init__.py"))
    files += sorted((ev / "categories").glob("*/grader.py"))
    return files


def _updated_grader_task(root, version: int):
    """A copy of the CT task package whose image ships the grader package with the CT grader at
    `version`, now passing an attempt with at most one wrong finding (the behaviour change)."""
    src = vs.REPO / "tasks" / CT / "synthetic_01"
    # Its own image repository (hab-task/r11-.../...): the real task's images are never pruned.
    dst = root / f"r11-{CT}" / "synthetic_01"
    shutil.copytree(src, dst)
    package = dst / "environment" / "hab"
    for f in _grader_package_files():
        target = package / f.relative_to(vs.REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
    module = package / "evaluation" / "categories" / "ct_abnormality_classification" / "grader.py"
    text = module.read_text()
    old_version = f"VERSION = {version - 1}\n"
    assert old_version in text and "passed=correct == total" in text
    module.write_text(text.replace(old_version, f"VERSION = {version}\n")
                      .replace("passed=correct == total", "passed=correct >= total - 1"))
    dockerfile = dst / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "COPY hab/ /opt/hab/\n")
    return dst


def _one_label_wrong(oracle) -> bytes:
    labels = json.loads((oracle[CT_TASK] / "workspace" / "submission.json").read_text())["labels"]
    assert len(labels) >= 3
    first = sorted(labels)[0]
    labels[first] = "no" if labels[first] == "yes" else "yes"
    return json.dumps({"labels": labels}).encode()


def _snapshot(job_id, entry_filter, trial_id):
    """Job status, its check rows, the leaderboard entry and the trial, read in ONE snapshot."""
    from django.db import connection, transaction

    from leaderboard.models import LeaderboardEntry
    from submissions.models import Trial, TrialCheck, VerificationJob

    with transaction.atomic():
        if connection.vendor == "postgresql":  # SQLite's transactions read one snapshot
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        job = VerificationJob.objects.get(pk=job_id)
        entries = list(LeaderboardEntry.objects.filter(**entry_filter))
        trial = Trial.objects.get(pk=trial_id)
        return {"status": job.status, "checks": TrialCheck.objects.filter(job=job).count(),
                "entries": [(e.successes, e.attempts) for e in entries],
                "outcome": trial.outcome, "grader": trial.grader_version}


def test_r11_rescore_after_a_grader_update_switches_the_leaderboard_atomically(
        settings, oracle, on_worker, tmp_path, monkeypatch, client):
    """R11: a grader update (VERSION bumped with a behaviour change) re-scores the affected
    published submission on the worker; the leaderboard keeps the old score until the re-score
    commits and shows the new one after (one entry, never two, never empty); every re-grade
    records its grader version; the agent and submission pages and the API list the previous
    score with its grader version and date; running the re-score again changes nothing."""
    from django.core.management import call_command
    from django.db import transaction

    from evaluation import graders
    from evaluation.models import BenchmarkTask
    from leaderboard.models import AggregateVersion, LeaderboardEntry
    from submissions.models import (
        CheckKind,
        JobPurpose,
        ScoreRevision,
        Submission,
        Trial,
        TrialCheck,
        VerificationJob,
    )
    from submissions.services import submission_publish
    from submissions.verification import verification_enqueue

    old_label = graders.version_label(CT)
    new_version = graders.VERSIONS[CT] + 1
    new_label = f"{CT}@{new_version}"

    # 1. A submission verified by the worker with the current grader, then published: attempt 3
    #    has one wrong finding and claims a failure, which the current grader confirms.
    settings.VERIFICATION_CHECKS = ["regrade"]
    bv = vs.synthetic_version()
    with transaction.atomic():
        sub = vs.make_submission(
            bv, outputs=oracle, tasks=[CT_TASK], claims={(CT_TASK, 3): 0.0},
            replace={(CT_TASK, 3): {"/workspace/submission.json": _one_label_wrong(oracle)}})
        verification_enqueue(submission=sub)
    vs.wait_for(lambda: Submission.objects.get(pk=sub.pk).status == "consistent", 300,
                f"submission {sub.pk} to be checked", worker=on_worker)
    first_checks = TrialCheck.objects.filter(trial__submission=sub, kind=CheckKind.REGRADE)
    assert sorted(first_checks.values_list("grader_version", flat=True)) == [old_label] * 3
    sub = submission_publish(submission=Submission.objects.get(pk=sub.pk), actor=None)
    wrong = Trial.objects.get(submission=sub, attempt=3)
    assert (wrong.outcome, wrong.verified_reward, wrong.grader_version) == (
        "failed", 0.0, old_label)
    at_agent = {"benchmark_version": bv, "agent": sub.agent}
    entry = LeaderboardEntry.objects.get(**at_agent)
    assert (entry.successes, entry.attempts) == (2, 3)
    version_before = AggregateVersion.objects.get(benchmark_version=bv).number

    # 2. The grader update: the task's verifier now runs the new grader, and the repository's
    #    registry says so.
    task = BenchmarkTask.objects.get(benchmark_version=bv, name=CT_TASK)
    updated = _updated_grader_task(tmp_path, new_version)
    BenchmarkTask.objects.filter(pk=task.pk).update(package_path=str(updated))
    monkeypatch.setitem(graders.VERSIONS, CT, new_version)

    out = io.StringIO()
    call_command("rescore", "--category", CT, "--reason", "CT grader tolerates one miss",
                 stdout=out)
    job = VerificationJob.objects.get(submission=sub, purpose=JobPurpose.RESCORE)
    assert f"submission {sub.pk}: re-score job {job.pk} queued" in out.getvalue()

    # 3. While it runs the old score stays; it switches when the job commits.
    observations, page_in_window = [], None
    deadline = time.time() + 300
    while time.time() < deadline:
        snap = _snapshot(job.pk, at_agent, wrong.pk)
        observations.append(snap)
        if page_in_window is None and snap["status"] == "running" and snap["checks"] == 1:
            page_in_window = client.get(f"/agents/{sub.agent.slug}/?benchmark={bv.slug}")
        if snap["status"] in ("done", "failed", "cancelled"):
            break
        time.sleep(0.05)
    assert observations[-1]["status"] == "done", (observations[-1], on_worker.tail())
    during = [o for o in observations if o["status"] != "done"]
    window = [o for o in during if o["checks"] >= 1]
    assert window, "never saw the re-score running with new check rows written"
    assert all(o["entries"] == [(2, 3)] and o["outcome"] == "failed"
               and o["grader"] == old_label for o in during), during
    assert observations[-1]["entries"] == [(3, 3)]
    assert (observations[-1]["outcome"], observations[-1]["grader"]) == ("passed", new_label)
    assert page_in_window is not None and page_in_window.status_code == 200
    assert "2/3 as the site graded them" in page_in_window.content.decode()
    assert AggregateVersion.objects.get(benchmark_version=bv).number == version_before + 1

    # Each re-grade records the version the verifier container reported, once.
    checks = list(TrialCheck.objects.filter(job=job, kind=CheckKind.REGRADE)
                  .order_by("trial__attempt"))
    assert [c.grader_version for c in checks] == [new_label] * 3
    assert [c.detail["grader"]["grader"] for c in checks] == [new_label] * 3
    assert [c.verified_reward for c in checks] == [1.0, 1.0, 1.0]
    assert {c.executions for c in checks} == {1} and all(c.grader_digest for c in checks)
    trials = list(Trial.objects.filter(submission=sub).order_by("attempt"))
    # The pass the re-score created got the checks a pass gets in the same job: its replay
    # (it has no trajectory: not replayable, so it stays below "verified") and its level is
    # what the re-score proved, not what an earlier check of the failure earned.
    assert [(t.outcome, t.grader_version, t.flags) for t in trials] == [
        ("passed", new_label, [])] * 2 + [("passed", new_label, ["not_replayable"])]
    assert trials[2].verification_level == "re-graded"
    assert {c.kind for c in TrialCheck.objects.filter(job=job, trial=trials[2])} == {
        CheckKind.REGRADE, CheckKind.REPLAY, CheckKind.TRAJECTORY_JUDGE}
    assert LeaderboardEntry.objects.filter(**at_agent).count() == 1

    # History: the previous score with its grader version and date.
    revision = ScoreRevision.objects.get(submission=sub)
    assert (revision.successes_before, revision.attempts_before, revision.graders_before) == (
        2, 3, [old_label])
    assert (revision.successes_after, revision.attempts_after, revision.graders_after) == (
        3, 3, [new_label])
    assert [c["attempt"] for c in revision.changes] == [3]
    assert revision.reason == "CT grader tolerates one miss"
    page = client.get(f"/agents/{sub.agent.slug}/?benchmark={bv.slug}").content.decode()
    assert "3/3 as the site graded them" in page and 'data-testid="score-history"' in page
    for text in (old_label, new_label, "2/3", revision.created_at.strftime("%Y-%m-%d %H:%M")):
        assert text in page.split('data-testid="score-history"')[1], text
    status_page = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert 'data-testid="score-history"' in status_page and new_label in status_page
    api = client.get(f"/api/v1/submissions/{sub.pk}/")
    assert api.status_code == 200, api.content
    history = api.json()["score_history"]
    assert [(h["before"], h["after"]) for h in history] == [
        ({"successes": 2, "attempts": 3, "graders": [old_label]},
         {"successes": 3, "attempts": 3, "graders": [new_label]})]

    job.refresh_from_db()
    wall = (job.finished_at - job.started_at).total_seconds()
    print(f"\nR11 re-score: 3 trials in {wall:.1f} s of job wall time, {wall / 3:.2f} s per "
          f"trial (mean check {sum(c.duration_s for c in checks) / 3:.2f} s)")

    # 4. Idempotent: the category has nothing left to re-score; re-scoring the submission again
    #    by id re-grades on the worker and changes nothing (no revision, no rebuild).
    out = io.StringIO()
    call_command("rescore", "--category", CT, stdout=out)
    assert "nothing to re-score" in out.getvalue()
    assert VerificationJob.objects.filter(submission=sub, purpose=JobPurpose.RESCORE).count() == 1
    entry_pk = LeaderboardEntry.objects.get(**at_agent).pk
    out = io.StringIO()
    call_command("rescore", "--submission", str(sub.pk), "--wait", "--timeout", "300",
                 stdout=out)
    print(out.getvalue())
    again = VerificationJob.objects.filter(submission=sub, purpose=JobPurpose.RESCORE).latest(
        "created_at")
    assert again.pk != job.pk and (again.status, again.verdict) == ("done", "unchanged")
    assert "3 trials in" in out.getvalue() and "s per trial" in out.getvalue()
    assert ScoreRevision.objects.filter(submission=sub).count() == 1
    assert AggregateVersion.objects.get(benchmark_version=bv).number == version_before + 1
    assert LeaderboardEntry.objects.get(**at_agent).pk == entry_pk
    assert [(t.outcome, t.verified_reward, t.grader_version) for t in Trial.objects.filter(
        submission=sub).order_by("attempt")] == [("passed", 1.0, new_label)] * 3
    assert set(TrialCheck.objects.filter(job=again).values_list("grader_version", flat=True)) \
        == {new_label}
    assert vs.labelled_containers(vs.RUN_PREFIX) == []
