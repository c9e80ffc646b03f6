"""The X-ray LLM judge's part of a verification: the trials awaiting it, the judges and prompt
versions that gave its verdicts, and how many judge requests its cache answered. The judge
itself runs inside the verifier (CheckContext.grade_outputs); this check runs nothing."""

from __future__ import annotations

from evaluation.judge.synthetic import is_synthetic
from submissions.models import CheckKind, CheckStatus
from submissions.verification.checks.base import Check, Contribution


def judge_summary(checks) -> dict:
    # The X-ray judge's rows only (the trajectory judge's have a judge_model too).
    checks = checks.exclude(kind=CheckKind.TRAJECTORY_JUDGE)
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
        # make run's synthetic judge (evaluation/judge/synthetic.py) gave some of them.
        "synthetic": any(is_synthetic(m) for m, _ in judges),
        "requests": requests,
        "cache_hits": hits,
        "cache_hit_ratio": hits / requests if requests else None,
    }


class Judge(Check):
    kind = "judge"
    title = "X-ray judge"
    runs = ("nothing of its own: the verifier of an X-ray task asks the configured LLM judge "
            "(or make run's synthetic judge) through the site's gateway")
    contributes = ("trials awaiting a judge are not scored by the site (flag awaiting_judge) "
                   "and keep their claimed outcome; never a discrepancy")
    report_order = 5

    def summarize(self, job, checks) -> Contribution:
        data = judge_summary(checks)
        parts = []
        if data["awaiting_trials"]:
            parts.append(f"{len(data['awaiting_trials'])} awaiting the X-ray judge (not scored)")
        if data["synthetic"]:
            parts.append("X-ray graded by the synthetic judge (a rule, not an LLM)")
        return Contribution("judge", data, headline="; ".join(parts))


CHECK = Judge()
