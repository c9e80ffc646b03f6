"""Reliability matrix rows R1-R6, R8-R10 for verification jobs: a REAL Celery worker process on
a REAL Redis broker, REAL containers, PostgreSQL shared with the worker.

R7 (PostgreSQL outage during grading) is in test_database_outage_during_grading.py (an in-test
TCP proxy cuts the database mid-grading); R8 here covers the failed status write.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hab_verif \
        .venv/bin/python -m pytest tests/evaluation/test_verification_job_faults.py
"""

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest

from tests.evaluation import verification_support as vs

CT = "ct-abnormality-classification/synthetic_01"
PATH = "pathology-tumor-region/synthetic_01"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, docker_engine):
    return vs.oracle_outputs(tmp_path_factory.mktemp("oracle-outputs"), only=[CT, PATH])


@pytest.fixture(autouse=True)
def _media_and_broker(settings, media_root):
    settings.MEDIA_ROOT = str(media_root)
    # In-process tests publish where no worker listens; tests on the worker use `on_worker`.
    settings.VERIFICATION_QUEUE = vs.INPROC_QUEUE
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    # Re-grade only: a clean job ends "consistent" (no pass replayed or re-run).
    settings.VERIFICATION_CHECKS = ["regrade"]
    settings.VERIFICATION_HEARTBEAT_S = 1
    vs.point_celery_at(vs.BROKER_URL)


def _small_submission(oracle, tasks=(CT,), attempts=1):
    from django.db import transaction

    from submissions.verification import verification_enqueue

    with transaction.atomic():
        sub = vs.make_submission(vs.synthetic_version(), outputs=oracle, tasks=list(tasks),
                                 attempts=attempts)
        job = verification_enqueue(submission=sub)
    return sub, job


def _final(sub, worker, timeout=180):
    from submissions.models import Submission

    return vs.wait_for(
        lambda: (s := Submission.objects.get(pk=sub.pk)).status in ("verified", "consistent",
                                                                    "discrepancy", "failed") and s,
        timeout, f"submission {sub.pk} to finish", worker=worker)


# -- R3: configuration ---------------------------------------------------------------------------
def test_r3_visibility_timeout_exceeds_longest_job_and_reliability_settings():
    code = (
        "import django, json; django.setup();"
        "from django.conf import settings as s;"
        "from submissions.tasks import verify_submission_task as t;"
        "print(json.dumps({'vt': s.CELERY_BROKER_TRANSPORT_OPTIONS['visibility_timeout'],"
        "'limit': s.VERIFICATION_TIME_LIMIT_S, 'soft': s.VERIFICATION_SOFT_TIME_LIMIT_S,"
        "'task_limit': t.time_limit, 'task_soft': t.soft_time_limit, 'acks_late': t.acks_late,"
        "'reject': t.reject_on_worker_lost, 'prefetch': s.CELERY_WORKER_PREFETCH_MULTIPLIER,"
        "'acks': s.CELERY_TASK_ACKS_LATE, 'routes': s.CELERY_TASK_ROUTES}))"
    )
    for extra in ({}, {"VERIFICATION_TIME_LIMIT_S": "40000", "CELERY_VISIBILITY_TIMEOUT_S": "60"}):
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "0",
               "SECRET_KEY": "x", "VERIFICATION_SAMPLE_SECRET": "s" * 32,
               "DATABASE_URL": "sqlite:///tmp/x.db",
               "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0", **extra}
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=vs.REPO,
                             capture_output=True, text=True, check=True).stdout
        cfg = json.loads(out.strip().splitlines()[-1])
        assert cfg["vt"] >= cfg["limit"] + 1800, cfg  # margin over the longest job
        assert cfg["task_limit"] == cfg["limit"] and cfg["task_soft"] < cfg["task_limit"]
        assert cfg["acks_late"] and cfg["reject"] and cfg["acks"] and cfg["prefetch"] == 1
        assert cfg["routes"]["evaluation.verify_submission"]["queue"] == "evaluation"


