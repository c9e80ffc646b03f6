"""The lease on a verification job: claim by conditional UPDATE, heartbeat, release, fail.

A worker owns a job while `claimed_by`, `attempt` and `status=running` are its own and its
heartbeat is fresh; every write re-checks them, so a worker whose lease was taken back (by the
reaper or a redelivery) writes nothing (LeaseLost).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from submissions.models import (
    ACTIVE_JOB_STATUSES,
    FINAL_JOB_STATUSES,
    JobStatus,
    Submission,
    SubmissionStatus,
    VerificationJob,
)
from submissions.states import submission_transition

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another worker (or the reaper) took the job back: stop without writing anything."""


def run_prefix(job_id: int) -> str:
    """Container job label prefix of a verification job: deterministic, unique per site."""
    return f"{settings.VERIFICATION_RUN_PREFIX}{job_id}-"


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_dead(claimed_by: str) -> bool:
    """True when the claim belongs to a process of this host that no longer exists."""
    host, _, pid = (claimed_by or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def jobs_of_dead_workers(*, limit: int) -> list[int]:
    """Running jobs claimed by a process of this host that has ended (a worker killed and
    restarted by make run's supervisor): taken back at once, not after their heartbeat's stale
    bound, since nothing runs them any more."""
    mine = (VerificationJob.objects.filter(status=JobStatus.RUNNING,
                                           claimed_by__startswith=f"{socket.gethostname()}:")
            .order_by("heartbeat_at").values_list("pk", "claimed_by")[:limit])
    return [pk for pk, owner in mine if _owner_dead(owner)]


def fail_job(job: VerificationJob, reason: str) -> bool:
    """Job -> failed (from whatever live state it is in) and its submission -> failed."""
    now = timezone.now()
    with transaction.atomic():
        n = VerificationJob.objects.filter(
            pk=job.pk, status__in=ACTIVE_JOB_STATUSES, attempt=job.attempt
        ).update(status=JobStatus.FAILED, finished_at=now, last_error=reason[:5000],
                 updated_at=now)
        if n != 1:
            return False
        sub = Submission.objects.get(pk=job.submission_id)
        note = f"verification failed (infrastructure, not scored): {reason}"[:5000]
        if sub.status == SubmissionStatus.QUEUED:
            submission_transition(submission=sub, to_status=SubmissionStatus.VERIFYING,
                                  note=f"verification job {job.pk}")
        if sub.status == SubmissionStatus.VERIFYING:
            submission_transition(submission=sub, to_status=SubmissionStatus.FAILED, note=note,
                                  status_reason=note)
    return True


def claim_job(job_id: int, worker: str) -> tuple[VerificationJob | None, str]:
    job = VerificationJob.objects.filter(pk=job_id).first()
    if job is None:
        return None, "missing"
    if job.status in FINAL_JOB_STATUSES:
        return None, "final"
    now = timezone.now()
    if job.status == JobStatus.RUNNING:
        stale = (
            job.heartbeat_at is None
            or job.heartbeat_at < now - timedelta(seconds=settings.VERIFICATION_STALE_AFTER_S)
            or (job.deadline_at is not None and job.deadline_at < now)
        )
        if not (stale or _owner_dead(job.claimed_by)):
            return None, "busy"  # R2: a duplicate delivery while the first copy runs
    if job.attempt >= settings.VERIFICATION_MAX_ATTEMPTS:
        fail_job(job, f"gave up after {job.attempt} attempts; last error: {job.last_error}")
        return None, "attempt_cap"
    lease = settings.VERIFICATION_TIME_LIMIT_S + settings.VERIFICATION_STALE_AFTER_S
    claimed = VerificationJob.objects.filter(
        pk=job.pk, status=job.status, attempt=job.attempt, claimed_by=job.claimed_by
    ).update(
        status=JobStatus.RUNNING,
        attempt=F("attempt") + 1,
        claimed_by=worker,
        heartbeat_at=now,
        deadline_at=now + timedelta(seconds=lease),
        started_at=Coalesce("started_at", now),
        updated_at=now,
    )
    if claimed != 1:
        return None, "busy"
    job.refresh_from_db()
    return job, "claimed"


class Heartbeat(threading.Thread):
    """Writes heartbeat_at while the job runs; sets `lost` when the claim is no longer ours."""

    def __init__(self, job: VerificationJob, worker: str):
        super().__init__(daemon=True, name=f"heartbeat-{job.pk}")
        self.job_id, self.worker, self.attempt = job.pk, worker, job.attempt
        self.lost = threading.Event()
        self._halt = threading.Event()

    def beat(self) -> None:
        n = VerificationJob.objects.filter(
            pk=self.job_id, status=JobStatus.RUNNING, claimed_by=self.worker,
            attempt=self.attempt,
        ).update(heartbeat_at=timezone.now())
        if n != 1:
            self.lost.set()

    def run(self):
        try:
            while not self._halt.wait(settings.VERIFICATION_HEARTBEAT_S):
                try:
                    self.beat()
                except DatabaseError as exc:  # a database outage: keep trying
                    log.warning("heartbeat of job %s failed: %s", self.job_id, exc)
                    connection.close()
                if self.lost.is_set():
                    return
        finally:
            connection.close()

    def stop(self):
        self._halt.set()
        self.join(timeout=10)


def release_job(job: VerificationJob, worker: str, error: str) -> None:
    """Give the job back after an infrastructure error (the task then retries with backoff)."""
    if job.attempt >= settings.VERIFICATION_MAX_ATTEMPTS:
        fail_job(job, f"gave up after {job.attempt} attempts; last error: {error}")
        return
    VerificationJob.objects.filter(
        pk=job.pk, status=JobStatus.RUNNING, claimed_by=worker, attempt=job.attempt
    ).update(status=JobStatus.PENDING, last_error=error[:5000], updated_at=timezone.now())
