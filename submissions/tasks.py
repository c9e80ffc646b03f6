"""Celery jobs of the submissions app (ids only; idempotent)."""

from celery import shared_task


@shared_task(name="submissions.sweep_staging", soft_time_limit=300, time_limit=360,
             ignore_result=True)
def sweep_staging_task() -> int:
    """Remove staging folders and partial uploads older than 6 hours (U12). Idempotent."""
    from submissions.intake import staging_cleanup

    return staging_cleanup()
