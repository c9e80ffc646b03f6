"""Verification jobs: enqueue and publish, run one job to its verdict, reap and reconcile.

See the package docstring for the pipeline.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from config.celery import app as celery_app
from evaluation import health, runner
from submissions.models import (
    ACTIVE_JOB_STATUSES,
    JobPurpose,
    JobStatus,
    Submission,
    SubmissionStatus,
    VerificationJob,
)
from submissions.publishing import tryout_reference_publish
from submissions.states import InvalidTransition, submission_transition
from submissions.verification.checks import job_config, run_checks
from submissions.verification.lease import (
    LeaseLost,
    claim_job,
    fail_job,
    Heartbeat,
    release_job,
    jobs_of_dead_workers,
    run_prefix,
    worker_identity,
)
from submissions.verification.rescore import rescore_apply, rescore_ready
from submissions.verification.sample import rerun_reveal
from submissions.verification.verdict import submission_verdict_record, verification_summary

log = logging.getLogger(__name__)

REAPER_LOCK = "evaluation:reap-stuck-submissions"
# Published by name (submissions/tasks.py defines it), so the task module, whose bodies import
# this one (house style HS14), is not imported back.
VERIFY_TASK = "evaluation.verify_submission"


def verification_enqueue(*, submission: Submission) -> VerificationJob:
    """The submission's live job (created if none) and its publication on commit.

    Call it inside the transaction that moves the submission to `queued`; the job row commits
    with it, and a broker error after the commit only delays the job (the reconciler retries).
    """
    job = VerificationJob.objects.filter(
        submission_id=submission.pk, status__in=ACTIVE_JOB_STATUSES
    ).first()
    if job is None:
        try:
            with transaction.atomic():
                job = VerificationJob.objects.create(submission_id=submission.pk,
                                                     config=job_config())
        except IntegrityError:  # a concurrent enqueue created it first
            job = VerificationJob.objects.get(
                submission_id=submission.pk, status__in=ACTIVE_JOB_STATUSES
            )
    transaction.on_commit(partial(verification_publish, job_id=job.pk), robust=True)
    return job


def verification_publish(*, job_id: int) -> bool:
    """Send the job id to the evaluation queue. Never raises: False when the broker is down."""
    try:
        celery_app.send_task(VERIFY_TASK, args=[job_id], queue=settings.VERIFICATION_QUEUE)
    except Exception as exc:  # noqa: BLE001 - the broker's errors vary by transport
        log.warning("could not publish verification job %s: %s", job_id, exc)
        VerificationJob.objects.filter(pk=job_id, status=JobStatus.PENDING).update(
            last_error=f"broker unavailable, will retry: {exc}"[:2000], updated_at=timezone.now()
        )
        return False
    VerificationJob.objects.filter(pk=job_id, status=JobStatus.PENDING).update(
        enqueued_at=timezone.now(), updated_at=timezone.now()
    )
    return True


def queue_ready_messages(queue: str) -> int | None:
    """Messages waiting in `queue` that no worker has taken yet; None when the broker does not
    answer. Unacknowledged messages (a worker holds them) are not counted, on Redis and RabbitMQ.
    """
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1)
            try:
                return int(conn.default_channel.queue_declare(
                    queue=queue, passive=True).message_count)
            except conn.channel_errors:  # Redis: an empty queue has no key; RabbitMQ: no such queue
                return 0
    except Exception as exc:  # noqa: BLE001 - the broker's errors vary by transport
        log.warning("could not count the messages of queue %s: %s", queue, exc)
        return None


def verification_run(*, job_id: int, worker: str | None = None) -> str:
    """Run one verification job to its verdict. Returns what happened (for logs and tests).

    Raises runner.InfrastructureError / DatabaseError after releasing the job, so the Celery
    task retries with backoff; returns quietly for duplicates, final jobs and lost leases.
    """
    worker = worker or worker_identity()
    # R12: an unhealthy worker (disk nearly full, engine away, an image missing) claims nothing;
    # the job stays pending and the task is retried with backoff, so a healthy worker takes it.
    status = health.worker_health()  # a fraction of a second; jobs take minutes
    if not status["healthy"]:
        why = "; ".join(status["problems"])
        VerificationJob.objects.filter(pk=job_id, status=JobStatus.PENDING).update(
            last_error=f"worker {worker} unhealthy, not claimed: {why}"[:2000],
            updated_at=timezone.now()
        )
        raise runner.InfrastructureError(f"worker unhealthy: {why}")
    job, outcome = claim_job(job_id, worker)
    if job is None:
        log.info("verification job %s: %s", job_id, outcome)
        return outcome
    heartbeat = Heartbeat(job, worker)
    heartbeat.start()
    try:
        if job.purpose == JobPurpose.RESCORE:  # R11: re-grade, then switch in one transaction
            if not rescore_ready(job):
                VerificationJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING,
                                               claimed_by=worker).update(
                    status=JobStatus.CANCELLED, finished_at=timezone.now(),
                    last_error="the submission is no longer published")
                return "cancelled"
            run_checks(job, heartbeat)
            rescore_apply(job, worker)
            return "done"
        if not _submission_verifying(job):
            VerificationJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING,
                                           claimed_by=worker).update(
                status=JobStatus.CANCELLED, finished_at=timezone.now(),
                last_error="the submission left the verification path")
            return "cancelled"
        if job.attempt > 1:
            reaped = runner.reap_job_prefix(run_prefix(job.pk), keep_attempt=job.attempt)
            if reaped:
                log.warning("job %s: reaped containers of dead attempts: %s", job.pk, reaped)
                VerificationJob.objects.filter(pk=job.pk).update(reaped=job.reaped + reaped)
        run_checks(job, heartbeat)
        _finish(job, worker)
        return "done"
    except LeaseLost:
        log.warning("job %s: lease lost, stopping", job.pk)
        return "lease_lost"
    except SoftTimeLimitExceeded:
        fail_job(job, "verification time limit exceeded")
        return "failed"
    except (runner.InfrastructureError, DatabaseError, ConnectionError, OSError) as exc:
        try:
            release_job(job, worker, f"{type(exc).__name__}: {exc}")
        except DatabaseError:
            log.exception("job %s: could not release after %s", job.pk, exc)
        raise
    except Exception as exc:
        # A bug, not the infrastructure: release it; the reconciler publishes it again later
        # and the attempt cap ends it as failed (never scored).
        log.exception("job %s failed unexpectedly", job.pk)
        release_job(job, worker, f"{type(exc).__name__}: {exc}")
        raise
    finally:
        heartbeat.stop()


def _submission_verifying(job: VerificationJob) -> bool:
    sub = Submission.objects.get(pk=job.submission_id)
    if sub.status == SubmissionStatus.VERIFYING:
        return True
    if sub.status != SubmissionStatus.QUEUED:
        return False
    try:
        submission_transition(submission=sub, to_status=SubmissionStatus.VERIFYING,
                              note=f"verification job {job.pk} started", trials_done=0)
    except InvalidTransition:
        return Submission.objects.filter(pk=sub.pk,
                                         status=SubmissionStatus.VERIFYING).exists()
    return True


def _finish(job: VerificationJob, worker: str) -> None:
    summary = verification_summary(job)
    now = timezone.now()
    with transaction.atomic():
        n = VerificationJob.objects.filter(
            pk=job.pk, status=JobStatus.RUNNING, claimed_by=worker, attempt=job.attempt
        ).update(status=JobStatus.DONE, verdict=summary["verdict"], summary=summary,
                 finished_at=now, last_error="", updated_at=now)
        if n != 1:
            raise LeaseLost()
        sub = Submission.objects.select_for_update().get(pk=job.submission_id)
        if sub.status != SubmissionStatus.VERIFYING:
            VerificationJob.objects.filter(pk=job.pk).update(status=JobStatus.CANCELLED)
            return
        # The one verdict function (verified only when the site re-ran the agent, methods page);
        # the re-run order and its salt are revealed with it.
        coverage = submission_verdict_record(submission_id=job.submission_id, job=job)
        rerun_reveal(submission_id=job.submission_id)
        verdict = coverage["verdict"]
        summary.update(verdict=verdict, coverage=coverage,
                       headline=f"{verdict}: " + summary["headline"].split(": ", 1)[1])
        VerificationJob.objects.filter(pk=job.pk).update(verdict=verdict, summary=summary)
        sub = submission_transition(
            submission=sub,
            to_status=verdict,
            note=summary["headline"],
            is_verified=verdict == SubmissionStatus.VERIFIED,
        )
        tryout_reference_publish(submission=sub)


def reap_stuck_submissions(*, batch: int | None = None) -> dict:
    """Requeue or fail stale running jobs, enqueue forgotten queued submissions, re-publish.

    Runs under a cache.add lock (overlapping runs return at once) and handles bounded batches.
    """
    batch = batch or settings.VERIFICATION_REAPER_BATCH
    report = {"locked": False, "requeued": [], "failed": [], "enqueued": [], "published": [],
              "work_dirs": []}
    if not cache.add(REAPER_LOCK, worker_identity(), timeout=300):
        report["locked"] = True
        return report
    try:
        now = timezone.now()
        stale_before = now - timedelta(seconds=settings.VERIFICATION_STALE_AFTER_S)
        dead = jobs_of_dead_workers(limit=batch)
        stuck = (VerificationJob.objects.filter(status=JobStatus.RUNNING)
                 .filter(Q(heartbeat_at__lt=stale_before) | Q(heartbeat_at__isnull=True)
                         | Q(deadline_at__lt=now) | Q(pk__in=dead))
                 .order_by("heartbeat_at")[:batch])
        published: set[int] = set()
        for job in stuck:
            if job.attempt >= settings.VERIFICATION_MAX_ATTEMPTS:
                if fail_job(job, f"worker {job.claimed_by} stopped after attempt {job.attempt} "
                                  f"of {settings.VERIFICATION_MAX_ATTEMPTS}"):
                    report["failed"].append(job.pk)
                continue
            n = VerificationJob.objects.filter(
                pk=job.pk, status=JobStatus.RUNNING, attempt=job.attempt,
                claimed_by=job.claimed_by,
            ).update(status=JobStatus.PENDING, updated_at=now,
                     last_error=(f"worker {job.claimed_by} ended; requeued" if job.pk in dead
                                 else f"worker {job.claimed_by} stopped heartbeating at "
                                      f"{job.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC; requeued"))
            if n != 1:
                continue
            try:
                reaped = runner.reap_job_prefix(run_prefix(job.pk))
                if reaped:
                    VerificationJob.objects.filter(pk=job.pk).update(reaped=job.reaped + reaped)
            except runner.InfrastructureError as exc:
                log.warning("could not reap containers of job %s: %s", job.pk, exc)
            report["requeued"].append(job.pk)
            if verification_publish(job_id=job.pk):
                published.add(job.pk)
        forgotten = (Submission.objects.filter(status=SubmissionStatus.QUEUED)
                     .exclude(verification_jobs__status__in=ACTIVE_JOB_STATUSES)
                     .order_by("queued_at", "pk")[:batch])
        for sub in forgotten:
            job = verification_enqueue(submission=sub)  # publishes at once (no transaction)
            report["enqueued"].append(job.pk)
            published.add(job.pk)
        # Pending jobs to publish again: never published (the broker was down); published long
        # ago (a message lost behind a long queue); or published a while ago while the queue
        # now holds no ready message. A pending job's message is then out of the
        # queue, and no worker started it: the worker holding it died (a prefetched message
        # of a SIGKILLed worker waits for the broker's visibility timeout) or holds it for a
        # retry's countdown. Either way a new copy costs one no-op claim at most (R2), and a
        # queue with ready messages is never flooded with copies.
        republish_before = now - timedelta(seconds=settings.VERIFICATION_REPUBLISH_AFTER_S)
        due = Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=republish_before)
        if queue_ready_messages(settings.VERIFICATION_QUEUE) == 0:
            due |= Q(enqueued_at__lt=now - timedelta(
                seconds=settings.VERIFICATION_UNCLAIMED_AFTER_S))
        unsent = (VerificationJob.objects.filter(status=JobStatus.PENDING).filter(due)
                  .exclude(pk__in=published).order_by("created_at")[:batch])
        for job in unsent:
            if verification_publish(job_id=job.pk):
                report["published"].append(job.pk)
        # The work directories of killed workers (their containers went with their jobs above).
        report["work_dirs"] = runner.reap_work_dirs(settings.VERIFICATION_WORK_DIR_MAX_AGE_S)
        if report["work_dirs"]:
            log.warning("reaped work directories of dead workers: %s", report["work_dirs"])
    finally:
        cache.delete(REAPER_LOCK)
    return report
