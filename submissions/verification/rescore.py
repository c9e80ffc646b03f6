"""The switch that ends a re-score job (R11): a published submission's stored outputs were
re-graded by the current graders (the job's re-grade checks, each with its grader version);
now, in ONE transaction, the trials take the new scores, a ScoreRevision keeps the old score
when a number changed, and `published_set_changed` makes the leaderboard rebuild that agent's
rows and bump the aggregate version. Until that transaction commits every page, CSV and API row
shows the old score; after it, the new one. Re-running a re-score that changes nothing writes
nothing (no revision, no rebuild).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from submissions.models import (
    CheckKind,
    CheckStatus,
    JobStatus,
    Outcome,
    ScoreRevision,
    Submission,
    SubmissionStatus,
    Trial,
    TrialCheck,
    VerificationJob,
    VerificationLevel,
)
from submissions.signals import published_set_changed
from submissions.trials import trial_check_record, trial_screen_record
from submissions.verification.checks.base import screen_trial
from submissions.verification.lease import LeaseLost
from submissions.verification.verdict import submission_verdict_record


def rescore_ready(job: VerificationJob) -> bool:
    """A re-score runs only on a published submission (one taken down meanwhile is left)."""
    return Submission.objects.filter(pk=job.submission_id,
                                     status=SubmissionStatus.PUBLISHED).exists()


def submission_score(*, submission_id: int) -> dict:
    """Successes over counted trials (infrastructure errors excluded, as on the leaderboard)
    and the grader versions of their scores."""
    counted = Trial.objects.filter(submission_id=submission_id).exclude(
        outcome=Outcome.INFRA_ERROR)
    graders = sorted({g for g in counted.values_list("grader_version", flat=True) if g})
    return {"successes": counted.filter(success=True).count(), "attempts": counted.count(),
            "graders": graders}


def _state(trial: Trial) -> tuple:
    return trial.verified_reward, trial.outcome, trial.grader_version


def rescore_apply(job: VerificationJob, worker: str) -> dict:
    """Switch the submission to the job's re-grades (one transaction). Returns the summary."""
    checks = {c.trial_id: c for c in TrialCheck.objects.filter(job=job, kind=CheckKind.REGRADE)}
    now = timezone.now()
    with transaction.atomic():
        n = VerificationJob.objects.filter(
            pk=job.pk, status=JobStatus.RUNNING, claimed_by=worker, attempt=job.attempt
        ).update(status=JobStatus.DONE, finished_at=now, last_error="", updated_at=now)
        if n != 1:
            raise LeaseLost()
        sub = Submission.objects.select_for_update().get(pk=job.submission_id)
        if sub.status != SubmissionStatus.PUBLISHED:
            VerificationJob.objects.filter(pk=job.pk).update(
                status=JobStatus.CANCELLED, last_error="the submission is no longer published")
            return {"cancelled": True}
        before = submission_score(submission_id=sub.pk)
        trials = {t.pk: t for t in Trial.objects.select_for_update().filter(
            pk__in=list(checks)).select_related("benchmark_task").order_by("pk")}
        changes, versions_changed = [], False
        for trial_id, trial in trials.items():
            check = checks[trial_id]
            old = _state(trial)
            trial_check_record(trial_id=trial_id, flag=None, verified_reward=check.verified_reward,
                               grader_version=check.grader_version,
                               judge_model=check.judge_model,
                               judge_prompt_version=check.judge_prompt_version)
            trial.refresh_from_db(fields=["verified_reward", "outcome", "grader_version"])
            versions_changed |= old[2] != trial.grader_version
            if old[:2] != _state(trial)[:2]:
                changes.append({
                    "trial": trial_id, "task": trial.benchmark_task.name,
                    "attempt": trial.attempt, "reward_before": old[0],
                    "reward_after": trial.verified_reward, "outcome_before": old[1],
                    "outcome_after": trial.outcome, "grader_before": old[2],
                    "grader_after": trial.grader_version})
        after = submission_score(submission_id=sub.pk)
        headline = (f"re-scored {len(checks)} trials: {before['successes']}/"
                    f"{before['attempts']} -> {after['successes']}/{after['attempts']}"
                    f" ({len(changes)} trial score{'' if len(changes) == 1 else 's'} changed)")
        summary = {"rescore": True, "headline": headline, "before": before, "after": after,
                   "changes": changes}
        if changes:
            # A pass the re-score created was replayed and read by the trajectory judge in
            # this job; it is screened here with that replay's activity, and its level is what
            # this job proved (a level earned while it was a failure does not carry over).
            # Then the one verdict function recomputes the badge.
            replays = {c.trial_id: c for c in TrialCheck.objects.filter(
                job=job, kind=CheckKind.REPLAY)}
            for change in changes:
                if (change["outcome_after"] == Outcome.PASSED
                        and change["outcome_before"] != Outcome.PASSED):
                    trial = trials[change["trial"]]
                    replay = replays.get(trial.pk)
                    activity = (replay.detail or {}).get("activity") if replay else None
                    _rules, hits, _evidence, _traj = screen_trial(trial, activity=activity)
                    trial_screen_record(trial_id=trial.pk, hits=sorted({h.rule for h in hits}))
                    level = (VerificationLevel.REPRODUCED if replay is not None
                             and replay.status == CheckStatus.MATCH
                             else VerificationLevel.REGRADED)
                    Trial.objects.filter(pk=trial.pk).update(verification_level=level,
                                                             updated_at=now)
            submission_verdict_record(submission_id=sub.pk)
            ScoreRevision.objects.create(
                submission=sub, job=job,
                successes_before=before["successes"], attempts_before=before["attempts"],
                successes_after=after["successes"], attempts_after=after["attempts"],
                graders_before=before["graders"], graders_after=after["graders"],
                changes=changes, reason=(job.config or {}).get("reason", "")[:5000])
        if changes or versions_changed:
            # The leaderboard rebuilds this agent's rows and bumps the aggregate version here,
            # inside this transaction (its receiver): readers see the old rows or the new ones.
            published_set_changed.send(sender=Submission,
                                       benchmark_version=sub.benchmark_version,
                                       agent_ids=[sub.agent_id])
        VerificationJob.objects.filter(pk=job.pk).update(
            verdict="rescored" if changes else "unchanged", summary=summary)
    return summary
