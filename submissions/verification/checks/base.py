"""What every verification check shares: the job's context (its trials, configuration, lease
and the TrialCheck rows it writes), the `Check` each registered kind implements, and the helpers
that read a trial's stored outputs and trajectory.

Each check writes one TrialCheck row (update_or_create keyed by the unique constraints) and,
for trial checks, the trial's score and flags in the same transaction (R7).
"""

from __future__ import annotations

import concurrent.futures
from abc import ABC, abstractmethod
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest

from evaluation import agents, graders, runner
from evaluation.judge import cache as judging
from evaluation import screen as screen_rules
from submissions.harbor import MAX_CONFIG_BYTES, output_locations
from submissions.models import (
    FLAG_AWAITING_JUDGE,
    CheckKind,
    CheckStatus,
    JobPurpose,
    Outcome,
    Submission,
    Trial,
    TrialCheck,
    VerificationJob,
    site_outcome,
)
from submissions.trials import trial_check_record
from submissions.verification.lease import LeaseLost, Heartbeat, run_prefix

log = logging.getLogger(__name__)

MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024
REPLAY_LOG_KEPT = 256 * 1024  # of the replay's output, kept for the screen


def task_dir_of(benchmark_task) -> Path:
    path = Path(benchmark_task.package_path or "")
    if not path.is_absolute():
        path = Path(settings.BASE_DIR) / path
    if not benchmark_task.package_path or not (path / "task.toml").is_file():
        raise runner.InfrastructureError(
            f"task package of {benchmark_task.name} is not on this worker ({path})"
        )
    return path


def grader_digest(task_dir: Path) -> str:
    """Digest of what decides a grade: the task's tests/ and the base image (graders)."""
    h = hashlib.sha256()
    h.update(runner.tree_digest(Path(task_dir) / "tests").encode())
    h.update(runner.ensure_base_image().encode())
    return h.hexdigest()[:16]


def grader_version(task_dir: Path, verifier_run=None) -> str:
    """The grader version a score records ("<category>@<version>", R11): what the verifier
    container reported (grader.json), else the repository's version of the task's category."""
    reported = (getattr(verifier_run, "grader", None) or {}).get("grader")
    if reported:
        return str(reported)[:64]
    category = (runner.load_task_toml(task_dir).get("metadata") or {}).get("category", "")
    return graders.version_label(category) if category in graders.VERSIONS else ""


def _storage_copy(name: str, dest: Path, budget: list[int]) -> int:
    """Copy a stored file, or every file under a stored folder, to dest. Returns files copied."""
    try:
        with default_storage.open(name, "rb") as src:
            dest.parent.mkdir(parents=True, exist_ok=True)
            with open(dest, "wb") as out:
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    budget[0] -= len(chunk)
                    if budget[0] < 0:
                        raise runner.OutputTooLargeError("submitted outputs exceed the cap")
                    out.write(chunk)
        return 1
    except (IsADirectoryError, FileNotFoundError, PermissionError):
        pass
    try:
        dirs, files = default_storage.listdir(name)
    except (FileNotFoundError, NotADirectoryError, OSError):
        return 0
    copied = 0
    for f in files:
        copied += _storage_copy(f"{name}/{f}", dest / f, budget)
    for d in dirs:
        copied += _storage_copy(f"{name}/{d}", dest / d, budget)
    return copied


def materialize_outputs(trial: Trial, task_dir: Path, dest: Path) -> dict:
    """Copy the trial's submitted declared outputs (only those) from storage to dest/<path>.

    `artifact_paths` entries (relative to the stored tree or to the trial directory) ending in
    the path are tried first, then where the trial's stored artifacts manifest says Harbor put
    it, then Harbor's mirrored path <trial_dir>/artifacts/P (submissions.harbor.
    output_locations, the intake's rule).
    """
    prefix = (trial.submission.files_prefix or "").rstrip("/")
    trial_dir = (trial.trial_dir or "").strip("/")
    manifest = _stored_manifest(f"{prefix}/{trial_dir}/artifacts/manifest.json".lstrip("/"))
    found, missing = [], []
    budget = [runner.DEFAULT_OUTPUT_CAP_BYTES]
    for out in runner.declared_outputs(task_dir):
        rel = out.strip("/")
        candidates = []
        for ap in trial.artifact_paths or []:
            ap = str(ap).strip("/")
            if ap == rel or ap.endswith("/" + rel):
                candidates += [ap, f"{trial_dir}/{ap}"]
        candidates += output_locations(trial_dir, manifest, out)
        for cand in candidates:
            pp = PurePosixPath(cand)
            if pp.is_absolute() or ".." in pp.parts:
                continue
            if _storage_copy(f"{prefix}/{cand}".lstrip("/"), dest / rel, budget):
                found.append(out)
                break
        else:
            missing.append(out)
    return {"found": found, "missing": missing, "digest": outputs_digest(dest)}


