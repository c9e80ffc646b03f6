"""Re-run: the site runs the submission's agent itself on a sample of tasks and compares its
success with the site's outcome of the same trials. The site sizes the sample (its own cost
estimate, the power floor), and the evidence is pooled over re-verifications and linked uploads
of the same agent."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from django.conf import settings

from evaluation import agents, runner
from evaluation.judge import cache as judging
from submissions import linking, pricing
from submissions.harbor import AGENT_EXCEPTIONS, TIMEOUT_EXCEPTIONS
from submissions.measured import rerun_measured
from submissions.models import (
    CheckKind,
    CheckStatus,
    JobPurpose,
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


def site_cost_estimate(sub: Submission, trials) -> dict:
    """The site's own cost estimate per re-run trial, never the submission's reported cost:
    the dated price table applied to each trial's tokens; else the median measured cost of the
    site's re-runs of the same category; else VERIFICATION_RERUN_COST_DEFAULT_USD. Returns
    {"per_trial_usd", "basis", "reported_per_trial_usd", "flag", "trials_far_above",
    "trials_far_below"}: whether the reported mean, and how many trials, are far above or far
    below the estimate (VERIFICATION_REPORTED_COST_MAX_RATIO and _MIN_RATIO)."""
    model = str(((sub.agent.settings if sub.agent else None) or {}).get("model_name") or "")
    priced = [pricing.compute_cost(model, t.input_tokens, t.cached_tokens, t.output_tokens)
              for t in trials]
    priced = [c for c in priced if c is not None]
    if priced:
        per_trial, basis = sum(priced) / len(priced), f"price table {pricing.PRICE_TABLE_DATE}"
    else:
        categories = {t.benchmark_task.category_id for t in trials}
        measured = sorted(
            float(c) for c in (TrialCheck.objects.filter(
                kind=CheckKind.RERUN, status__in=(CheckStatus.MATCH, CheckStatus.MISMATCH),
                benchmark_task__category_id__in=categories)
                .values_list("detail__measured__cost_usd", flat=True)) if c)
        if measured:
            per_trial = measured[len(measured) // 2]
            basis = f"median of {len(measured)} measured re-runs of its categories"
        else:
            per_trial = float(settings.VERIFICATION_RERUN_COST_DEFAULT_USD)
            basis = "the site's default (VERIFICATION_RERUN_COST_DEFAULT_USD)"
    reported = [float(t.cost_usd) for t in trials if t.cost_usd is not None]
    mean = sum(reported) / len(reported) if reported else None
    high = settings.VERIFICATION_REPORTED_COST_MAX_RATIO * per_trial
    low = settings.VERIFICATION_REPORTED_COST_MIN_RATIO * per_trial
    flag = None
    if mean is not None and per_trial:
        flag = "far above" if mean > high else "far below" if mean < low else None
    return {"per_trial_usd": per_trial, "basis": basis, "reported_per_trial_usd": mean,
            "flag": flag, "trials_far_above": sum(1 for c in reported if c > high),
            "trials_far_below": sum(1 for c in reported if c < low)}


def _candidates(job: VerificationJob) -> tuple[list[design.Trial], dict, list[Trial]]:
    """Every counted trial in the committed secret order, with the site's outcome (what the
    re-runs are compared with); {(task name, attempt): Trial pk}; the trial rows."""
    order = Submission.objects.values_list("rerun_sample", flat=True).get(pk=job.submission_id)
    trials = list(Trial.objects.filter(submission_id=job.submission_id)
                  .exclude(outcome=Outcome.INFRA_ERROR).select_related("benchmark_task"))
    rows = {(t.benchmark_task.name, t.attempt): t for t in trials}
    candidates = [design.Trial(task=n, attempt=int(a), passed=bool(rows[(n, int(a))].success))
                  for n, a in order if (n, int(a)) in rows]
    return candidates, {k: t.pk for k, t in rows.items()}, trials


def rerun_plan(job: VerificationJob, candidates, trials) -> tuple[design.Plan, dict]:
    """The site's design for this job: the caps from the site's cost estimate, then
    design.plan against the power floor. Fixed in the job's config the first time (a resumed
    job keeps it)."""
    sub = Submission.objects.select_related("agent").get(pk=job.submission_id)
    config = job.config or {}
    fixed = config.get("rerun_plan")
    cost = fixed["cost"] if fixed else site_cost_estimate(sub, trials)
    base = design.Design(**{**job_config()["rerun_design"], **(config.get("rerun_design") or {}),
                            "cost_per_trial_usd": cost["per_trial_usd"] or None})
    if fixed:
        d = design.Design(**{**base.__dict__, "reruns_per_task": fixed["reruns_per_task"]})
        looks = d.looks(len({c.task for c in candidates}))
        cap = min(looks[-1] * d.reruns_per_task, len(candidates)) if looks else 0
        return design.Plan(d, fixed["floor_points"], fixed["floor_power"], fixed["power"],
                           cap), cost
    floor = {**job_config()["rerun_power_floor"], **(config.get("rerun_power_floor") or {})}
    plan = design.plan(candidates, base, floor_points=int(floor["points"]),
                       floor_power=float(floor["power"]))
    if job.pk:
        stored = {"reruns_per_task": plan.design.reruns_per_task, "power": plan.power,
                  "floor_points": plan.floor_points, "floor_power": plan.floor_power,
                  "cost": cost}
        VerificationJob.objects.filter(pk=job.pk).update(
            config={**config, "rerun_plan": stored})
        job.config = {**config, "rerun_plan": stored}
    return plan, cost


def pooled_results(job: VerificationJob) -> tuple[dict, list[int]]:
    """Every re-run outcome the site holds for this submission's agent on these tasks, by (task
    name, attempt), the first recorded kept: this job's, its earlier verifications' and those
    of linked uploads of the same agent (same harness, version and model). A re-verify or a
    re-roll adds to the evidence; it never draws again what was drawn. Also the submissions the
    evidence came from."""
    sub = Submission.objects.select_related("agent").get(pk=job.submission_id)
    chain = linking.lineage_of(sub)
    same = [sub.pk]
    if sub.agent is not None and len(chain) > 1:
        a = sub.agent
        same += list(Submission.objects.filter(
            pk__in=chain, agent__harness_id=a.harness_id, agent__model_id=a.model_id,
            agent__harness_version=a.harness_version).exclude(pk=sub.pk)
            .values_list("pk", flat=True))
    results: dict[tuple[str, int], bool] = {}
    sources: set[int] = set()
    for task, k, reward, source in (TrialCheck.objects.filter(
            job__submission_id__in=same, job__purpose=JobPurpose.VERIFY, kind=CheckKind.RERUN,
            status__in=(CheckStatus.MATCH, CheckStatus.MISMATCH))
            .order_by("created_at", "pk").values_list(
                "benchmark_task__name", "sample_index", "verified_reward",
                "job__submission_id")):
        if (task, k) not in results:
            results[(task, k)] = (reward or 0.0) >= 1.0
            sources.add(source)
    return results, sorted(sources)


def rerun_state(job: VerificationJob) -> tuple[design.RerunState, dict]:
    """The re-run so far: every counted trial in the submission's committed secret order with
    the site's outcome, the pooled re-run results, and {(task name, attempt): Trial pk}."""
    candidates, pks, trials = _candidates(job)
    plan, _cost = rerun_plan(job, candidates, trials)
    results, _sources = pooled_results(job)
    return design.RerunState(plan.design, candidates, results), pks


