"""Replay: the shell and file-edit tool calls recorded in a trial's ATIF trajectory, run
again in a fresh agent container, and the result graded."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from django.db import transaction

from evaluation import agents
from evaluation.judge import cache as judging
from evaluation.replay import plan_from_trajectory
from submissions.models import (
    FLAG_NOT_REPLAYABLE,
    CheckKind,
    CheckStatus,
    Outcome,
    Trial,
    TrialCheck,
    VerificationLevel,
)
from submissions.verification.checks import base
from submissions.verification.sample import secret_rank
from submissions.verification.checks.base import (
    REPLAY_LOG_KEPT,
    Check,
    CheckContext,
    Contribution,
    Result,
    claimed_reward,
    grader_digest,
    grader_version,
    load_trajectory,
    materialize_outputs,
    outputs_digest,
    same,
    task_dir_of,
)

FLAG_REPLAY = "replay_mismatch"


class Replay(Check):
    kind = CheckKind.REPLAY
    title = "Replay"
    runs = ("the shell and file-edit tool calls recorded in the trial's ATIF trajectory, in a "
            "fresh agent container, then the verifier on what they leave")
    contributes = ("every counted pass and a few failures; a replay that grades the same as "
                   "the submitted output raises the trial's level; a different grade flags "
                   "replay_mismatch (a discrepancy); an unknown tool is reported as "
                   "not_replayable")
    report_order = 1

    def run(self, ctx: CheckContext) -> None:
        done = ctx.done(self.kind)
        ctx.parallel(lambda t: self.check(ctx, t), [t for t in self.sample(ctx) if t.pk not in done])

    def sample(self, ctx: CheckContext) -> list[Trial]:
        if ctx.rescore:  # only the passes the re-score creates; the rest were replayed before
            return ctx.rescore_new_passes()
        # Every claimed pass, and every trial this job's re-grade made a pass: each counted pass
        # must be replayed (or re-run) for the submission to be verified.
        site_passes = set(Trial.objects.filter(submission=ctx.sub, success=True)
                          .values_list("pk", flat=True))
        passes = [t for t in ctx.trials if t.claimed_success or t.pk in site_passes]
        passing = passes if ctx.config["replay_passing"] else []
        failing = [t for t in ctx.trials if t not in passes
                   and t.claimed_outcome != Outcome.INFRA_ERROR]
        k = min(len(failing), max(0, int(ctx.config["replay_failing"])))
        # Which failures are replayed follows the site secret, not a public seed and the id.
        digest = ctx.sub.archive_sha256 or str(ctx.sub.pk)
        ranked = sorted(failing, key=lambda t: secret_rank(
            purpose="replay", digest=digest, key=f"{t.benchmark_task.name}\x1f{t.attempt}"))
        sample = passing + sorted(ranked[:k], key=lambda t: t.pk)
        return sample[: max(0, int(ctx.config["replay_max"]))]

    def check(self, ctx: CheckContext, trial: Trial) -> None:
        claimed = claimed_reward(trial)
        trajectory = load_trajectory(trial)
        if trajectory is None:
            with transaction.atomic():  # check row + trial score: both or neither (R7)
                ctx.record(CheckKind.REPLAY, trial=trial, res=Result(
                    CheckStatus.NOT_REPLAYABLE, claimed_reward=claimed, flags=[FLAG_NOT_REPLAYABLE],
                    reason="no readable ATIF trajectory was submitted for this trial"))
                base.set_trial_flag(trial.pk, FLAG_NOT_REPLAYABLE, True)
            return
        plan = plan_from_trajectory(trajectory)
        if not plan.replayable:
            with transaction.atomic():  # check row + trial score: both or neither (R7)
                ctx.record(CheckKind.REPLAY, trial=trial, res=Result(
                    CheckStatus.NOT_REPLAYABLE, claimed_reward=claimed, flags=[FLAG_NOT_REPLAYABLE],
                    reason="tools the site cannot replay: " + ", ".join(plan.unknown_tools),
                    detail={"plan": plan.describe()}))
                base.set_trial_flag(trial.pk, FLAG_NOT_REPLAYABLE, True)
            return
        task_dir = task_dir_of(trial.benchmark_task)
        t0 = time.time()
        reference = TrialCheck.objects.filter(
            job=ctx.job, trial=trial, kind=CheckKind.REGRADE).first()
        with tempfile.TemporaryDirectory(prefix="hab-replay-") as tmp:
            tmp = Path(tmp)
            (tmp / "submitted").mkdir()
            materialize_outputs(trial, task_dir, tmp / "submitted")
            run = agents.run_site_agent(
                agents.SiteAgent(kind="replay", name="replay"), task_dir,
                job_id=ctx.job_id(f"t{trial.pk}-rp"), attempt=ctx.job.attempt,
                out_dir=tmp / "replayed", trajectory=trajectory)
            replay_digest = outputs_digest(tmp / "replayed" / "workspace")
            sub_digest = outputs_digest(tmp / "submitted" / "workspace")
            try:
                v = ctx.grade_outputs(trial, task_dir, tmp / "replayed", f"t{trial.pk}-rp")
            except judging.JudgeNotConfigured as exc:
                ctx.awaiting_judge(CheckKind.REPLAY, trial, exc)
                return
        replay_reward = v.reward if v.reward is not None else 0.0
        submitted_reward = (reference.verified_reward if reference is not None
                            and reference.verified_reward is not None else claimed)
        reproduced = same(replay_reward, submitted_reward)
        identical = bool(replay_digest) and replay_digest == sub_digest
        reason = "" if reproduced else (
            f"the recorded commands produce an output graded {replay_reward:g}; the submitted "
            f"output is graded {submitted_reward:g}")
        if run.result.reasons:
            reason = (reason + f" (replay: {run.result.reason})").strip()
        with transaction.atomic():  # check row + trial score: both or neither (R7)
            ctx.record(CheckKind.REPLAY, trial=trial, res=Result(
                CheckStatus.MATCH if reproduced else CheckStatus.MISMATCH,
                verified_reward=replay_reward, claimed_reward=claimed, reproduced=reproduced,
                flags=[] if reproduced else [FLAG_REPLAY], reason=reason,
                detail={"plan": plan.describe(), "output_identical": identical,
                        "collected": run.collected, "missing": run.missing,
                        "log_tail": run.result.text[-2000:],
                        # What the runner saw the replay do, for the screen.
                        "activity": {"written": run.written,
                                     "log": run.result.text[-REPLAY_LOG_KEPT:],
                                     "trace": run.trace[-REPLAY_LOG_KEPT:]},
                        **({"judge": v.judge} if v.judge else {})},
                grader_version=grader_version(task_dir, v), grader_digest=grader_digest(task_dir),
                duration_s=time.time() - t0,
                judge=v.judge))
            base.set_trial_flag(trial.pk, FLAG_REPLAY, not reproduced,
                            level=VerificationLevel.REPRODUCED if reproduced else None)


    def summarize(self, job, checks) -> Contribution:
        mine = checks.filter(kind=self.kind)
        mismatched = sorted(mine.filter(status=CheckStatus.MISMATCH)
                            .values_list("trial_id", flat=True))
        not_replayable = sorted(mine.filter(status=CheckStatus.NOT_REPLAYABLE)
                                .values_list("trial_id", flat=True))
        checked = mine.count()
        headline = ""
        if checked:
            headline = (f"{mine.filter(status=CheckStatus.MATCH).count()}/{checked} replays "
                        "reproduce"
                        + (f" ({len(not_replayable)} not replayable)" if not_replayable else ""))
        return Contribution("replay", {"checked": checked, "mismatched_trials": mismatched,
                                       "not_replayable_trials": not_replayable},
                            headline=headline, contradicts=bool(mismatched))


CHECK = Replay()
