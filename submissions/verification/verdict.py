"""The verdict of a submission (submission_verdict_record: one function, from the trials'
current state and the last re-run), the summary of a verification job (every registered
check's contribution) and the status page's view of a job's progress."""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from submissions import linking
from submissions.models import (
    FLAG_AWAITING_JUDGE,
    FLAG_AWAITING_TRAJECTORY_JUDGE,
    FLAG_REWARD_HACK,
    FLAG_TRAJECTORY_SUSPICIOUS,
    CheckKind,
    JobPurpose,
    JobStatus,
    Outcome,
    Submission,
    SubmissionEvent,
    SubmissionStatus,
    Trial,
    TrialCheck,
    VerificationJob,
    VerificationLevel,
    is_flagged,
)
from submissions.verification.checks import summarize
from submissions.verification.checks.rerun import rerun_statistics

__all__ = ["rerun_statistics",
           "submission_verdict_record", "verification_progress", "verification_summary"]


# Flags that contradict the claims (a discrepancy); reward_hack:RH<n> only while open (the
# trial keeps a reward-hacking flag only until a maintainer clears it).
_CONTRADICTING = ("regrade_mismatch", "replay_mismatch")


def _contradicts(flags) -> bool:
    return any(f in _CONTRADICTING or str(f).startswith(FLAG_REWARD_HACK + ":")
               for f in flags or ())


def _last_verification(submission_id: int) -> VerificationJob | None:
    return (VerificationJob.objects.filter(submission_id=submission_id,
                                           purpose=JobPurpose.VERIFY, status=JobStatus.DONE)
            .order_by("-finished_at", "-pk").first())


def submission_verdict_record(*, submission_id: int, job: VerificationJob | None = None) -> dict:
    """THE verdict of a submission, from its trials' current state and its last verification's
    re-run (VERDICT_DEFINITIONS). Called after every change to a trial (a verification, a
    re-score, a re-screen, a clearance, an infrastructure confirmation or revocation) inside
    that change's transaction: the badge, the status and the aggregates move together.

    verified: a re-run sample was drawn and run and agrees with the claims under the stated
    test, every counted trial was re-graded, every counted pass was reproduced or re-run, and
    no flag is open. discrepancy: a trial carries a finding that contradicts its claim, or the
    re-run succeeds significantly less often than claimed. Otherwise consistent, with what is
    missing said. Returns the coverage dict stored on the submission."""
    job = job or _last_verification(submission_id)
    rerun = rerun_statistics(job) if job is not None else None
    trials = Trial.objects.filter(submission_id=submission_id)
    if rerun and rerun["ran"] and not rerun["significant"]:
        # A re-run covers only the pass it reproduces, when it passed too (rerun_statistics).
        trials.filter(pk__in=rerun["agreeing_trials"], success=True).exclude(
            verification_level=VerificationLevel.RERUN).update(
            verification_level=VerificationLevel.RERUN, updated_at=timezone.now())
    counted = trials.exclude(outcome=Outcome.INFRA_ERROR)
    rows = list(counted.values_list("verification_level", "success", "verified_reward", "flags"))
    covered = (VerificationLevel.REPRODUCED, VerificationLevel.RERUN)
    all_flags = [f for f in trials.exclude(flags=[]).values_list("flags", flat=True) if f]
    coverage = {
        "counted": len(rows),
        "passes": sum(1 for r in rows if r[1]),
        # A reproduced trial's replay graded the same output as the submitted one.
        "regraded": sum(1 for r in rows
                        if r[2] is not None or r[0] == VerificationLevel.REPRODUCED),
        "reproduced": sum(1 for r in rows if r[0] == VerificationLevel.REPRODUCED),
        "rerun": sum(1 for r in rows if r[0] == VerificationLevel.RERUN),
        "passes_uncovered": sum(1 for r in rows if r[1] and r[0] not in covered),
        # Findings against the claim only (is_flagged): "not replayable" or "awaiting judge"
        # say what could not be checked, and are counted on their own.
        "flagged": sum(is_flagged(f) for f in all_flags),
        "awaiting_judge": sum(FLAG_AWAITING_JUDGE in f for f in all_flags),
        # Counted passes the trajectory judge has not read (none configured) or found
        # suspicious (the maintainer's queue); a "hack" is an open reward_hack:TJ flag.
        "awaiting_trajectory_judge": sum(FLAG_AWAITING_TRAJECTORY_JUDGE in f for f in all_flags),
        "trajectory_suspicious": sum(FLAG_TRAJECTORY_SUSPICIOUS in f for f in all_flags),
        "rerun_ran": bool(rerun and rerun["ran"]),
        "rerun_contradicts": bool(rerun and rerun["significant"]),
        **_chain(submission_id),
    }
    why = _not_verified_because(coverage, rerun, submission_id)
    contradicts = (coverage["rerun_contradicts"] or bool(coverage["linked_discrepancies"])
                   or any(_contradicts(f) for f in all_flags))
    coverage["not_verified_because"] = why
    coverage["verdict"] = str(SubmissionStatus.DISCREPANCY if contradicts
                              else SubmissionStatus.CONSISTENT if why
                              else SubmissionStatus.VERIFIED)
    _store(submission_id, coverage)
    return coverage