# -- R2: duplicate delivery ----------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_r2_duplicate_delivery_is_a_noop(oracle):
    from django.utils import timezone

    from submissions.models import TrialCheck, VerificationJob
    from submissions.verification import verification_enqueue, verification_run

    sub, job = _small_submission(oracle)
    assert verification_enqueue(submission=sub).pk == job.pk  # one live job per submission
    # A second copy while the first runs (live owner, fresh heartbeat): no-op.
    VerificationJob.objects.filter(pk=job.pk).update(
        status="running", attempt=1, claimed_by="otherhost:4242", heartbeat_at=timezone.now())
    assert verification_run(job_id=job.pk) == "busy"
    assert VerificationJob.objects.get(pk=job.pk).attempt == 1
    VerificationJob.objects.filter(pk=job.pk).update(status="pending", claimed_by="")
    assert verification_run(job_id=job.pk) == "done"
    # Redelivery after the end: no-op, nothing rewritten, status never goes backwards.
    assert verification_run(job_id=job.pk) == "final"
    sub.refresh_from_db()
    assert sub.status == "consistent"
    # One re-grade, one reward-hacking screen and one trajectory judgement of the pass (issues
    # 14 and 23), each executed once.
    assert list(TrialCheck.objects.filter(job=job).order_by("kind")
                .values_list("kind", "executions")) == [("regrade", 1), ("screen", 1),
                                                     ("traj_judge", 1)]
    assert verification_run(job_id=10**9) == "missing"


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_r2_a_job_whose_claim_is_taken_stops_without_a_verdict(oracle, settings):
    """The per-job lease: when the claim passes to someone else (the reaper requeued it, another
    worker took it over), the heartbeat notices and the old copy stops writing."""
    import threading

    from submissions.models import TrialCheck, VerificationJob
    from submissions.verification import verification_run

    settings.VERIFICATION_PARALLEL_TRIALS = 1
    sub, job = _small_submission(oracle, tasks=(CT, PATH), attempts=3)
    out = {}

    def run():
        from django.db import connection

        try:
            out["r"] = verification_run(job_id=job.pk)
        finally:
            connection.close()

    t = threading.Thread(target=run)
    t.start()
    vs.wait_for(lambda: TrialCheck.objects.filter(job=job).exists(), 60, "a first check")
    VerificationJob.objects.filter(pk=job.pk).update(claimed_by="otherhost:1")
    t.join(timeout=90)
    assert out.get("r") == "lease_lost"
    j = VerificationJob.objects.get(pk=job.pk)
    assert j.verdict == "" and j.status == "running" and j.claimed_by == "otherhost:1"
    assert TrialCheck.objects.filter(job=job).count() < 6
    sub.refresh_from_db()
    assert sub.status == "verifying"


# -- R4: attempt cap -----------------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_r4_attempt_cap_fails_as_infrastructure_never_scored(oracle, settings, monkeypatch):
    from evaluation import runner
    from submissions.models import TrialCheck, VerificationJob
    from submissions.verification import verification_run

    settings.VERIFICATION_MAX_ATTEMPTS = 3
    sub, job = _small_submission(oracle)

    def oom(*a, **k):
        raise runner.InfrastructureError("engine lost the container (simulated OOM loop)")

    monkeypatch.setattr(runner, "run_verifier", oom)
    for attempt in (1, 2):
        with pytest.raises(runner.InfrastructureError):
            verification_run(job_id=job.pk)
        j = VerificationJob.objects.get(pk=job.pk)
        assert (j.status, j.attempt) == ("pending", attempt) and "simulated" in j.last_error
    with pytest.raises(runner.InfrastructureError):
        verification_run(job_id=job.pk)  # the third attempt fails, and was the last
    j = VerificationJob.objects.get(pk=job.pk)
    sub.refresh_from_db()
    assert (j.status, j.attempt) == ("failed", 3)
    assert sub.status == "failed" and "infrastructure" in sub.status_reason
    assert not TrialCheck.objects.filter(job=job).exists()  # nothing scored
    assert verification_run(job_id=job.pk) == "final"  # a stray redelivery: no infinite requeue
    assert sub.trials.filter(verified_reward__isnull=False).count() == 0


