"""Re-run: the site runs the submission's agent itself on a sample of tasks and compares its
success with the claim on the same tasks."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from django.conf import settings
from scipy.stats import binom, fisher_exact

from evaluation import agents, judging, runner
from submissions.harbor import AGENT_EXCEPTIONS, TIMEOUT_EXCEPTIONS
from submissions.measured import rerun_measured
from submissions.models import (
    CheckKind,
    CheckStatus,
    Submission,
    Trial,
    TrialCheck,
    VerificationJob,
)
from submissions.verification.sample import rerun_commit
from submissions.verification.checks.base import (
    Check,
    CheckContext,
    Contribution,
    Result,
    grader_digest,
    grader_version,
    task_dir_of,
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


def paired_inflation_p(b: int, c: int) -> float:
    """One-sided exact test (McNemar's, as a binomial) of the discordant pairs: b claimed passes
    that failed when the site re-ran that task and attempt, c claimed failures that passed. An
    honest stochastic agent's claim and re-run are two draws of the same trial, so b and c are
    equally likely; claims inflated by turning failures into passes make b larger.
    p = P(X >= b) for X ~ Binomial(b + c, 1/2)."""
    n = b + c
    if n == 0 or b == 0:
        return 1.0
    return float(binom.sf(b - 1, n, 0.5))


def rerun_pairs(job: VerificationJob) -> list[dict]:
    """(task, attempt, claimed success, re-run success) of every trial the job re-ran."""
    ran = TrialCheck.objects.filter(job=job, kind=CheckKind.RERUN,
                                    status__in=(CheckStatus.MATCH, CheckStatus.MISMATCH))
    rows = list(ran.values_list("benchmark_task_id", "sample_index", "verified_reward",
                                "duration_s"))
    claimed = {(t, a): (c, pk) for t, a, c, pk in Trial.objects.filter(
        submission_id=job.submission_id, benchmark_task_id__in={r[0] for r in rows}).values_list(
        "benchmark_task_id", "attempt", "claimed_success", "pk")}
    pairs = []
    for task_id, attempt, reward, seconds in rows:
        if (task_id, attempt) not in claimed:
            continue  # a sample row of an attempt the submission does not have: not paired
        success, trial_id = claimed[(task_id, attempt)]
        pairs.append({"task": task_id, "attempt": attempt, "trial": trial_id,
                      "claimed": bool(success), "rerun": (reward or 0.0) >= 1.0,
                      "seconds": seconds})
    return pairs


def rerun_statistics(job: VerificationJob) -> dict | None:
    reruns = list(TrialCheck.objects.filter(job=job, kind=CheckKind.RERUN))
    pairs = rerun_pairs(job)
    if not pairs:
        blocked = [r for r in reruns if r.status == CheckStatus.NOT_RUNNABLE]
        reason = (blocked or reruns)[0].reason if reruns else "re-run not configured"
        return {"ran": False, "reason": reason, "significant": False,
                "not_runnable": bool(blocked)}
    b = sum(1 for x in pairs if x["claimed"] and not x["rerun"])
    c = sum(1 for x in pairs if x["rerun"] and not x["claimed"])
    c_pass = sum(1 for x in pairs if x["claimed"])
    r_pass = sum(1 for x in pairs if x["rerun"])
    p = paired_inflation_p(b, c)
    alpha = (job.config or {}).get("rerun_alpha", settings.VERIFICATION_RERUN_ALPHA)
    return {
        "ran": True,
        "tasks": len({x["task"] for x in pairs}),
        "rerun_success": r_pass,
        "rerun_runs": len(pairs),
        "rerun_rate": r_pass / len(pairs),
        "claimed_success": c_pass,
        "claimed_runs": len(pairs),
        "claimed_rate": c_pass / len(pairs),
        "claimed_pass_rerun_fail": b,
        "claimed_fail_rerun_pass": c,
        "test": ("paired exact test, one-sided (McNemar): claimed vs re-run success of the "
                 "same task and attempt"),
        "p_value": p,
        "alpha": alpha,
        "significant": p < alpha,
        "agreeing_trials": sorted(x["trial"] for x in pairs if x["claimed"] == x["rerun"]),
        "power": rerun_power(len(pairs), c_pass, len(pairs) - c_pass, alpha),
        "seconds_per_trial": (sum(x["seconds"] or 0.0 for x in pairs) / len(pairs)),
    }


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
        done = ctx.done(self.kind)
        todo = [(task, k) for task, k in self.sample(ctx) if (task.pk, k) not in done]
        agent, _why = ctx.rerun_agent()
        if agent is not None and agent.kind == "harbor":
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

    def sample(self, ctx: CheckContext) -> list[tuple]:
        """(task, attempt) pairs from the front of the submission's committed re-run order
        (submissions.verification.sample: secret, fixed at intake, revealed with the verdict).
        A re-run attempt reproduces exactly the trial with that task and attempt."""
        rerun_commit(submission_id=ctx.sub.pk)  # intake made it; kept if so
        order = Submission.objects.values_list("rerun_sample", flat=True).get(pk=ctx.sub.pk)
        tasks = {t.benchmark_task.name: t.benchmark_task for t in ctx.trials}
        size = max(0, int(ctx.config["rerun_tasks"])) * max(1, int(ctx.config["rerun_attempts"]))
        return [(tasks[name], int(attempt)) for name, attempt in order[:size] if name in tasks]

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
        stats = rerun_statistics(job)
        headline = ""
        if stats and stats["ran"]:
            headline = (f"re-run {stats['rerun_success']}/{stats['rerun_runs']} vs claimed "
                        f"{stats['claimed_success']}/{stats['claimed_runs']} claimed on the "
                        f"same trials (paired p={stats['p_value']:.3g}"
                        f"{', significant' if stats['significant'] else ''})")
        return Contribution("rerun", stats, headline=headline,
                            contradicts=bool(stats and stats["significant"]))


CHECK = Rerun()