def rerun_statistics(job: VerificationJob, *, with_power: bool = False) -> dict | None:
    """The re-run's result under the job's planned design: the decision of the exact test at
    the last complete look (consistent, inflated or inconclusive), the figures behind it, the
    plan (its power against the floor, and whether it reaches it), the site's cost estimate
    and, with ``with_power``, what the design detects against these outcomes."""
    reruns = list(TrialCheck.objects.filter(job=job, kind=CheckKind.RERUN))
    candidates, pks, trials = _candidates(job)
    plan, cost = rerun_plan(job, candidates, trials)
    results, sources = pooled_results(job)
    state = design.RerunState(plan.design, candidates, results)
    # A job that does not re-run (VERIFICATION_CHECKS without it) has no plan to report.
    configured = CheckKind.RERUN in {**job_config(), **(job.config or {})}["checks"]
    planned = {"power": plan.power, "floor_points": plan.floor_points,
               "floor_power": plan.floor_power, "powered": plan.powered,
               "reruns_per_task": plan.design.reruns_per_task, "cap": plan.cap,
               "sentence": plan.sentence()} if configured else None
    if not state.results:
        blocked = [r for r in reruns if r.status == CheckStatus.NOT_RUNNABLE]
        reason = (blocked or reruns)[0].reason if reruns else "re-run not configured"
        by = ((blocked[0].detail or {}).get("not_runnable_by") or "site") if blocked else "site"
        return {"ran": False, "reason": reason, "significant": False,
                "not_runnable": bool(blocked), "not_runnable_by": by, "plan": planned,
                "cost": cost}
    d = design.decision(state)
    covered = [tuple(k) for k in d["covered"]]
    passed = {t.key: t.passed for t in state.candidates}
    keys = covered or [k for k in state.results if k in passed]
    runs = len(keys) or 1
    r_pass = sum(1 for k in keys if state.results.get(k))
    c_pass = sum(1 for k in keys if passed.get(k))
    out = {
        "ran": True,
        "decision": d["status"],
        "decision_reason": d["reason"],
        "final": d["final"],
        "tasks": len({k[0] for k in keys}),
        "rerun_success": r_pass,
        "rerun_runs": len(keys),
        "rerun_rate": r_pass / runs,
        # The site's outcomes of the same trials (what the test compares with).
        "site_success": c_pass,
        "site_runs": len(keys),
        "site_rate": c_pass / runs,
        "site_pass_rerun_fail": d["b"],
        "site_fail_rerun_pass": d["c"],
        "expected_passes": d.get("expected_passes"),
        "look": d["look"], "looks": d["looks"],
        "test": d["test"],
        "p_value": d["p_value"] if d["p_value"] is not None else 1.0,
        "alpha": d["alpha"],
        "alpha_spent": d.get("alpha_spent"),
        "significant": d["status"] == design.INFLATED,
        "plan": planned,
        "cost": cost,
        "pooled_from": [s for s in sources if s != job.submission_id],
        # A re-run raises only a pass to the level re-run, and only when it passed too: a
        # failing re-run never vouches for anything.
        "agreeing_trials": sorted(pks[k] for k in keys
                                  if k in pks and state.results.get(k) and passed.get(k)),
        "seconds_per_trial": (sum(r.duration_s or 0.0 for r in reruns
                                  if r.status in (CheckStatus.MATCH, CheckStatus.MISMATCH))
                              / max(1, len(state.results))),
    }
    if with_power:
        out["power"] = design.describe_power(state.candidates, state.design)
        out["power"]["statement"] = out["power"]["sentence"]
    return out


