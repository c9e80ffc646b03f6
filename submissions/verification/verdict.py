"""The verdict of a verification job (re-grade and replay mismatches, the re-run's Fisher exact
test) and the status page's view of a job's progress."""

from __future__ import annotations

from django.conf import settings
from scipy.stats import binom, fisher_exact

from evaluation.synthetic_judge import is_synthetic
from submissions.models import (
    CheckKind,
    CheckStatus,
    JobStatus,
    Submission,
    SubmissionStatus,
    Trial,
    TrialCheck,
    VerificationJob,
)


def fisher_exact_two_sided(a: int, b: int, c: int, d: int) -> float:
    """p of the 2x2 table [[a, b], [c, d]] (re-run pass/fail vs claimed pass/fail)."""
    if (a + b) == 0 or (c + d) == 0:
        return 1.0
    return float(fisher_exact([[a, b], [c, d]], alternative="two-sided").pvalue)


POWER_TARGET = 0.8


def rerun_power(n_rerun: int, c_pass: int, c_fail: int, alpha: float,
                target: float = POWER_TARGET) -> dict:
    """What gap the re-run's Fisher test can detect with n_rerun runs against this claim.

    Conditional on the claimed table, a true re-run success rate q gives the test's power
    sum(Binomial(n_rerun, q).pmf(x) for the x it rejects at alpha). The detectable rate is the
    highest q at or below the claimed rate with power >= target (a drop the test finds 8 times
    in 10); None when even q = 0 (every re-run fails) is found less often than that.
    """
    claimed_rate = c_pass / max(1, c_pass + c_fail)
    rejects = [x for x in range(n_rerun + 1)
               if fisher_exact_two_sided(x, n_rerun - x, c_pass, c_fail) < alpha]

    def power(q: float) -> float:
        return float(sum(binom.pmf(x, n_rerun, q) for x in rejects))

    detectable = None
    steps = int(round(claimed_rate * 200))
    for i in range(steps, -1, -1):  # from the claimed rate down, in half-point steps
        q = i / 200
        if power(q) >= target:
            detectable = q
            break
    at_zero = power(0.0)
    runs = f"{n_rerun} re-run trial{'s' if n_rerun != 1 else ''}"
    claim = f"the claimed {claimed_rate:.0%} ({c_pass}/{c_pass + c_fail})"
    if detectable is None:
        statement = (f"With {runs} against {claim}, the Fisher test (alpha {alpha:g}) cannot "
                     f"detect any gap at {target:.0%} power: even if every re-run failed it would "
                     f"flag the difference only {at_zero:.0%} of the time.")
    else:
        gap = claimed_rate - detectable
        statement = (f"With {runs} against {claim}, the Fisher test (alpha {alpha:g}) detects, "
                     f"at {target:.0%} power, a true re-run success rate of {detectable:.1%} or "
                     f"lower (a gap of {gap * 100:.1f} points or more); smaller gaps would "
                     f"usually go unnoticed.")
    return {"target": target, "alpha": alpha, "claimed_rate": claimed_rate,
            "detectable_rate": detectable,
            "detectable_gap": None if detectable is None else claimed_rate - detectable,
            "power_if_all_fail": at_zero, "statement": statement}


def rerun_statistics(job: VerificationJob) -> dict | None:
    reruns = list(TrialCheck.objects.filter(job=job, kind=CheckKind.RERUN))
    ran = [r for r in reruns if r.status in (CheckStatus.MATCH, CheckStatus.MISMATCH)]
    if not ran:
        reason = reruns[0].reason if reruns else "re-run not configured"
        return {"ran": False, "reason": reason, "significant": False}
    tasks = {r.benchmark_task_id for r in ran}
    claimed = Trial.objects.filter(submission_id=job.submission_id, benchmark_task_id__in=tasks)
    c_pass = claimed.filter(claimed_success=True).count()
    c_fail = claimed.count() - c_pass
    r_pass = sum(1 for r in ran if (r.verified_reward or 0) >= 1.0)
    r_fail = len(ran) - r_pass
    p = fisher_exact_two_sided(r_pass, r_fail, c_pass, c_fail)
    alpha = (job.config or {}).get("rerun_alpha", settings.VERIFICATION_RERUN_ALPHA)
    return {
        "ran": True,
        "tasks": len(tasks),
        "rerun_success": r_pass,
        "rerun_runs": len(ran),
        "rerun_rate": r_pass / len(ran),
        "claimed_success": c_pass,
        "claimed_runs": c_pass + c_fail,
        "claimed_rate": c_pass / max(1, c_pass + c_fail),
        "test": "Fisher exact, two-sided (re-run vs claimed pass/fail on the same tasks)",
        "p_value": p,
        "alpha": alpha,
        "significant": p < alpha,
        "power": rerun_power(len(ran), c_pass, c_fail, alpha),
        "seconds_per_trial": (sum(r.duration_s or 0.0 for r in ran) / len(ran)),
    }


def rerun_passed_tasks(job: VerificationJob) -> set[int]:
    """Tasks whose re-run passed at least once, when the re-run as a whole agrees with the
    claim (no significant difference); their counted passes are covered by the re-run."""
    rerun = rerun_statistics(job)
    if not rerun or not rerun["ran"] or rerun["significant"]:
        return set()
    return set(TrialCheck.objects.filter(job=job, kind=CheckKind.RERUN, status=CheckStatus.MATCH)
               .values_list("benchmark_task_id", flat=True))


