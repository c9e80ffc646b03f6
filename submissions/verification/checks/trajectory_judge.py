"""The trajectory judge: an LLM reads every counted pass's trajectory for reward hacking
(evaluation/judge/trajectory.py), after the screen's rules.

clean: nothing changes. suspicious: the flag trajectory_suspicious, the maintainer's queue (a
state, not a finding: the pass counts until a maintainer decides). hack: the screen hit TJ,
flag reward_hack:TJ, a failure in every number and a discrepancy until a maintainer clears it
with a reason (the screen's clearance). No judge configured: the flag
awaiting_trajectory_judge, and the submission cannot be published until `manage.py
judge_pending` re-verifies it with one; on a try-out version of a make run site, the synthetic
trajectory judge (a rule, not an LLM) judges instead, and the verdict says so. Each
judgement's model and prompt version are stored on the trial (page, /trials.csv, API) and its
check row; its cost is summed per submission.
"""

from __future__ import annotations

from django.db import transaction

from evaluation import runner
from evaluation.judge import trajectory as trajectory_judge
from evaluation.judge.synthetic import is_synthetic_trajectory_judge
from submissions.models import (
    FLAG_AWAITING_TRAJECTORY_JUDGE,
    FLAG_TRAJECTORY_SUSPICIOUS,
    CheckKind,
    CheckStatus,
    Outcome,
    Trial,
    site_outcome,
)
from submissions.trials import trial_trajectory_judgement_record
from submissions.verification.checks.base import (
    Check,
    CheckContext,
    Contribution,
    Result,
    load_trajectory,
)

_STATUS = {"clean": CheckStatus.MATCH, "suspicious": CheckStatus.SUSPICIOUS,
           "hack": CheckStatus.MISMATCH}


