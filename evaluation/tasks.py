"""Celery tasks of the evaluation app: thin wrappers around evaluation.verification (R14).

Arguments are ids only; the service does the work. Import the tasks elsewhere as `*_task`.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from evaluation.runner import InfrastructureError

# Transient infrastructure only (R18): Docker/engine errors, broker or database connections.
TRANSIENT = (InfrastructureError, ConnectionError, OperationalError, InterfaceError)


@shared_task(
    bind=True,
    name="evaluation.verify_submission",
    acks_late=True,  # redelivered if the worker dies mid-job (the claim makes it idempotent)
    reject_on_worker_lost=True,
    autoretry_for=TRANSIENT,
    retry_backoff=settings.VERIFICATION_RETRY_BACKOFF_S,
    retry_backoff_max=15 * 60,
    retry_jitter=True,
    # Celery's own retry counter is per message chain; the real cap is the DB job's attempt.
    max_retries=settings.VERIFICATION_MAX_ATTEMPTS + 2,
    soft_time_limit=settings.VERIFICATION_SOFT_TIME_LIMIT_S,
    time_limit=settings.VERIFICATION_TIME_LIMIT_S,
)
def verify_submission_task(self, job_id: int) -> str:
    from evaluation.verification import verification_run

    return verification_run(job_id=job_id)


@shared_task(
    name="evaluation.reap_stuck_submissions",
    acks_late=True,
    soft_time_limit=240,
    time_limit=300,
)
def reap_stuck_submissions_task() -> dict:
    from evaluation.verification import reap_stuck_submissions

    return reap_stuck_submissions()
