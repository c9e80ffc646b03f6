"""Re-grade: every trial's submitted output, graded again by the site in a fresh verifier
container that alone receives the hidden answer."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from django.db import transaction

from evaluation import runner
from evaluation.judge import cache as judging
from submissions.models import FLAG_AWAITING_JUDGE, CheckKind, CheckStatus, Outcome, Trial
from submissions.verification.checks import base
from submissions.verification.checks.base import (
    Check,
    CheckContext,
    Contribution,
    Result,
    claimed_reward,
    grader_digest,
    grader_version,
    materialize_outputs,
    same,
    task_dir_of,
)

FLAG_REGRADE = "regrade_mismatch"


class Regrade(Check):
    kind = CheckKind.REGRADE
    title = "Re-grade"
    runs = ("the task's verifier on the trial's submitted output (declared outputs only), in a "
            "fresh container that alone receives the hidden answer")
    contributes = ("the trial's verified reward, which decides its outcome; level re-graded; "
                   "a grade different from the claim flags regrade_mismatch (a discrepancy)")
    report_order = 0

    def run(self, ctx: CheckContext) -> None:
        done = ctx.done(self.kind)
        ctx.progress()
        ctx.parallel(lambda t: self.check(ctx, t), [t for t in ctx.trials if t.pk not in done])

    def check(self, ctx: CheckContext, trial: Trial) -> None:
        claimed = claimed_reward(trial)
        if (trial.claimed_outcome == Outcome.INFRA_ERROR and not ctx.rescore
                and Trial.objects.filter(pk=trial.pk, infra_confirmed=True).exists()):
            # Confirmed (by this job's re-attempt or a maintainer): not graded, not counted.
            with transaction.atomic():
                ctx.record(CheckKind.REGRADE, trial=trial, res=Result(
                    CheckStatus.SKIPPED, reason="infrastructure error confirmed: not graded, "
                    "not counted (see the infrastructure re-attempt)"))
            ctx.progress()
            return
        # A claimed infrastructure error is graded too: the site decides what it counts as
        # (site_outcome); having claimed no grade, it is no mismatch.
        no_claim = trial.claimed_outcome == Outcome.INFRA_ERROR
        task_dir = task_dir_of(trial.benchmark_task)
        t0 = time.time()
        with tempfile.TemporaryDirectory(prefix="hab-regrade-") as tmp:
            out = Path(tmp) / "outputs"
            out.mkdir()
            got = materialize_outputs(trial, task_dir, out)
            try:
                v = ctx.grade_outputs(trial, task_dir, out, f"t{trial.pk}-rg")
            except judging.JudgeNotConfigured as exc:
                if ctx.rescore:  # never half a re-score: retried, old scores kept meanwhile
                    raise runner.InfrastructureError(f"re-score needs the judge: {exc}") from exc
                ctx.awaiting_judge(CheckKind.REGRADE, trial, exc)
                ctx.progress()
                return
            except (runner.ImageBuildError, runner.TaskEnvironmentError) as exc:
                if not no_claim or ctx.rescore:
                    raise
                # An unconfirmed claimed infrastructure error (not re-attempted: over the cap)
                # whose environment fails: not graded; it stays a failure, the row says why.
                with transaction.atomic():
                    ctx.record(CheckKind.REGRADE, trial=trial, res=Result(
                        CheckStatus.ERROR, reason=(
                            f"not graded: the task environment failed ({exc}); the claimed "
                            "infrastructure error is not confirmed (not re-attempted), so the "
                            "trial counts as a failure")[:5000]))
                ctx.progress()
                return
        verified = v.reward if v.reward is not None else 0.0
        match = no_claim or same(verified, claimed)
        reason = "" if match else f"re-grade gives {verified:g}, the submission claims {claimed:g}"
        if no_claim:
            reason = (f"the submission reports an infrastructure error; the site grades the "
                      f"collected output {verified:g}")
        if v.reward is None:
            reason = f"verifier gave no reward ({v.error}); counted as 0. " + reason
        if got["missing"]:
            reason += f" (submitted output missing: {', '.join(got['missing'])})"
        version = grader_version(task_dir, v)
        flags = [] if match else [FLAG_REGRADE]
        if ctx.rescore:
            # Judged against the site's previous score, not the claim (made under the old
            # grader): a re-score never flags the submitter.
            before, flags = trial.verified_reward, []
            reason = (f"re-score with {version}: {verified:g} (was "
                      f"{'not re-graded' if before is None else f'{before:g}'} with "
                      f"{trial.grader_version or 'an unversioned grader'})")
        with transaction.atomic():  # check row + trial score: both or neither (R7)
            ctx.record(CheckKind.REGRADE, trial=trial, res=Result(
                CheckStatus.MATCH if match else CheckStatus.MISMATCH,
                verified_reward=verified, claimed_reward=claimed,
                flags=flags, reason=reason.strip(),
                detail={"rewards": v.rewards, "outputs": got, "verifier": v.result.reason,
                        "grader": v.grader, **({"judge": v.judge} if v.judge else {})},
                grader_version=version, grader_digest=grader_digest(task_dir),
                duration_s=time.time() - t0, judge=v.judge))
            if not ctx.rescore:
                base.set_trial_flag(trial.pk, FLAG_REGRADE, not match, verified_reward=verified,
                                grader_version=version, clear=(FLAG_AWAITING_JUDGE,),
                                judge_model=(v.judge or {}).get("model", ""),
                                judge_prompt_version=(v.judge or {}).get("prompt_version", ""))
        ctx.progress()


    def summarize(self, job, checks) -> Contribution:
        mine = checks.filter(kind=self.kind)
        mismatched = sorted(mine.filter(status=CheckStatus.MISMATCH)
                            .values_list("trial_id", flat=True))
        checked = mine.count()
        # Only a re-grade that ran and agreed matches: one awaiting the judge (or skipped) does not.
        matched = mine.filter(status=CheckStatus.MATCH).count()
        return Contribution(
            "regrade", {"checked": checked, "mismatched_trials": mismatched,
                        "skipped": mine.filter(status=CheckStatus.SKIPPED).count()},
            headline=f"{matched}/{checked} re-grades match", contradicts=bool(mismatched))


CHECK = Regrade()
