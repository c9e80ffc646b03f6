"""Celery jobs of the submissions app: thin wrappers around services (HS14; ids only; idempotent).

The verification tasks keep their `evaluation.*` names: those names are the routing keys of the
evaluation queue and the beat schedule in config/settings.py. Import them elsewhere as `*_task`.
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import worker_init, worker_process_init, worker_process_shutdown
from django.conf import settings
from django.db import InterfaceError, OperationalError

from evaluation.runner import InfrastructureError

logger = logging.getLogger(__name__)


@worker_init.connect
def reap_engine_on_start(**_kwargs) -> None:
    """VERIFICATION_REAP_ON_START: before this worker consumes anything, remove what a previous
    life of its host left on its own engine and in its temporary folder (a host lost mid-job,
    then back: its runs belong to jobs another host took over)."""
    if not settings.VERIFICATION_REAP_ON_START:
        return
    from evaluation import runner

    removed = runner.reap_engine()
    logger.warning("reaped at start: %d containers, %d temporary folders (%s)",
                   len(removed["containers"]), len(removed["temporary"]),
                   ", ".join(removed["containers"] + removed["temporary"])[:2000] or "nothing")


@worker_process_init.connect
def work_tempdir_on_start(**_kwargs) -> None:
    """Each pool process works in a temporary folder of its own (<tmp>/hab-work-<pid>): the
    reaper removes a killed process's work directories by its pid (runner.reap_work_dirs)."""
    from evaluation import runner

    runner.work_tempdir_use()


@worker_process_shutdown.connect
def work_tempdir_on_stop(**_kwargs) -> None:
    from evaluation import runner

    runner.work_tempdir_done()


@shared_task(name="submissions.sweep_staging", soft_time_limit=300, time_limit=360,
             ignore_result=True)
def sweep_staging_task() -> int:
    """Remove staging folders and partial uploads older than 6 hours (U12). Idempotent."""
    # Imported in the body, as house style HS14 prescribes for services.
    from submissions.intake import staging_cleanup

    return staging_cleanup()


# Transient infrastructure only (HS18): Docker/engine errors, broker or database connections.
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
    # Imported in the body, as house style HS14 prescribes for services.
    from submissions.verification import verification_run

    return verification_run(job_id=job_id)


@shared_task(
    name="evaluation.reap_stuck_submissions",
    acks_late=True,
    soft_time_limit=240,
    time_limit=300,
)
def reap_stuck_submissions_task() -> dict:
    # Imported in the body, as house style HS14 prescribes for services.
    from submissions.verification import reap_stuck_submissions

    return reap_stuck_submissions()


@shared_task(
    name="submissions.intake_upload",
    acks_late=True,  # redelivered if the worker dies mid-intake (the claim makes it idempotent)
    reject_on_worker_lost=True,
    autoretry_for=(ConnectionError, OperationalError, InterfaceError),
    retry_backoff=5,
    retry_backoff_max=300,
    max_retries=5,
    soft_time_limit=settings.INTAKE_TIME_LIMIT_S - 60,
    time_limit=settings.INTAKE_TIME_LIMIT_S,
)
def intake_upload_task(submission_id: int) -> str:
    """Extract, validate, scan and store one received upload (submissions.intake)."""
    # Imported in the body, as house style HS14 prescribes for services.
    from submissions.intake import submission_intake

    return submission_intake(submission_id=submission_id)


@shared_task(name="submissions.reap_stuck_intake", acks_late=True, soft_time_limit=240,
             time_limit=300, ignore_result=True)
def reap_stuck_intake_task() -> dict:
    """Publish again the intake of uploads whose message or worker was lost. Idempotent."""
    # Imported in the body, as house style HS14 prescribes for services.
    from submissions.intake import intake_reap

    return intake_reap()
