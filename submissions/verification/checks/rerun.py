"""Re-run: the site runs the submission's agent itself on a sample of tasks and compares its
success with the claim on the same tasks."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path


from evaluation import agents, runner
from evaluation.judge import cache as judging
from submissions.harbor import AGENT_EXCEPTIONS, TIMEOUT_EXCEPTIONS
from submissions.measured import rerun_measured
from submissions.models import (
    CheckKind,
    CheckStatus,
    Outcome,
    Submission,
    Trial,
    TrialCheck,
    VerificationJob,
)
from submissions.verification import design
from submissions.verification.sample import rerun_commit
from submissions.verification.checks.base import (
    Check,
    CheckContext,
    Contribution,
    Result,
    grader_digest,
    grader_version,
    job_config,
    task_dir_of,
)


def design_of(job: VerificationJob, trials=None) -> design.Design:
    """The job's re-run design (fixed in its config when it was created), with the submission's
    reported mean cost per attempt as the cost estimate for the model-cost cap."""
    conf = {**job_config()["rerun_design"], **((job.config or {}).get("rerun_design") or {})}
    costs = [float(c) for c in (trials if trials is not None else Trial.objects.filter(
        submission_id=job.submission_id)).values_list("cost_usd", flat=True) if c]
    return design.Design(**conf, cost_per_trial_usd=(sum(costs) / len(costs)) if costs else None)


def rerun_state(job: VerificationJob) -> tuple[design.RerunState, dict]:
    """The re-run so far: every counted trial in the submission's committed secret order, the
    re-run results this job recorded, and {(task name, attempt): Trial pk}."""
    # A read: the order intake committed (the check commits one first if a row has none).
    order = Submission.objects.values_list("rerun_sample", flat=True).get(pk=job.submission_id)
    trials = Trial.objects.filter(submission_id=job.submission_id).exclude(
        outcome=Outcome.INFRA_ERROR)
    rows = {(n, a): (c, pk) for n, a, c, pk in trials.values_list(
        "benchmark_task__name", "attempt", "claimed_success", "pk")}
    candidates = [design.Trial(task=n, attempt=int(a), claimed=bool(rows[(n, int(a))][0]))
                  for n, a in order if (n, int(a)) in rows]
    results = {(n, a): (r or 0.0) >= 1.0 for n, a, r in TrialCheck.objects.filter(
        job=job, kind=CheckKind.RERUN, status__in=(CheckStatus.MATCH, CheckStatus.MISMATCH))
        .values_list("benchmark_task__name", "sample_index", "verified_reward")}
    state = design.RerunState(design_of(job, trials), candidates, results)
    return state, {k: v[1] for k, v in rows.items()}


def rerun_statistics(job: VerificationJob, *, with_power: bool = False) -> dict | None:
    """The re-run's result under the job's design: the decision of the exact test at the last
    complete look (consistent, inflated or inconclusive), the figures behind it and, with
    ``with_power``, what the design detects against these claims (design.describe_power)."""
    reruns = list(TrialCheck.objects.filter(job=job, kind=CheckKind.RERUN))
    state, pks = rerun_state(job)
    if not state.results:
        blocked = [r for r in reruns if r.status == CheckStatus.NOT_RUNNABLE]
        reason = (blocked or reruns)[0].reason if reruns else "re-run not configured"
        return {"ran": False, "reason": reason, "significant": False,
                "not_runnable": bool(blocked)}
    d = design.decision(state)
    covered = [tuple(k) for k in d["covered"]]
    claimed = {t.key: t.claimed for t in state.candidates}
    runs = len(covered) or len(state.results)
    keys = covered or list(state.results)
    r_pass = sum(1 for k in keys if state.results.get(k))
    c_pass = sum(1 for k in keys if claimed.get(k))
    out = {
        "ran": True,
        "decision": d["status"],
        "decision_reason": d["reason"],
        "tasks": len({k[0] for k in keys}),
        "rerun_success": r_pass,
        "rerun_runs": runs,
        "rerun_rate": r_pass / runs,
        "claimed_success": c_pass,
        "claimed_runs": runs,
        "claimed_rate": c_pass / runs,
        "claimed_pass_rerun_fail": d["b"],
        "claimed_fail_rerun_pass": d["c"],
        "expected_passes": d.get("expected_passes"),
        "look": d["look"], "looks": d["looks"],
        "test": d["test"],
        "p_value": d["p_value"] if d["p_value"] is not None else 1.0,
        "alpha": d["alpha"],
        "alpha_spent": d.get("alpha_spent"),
        "significant": d["status"] == design.INFLATED,
        # A re-run covers only the trial it reproduces, when its result agrees with the claim.
        "agreeing_trials": sorted(pks[k] for k in keys
                                  if k in pks and bool(state.results.get(k)) == claimed.get(k)),
        "seconds_per_trial": (sum(r.duration_s or 0.0 for r in reruns
                                  if r.status in (CheckStatus.MATCH, CheckStatus.MISMATCH))
                              / max(1, len(state.results))),
    }
    if with_power:
        out["power"] = design.describe_power(state.candidates, state.design)
        out["power"]["statement"] = out["power"]["sentence"]
    return out


class Rerun(Check):
    kind = CheckKind.RERUN
    title = "Re-run"
    runs = ("the submission's harness and model (the site's key and endpoint) on a sample of "
            "tasks, through the real Harbor CLI for Harbor harnesses; the output is graded by "
            "the site's verifier")
    contributes = ("claimed vs re-run success of the same task and attempt, paired (the "
                   "stated test); significantly fewer re-run successes is a discrepancy; a trial "
                   "whose re-run agrees with its outcome reaches the level re-run")
    report_order = 3

    def run(self, ctx: CheckContext) -> None:
        """Stage by stage (design.next_stage) from the front of the committed secret order:
        re-run the trials up to the next look, test, go on while inconclusive and the caps
        allow. A resumed job starts from the rows an earlier attempt wrote."""
        agent, why = ctx.rerun_agent()
        rerun_commit(submission_id=ctx.sub.pk)  # intake made it (kept); rows made otherwise
        tasks = {t.benchmark_task.name: t.benchmark_task for t in ctx.trials}
        tried: set = set()
        while True:
            ctx.guard()
            state, _pks = rerun_state(ctx.job)
            stage = design.next_stage(state)
            if not stage:
                return
            if agent is None:  # one row says why; the verdict reports "not re-runnable"
                first = stage[0]
                ctx.record(CheckKind.RERUN, task=tasks[first.task], sample_index=first.attempt,
                           res=Result(CheckStatus.NOT_RUNNABLE,
                                      claimed_reward=1.0 if first.claimed else 0.0, reason=why))
                return
            done = set(TrialCheck.objects.filter(job=ctx.job, kind=self.kind).values_list(
                "benchmark_task__name", "sample_index"))
            todo = [(tasks[t.task], t.attempt) for t in stage if t.key not in done]
            if not todo or tried >= {t.key for t in stage}:
                return  # rows that cannot decide (awaiting the judge): inconclusive, said so
            tried |= {t.key for t in stage}
            if agent.kind == "harbor":
                # One `harbor run -k n` per task (Harbor runs its trials -n at a time itself),
                # the tasks one after the other.
                groups: dict[int, tuple] = {}
                for task, k in todo:
                    groups.setdefault(task.pk, (task, []))[1].append(k)
                for group in groups.values():
                    ctx.guard()
                    self.check_harbor(ctx, agent, group)
            else:
                ctx.parallel(lambda item: self.check(ctx, item), todo)

    def claimed(self, ctx: CheckContext, task, attempt: int) -> float | None:
        """The claimed success (1/0) of the trial a re-run attempt reproduces."""
        for t in ctx.trials:
            if t.benchmark_task_id == task.pk and t.attempt == attempt:
                return 1.0 if t.claimed_success else 0.0
        return None

    def check(self, ctx: CheckContext, item) -> None:
        task, k = item
        claimed = self.claimed(ctx, task, k)
        agent, why = ctx.rerun_agent()
        if agent is None:
            ctx.record(CheckKind.RERUN, task=task, sample_index=k, res=Result(
                CheckStatus.NOT_RUNNABLE, claimed_reward=claimed, reason=why))
            return
        task_dir = task_dir_of(task)
        t0 = time.time()
        with tempfile.TemporaryDirectory(prefix="hab-rerun-") as tmp:
            out = Path(tmp) / "out"
            run = agents.run_site_agent(agent, task_dir, job_id=ctx.job_id(f"k{task.pk}-{k}-rr"),
                                        attempt=ctx.job.attempt, out_dir=out)
            run_s = time.time() - t0  # the site's measured time (no token count here)
            try:
                v = ctx.grade_outputs(None, task_dir, out, f"k{task.pk}-{k}-rr")
            except judging.JudgeNotConfigured as exc:
                ctx.awaiting_judge(CheckKind.RERUN, None, exc, task=task, sample_index=k)
                return
            finally:
                shutil.rmtree(out, ignore_errors=True)
        reward = v.reward if v.reward is not None else 0.0
        ctx.record(CheckKind.RERUN, task=task, sample_index=k, res=Result(
            CheckStatus.MATCH if reward >= 1.0 else CheckStatus.MISMATCH,
            verified_reward=reward, claimed_reward=claimed, reproduced=reward >= 1.0,
            reason=run.result.reason, detail={"agent": agent.name, "kind": agent.kind,
                                              "log_tail": run.result.text[-2000:],
                                              "measured": rerun_measured(
                                                  model=agent.model, agent_seconds=run_s)},
            grader_version=grader_version(task_dir, v), grader_digest=grader_digest(task_dir),
            duration_s=time.time() - t0, judge=v.judge))

    def check_harbor(self, ctx: CheckContext, agent, group) -> None:
        """Re-run one task len(ks) times with the real Harbor CLI; grade each trial's outputs
        with the site's verifier, like a re-grade."""
        task, ks = group
        task_dir = task_dir_of(task)
        with tempfile.TemporaryDirectory(prefix="hab-harbor-") as tmp:
            hb = agents.run_harbor_agent(agent, task_dir, job_id=ctx.job_id(f"k{task.pk}-hb"),
                                         attempt=ctx.job.attempt, attempts=len(ks),
                                         work_dir=Path(tmp))
            # Only what the agent is known to cause (its timeout, its errors) is graded as its
            # failure; anything else (tmux, Docker, the site's endpoint) is the site's problem:
            # retried, never scored.
            infra = [t for t in hb.trials if t.exception_type
                     and t.exception_type not in AGENT_EXCEPTIONS | TIMEOUT_EXCEPTIONS]
            graded = [t for t in hb.trials if t not in infra]
            per_trial_s = hb.seconds / max(1, len(hb.trials))
            # How the agent reached its model: from the worker (terminus-2, task container on
            # network none) or from inside the task container through the site's gateway.
            gw = hb.gateway_log
            egress = {"egress": "none (agent on the worker)"} if gw is None else {
                "egress": "model gateway", "gateway_requests": len(gw),
                "gateway_refused": sum(1 for e in gw if e.get("refused")),
                "gateway_errors": sum(1 for e in gw if e.get("error"))}
            for k, trial in zip(ks, graded, strict=False):
                t0 = time.time()
                try:
                    v = ctx.grade_outputs(None, task_dir, trial.artifacts_dir,
                                           f"k{task.pk}-{k}-rr")
                except judging.JudgeNotConfigured as exc:
                    ctx.awaiting_judge(CheckKind.RERUN, None, exc, task=task, sample_index=k)
                    continue
                grade_s = time.time() - t0
                reward = v.reward if v.reward is not None else 0.0
                reason = f"{trial.exception_type}: {trial.exception_message}".strip(": ") \
                    if trial.exception_type else ""
                ctx.record(CheckKind.RERUN, task=task, sample_index=k, res=Result(
                    CheckStatus.MATCH if reward >= 1.0 else CheckStatus.MISMATCH,
                    verified_reward=reward, claimed_reward=self.claimed(ctx, task, k),
                    reproduced=reward >= 1.0, reason=reason[:2000], detail={
                        "agent": agent.name, "kind": agent.kind, "model": agent.model,
                        "harness_version": agent.version, "agent_version": trial.agent_version,
                        "harbor_version": runner.harbor_version(),
                        "dropped_kwargs": runner.site_kwargs(agent.kwargs)[1],
                        "harbor_trial": trial.name, "trial_s": trial.seconds,
                        "agent_s": trial.agent_seconds,
                        "harbor_job_s": hb.seconds, "harbor_trials": len(hb.trials),
                        "grade_s": grade_s, "log_tail": hb.log_tail[-2000:], **egress,
                        # the site's own time, tokens and cost (price table) of this re-run
                        "measured": rerun_measured(
                            model=agent.model, agent_seconds=trial.agent_seconds,
                            trial_seconds=trial.seconds, input_tokens=trial.input_tokens,
                            cached_tokens=trial.cached_tokens,
                            output_tokens=trial.output_tokens)},
                    grader_version=grader_version(task_dir, v),
                    grader_digest=grader_digest(task_dir), duration_s=per_trial_s + grade_s, judge=v.judge))
        if len(graded) < len(ks):  # the rest are retried with the job (done ones are kept)
            why = "; ".join(f"{t.exception_type}: {t.exception_message[:300]}" for t in infra)
            raise runner.InfrastructureError(
                f"harbor re-run of {task.name}: {len(ks) - len(graded)} of {len(ks)} trials "
                f"ended without a result the site can grade ({why or hb.log_tail[-500:]})")


    def summarize(self, job, checks) -> Contribution:
        stats = rerun_statistics(job, with_power=True)
        headline = ""
        if stats and stats["ran"]:
            headline = (f"re-run {stats['rerun_success']}/{stats['rerun_runs']} vs "
                        f"{stats['claimed_success']}/{stats['claimed_runs']} claimed on the "
                        f"same trials ({stats['decision']}, exact p={stats['p_value']:.3g}"
                        f"{', significant' if stats['significant'] else ''})")
        return Contribution("rerun", stats, headline=headline,
                            contradicts=bool(stats and stats["significant"]))


CHECK = Rerun()