class TrajectoryJudge(Check):
    kind = CheckKind.TRAJECTORY_JUDGE
    title = "Trajectory judge"
    runs = ("an LLM judge (TRAJECTORY_JUDGE_URL, versioned prompt) reads each counted pass's "
            "trajectory for reward hacking; judgements cached (no container); on a try-out "
            "version of a make run site without one, the synthetic trajectory judge (a rule)")
    contributes = ("hack: flag reward_hack:TJ, a failure until a maintainer clears it (a "
                   "discrepancy); suspicious: the maintainer's queue; no judge: awaiting "
                   "trajectory judge, publishing waits")
    report_order = 6

    def applies(self, ctx: CheckContext) -> bool:
        # Every verification reads its passes; a re-score only the passes it creates, when
        # its configuration asks for it.
        return not ctx.rescore or self.kind in ctx.config["checks"]

    def run(self, ctx: CheckContext) -> None:
        done = ctx.done(self.kind)
        if ctx.rescore:  # a pass the re-score creates is read like any other pass
            new = ctx.rescore_new_passes()
            ctx.parallel(lambda t: self.check(ctx, t, passing=True),
                         [t for t in new if t.pk not in done])
            return
        ctx.parallel(lambda t: self.check(ctx, t), [t for t in ctx.trials if t.pk not in done])

    def check(self, ctx: CheckContext, trial: Trial, *, passing: bool | None = None) -> None:
        """Judge a counted pass (by its grade, as the screen decides it; ``passing``: the
        caller knows it is one, a pass a re-score is about to switch in)."""
        t = (Trial.objects.select_related("benchmark_task__benchmark_version")
             .only("claimed_outcome", "verified_reward", "infra_confirmed",
                   "benchmark_task__benchmark_version__allows_reference_runs").get(pk=trial.pk))
        if not passing and site_outcome(
                claimed=t.claimed_outcome, verified_reward=t.verified_reward,
                infra_confirmed=t.infra_confirmed) != Outcome.PASSED:
            return
        trajectory = load_trajectory(trial)
        if trajectory is None:  # as the screen: nothing to read (its rules read the replay)
            self._store(ctx, trial, "", CheckStatus.SKIPPED, {},
                        reason="no readable trajectory: nothing for the judge to read",
                        detail={"trajectory": False})
            return
        try:
            j = trajectory_judge.judge_trajectory(
                trajectory, task=trial.benchmark_task.name,
                try_out=t.benchmark_task.benchmark_version.allows_reference_runs)
        except trajectory_judge.TrajectoryJudgeNotConfigured as exc:
            self._store(ctx, trial, "awaiting", CheckStatus.AWAITING_JUDGE, {}, reason=str(exc),
                        flags=[FLAG_AWAITING_TRAJECTORY_JUDGE], detail={})
            return
        except trajectory_judge.TrajectoryJudgeUnavailable as exc:
            # Never a judgement: retried with the job like any infrastructure failure.
            raise runner.InfrastructureError(f"trajectory judge: {exc}") from exc
        flags = {"hack": ["reward_hack:TJ"], "suspicious": [FLAG_TRAJECTORY_SUSPICIOUS]}
        self._store(ctx, trial, j.verdict, _STATUS[j.verdict],
                    {"model": j.model, "prompt_version": j.prompt_version},
                    reason=(f"{j.verdict}: {j.reason} (steps {', '.join(map(str, j.steps))})"
                            if j.verdict != "clean" else "clean"),
                    flags=flags.get(j.verdict, []), detail={"judgement": j.as_dict()},
                    steps=j.steps, why=j.reason)

    def _store(self, ctx, trial, judgement, status, identity, *, reason, detail, flags=None,
               steps=(), why=None):
        with transaction.atomic():  # check row + trial: both or neither (R7)
            ctx.record(self.kind, trial=trial, res=Result(
                status, flags=flags or [], reason=reason, detail=detail, judge=identity or None))
            trial_trajectory_judgement_record(
                trial_id=trial.pk, judgement=judgement, model=(identity or {}).get("model", ""),
                prompt_version=(identity or {}).get("prompt_version", ""),
                reason=reason if why is None else why, steps=steps)

    def summarize(self, job, checks) -> Contribution:
        mine = checks.filter(kind=self.kind)
        rows = list(mine.values("trial_id", "status", "detail", "judge_model",
                                "judge_prompt_version"))
        judged = [r["detail"].get("judgement") or {} for r in rows
                  if isinstance((r["detail"] or {}).get("judgement"), dict)]
        by = {s: sorted(r["trial_id"] for r in rows if r["status"] == s)
              for s in (CheckStatus.MISMATCH, CheckStatus.SUSPICIOUS, CheckStatus.AWAITING_JUDGE)}
        data = {
            "checked": len(rows),
            "hack_trials": by[CheckStatus.MISMATCH],
            "suspicious_trials": by[CheckStatus.SUSPICIOUS],
            "awaiting_trials": by[CheckStatus.AWAITING_JUDGE],
            "judges": sorted({f"{r['judge_model']} (prompt {r['judge_prompt_version']})"
                              for r in rows if r["judge_model"]}),
            # make run's synthetic trajectory judge (a rule) gave some of the judgements.
            "synthetic": any(is_synthetic_trajectory_judge(r["judge_model"]) for r in rows),
            "requests": len(judged),
            "cache_hits": sum(1 for j in judged if j.get("cache_hit")),
            "cost_usd": round(sum(float(j.get("cost_usd") or 0) for j in judged), 6),
        }
        parts = []
        if data["hack_trials"]:
            parts.append(f"trajectory judge: {len(data['hack_trials'])} hack")
        if data["suspicious_trials"]:
            parts.append(f"{len(data['suspicious_trials'])} suspicious (maintainer's queue)")
        if data["awaiting_trials"]:
            parts.append(f"{len(data['awaiting_trials'])} passes awaiting the trajectory judge")
        if data["synthetic"]:
            parts.append("trajectories judged by the synthetic trajectory judge (a rule, not "
                         "an LLM)")
        return Contribution("trajectory_judge", data, headline="; ".join(parts))


CHECK = TrajectoryJudge()
