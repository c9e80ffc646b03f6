"""The reward-hacking screen: deterministic rules (evaluation/screen_rules.toml) over every
counted pass's trajectory and its replay's container activity."""

from __future__ import annotations

from django.db import transaction

from submissions.models import CheckKind, CheckStatus, Outcome, Trial, TrialCheck, site_outcome
from submissions.trials import trial_screen_record
from submissions.verification.checks.base import (
    Check,
    CheckContext,
    Contribution,
    Result,
    screen_trial,
)


class Screen(Check):
    kind = CheckKind.SCREEN
    title = "Reward-hacking screen"
    runs = ("the rules of evaluation/screen_rules.toml over each counted pass's trajectory and "
            "its replay's container activity (no container of its own)")
    contributes = ("a tripped rule flags the trial reward_hack:RH<n> and counts it as a "
                   "failure until a maintainer clears it; an open flag is a discrepancy")
    report_order = 2

    def applies(self, ctx: CheckContext) -> bool:
        # Not optional: every counted pass is screened, after the replay (whose container
        # activity it reads). A re-score (R11) changes grades only: its trajectories were
        # screened when verified (`manage.py screen_trials` for new rules).
        return not ctx.rescore

    def run(self, ctx: CheckContext) -> None:
        done = ctx.done(self.kind)
        ctx.parallel(lambda t: self.check(ctx, t), [t for t in ctx.trials if t.pk not in done])

    def check(self, ctx: CheckContext, trial: Trial) -> None:
        """Screen a counted pass (by its grade: claimed, re-graded, infra not confirmed) with the
        rules of evaluation/screen_rules.toml over its trajectory and its replay's activity."""
        t = Trial.objects.only("claimed_outcome", "verified_reward", "infra_confirmed").get(
            pk=trial.pk)
        if site_outcome(claimed=t.claimed_outcome, verified_reward=t.verified_reward,
                        infra_confirmed=t.infra_confirmed) != Outcome.PASSED:
            return
        replay = TrialCheck.objects.filter(job=ctx.job, trial=trial,
                                           kind=CheckKind.REPLAY).first()
        activity = (replay.detail or {}).get("activity") if replay is not None else None
        rules, hits, evidence, trajectory = screen_trial(trial, activity=activity)
        tripped = sorted({h.rule for h in hits}, key=lambda r: (len(r), r))
        reason = "; ".join(
            f"{h.rule} {rules.get(h.rule).title.lower()}: {h.source}"
            f"{f' (step {h.step})' if h.step is not None else ''}: {h.excerpt}"
            for h in hits if rules.get(h.rule))
        if trajectory is None:
            reason = ("no readable trajectory; screened the replay's activity only. "
                      if activity else "no readable trajectory and no replay: nothing to "
                      "screen. ") + reason
        with transaction.atomic():  # check row + trial outcome: both or neither (R7)
            ctx.record(CheckKind.SCREEN, trial=trial, res=Result(
                CheckStatus.MISMATCH if tripped else CheckStatus.MATCH,
                flags=[f"reward_hack:{r}" for r in tripped], reason=reason.strip(),
                detail={"rules_version": rules.version, "rules": [r.id for r in rules.rules],
                        "hits": [h.as_dict() for h in hits], "evidence_items": len(evidence),
                        "trajectory": trajectory is not None, "replay_activity": bool(activity)},
                grader_version=rules.version))
            trial_screen_record(trial_id=trial.pk, hits=tripped)


    def summarize(self, job, checks) -> Contribution:
        mine = checks.filter(kind=self.kind)
        screened = mine.count()
        tripped = set(mine.filter(status=CheckStatus.MISMATCH).values_list("trial_id", flat=True))
        # A maintainer may already have cleared what this screen found (a re-verification).
        flagged = sorted(t.pk for t in Trial.objects.filter(pk__in=tripped).only(
            "screen_hits", "screen_cleared") if t.screen_open)
        headline = (f"reward-hacking screen: {len(flagged)}/{screened} counted passes flagged"
                    if screened else "")
        return Contribution("screen", {"checked": screened, "flagged_trials": flagged},
                            headline=headline, contradicts=bool(flagged))


CHECK = Screen()
