"""The verdict of a verification job (re-grade and replay mismatches, the re-run's Fisher exact
test) and the status page's view of a job's progress."""

from __future__ import annotations

from submissions.models import (
    CheckKind,
    CheckStatus,
    JobStatus,
    Submission,
    SubmissionStatus,
    TrialCheck,
    VerificationJob,
)
from submissions.verification.checks import summarize
from submissions.verification.checks.rerun import (
    POWER_TARGET,
    fisher_exact_two_sided,
    rerun_power,
    rerun_statistics,
)

__all__ = ["POWER_TARGET", "fisher_exact_two_sided", "rerun_passed_tasks", "rerun_power",
           "rerun_statistics", "verification_progress", "verification_summary"]


def rerun_passed_tasks(job: VerificationJob) -> set[int]:
    """Tasks whose re-run passed at least once, when the re-run as a whole agrees with the
    claim (no significant difference); their counted passes are covered by the re-run."""
    rerun = rerun_statistics(job)
    if not rerun or not rerun["ran"] or rerun["significant"]:
        return set()
    return set(TrialCheck.objects.filter(job=job, kind=CheckKind.RERUN, status=CheckStatus.MATCH)
               .values_list("benchmark_task_id", flat=True))


def verification_summary(job: VerificationJob) -> dict:
    """The job's verdict and headline from every registered check's contribution
    (submissions.verification.checks.REGISTRY): a discrepancy when any check contradicts
    the claims."""
    contributions = summarize(job, TrialCheck.objects.filter(job=job))
    discrepancy = any(c.contradicts for c in contributions)
    verdict = SubmissionStatus.DISCREPANCY if discrepancy else SubmissionStatus.VERIFIED
    parts = [c.headline for c in contributions if c.headline]
    return {
        "verdict": str(verdict),
        "headline": f"{verdict}: " + "; ".join(parts),
        **{c.key: c.data for c in contributions},
    }


def verification_progress(*, submission: Submission) -> dict:
    """For the status page: the live job, its checks done per kind, and why it waits."""
    job = submission.verification_jobs.order_by("-created_at").first()
    if job is None:
        return {"job": None}
    done = {k: TrialCheck.objects.filter(job=job, kind=k).count() for k in CheckKind.values}
    return {
        "job": job.pk,
        "status": job.status,
        "attempt": job.attempt,
        "waiting_because": job.last_error if job.status == JobStatus.PENDING else "",
        "heartbeat_at": job.heartbeat_at,
        "regrade": {"done": done["regrade"], "total": submission.trials_total
                    or submission.trials.count()},
        "replay": {"done": done["replay"]},
        "rerun": {"done": done["rerun"]},
        "screen": {"done": done["screen"]},
        "infra": {"done": done["infra"]},
        "verdict": job.verdict,
        "summary": job.summary,
        # The headline without its leading "<verdict>: ", which the page shows beside it.
        "detail": str((job.summary or {}).get("headline", "")).removeprefix(f"{job.verdict}: "),
    }