def _chain(submission_id: int) -> dict:
    """What links this submission to others: the discrepant submissions of its chain (a
    discrepancy stays with every linked upload), how many other uploads share its runs, and
    the earlier discrepant submissions of the same agent (shown, not held against a new run of
    its own)."""
    sub = Submission.objects.only("pk", "lineage_id", "agent_id").get(pk=submission_id)
    chain = [pk for pk in linking.lineage_of(sub) if pk != submission_id]
    discrepant = list(Submission.objects.filter(pk__in=chain).filter(
        Q(status=SubmissionStatus.DISCREPANCY) | Q(coverage__verdict="discrepancy"))
        .values_list("pk", flat=True))
    agent = list(Submission.objects.filter(agent_id=sub.agent_id).exclude(pk=submission_id)
                 .exclude(pk__in=discrepant).filter(
                     Q(status=SubmissionStatus.DISCREPANCY) | Q(coverage__verdict="discrepancy"))
                 .values_list("pk", flat=True)) if sub.agent_id else []
    return {"linked_discrepancies": sorted(discrepant), "linked_uploads": len(chain),
            "agent_discrepancies": sorted(agent)}


def _not_verified_because(cov: dict, rerun: dict | None, submission_id: int) -> list[str]:
    why = []
    if not rerun or not rerun["ran"]:
        reason = (rerun or {}).get("reason") or ""
        if (rerun or {}).get("not_runnable"):
            whose = ("the submission" if rerun.get("not_runnable_by") == "submission"
                     else "the site")
            why.append(f"not re-runnable because of {whose}: {reason}")
        else:
            why.append("not re-run by the site" + (f" ({reason})" if reason else ""))
    elif rerun.get("decision") == "inconclusive":
        why.append(f"inconclusive: {rerun.get('decision_reason') or 'more re-runs needed'}")
    plan = (rerun or {}).get("plan")
    if plan and not plan["powered"]:
        why.append(f"re-run underpowered: the site's design {plan['sentence']}")
    if cov.get("linked_discrepancies"):
        why.append("linked to discrepant submission"
                   f"{'s' if len(cov['linked_discrepancies']) > 1 else ''} "
                   + ", ".join(str(s) for s in cov["linked_discrepancies"]))
    if cov["regraded"] < cov["counted"]:
        why.append(f"{cov['counted'] - cov['regraded']} of {cov['counted']} counted trials not "
                   "re-graded")
    if cov["passes_uncovered"]:
        why.append(f"{cov['passes_uncovered']} of {cov['passes']} counted passes neither "
                   "reproduced nor re-run")
    if cov.get("awaiting_trajectory_judge"):
        n = cov["awaiting_trajectory_judge"]
        why.append(f"{n} counted pass{'' if n == 1 else 'es'} awaiting the trajectory judge")
    if cov.get("trajectory_suspicious"):
        n = cov["trajectory_suspicious"]
        why.append(f"{n} counted pass{'' if n == 1 else 'es'} the trajectory judge found "
                   "suspicious (maintainer's queue)")
    if cov["flagged"]:
        why.append(f"{cov['flagged']} trial{'' if cov['flagged'] == 1 else 's'} with an open "
                   "flag")
    return why


def _store(submission_id: int, coverage: dict) -> None:
    """Store the coverage; a submission still waiting for a maintainer takes the verdict as its
    status too (an audited change); a published one keeps its status and shows the badge."""
    sub = Submission.objects.select_for_update().get(pk=submission_id)
    verdict = coverage["verdict"]
    fields = {"coverage": coverage, "is_verified": verdict == SubmissionStatus.VERIFIED,
              "updated_at": timezone.now()}
    if sub.status in VERDICT_STATUSES and sub.status != verdict:
        fields["status"] = verdict
        SubmissionEvent.objects.create(
            submission=sub, from_status=sub.status, to_status=verdict,
            note=f"verdict recomputed after a change to its trials: {verdict}")
    Submission.objects.filter(pk=submission_id).update(**fields)


VERDICT_STATUSES = (SubmissionStatus.VERIFIED, SubmissionStatus.CONSISTENT,
                    SubmissionStatus.DISCREPANCY)


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