def verification_summary(job: VerificationJob) -> dict:
    checks = TrialCheck.objects.filter(job=job)

    def count(kind, status=None):
        qs = checks.filter(kind=kind)
        return qs.filter(status=status).count() if status else qs.count()

    regrade_mismatch = sorted(checks.filter(kind=CheckKind.REGRADE, status=CheckStatus.MISMATCH)
                              .values_list("trial_id", flat=True))
    replay_mismatch = sorted(checks.filter(kind=CheckKind.REPLAY, status=CheckStatus.MISMATCH)
                             .values_list("trial_id", flat=True))
    not_replayable = sorted(checks.filter(kind=CheckKind.REPLAY,
                                          status=CheckStatus.NOT_REPLAYABLE)
                            .values_list("trial_id", flat=True))
    screened = count(CheckKind.SCREEN)
    screen_tripped = set(checks.filter(kind=CheckKind.SCREEN, status=CheckStatus.MISMATCH)
                         .values_list("trial_id", flat=True))
    # A maintainer may already have cleared what this screen found (a re-verification).
    screen_flagged = sorted(t.pk for t in Trial.objects.filter(pk__in=screen_tripped).only(
        "screen_hits", "screen_cleared") if t.screen_open)
    rerun = rerun_statistics(job)
    discrepancy = bool(regrade_mismatch or replay_mismatch or screen_flagged
                       or (rerun and rerun["significant"]))
    verdict = SubmissionStatus.DISCREPANCY if discrepancy else SubmissionStatus.VERIFIED
    regraded = count(CheckKind.REGRADE)
    replayed = count(CheckKind.REPLAY)
    # Only a re-grade that ran and agreed matches: one awaiting the judge (or skipped) does not.
    parts = [f"{count(CheckKind.REGRADE, CheckStatus.MATCH)}/{regraded} re-grades match"]
    if replayed:
        parts.append(f"{count(CheckKind.REPLAY, CheckStatus.MATCH)}/{replayed} replays reproduce"
                     + (f" ({len(not_replayable)} not replayable)" if not_replayable else ""))
    if screened:
        parts.append(f"reward-hacking screen: {len(screen_flagged)}/{screened} counted passes "
                     "flagged")
    if rerun and rerun["ran"]:
        parts.append(f"re-run {rerun['rerun_success']}/{rerun['rerun_runs']} vs claimed "
                     f"{rerun['claimed_success']}/{rerun['claimed_runs']} "
                     f"(Fisher p={rerun['p_value']:.3g}"
                     f"{', significant' if rerun['significant'] else ''})")
    infra = {"claimed": count(CheckKind.INFRA),
             "confirmed_trials": _trial_ids(checks, CheckKind.INFRA, CheckStatus.MATCH),
             "not_confirmed_trials": _trial_ids(checks, CheckKind.INFRA, CheckStatus.MISMATCH),
             "not_attempted_trials": _trial_ids(checks, CheckKind.INFRA, CheckStatus.SKIPPED)}
    if infra["claimed"]:
        parts.append(f"infrastructure errors: {len(infra['confirmed_trials'])}/"
                     f"{infra['claimed']} claimed confirmed by the site's re-attempt"
                     + (f" ({len(infra['not_attempted_trials'])} not re-attempted)"
                        if infra["not_attempted_trials"] else ""))
    judge = judge_summary(checks)
    if judge["awaiting_trials"]:
        parts.append(f"{len(judge['awaiting_trials'])} awaiting the X-ray judge (not scored)")
    if judge["synthetic"]:
        parts.append("X-ray graded by the synthetic judge (a rule, not an LLM)")
    return {
        "verdict": str(verdict),
        "headline": f"{verdict}: " + "; ".join(parts),
        "judge": judge,
        "regrade": {"checked": regraded, "mismatched_trials": regrade_mismatch,
                    "skipped": count(CheckKind.REGRADE, CheckStatus.SKIPPED)},
        "replay": {"checked": replayed, "mismatched_trials": replay_mismatch,
                   "not_replayable_trials": not_replayable},
        "screen": {"checked": screened, "flagged_trials": screen_flagged},
        "rerun": rerun,
        "infra": infra,
    }


def _trial_ids(checks, kind: str, status: str) -> list[int]:
    return sorted(checks.filter(kind=kind, status=status).values_list("trial_id", flat=True))


def judge_summary(checks) -> dict:
    """The LLM judge's part of a job: trials awaiting it, the judges and prompt versions that
    gave its verdicts, and how many judge requests the cache answered."""
    records = [c["detail"]["judge"] for c in checks.exclude(judge_model="").values("detail")
               if isinstance((c["detail"] or {}).get("judge"), dict)]
    requests = sum(r.get("requests", 0) for r in records)
    hits = sum(r.get("cache_hits", 0) for r in records)
    judges = set(checks.exclude(judge_model="").values_list("judge_model",
                                                             "judge_prompt_version"))
    return {
        "awaiting_trials": sorted(checks.filter(kind=CheckKind.REGRADE,
                                                status=CheckStatus.AWAITING_JUDGE)
                                  .values_list("trial_id", flat=True)),
        "judges": sorted({f"{m} (prompt {v})" for m, v in judges}),
        # make run's synthetic judge (evaluation/synthetic_judge.py) gave some of them.
        "synthetic": any(is_synthetic(m) for m, _ in judges),
        "requests": requests,
        "cache_hits": hits,
        "cache_hit_ratio": hits / requests if requests else None,
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