# -- R8: the status write fails ------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_r8_failed_status_write_never_reports_success(oracle, monkeypatch):
    from django.db import OperationalError

    from submissions import verification
    from submissions.models import TrialCheck, VerificationJob
    from submissions.verification import jobs

    sub, job = _small_submission(oracle)
    real = jobs.submission_transition

    def flaky(*, submission, to_status, **kw):
        if to_status in ("verified", "consistent", "discrepancy"):
            raise OperationalError("server closed the connection unexpectedly")
        return real(submission=submission, to_status=to_status, **kw)

    monkeypatch.setattr(jobs, "submission_transition", flaky)
    with pytest.raises(OperationalError):
        verification.verification_run(job_id=job.pk)
    sub.refresh_from_db()
    j = VerificationJob.objects.get(pk=job.pk)
    assert sub.status == "verifying" and not sub.is_verified  # never a premature success
    assert j.status == "pending" and j.verdict == "" and "OperationalError" in j.last_error
    monkeypatch.setattr(jobs, "submission_transition", real)
    assert verification.verification_run(job_id=job.pk) == "done"  # the retry
    sub.refresh_from_db()
    assert sub.status == "consistent"
    # One re-grade, one reward-hacking screen and one trajectory judgement of the pass (issues
    # 14 and 23), each executed once.
    assert list(TrialCheck.objects.filter(job=job).order_by("kind")
                .values_list("kind", "executions")) == [("regrade", 1), ("screen", 1),
                                                     ("traj_judge", 1)]


# -- R9: stuck-job watchdog ----------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_r9_reaper_requeues_stale_jobs_fails_capped_and_takes_a_lock(oracle, settings):
    from django.core.cache import cache
    from django.utils import timezone

    from submissions.models import VerificationJob
    from submissions.verification import REAPER_LOCK, reap_stuck_submissions

    settings.VERIFICATION_QUEUE = vs.QUEUE + "-r9"  # no consumer: count what is published
    vs.redis_client().delete(settings.VERIFICATION_QUEUE)
    old = timezone.now() - timedelta(hours=1)
    sub1, job1 = _small_submission(oracle)
    sub2, job2 = _small_submission(oracle)
    VerificationJob.objects.filter(pk=job1.pk).update(status="running", attempt=1,
                                                      claimed_by="deadhost:1", heartbeat_at=old)
    VerificationJob.objects.filter(pk=job2.pk).update(status="running", attempt=3,
                                                      claimed_by="deadhost:2", heartbeat_at=old)
    sub2.__class__.objects.filter(pk=sub2.pk).update(status="verifying")
    assert cache.add(REAPER_LOCK, "someone else", timeout=60)
    assert reap_stuck_submissions()["locked"] is True  # overlapping runs do nothing
    cache.delete(REAPER_LOCK)
    report = reap_stuck_submissions()
    assert report["requeued"] == [job1.pk] and report["failed"] == [job2.pk]
    j1, j2 = VerificationJob.objects.get(pk=job1.pk), VerificationJob.objects.get(pk=job2.pk)
    assert j1.status == "pending" and "stopped heartbeating" in j1.last_error
    assert j2.status == "failed"
    sub2.refresh_from_db()
    assert sub2.status == "failed"
    assert vs.queue_length(settings.VERIFICATION_QUEUE) >= 1
    vs.redis_client().delete(settings.VERIFICATION_QUEUE)


# -- R5: broker down at submit time --------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_r5_broker_down_at_submit_loses_nothing(oracle, on_worker):
    from submissions.models import TrialCheck, VerificationJob
    from submissions.verification import reap_stuck_submissions, verification_publish

    vs.point_celery_at(vs.DEAD_BROKER_URL)
    t0 = time.time()
    sub, job = _small_submission(oracle)  # enqueue on commit: the publish fails
    assert time.time() - t0 < 20, "a dead broker must not hang the submit path"
    j = VerificationJob.objects.get(pk=job.pk)
    assert j.status == "pending" and j.enqueued_at is None
    assert "broker unavailable" in j.last_error
    sub.refresh_from_db()
    assert sub.status == "queued"  # committed
    vs.point_celery_at(vs.BROKER_URL)  # the broker is back
    report = reap_stuck_submissions()
    assert job.pk in report["published"]
    assert verification_publish(job_id=job.pk)  # and a duplicate message (R2 on a real worker)
    sub = _final(sub, on_worker)
    assert sub.status == "consistent"
    # One re-grade, one reward-hacking screen and one trajectory judgement of the pass (issues
    # 14 and 23), each executed once.
    assert list(TrialCheck.objects.filter(job=job).order_by("kind")
                .values_list("kind", "executions")) == [("regrade", 1), ("screen", 1),
                                                     ("traj_judge", 1)]