def not_runnable_detail(why) -> dict:
    """Whose the reason is: the site's (no key for that model, a harness it has not built) or
    the submission's (a custom agent class, a version the site does not offer)."""
    return {"not_runnable_by": getattr(why, "by", "site")}


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
                                      claimed_reward=self.claimed(ctx, tasks[first.task],
                                                                  first.attempt),
                                      reason=why, detail=not_runnable_detail(why)))
                return
            done = set(TrialCheck.objects.filter(job=ctx.job, kind=self.kind).values_list(
                "benchmark_task__name", "sample_index"))
            todo = [(tasks[t.task], t.attempt) for t in stage if t.key not in done]
            if not todo or tried >= {t.key for t in stage}:
                return  # rows that cannot decide (awaiting the judge): inconclusive, said so
            tried |= {t.key for t in stage}
            if agent.kind == "harbor":
                # One `harbor run -k n` per task (Harbor runs its trials -n at a time itself),
                # VERIFICATION_PARALLEL_TRIALS tasks at once: a re-run mostly waits on its
                # containers and the model, so a stage takes the time of its slowest tasks.
                groups: dict[int, tuple] = {}
                for task, k in todo:
                    groups.setdefault(task.pk, (task, []))[1].append(k)
                ctx.parallel(lambda group: self.check_harbor(ctx, agent, group),
                             list(groups.values()))
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
                CheckStatus.NOT_RUNNABLE, claimed_reward=claimed, reason=why,
                detail=not_runnable_detail(why)))
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
                                              "runtime": runner.sandbox_runtime() or "runc",
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
                        # the task container's runtime: gVisor, or runc for RUNC_HARNESSES
                        "runtime": hb.runtime or "runc", "isolation": runner.isolation(hb.runtime),
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
            headline = (f"re-run {stats['rerun_success']}/{stats['rerun_runs']} vs the site's "
                        f"{stats['site_success']}/{stats['site_runs']} on the same trials "
                        f"({stats['decision']}, exact p={stats['p_value']:.3g}"
                        f"{', significant' if stats['significant'] else ''})")
        return Contribution("rerun", stats, headline=headline,
                            contradicts=bool(stats and stats["significant"]))


CHECK = Rerun()
