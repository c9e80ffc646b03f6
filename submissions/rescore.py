"""Re-scoring published submissions after a grader update (reliability matrix R11).

A grader change bumps the grader's VERSION (evaluation/graders, kept honest by
tests/evaluation/test_grader_versions.py). `rescore_candidates` finds the published submissions
whose scores were produced by another version than the repository's (or never re-graded);
`submission_rescore` queues one re-score job per submission: the verification worker path
(same Celery task, lease, heartbeat, attempt cap, reaper) re-grades every trial's stored output
in a fresh verifier container, and `submissions.verification.rescore.rescore_apply` switches
the trials and the leaderboard in one transaction when the job is done. Maintainers use
`manage.py rescore --category ... | --submission ...` or the Re-score button of a published
submission's page.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import Q

from evaluation.grader_versions import current_versions
from submissions.models import (
    ACTIVE_JOB_STATUSES,
    JobPurpose,
    Submission,
    SubmissionEvent,
    SubmissionStatus,
    VerificationJob,
)
from submissions.states import SubmissionError
from submissions.verification import job_config, verification_publish


def rescore_candidates(*, category: str | None = None,
                       submission_ids: list[int] | None = None) -> list[Submission]:
    """Published, uploaded submissions to re-score, oldest first.

    With ``category``: those with a trial of that category whose score was not produced by the
    category's current grader version (so a finished re-score is not picked again). With
    ``submission_ids``: those submissions, whatever their versions (a refused id raises).
    """
    published = (Submission.objects.published().filter(is_reconstructed=False)
                 .exclude(files_prefix=""))
    if submission_ids is not None:
        found = list(published.filter(pk__in=submission_ids).order_by("pk"))
        missing = sorted(set(submission_ids) - {s.pk for s in found})
        if missing:
            raise SubmissionError(
                f"not published uploads (only those can be re-scored): {missing}")
        return found
    if category is None:
        raise SubmissionError("name a category or submissions to re-score")
    current = current_versions()
    if category not in current:
        raise SubmissionError(f"unknown category {category!r}; expected one of: "
                              f"{', '.join(sorted(current))}")
    stale = Q(trials__benchmark_task__category__slug=category) & ~Q(
        trials__grader_version=current[category])
    return list(published.filter(stale).distinct().order_by("published_at", "pk"))


def submission_rescore(*, submission: Submission, actor=None, reason: str = "") -> VerificationJob:
    """Queue a re-score of a published submission (its live job if one exists: idempotent).

    The job id is published on commit; the submission stays published and its rows stay on the
    leaderboard until the job's switch commits.
    """
    if submission.status != SubmissionStatus.PUBLISHED or submission.is_reconstructed \
            or not submission.files_prefix:
        raise SubmissionError("only a published upload can be re-scored")
    with transaction.atomic():
        job = VerificationJob.objects.filter(submission_id=submission.pk,
                                             status__in=ACTIVE_JOB_STATUSES).first()
        if job is None:
            try:
                with transaction.atomic():
                    job = VerificationJob.objects.create(
                        submission_id=submission.pk, purpose=JobPurpose.RESCORE,
                        # A pass the re-score creates gets every check a pass gets: its
                        # replay and trajectory judge run in this job (the screen at the switch).
                        config={**job_config(), "checks": ["regrade", "replay", "traj_judge"],
                                "reason": reason or "re-score requested"})
            except IntegrityError:  # a concurrent request created it first
                job = VerificationJob.objects.get(submission_id=submission.pk,
                                                  status__in=ACTIVE_JOB_STATUSES)
            SubmissionEvent.objects.create(
                submission_id=submission.pk, from_status=submission.status,
                to_status=submission.status, actor=actor,
                note=f"re-score requested (job {job.pk}): {reason}".strip(": ")[:5000])
        job_id = job.pk
        transaction.on_commit(lambda: verification_publish(job_id=job_id), robust=True)
    return job