# -- R6: broker restart without persistence ------------------------------------------------------
@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_r6_lost_queue_is_rebuilt_from_postgres(oracle, settings):
    from django.db import transaction

    from submissions.models import VerificationJob
    from submissions.verification import reap_stuck_submissions, verification_enqueue

    queue = settings.VERIFICATION_QUEUE = vs.QUEUE + "-r6"  # no consumer here
    vs.redis_client().delete(queue)
    bv = vs.synthetic_version()
    with transaction.atomic():
        subs = [vs.make_submission(bv, outputs=oracle, tasks=[CT], attempts=1) for _ in range(7)]
        for s in subs[:5]:
            verification_enqueue(submission=s)
    assert vs.queue_length(queue) == 5
    vs.redis_client().delete(queue)  # Redis restarted without persistence: messages gone
    settings.VERIFICATION_REPUBLISH_AFTER_S = 0
    report = reap_stuck_submissions()
    # 5 pending jobs re-published, 2 queued submissions without a job enqueued.
    assert len(report["published"]) == 5 and len(report["enqueued"]) == 2
    assert vs.queue_length(queue) == 7
    assert VerificationJob.objects.filter(submission__in=subs, status="pending").count() == 7
    vs.redis_client().delete(queue)


# -- R1: SIGKILL mid-verification ----------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_r1_sigkill_worker_mid_verification(oracle, on_worker):
    from submissions.models import TrialCheck, VerificationJob

    sub, job = _small_submission(oracle, tasks=(CT, PATH), attempts=3)
    prefix = f"{vs.RUN_PREFIX}{job.pk}-"

    def running_with_container():
        j = VerificationJob.objects.get(pk=job.pk)
        live = vs.labelled_containers(prefix)
        done = TrialCheck.objects.filter(job=job).count()
        return (j, live) if j.status == "running" and live and done >= 1 else None

    # Freeze the pool child running the job, let any Docker call it had in flight land, and kill
    # it only while one of its containers is still there: that container is then a true orphan
    # (a container seen a moment before the stop may have been removed by the child itself).
    orphans: set[str] = set()
    for _ in range(50):
        j, _live = vs.wait_for(running_with_container, 120, "a running job with a live container",
                               interval=0.1, worker=on_worker)
        pid = int(j.claimed_by.rsplit(":", 1)[1])
        os.kill(pid, signal.SIGSTOP)
        time.sleep(0.5)
        orphans = set(vs.labelled_containers(prefix))
        if orphans:
            break
        os.kill(pid, signal.SIGCONT)
    assert orphans, "never caught the job's pool child with a container of its own"
    os.kill(pid, signal.SIGKILL)  # the pool child running the job
    sub = _final(sub, on_worker)
    j = VerificationJob.objects.get(pk=job.pk)
    assert sub.status == "consistent", (j.summary, on_worker.tail())
    assert j.attempt == 2  # redelivered and re-run exactly once more
    checks = TrialCheck.objects.filter(job=job)
    # Each trial re-graded once and each (oracle) pass screened once, no duplicate.
    assert checks.filter(kind="regrade").count() == 6 == sub.trials.count()
    assert checks.filter(kind="screen").count() == 6
    assert set(checks.values_list("executions", flat=True)) == {1}
    assert orphans & set(j.reaped), (orphans, j.reaped)  # the orphan container was reaped
    assert vs.labelled_containers(prefix) == []


# -- R10: graceful shutdown ----------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_r10_sigterm_drains_the_running_job(oracle, media_root, settings):
    from submissions.models import TrialCheck

    settings.VERIFICATION_QUEUE = vs.QUEUE + "-r10"
    vs.redis_client().delete(settings.VERIFICATION_QUEUE)
    sub, job = _small_submission(oracle, tasks=(CT,), attempts=3)
    w = vs.Worker(media_root=media_root, queue=settings.VERIFICATION_QUEUE).start()
    vs.wait_for(lambda: TrialCheck.objects.filter(job=job).exists(), 120, "the job to start",
                interval=0.1, worker=w)
    assert w.stop(signal.SIGTERM, timeout=120) == 0  # warm shutdown: waits for the job
    sub.refresh_from_db()
    assert sub.status == "consistent"
    checks = TrialCheck.objects.filter(job=job)
    assert checks.filter(kind="regrade").count() == 3 == checks.filter(kind="screen").count()


