"""Infrastructure re-attempt: each trial the submission reports as an infrastructure error is
attempted again by the site, which alone decides whether it was one."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.db import transaction

from evaluation import agents, runner
from evaluation.judge import cache as judging
from evaluation.replay import plan_from_trajectory
from submissions.flags import FLAG_NO_CLAIMED_GRADE
from submissions.harbor import AGENT_EXCEPTIONS, TIMEOUT_EXCEPTIONS
from submissions.models import (
    CheckKind,
    CheckStatus,
    InfraConfirmation,
    Outcome,
    Trial,
)
from submissions.trials import trial_infra_confirm, trial_infra_unconfirm
from submissions.verification.checks.base import (
    Check,
    CheckContext,
    Contribution,
    Result,
    load_trajectory,
    task_dir_of,
)


class InfraReattempt(Check):
    kind = CheckKind.INFRA
    title = "Infrastructure re-attempt"
    runs = ("the harness again (or a replay of the recorded commands, or the bare environment) "
            "on each claimed infrastructure error, up to VERIFICATION_INFRA_REATTEMPT_MAX")
    contributes = ("confirms a claimed infrastructure error (the trial leaves the denominator) "
                   "only when the site's own attempt hits one too; otherwise the trial counts "
                   "as a failure. Not optional; never a discrepancy")
    report_order = 4

    def applies(self, ctx: CheckContext) -> bool:
        # The site decides what an infrastructure error is: each claimed one is re-attempted
        # (up to the cap) before the re-grade, which does not grade a confirmed one. Not
        # optional; a re-score (R11) changes grades only.
        return not ctx.rescore

    def run(self, ctx: CheckContext) -> None:
        claimed = [t for t in ctx.trials if t.claimed_outcome == Outcome.INFRA_ERROR]
        cap = max(0, int(ctx.config.get("infra_reattempt_max",
                                        settings.VERIFICATION_INFRA_REATTEMPT_MAX)))
        done = ctx.done(self.kind)
        # A judged trial whose verifier had no judge claims no grade and no infrastructure
        # error: nothing to re-attempt, the re-grade alone decides it.
        ungraded = [t for t in claimed if FLAG_NO_CLAIMED_GRADE in (t.flags or ())]
        for trial in ungraded:
            if trial.pk not in done:
                with transaction.atomic():
                    ctx.record(CheckKind.INFRA, trial=trial, res=Result(
                        CheckStatus.SKIPPED, reason=(
                            "no infrastructure error claimed: the submitter's verifier had no "
                            "judge and recorded no grade; the site's re-grade decides")))
        claimed = [t for t in claimed if t not in ungraded]
        for trial in claimed[cap:]:
            if trial.pk not in done:
                self.not_attempted(ctx, trial, cap)
        ctx.parallel(lambda t: self.check(ctx, t),
                     [t for t in claimed[:cap] if t.pk not in done])

    def not_attempted(self, ctx: CheckContext, trial: Trial, cap: int) -> None:
        with transaction.atomic():
            ctx.record(CheckKind.INFRA, trial=trial, res=Result(
                CheckStatus.SKIPPED, reason=(
                    f"not re-attempted: the site re-attempts at most {cap} claimed "
                    "infrastructure errors per submission (VERIFICATION_INFRA_REATTEMPT_MAX); "
                    "unconfirmed, it counts as a failure"),
                detail={"cap": cap}))

    def reattempt_agent(self, ctx: CheckContext, trial: Trial):
        """(mode, agent, trajectory, why not re-run): the harness itself when the site can run it (Harbor or
        a site agent), else a replay of the recorded commands, else the bare environment."""
        agent, why = ctx.rerun_agent()
        if agent is not None:
            return ("harbor" if agent.kind == "harbor" else "rerun"), agent, None, ""
        trajectory = load_trajectory(trial)
        if trajectory is not None and plan_from_trajectory(trajectory).replayable:
            return "replay", agents.SiteAgent(kind="replay", name="replay"), trajectory, why
        return "environment", agents.SiteAgent(kind="nop", name="nop"), None, why

    def check(self, ctx: CheckContext, trial: Trial) -> None:
        """Re-attempt a claimed infrastructure error in fresh containers: the agent phase (by
        _reattempt_agent), then the verifier on what it left. Only an infrastructure failure of
        the site's own attempt confirms the claim: the environment fails to build or start, the
        Harbor trial ends in an exception that is neither the agent's nor its timeout, or the
        verifier crashes, times out or reports an infrastructure error; a control container
        first proves the engine itself works (else the job is retried). An attempt that
        completes, whatever its grade, leaves the claim unconfirmed: a failure."""
        task_dir = task_dir_of(trial.benchmark_task)
        mode, agent, trajectory, why_not_rerun = self.reattempt_agent(ctx, trial)
        job_id = ctx.job_id(f"t{trial.pk}-if")
        t0 = time.time()
        failure, reward, note = "", None, ""
        detail: dict = {"mode": mode, "agent": agent.name}
        if why_not_rerun:
            detail["not_rerun"] = why_not_rerun
        with tempfile.TemporaryDirectory(prefix="hab-infra-") as tmp:
            tmp = Path(tmp)
            try:
                artifacts = tmp / "out"
                if mode == "harbor":
                    hb = agents.run_harbor_agent(agent, task_dir, job_id=job_id,
                                                 attempt=ctx.job.attempt, attempts=1,
                                                 work_dir=tmp / "harbor")
                    ht = hb.trials[0] if hb.trials else None
                    detail.update(harbor_job_s=hb.seconds, log_tail=hb.log_tail[-2000:])
                    if ht is None:
                        failure = f"Harbor ended without a trial: {hb.log_tail[-500:]}"
                    elif ht.exception_type and ht.exception_type not in (
                            AGENT_EXCEPTIONS | TIMEOUT_EXCEPTIONS):
                        failure = f"{ht.exception_type}: {ht.exception_message[:500]}"
                    else:
                        artifacts = ht.artifacts_dir
                        if ht.exception_type:
                            note = f"the agent's own end ({ht.exception_type})"
                else:
                    run = agents.run_site_agent(agent, task_dir, job_id=job_id,
                                                attempt=ctx.job.attempt, out_dir=artifacts,
                                                trajectory=trajectory)
                    detail["agent_phase"] = run.result.reason or "exited normally"
                    if run.result.container_died:
                        failure = f"the task container died during the agent phase " \
                                  f"({run.result.reason})"
                if not failure:
                    try:
                        v = ctx.grade_outputs(None, task_dir, artifacts, f"t{trial.pk}-if")
                    except judging.JudgeNotConfigured:
                        v = None
                        note = "its output awaits the X-ray judge"
                    if v is not None:
                        if v.result.timed_out or v.result.container_died:
                            failure = f"the verifier did not finish ({v.result.reason})"
                        else:
                            reward = v.reward
            except runner.ImageBuildError as exc:
                failure = f"the task environment failed to build: {exc}"
            except runner.TaskEnvironmentError as exc:
                failure = f"the task environment failed to start: {exc}"
            except runner.InfrastructureError as exc:
                # The verifier's own infrastructure error (no reward file) or the engine's:
                # the control run below tells them apart.
                failure = f"infrastructure error: {exc}"
        if failure:
            # Raises InfrastructureError (the job is retried) when the engine itself is broken.
            runner.engine_control_run(job_id=ctx.job_id(f"t{trial.pk}-ctl"),
                                      attempt=ctx.job.attempt)
        seconds = time.time() - t0
        detail["seconds"] = seconds
        how = {"harbor": f"re-ran {agent.name} with the real Harbor CLI",
               "rerun": f"re-ran the {agent.name} agent",
               "replay": "replayed the recorded commands",
               "environment": "started the task environment and ran the verifier on an empty "
                              "output (no re-runnable harness, no replayable trajectory)"}[mode]
        if failure:
            reason = f"confirmed: the site {how} and hit an infrastructure failure too: {failure}"
        else:
            reason = (f"not confirmed: the site {how} and it completed normally"
                      + (f" (verifier reward {reward:g})" if reward is not None else "")
                      + (f"; {note}" if note else "")
                      + "; the trial counts as a failure")
        with transaction.atomic():  # check row + trial outcome: both or neither (R7)
            ctx.record(CheckKind.INFRA, trial=trial, res=Result(
                CheckStatus.MATCH if failure else CheckStatus.MISMATCH,
                verified_reward=reward, reproduced=bool(failure), reason=reason, detail=detail,
                duration_s=seconds))
            current = Trial.objects.only("infra_confirmed", "infra_confirmed_by").get(pk=trial.pk)
            if failure and not current.infra_confirmed:
                trial_infra_confirm(trial_id=trial.pk, by=InfraConfirmation.SITE,
                                    reason=reason[:2000])
            elif not failure and current.infra_confirmed_by == InfraConfirmation.SITE:
                # An earlier job's re-attempt confirmed it; this one completed: no longer.
                trial_infra_unconfirm(trial_id=trial.pk, reason=reason[:2000])


    def summarize(self, job, checks) -> Contribution:
        def ids(status):
            return sorted(checks.filter(kind=self.kind, status=status)
                          .values_list("trial_id", flat=True))

        data = {"claimed": checks.filter(kind=self.kind).count(),
                "confirmed_trials": ids(CheckStatus.MATCH),
                "not_confirmed_trials": ids(CheckStatus.MISMATCH),
                "not_attempted_trials": ids(CheckStatus.SKIPPED)}
        headline = ""
        if data["claimed"]:
            headline = (f"infrastructure errors: {len(data['confirmed_trials'])}/"
                        f"{data['claimed']} claimed confirmed by the site's re-attempt"
                        + (f" ({len(data['not_attempted_trials'])} not re-attempted)"
                           if data["not_attempted_trials"] else ""))
        return Contribution("infra", data, headline=headline)


CHECK = InfraReattempt()