def _stored_manifest(name: str) -> list:
    """A trial's stored artifacts/manifest.json (every tested Harbor release writes one), or []
    (none, unreadable, or over the intake's cap for it)."""
    try:
        with default_storage.open(name, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except (FileNotFoundError, IsADirectoryError, PermissionError, OSError):
        return []
    if len(data) > MAX_CONFIG_BYTES:
        return []
    try:
        manifest = json.loads(data)
    except ValueError:
        return []
    return manifest if isinstance(manifest, list) else []


def outputs_digest(root: Path) -> str:
    root = Path(root)
    return runner.tree_digest(root) if root.is_dir() else ""


def load_trajectory(trial: Trial) -> dict | None:
    if not trial.trajectory_path:
        return None
    name = f"{trial.submission.files_prefix.rstrip('/')}/{trial.trajectory_path.lstrip('/')}"
    try:
        with default_storage.open(name, "rb") as fh:
            data = fh.read(MAX_TRAJECTORY_BYTES + 1)
    except (FileNotFoundError, OSError):
        return None
    if len(data) > MAX_TRAJECTORY_BYTES:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def claimed_reward(trial: Trial) -> float:
    if trial.reward is not None:
        return float(trial.reward)
    return 1.0 if trial.claimed_success else 0.0


def same(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(float(a) - float(b)) < 1e-6


def set_trial_flag(trial_id: int, flag: str, on: bool, **fields) -> None:
    # A re-grade also sets the trial's site outcome (the owner of Trial decides how).
    trial_check_record(trial_id=trial_id, flag=flag, on=on, **fields)


def job_config() -> dict:
    return {
        "checks": [c for c in settings.VERIFICATION_CHECKS if c in CheckKind.values],
        "replay_passing": settings.VERIFICATION_REPLAY_PASSING,
        "replay_failing": settings.VERIFICATION_REPLAY_FAILING,
        "replay_max": settings.VERIFICATION_REPLAY_MAX,
        # The sequential re-run design (submissions.verification.design), fixed per job.
        "rerun_design": {
            "first": settings.VERIFICATION_RERUN_FIRST_TASKS,
            "step": settings.VERIFICATION_RERUN_STEP_TASKS,
            "max_trials": settings.VERIFICATION_RERUN_MAX_TRIALS,
            "alpha": settings.VERIFICATION_RERUN_ALPHA,
            "reruns_per_task": settings.VERIFICATION_RERUN_PER_TASK,
            "max_cost_usd": float(settings.VERIFICATION_RERUN_MAX_COST_USD) or None,
            "futility_z": settings.VERIFICATION_RERUN_FUTILITY_Z,
            "accept_z": settings.VERIFICATION_RERUN_ACCEPT_Z,
            "spending": settings.VERIFICATION_RERUN_SPENDING,
        },
        "rerun_power_floor": {"points": settings.VERIFICATION_RERUN_POWER_FLOOR_POINTS,
                              "power": settings.VERIFICATION_RERUN_POWER_FLOOR},
        "rerun_alpha": settings.VERIFICATION_RERUN_ALPHA,
        "infra_reattempt_max": settings.VERIFICATION_INFRA_REATTEMPT_MAX,
    }


def screen_trial(trial: Trial, *, activity: dict | None):
    """The reward-hacking screen of one trial: (rules, hits, evidence, trajectory) from its
    stored trajectory, its replay's container activity and its task's hidden answer files."""
    rules = screen_rules.load_rules()
    trajectory = load_trajectory(trial)
    evidence = (screen_rules.trajectory_evidence(trajectory)
                + screen_rules.activity_evidence(activity))
    hits = screen_rules.screen(
        evidence, rules=rules,
        hidden_texts=screen_rules.hidden_texts_of(task_dir_of(trial.benchmark_task)))
    return rules, hits, evidence, trajectory


# The checks that run containers, all in the sandbox runtime (gVisor when it works here) and
# under the engine's user mapping; a Harbor re-run records its task container's own runtime.
_CONTAINER_CHECKS = (CheckKind.REGRADE, CheckKind.REPLAY, CheckKind.RERUN, CheckKind.INFRA)


def isolation_of(kind: str) -> str:
    """In words: the kernel and the user mapping a check of ``kind`` ran its containers under."""
    return runner.isolation(runner.sandbox_runtime())


@dataclass
class Result:
    """What one check of one trial (or one re-run sample) found: one TrialCheck row."""

    status: str
    verified_reward: float | None = None
    claimed_reward: float | None = None
    reproduced: bool | None = None
    flags: list | None = None
    reason: str = ""
    detail: dict | None = None
    grader_version: str = ""
    grader_digest: str = ""
    duration_s: float | None = None
    judge: dict | None = None  # the LLM judge's record (judging.judge_record), X-ray only


class CheckContext:
    """One run of a verification job: the submission, its trials in order, the job's
    configuration and lease, and the writes every check shares."""

    def __init__(self, job: VerificationJob, heartbeat: Heartbeat):
        self.job = job
        self.heartbeat = heartbeat
        self.config = {**job_config(), **(job.config or {})}
        # A re-score (R11) records its re-grades only; the trials and the leaderboard switch
        # when the whole job is done (submissions.verification.rescore.rescore_apply).
        self.rescore = job.purpose == JobPurpose.RESCORE
        self.sub = Submission.objects.select_related("agent__harness").get(pk=job.submission_id)
        self.trials = list(
            Trial.objects.filter(submission=self.sub)
            .select_related("benchmark_task", "submission")
            .order_by("benchmark_task__position", "benchmark_task_id", "attempt")
        )

    def rescore_new_passes(self) -> list[Trial]:
        """In a re-score: the trials this job's re-grade turns into passes (they switch at the
        end of the job, and get the checks a pass gets before that)."""
        graded = dict(TrialCheck.objects.filter(job=self.job, kind=CheckKind.REGRADE)
                      .values_list("trial_id", "verified_reward"))
        return [t for t in self.trials if t.pk in graded and not t.success and site_outcome(
            claimed=t.claimed_outcome, verified_reward=graded[t.pk],
            infra_confirmed=t.infra_confirmed) == Outcome.PASSED]

    def guard(self):
        if self.heartbeat.lost.is_set():
            raise LeaseLost()

    def parallel(self, fn, items) -> None:
        if not items:
            return

        def call(item):
            try:
                self.guard()
                return fn(item)
            finally:
                connection.close()

        workers = max(1, settings.VERIFICATION_PARALLEL_TRIALS)
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers,
                                                     thread_name_prefix=f"job{self.job.pk}")
        try:
            futures = [pool.submit(call, item) for item in items]
            for fut in concurrent.futures.as_completed(futures):
                fut.result()  # the first error stops the job (the others are cancelled)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def record(self, kind: str, *, trial=None, task=None, sample_index=0, res: Result):
        detail = dict(res.detail or {})
        if res.duration_s is not None and kind in _CONTAINER_CHECKS:
            # What separated this check's containers from the host, per trial.
            detail.setdefault("isolation", isolation_of(kind))
        values = {
            "status": res.status,
            "claimed_reward": res.claimed_reward,
            "verified_reward": res.verified_reward,
            "reproduced": res.reproduced,
            "flags": res.flags or [],
            "reason": res.reason[:5000],
            "detail": detail,
            "grader_version": res.grader_version,
            "grader_digest": res.grader_digest,
            "judge_model": (res.judge or {}).get("model", ""),
            "judge_prompt_version": (res.judge or {}).get("prompt_version", ""),
            "job_attempt": self.job.attempt,
            "duration_s": res.duration_s,
            "benchmark_task": task or trial.benchmark_task,
        }
        key = {"job": self.job, "kind": kind}
        if trial is not None:
            key["trial"] = trial
        else:
            key.update(trial=None, benchmark_task=task, sample_index=sample_index)
        TrialCheck.objects.update_or_create(
            **key,
            defaults={**values, "executions": F("executions") + 1},
            create_defaults={**values, "executions": 1},
        )

    def done(self, kind: str) -> set:
        qs = TrialCheck.objects.filter(job=self.job, kind=kind)
        if kind == CheckKind.RERUN:
            return set(qs.values_list("benchmark_task_id", "sample_index"))
        return set(qs.values_list("trial_id", flat=True))

    def job_id(self, what: str) -> str:
        return f"{run_prefix(self.job.pk)}{what}"


    def progress(self):
        n = TrialCheck.objects.filter(job=self.job, kind=CheckKind.REGRADE).count()
        if n:  # Greatest: parallel trials may finish their counts out of order
            Submission.objects.filter(pk=self.sub.pk).update(
                trials_done=Greatest(F("trials_done"), Value(n)))


    def grade_outputs(self, trial, task_dir: Path, artifacts: Path, what: str):
        """The verifier's run; raises judging.JudgeNotConfigured when the task needs the LLM
        judge and none is configured (the caller records "awaiting judge")."""
        judge = judging.judge_for(task_dir)
        image, _built = runner.build_task_image(task_dir)  # cached by digest; rebuilt if pruned
        v = runner.run_verifier(
            task_dir, job_id=self.job_id(what), attempt=self.job.attempt,
            artifacts_dir=artifacts, judge=judge, image=image,
        )
        v.judge = judging.judge_record(judge, v.judge_log, task_dir) if judge else None
        return v


    def awaiting_judge(self, kind: str, trial: Trial, exc: Exception, **key) -> None:
        """No judge: the check waits (not scored, not retried by this job)."""
        claimed = claimed_reward(trial) if trial is not None else None
        with transaction.atomic():  # check row + trial flag: both or neither (R7)
            self.record(kind, trial=trial, res=Result(
                CheckStatus.AWAITING_JUDGE, claimed_reward=claimed, reason=str(exc),
                flags=[FLAG_AWAITING_JUDGE]), **key)
            if kind == CheckKind.REGRADE:
                set_trial_flag(trial.pk, FLAG_AWAITING_JUDGE, True)


    def rerun_agent(self) -> tuple:
        """(site agent, why not): how the site re-runs this submission's harness."""
        a = self.sub.agent
        return agents.resolve_site_agent(a.harness.slug, harness_version=a.harness_version or "",
                                         agent_settings=a.settings or {})



class Check(ABC):
    """One kind of verification check (a module of this package, listed in REGISTRY).

    ``kind`` is its TrialCheck kind; ``runs`` says what the site runs for it and
    ``contributes`` what it adds to a trial's level, the coverage and the verdict (both shown
    in docs/verification.md and on the methods page). ``applies`` decides whether this job runs
    it; ``run`` does the work, resuming from the rows an earlier attempt of the job wrote.
    ``summarize`` is its part of the verdict: a Contribution read from the job's rows.
    """

    kind: str = ""
    title: str = ""
    runs: str = ""
    contributes: str = ""
    report_order: int = 0  # its clause's place in the verdict's headline

    def applies(self, ctx: CheckContext) -> bool:
        return self.kind in ctx.config["checks"]

    def run(self, ctx: CheckContext) -> None:
        """Nothing by default: a check that only reports (the judge's part) runs nothing."""

    @abstractmethod
    def summarize(self, job, checks) -> "Contribution":
        """This check's part of the job's verdict, from the job's rows."""


@dataclass
class Contribution:
    """A check's part of a job's summary: its section (``data`` under ``key``), its clause of
    the headline (empty: none) and whether it contradicts the claims."""

    key: str
    data: object
    headline: str = ""
    contradicts: bool = False