# -- no engine: jobs wait, and say why -----------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_without_an_engine_jobs_wait_and_say_why(monkeypatch, settings):
    from django.db import transaction

    from evaluation import runner
    from submissions.models import VerificationJob
    from submissions.verification import verification_enqueue, verification_progress, \
        verification_run

    settings.VERIFICATION_QUEUE = vs.QUEUE + "-noengine"
    monkeypatch.setattr(runner, "engine_status", lambda: {
        "reachable": False, "error": "Cannot connect to the Docker daemon", "base_image": "b",
        "base_image_present": None})
    with transaction.atomic():
        sub = vs.make_submission(vs.synthetic_version(), outputs={}, tasks=[])
        job = verification_enqueue(submission=sub)
    for _ in range(5):  # however often it is retried, no attempt is consumed
        with pytest.raises(runner.InfrastructureError):
            verification_run(job_id=job.pk)
    j = VerificationJob.objects.get(pk=job.pk)
    assert (j.status, j.attempt) == ("pending", 0)
    progress = verification_progress(submission=sub)
    assert "unhealthy, not claimed" in progress["waiting_because"]
    assert "Cannot connect to the Docker daemon" in progress["waiting_because"]
    sub.refresh_from_db()
    assert sub.status == "queued"
    vs.redis_client().delete(settings.VERIFICATION_QUEUE)


# -- R15: a prefetched message of a killed worker -------------------------------------------------
# A consumer that takes one message off the queue without acknowledging it and waits, as a
# worker that prefetched a job it had not started yet; SIGKILLed, it leaves the message in the
# broker's unacknowledged set until the visibility timeout (6 h here).
_HOLDER = """
import json, sys, time
from kombu import Connection
with Connection(sys.argv[1]) as conn:
    ch = conn.channel()
    while (m := ch.basic_get(sys.argv[2], no_ack=False)) is None:
        time.sleep(0.05)
    print(json.dumps({"tag": m.delivery_tag, "task": m.headers.get("task"),
                      "args": json.loads(m.body)[0]}), flush=True)
    time.sleep(3600)
"""


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_r15_prefetched_message_of_a_killed_worker_is_published_again(oracle, media_root,
                                                                       settings):
    """R15: a worker SIGKILLed while it held a job's message it had not started: the job stays
    pending with its message out of the queue (not ready, not acknowledged). A live idle worker
    gets nothing until the reaper sees the job unclaimed past VERIFICATION_UNCLAIMED_AFTER_S
    with no ready message in the queue; then it is published again and verified exactly once.
    The copy the broker would redeliver after its visibility timeout is a no-op (R2)."""
    from datetime import timedelta

    from django.utils import timezone

    from submissions.models import TrialCheck, VerificationJob
    from submissions.verification import reap_stuck_submissions, verification_publish

    queue = settings.VERIFICATION_QUEUE = vs.QUEUE + "-r15"
    settings.VERIFICATION_UNCLAIMED_AFTER_S = 120
    settings.VERIFICATION_REPUBLISH_AFTER_S = 1800
    r = vs.redis_client()
    r.delete(queue)
    sub, job = _small_submission(oracle)
    assert vs.queue_length(queue) == 1
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, vs.BROKER_URL, queue],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        held = json.loads(holder.stdout.readline())
    finally:
        os.killpg(holder.pid, signal.SIGKILL)  # the worker that prefetched it dies
        holder.wait(timeout=30)
    assert held["task"] == "evaluation.verify_submission" and held["args"] == [job.pk]
    assert vs.queue_length(queue) == 0 and r.hexists("unacked", held["tag"])
    w = vs.Worker(media_root=media_root, queue=queue).start()  # a live, idle worker
    try:
        # Published a moment ago: not yet suspect, nothing is published again.
        report = reap_stuck_submissions()
        assert report["published"] == [] and vs.queue_length(queue) == 0
        j = VerificationJob.objects.get(pk=job.pk)
        assert (j.status, j.attempt) == ("pending", 0)
        # Two reaper intervals later (enqueued_at moved back instead of waiting them out).
        VerificationJob.objects.filter(pk=job.pk).update(
            enqueued_at=timezone.now() - timedelta(seconds=121))
        report = reap_stuck_submissions()
        assert report["published"] == [job.pk]
        sub = _final(sub, w)
        assert sub.status == "consistent"
        # The held copy, redelivered when the visibility timeout ends: a no-op.
        assert verification_publish(job_id=job.pk)
        vs.wait_for(lambda: f"verification job {job.pk}: final" in w.tail(20000), 120,
                    "the redelivered copy to be consumed", worker=w)
    finally:
        w.stop()
        r.hdel("unacked", held["tag"])
        r.zrem("unacked_index", held["tag"])
        r.delete(queue)
    j = VerificationJob.objects.get(pk=job.pk)
    assert (j.status, j.attempt) == ("done", 1)  # claimed once
    assert list(TrialCheck.objects.filter(job=job).order_by("kind")
                .values_list("kind", "executions")) == [("regrade", 1), ("screen", 1),
                                                     ("traj_judge", 1)]


def test_r15_no_prefetch_of_verification_jobs_on_redis():
    """R15: with late acks and a prefetch multiplier of 1, a Redis worker also fetches only when
    a pool process is free (a reconnect no longer lets a busy worker take the next job); the
    unclaimed bound defaults to two reaper intervals."""
    code = (
        "import django, json; django.setup();"
        "from django.conf import settings as s;"
        "print(json.dumps({'disable': s.CELERY_WORKER_DISABLE_PREFETCH,"
        "'prefetch': s.CELERY_WORKER_PREFETCH_MULTIPLIER, 'acks': s.CELERY_TASK_ACKS_LATE,"
        "'interval': s.VERIFICATION_REAPER_INTERVAL_S,"
        "'unclaimed': s.VERIFICATION_UNCLAIMED_AFTER_S,"
        "'beat': s.CELERY_BEAT_SCHEDULE['reap-stuck-submissions']['schedule']}))"
    )
    seen = {}
    for broker in ("redis://127.0.0.1:6379/0", "amqp://guest:guest@127.0.0.1:5672//"):
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "0",
               "SECRET_KEY": "x", "VERIFICATION_SAMPLE_SECRET": "s" * 32,
               "DATABASE_URL": "sqlite:///tmp/x.db",
               "CELERY_BROKER_URL": broker, "VERIFICATION_REAPER_INTERVAL_S": "30"}
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=vs.REPO,
                             capture_output=True, text=True, check=True).stdout
        seen[broker.split(":")[0]] = json.loads(out.strip().splitlines()[-1])
    assert seen["redis"] == {"disable": True, "prefetch": 1, "acks": True, "interval": 30.0,
                             "unclaimed": 60.0, "beat": 30.0}
    # RabbitMQ enforces the prefetch count itself (Celery's disable_prefetch is Redis-only).
    assert seen["amqp"]["disable"] is False and seen["amqp"]["prefetch"] == 1


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_r15_jobs_waiting_in_the_queue_are_not_published_again(oracle, settings):
    """R15: the unclaimed bound applies only once the queue holds no ready message: a job whose
    message still waits behind busy workers is not copied every two reaper intervals."""
    from datetime import timedelta

    from django.utils import timezone

    from submissions.models import VerificationJob
    from submissions.verification import reap_stuck_submissions

    queue = settings.VERIFICATION_QUEUE = vs.QUEUE + "-r15q"  # no consumer: busy workers
    settings.VERIFICATION_UNCLAIMED_AFTER_S = 120
    vs.redis_client().delete(queue)
    (_s1, job1), (_s2, job2) = _small_submission(oracle), _small_submission(oracle)
    VerificationJob.objects.filter(pk__in=[job1.pk, job2.pk]).update(
        enqueued_at=timezone.now() - timedelta(seconds=121))
    assert reap_stuck_submissions()["published"] == [] and vs.queue_length(queue) == 2
    vs.redis_client().delete(queue)  # both messages taken by workers that died with them
    assert sorted(reap_stuck_submissions()["published"]) == sorted([job1.pk, job2.pk])
    assert vs.queue_length(queue) == 2
    assert reap_stuck_submissions()["published"] == []  # just published: not yet suspect
    vs.redis_client().delete(queue)
