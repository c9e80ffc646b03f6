"""The checks of a verification job: re-grade every trial, replay a sample, re-run a sample.

Each check writes one TrialCheck row (update_or_create keyed by the unique constraints) and,
for trial checks, the trial's score and flags in the same transaction (R7).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import logging
import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest

from evaluation import agents, graders, judging, runner
from evaluation import screen as screen_rules
from evaluation.replay import plan_from_trajectory
from submissions.harbor import AGENT_EXCEPTIONS, TIMEOUT_EXCEPTIONS
from submissions.models import (
    FLAG_AWAITING_JUDGE,
    FLAG_NOT_REPLAYABLE,
    CheckKind,
    InfraConfirmation,
    CheckStatus,
    JobPurpose,
    Outcome,
    Submission,
    Trial,
    TrialCheck,
    VerificationJob,
    VerificationLevel,
    site_outcome,
)
from submissions.trials import (
    trial_check_record,
    trial_infra_confirm,
    trial_infra_unconfirm,
    trial_screen_record,
)
from submissions.verification.lease import LeaseLost, _Heartbeat, run_prefix

log = logging.getLogger(__name__)

FLAG_REGRADE = "regrade_mismatch"
FLAG_REPLAY = "replay_mismatch"
VERIFICATION_FLAGS = (FLAG_REGRADE, FLAG_REPLAY, FLAG_NOT_REPLAYABLE)  # + reward_hack:RH<n>
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

    Harbor mirrors a collected container path P at <trial_dir>/artifacts/P; `artifact_paths`
    entries (relative to the stored tree or to the trial directory) are tried first.
    """
    prefix = (trial.submission.files_prefix or "").rstrip("/")
    trial_dir = (trial.trial_dir or "").strip("/")
    found, missing = [], []
    budget = [runner.DEFAULT_OUTPUT_CAP_BYTES]
    for out in runner.declared_outputs(task_dir):
        rel = out.strip("/")
        candidates = []
        for ap in trial.artifact_paths or []:
            ap = str(ap).strip("/")
            if ap == rel or ap.endswith("/" + rel):
                candidates += [ap, f"{trial_dir}/{ap}"]
        candidates.append(f"{trial_dir}/artifacts/{rel}")
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


def _claimed_reward(trial: Trial) -> float:
    if trial.reward is not None:
        return float(trial.reward)
    return 1.0 if trial.claimed_success else 0.0


def _same(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(float(a) - float(b)) < 1e-6


def _set_trial_flag(trial_id: int, flag: str, on: bool, **fields) -> None:
    # A re-grade also sets the trial's site outcome (the owner of Trial decides how).
    trial_check_record(trial_id=trial_id, flag=flag, on=on, **fields)


def job_config() -> dict:
    return {
        "checks": [c for c in settings.VERIFICATION_CHECKS if c in CheckKind.values],
        "replay_passing": settings.VERIFICATION_REPLAY_PASSING,
        "replay_failing": settings.VERIFICATION_REPLAY_FAILING,
        "replay_max": settings.VERIFICATION_REPLAY_MAX,
        "rerun_tasks": settings.VERIFICATION_RERUN_TASKS,
        "rerun_attempts": settings.VERIFICATION_RERUN_ATTEMPTS,
        "rerun_alpha": settings.VERIFICATION_RERUN_ALPHA,
        "infra_reattempt_max": settings.VERIFICATION_INFRA_REATTEMPT_MAX,
    }


def screen_trial(trial: Trial, *, harness: str, activity: dict | None):
    """The reward-hacking screen of one trial: (rules, hits, evidence, trajectory) from its
    stored trajectory, its replay's container activity and its task's hidden answer files."""
    rules = screen_rules.load_rules()
    trajectory = load_trajectory(trial)
    evidence = (screen_rules.trajectory_evidence(trajectory)
                + screen_rules.activity_evidence(activity))
    hits = screen_rules.screen(
        evidence, rules=rules, harness=harness,
        hidden_texts=screen_rules.hidden_texts_of(task_dir_of(trial.benchmark_task)))
    return rules, hits, evidence, trajectory


@dataclass
class _Result:
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


class _Checks:
    def __init__(self, job: VerificationJob, heartbeat: _Heartbeat):
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

    # -- plumbing
    def _guard(self):
        if self.heartbeat.lost.is_set():
            raise LeaseLost()

    def _parallel(self, fn, items) -> None:
        if not items:
            return

        def call(item):
            try:
                self._guard()
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

    def _record(self, kind: str, *, trial=None, task=None, sample_index=0, res: _Result):
        values = {
            "status": res.status,
            "claimed_reward": res.claimed_reward,
            "verified_reward": res.verified_reward,
            "reproduced": res.reproduced,
            "flags": res.flags or [],
            "reason": res.reason[:5000],
            "detail": res.detail or {},
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

    def _done(self, kind: str) -> set:
        qs = TrialCheck.objects.filter(job=self.job, kind=kind)
        if kind == CheckKind.RERUN:
            return set(qs.values_list("benchmark_task_id", "sample_index"))
        return set(qs.values_list("trial_id", flat=True))

    def _job_id(self, what: str) -> str:
        return f"{run_prefix(self.job.pk)}{what}"

    # -- run
    def run(self):
        checks = self.config["checks"]
        # The site decides what an infrastructure error is: each claimed one is re-attempted
        # (up to the cap) before the re-grade, which does not grade a confirmed one. Not
        # optional; a re-score (R11) changes grades only.
        if not self.rescore:
            claimed = [t for t in self.trials if t.claimed_outcome == Outcome.INFRA_ERROR]
            cap = max(0, int(self.config.get("infra_reattempt_max",
                                             settings.VERIFICATION_INFRA_REATTEMPT_MAX)))
            done = self._done(CheckKind.INFRA)
            for trial in claimed[cap:]:
                if trial.pk not in done:
                    self.infra_not_attempted(trial, cap)
            self._parallel(self.infra_reattempt, [t for t in claimed[:cap] if t.pk not in done])
        if CheckKind.REGRADE in checks:
            done = self._done(CheckKind.REGRADE)
            self._progress()
            self._parallel(self.regrade, [t for t in self.trials if t.pk not in done])
        if CheckKind.REPLAY in checks:
            done = self._done(CheckKind.REPLAY)
            self._parallel(self.replay, [t for t in self.replay_sample() if t.pk not in done])
        # The reward-hacking screen is not optional: every counted pass is screened, after the
        # replay (whose container activity it reads). A re-score (R11) changes grades only: its
        # trajectories were screened when verified (`manage.py screen_trials` for new rules).
        if not self.rescore:
            done = self._done(CheckKind.SCREEN)
            self._parallel(self.screen, [t for t in self.trials if t.pk not in done])
        if CheckKind.RERUN in checks:
            done = self._done(CheckKind.RERUN)
            todo = [(task, k) for task, k in self.rerun_sample() if (task.pk, k) not in done]
            agent, _why = self.rerun_agent()
            if agent is not None and agent.kind == "harbor":
                # One `harbor run -k n` per task (Harbor runs its trials -n at a time itself),
                # the tasks one after the other.
                groups: dict[int, tuple] = {}
                for task, k in todo:
                    groups.setdefault(task.pk, (task, []))[1].append(k)
                for group in groups.values():
                    self._guard()
                    self.rerun_harbor(agent, group)
            else:
                self._parallel(self.rerun, todo)

    def _progress(self):
        n = TrialCheck.objects.filter(job=self.job, kind=CheckKind.REGRADE).count()
        if n:  # Greatest: parallel trials may finish their counts out of order
            Submission.objects.filter(pk=self.sub.pk).update(
                trials_done=Greatest(F("trials_done"), Value(n)))

    # -- re-grade
    def grade_outputs(self, trial, task_dir: Path, artifacts: Path, what: str):
        """The verifier's run; raises judging.JudgeNotConfigured when the task needs the LLM
        judge and none is configured (the caller records "awaiting judge")."""
        judge = judging.judge_for(task_dir)
        image, _built = runner.build_task_image(task_dir)  # cached by digest; rebuilt if pruned
        v = runner.run_verifier(
            task_dir, job_id=self._job_id(what), attempt=self.job.attempt,
            artifacts_dir=artifacts, judge=judge, image=image,
        )
        v.judge = judging.judge_record(judge, v.judge_log, task_dir) if judge else None
        return v

    def _awaiting_judge(self, kind: str, trial: Trial, exc: Exception, **key) -> None:
        """No judge: the check waits (not scored, not retried by this job)."""
        claimed = _claimed_reward(trial) if trial is not None else None
        with transaction.atomic():  # check row + trial flag: both or neither (R7)
            self._record(kind, trial=trial, res=_Result(
                CheckStatus.AWAITING_JUDGE, claimed_reward=claimed, reason=str(exc),
                flags=[FLAG_AWAITING_JUDGE]), **key)
            if kind == CheckKind.REGRADE:
                _set_trial_flag(trial.pk, FLAG_AWAITING_JUDGE, True)

    def regrade(self, trial: Trial):
        claimed = _claimed_reward(trial)
        if (trial.claimed_outcome == Outcome.INFRA_ERROR and not self.rescore
                and Trial.objects.filter(pk=trial.pk, infra_confirmed=True).exists()):
            # Confirmed (by this job's re-attempt or a maintainer): not graded, not counted.
            with transaction.atomic():
                self._record(CheckKind.REGRADE, trial=trial, res=_Result(
                    CheckStatus.SKIPPED, reason="infrastructure error confirmed: not graded, "
                    "not counted (see the infrastructure re-attempt)"))
            self._progress()
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
                v = self.grade_outputs(trial, task_dir, out, f"t{trial.pk}-rg")
            except judging.JudgeNotConfigured as exc:
                if self.rescore:  # never half a re-score: retried, old scores kept meanwhile
                    raise runner.InfrastructureError(f"re-score needs the judge: {exc}") from exc
                self._awaiting_judge(CheckKind.REGRADE, trial, exc)
                self._progress()
                return
            except (runner.ImageBuildError, runner.TaskEnvironmentError) as exc:
                if not no_claim or self.rescore:
                    raise
                # An unconfirmed claimed infrastructure error (not re-attempted: over the cap)
                # whose environment fails: not graded; it stays a failure, the row says why.
                with transaction.atomic():
                    self._record(CheckKind.REGRADE, trial=trial, res=_Result(
                        CheckStatus.ERROR, reason=(
                            f"not graded: the task environment failed ({exc}); the claimed "
                            "infrastructure error is not confirmed (not re-attempted), so the "
                            "trial counts as a failure")[:5000]))
                self._progress()
                return
        verified = v.reward if v.reward is not None else 0.0
        match = no_claim or _same(verified, claimed)
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
        if self.rescore:
            # Judged against the site's previous score, not the claim (made under the old
            # grader): a re-score never flags the submitter.
            before, flags = trial.verified_reward, []
            reason = (f"re-score with {version}: {verified:g} (was "
                      f"{'not re-graded' if before is None else f'{before:g}'} with "
                      f"{trial.grader_version or 'an unversioned grader'})")
        with transaction.atomic():  # check row + trial score: both or neither (R7)
            self._record(CheckKind.REGRADE, trial=trial, res=_Result(
                CheckStatus.MATCH if match else CheckStatus.MISMATCH,
                verified_reward=verified, claimed_reward=claimed,
                flags=flags, reason=reason.strip(),
                detail={"rewards": v.rewards, "outputs": got, "verifier": v.result.reason,
                        "grader": v.grader, **({"judge": v.judge} if v.judge else {})},
                grader_version=version, grader_digest=grader_digest(task_dir),
                duration_s=time.time() - t0, judge=v.judge))
            if not self.rescore:
                _set_trial_flag(trial.pk, FLAG_REGRADE, not match, verified_reward=verified,
                                grader_version=version, clear=(FLAG_AWAITING_JUDGE,),
                                judge_model=(v.judge or {}).get("model", ""),
                                judge_prompt_version=(v.judge or {}).get("prompt_version", ""))
        self._progress()

    # -- infrastructure re-attempt
    def infra_not_attempted(self, trial: Trial, cap: int) -> None:
        with transaction.atomic():
            self._record(CheckKind.INFRA, trial=trial, res=_Result(
                CheckStatus.SKIPPED, reason=(
                    f"not re-attempted: the site re-attempts at most {cap} claimed "
                    "infrastructure errors per submission (VERIFICATION_INFRA_REATTEMPT_MAX); "
                    "unconfirmed, it counts as a failure"),
                detail={"cap": cap}))

    def _reattempt_agent(self, trial: Trial):
        """(mode, agent, trajectory, why not re-run): the harness itself when the site can run it (Harbor or
        a site agent), else a replay of the recorded commands, else the bare environment."""
        agent, why = self.rerun_agent()
        if agent is not None:
            return ("harbor" if agent.kind == "harbor" else "rerun"), agent, None, ""
        trajectory = load_trajectory(trial)
        if trajectory is not None and plan_from_trajectory(trajectory).replayable:
            return "replay", agents.SiteAgent(kind="replay", name="replay"), trajectory, why
        return "environment", agents.SiteAgent(kind="nop", name="nop"), None, why

    def infra_reattempt(self, trial: Trial) -> None:
        """Re-attempt a claimed infrastructure error in fresh containers: the agent phase (by
        _reattempt_agent), then the verifier on what it left. Only an infrastructure failure of
        the site's own attempt confirms the claim: the environment fails to build or start, the
        Harbor trial ends in an exception that is neither the agent's nor its timeout, or the
        verifier crashes, times out or reports an infrastructure error; a control container
        first proves the engine itself works (else the job is retried). An attempt that
        completes, whatever its grade, leaves the claim unconfirmed: a failure."""
        task_dir = task_dir_of(trial.benchmark_task)
        mode, agent, trajectory, why_not_rerun = self._reattempt_agent(trial)
        job_id = self._job_id(f"t{trial.pk}-if")
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
                                                 attempt=self.job.attempt, attempts=1,
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
                                                attempt=self.job.attempt, out_dir=artifacts,
                                                trajectory=trajectory)
                    detail["agent_phase"] = run.result.reason or "exited normally"
                    if run.result.container_died:
                        failure = f"the task container died during the agent phase " \
                                  f"({run.result.reason})"
                if not failure:
                    try:
                        v = self.grade_outputs(None, task_dir, artifacts, f"t{trial.pk}-if")
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
            runner.engine_control_run(job_id=self._job_id(f"t{trial.pk}-ctl"),
                                      attempt=self.job.attempt)
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
            self._record(CheckKind.INFRA, trial=trial, res=_Result(
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

    # -- replay
    def replay_sample(self) -> list[Trial]:
        rng = random.Random(f"{settings.LEADERBOARD_RANDOM_SEED}:{self.sub.pk}:replay")
        # Every claimed pass, and every trial this job's re-grade made a pass: each counted pass
        # must be replayed (or re-run) for the submission to be verified.
        site_passes = set(Trial.objects.filter(submission=self.sub, success=True)
                          .values_list("pk", flat=True))
        passes = [t for t in self.trials if t.claimed_success or t.pk in site_passes]
        passing = passes if self.config["replay_passing"] else []
        failing = [t for t in self.trials if t not in passes
                   and t.claimed_outcome != Outcome.INFRA_ERROR]
        k = min(len(failing), max(0, int(self.config["replay_failing"])))
        sample = passing + sorted(rng.sample(failing, k), key=lambda t: t.pk)
        return sample[: max(0, int(self.config["replay_max"]))]

    def replay(self, trial: Trial):
        claimed = _claimed_reward(trial)
        trajectory = load_trajectory(trial)
        if trajectory is None:
            with transaction.atomic():  # check row + trial score: both or neither (R7)
                self._record(CheckKind.REPLAY, trial=trial, res=_Result(
                    CheckStatus.NOT_REPLAYABLE, claimed_reward=claimed, flags=[FLAG_NOT_REPLAYABLE],
                    reason="no readable ATIF trajectory was submitted for this trial"))
                _set_trial_flag(trial.pk, FLAG_NOT_REPLAYABLE, True)
            return
        plan = plan_from_trajectory(trajectory)
        if not plan.replayable:
            with transaction.atomic():  # check row + trial score: both or neither (R7)
                self._record(CheckKind.REPLAY, trial=trial, res=_Result(
                    CheckStatus.NOT_REPLAYABLE, claimed_reward=claimed, flags=[FLAG_NOT_REPLAYABLE],
                    reason="tools the site cannot replay: " + ", ".join(plan.unknown_tools),
                    detail={"plan": plan.describe()}))
                _set_trial_flag(trial.pk, FLAG_NOT_REPLAYABLE, True)
            return
        task_dir = task_dir_of(trial.benchmark_task)
        t0 = time.time()
        reference = TrialCheck.objects.filter(
            job=self.job, trial=trial, kind=CheckKind.REGRADE).first()
        with tempfile.TemporaryDirectory(prefix="hab-replay-") as tmp:
            tmp = Path(tmp)
            (tmp / "submitted").mkdir()
            materialize_outputs(trial, task_dir, tmp / "submitted")
            run = agents.run_site_agent(
                agents.SiteAgent(kind="replay", name="replay"), task_dir,
                job_id=self._job_id(f"t{trial.pk}-rp"), attempt=self.job.attempt,
                out_dir=tmp / "replayed", trajectory=trajectory)
            replay_digest = outputs_digest(tmp / "replayed" / "workspace")
            sub_digest = outputs_digest(tmp / "submitted" / "workspace")
            try:
                v = self.grade_outputs(trial, task_dir, tmp / "replayed", f"t{trial.pk}-rp")
            except judging.JudgeNotConfigured as exc:
                self._awaiting_judge(CheckKind.REPLAY, trial, exc)
                return
        replay_reward = v.reward if v.reward is not None else 0.0
        submitted_reward = (reference.verified_reward if reference is not None
                            and reference.verified_reward is not None else claimed)
        reproduced = _same(replay_reward, submitted_reward)
        identical = bool(replay_digest) and replay_digest == sub_digest
        reason = "" if reproduced else (
            f"the recorded commands produce an output graded {replay_reward:g}; the submitted "
            f"output is graded {submitted_reward:g}")
        if run.result.reasons:
            reason = (reason + f" (replay: {run.result.reason})").strip()
        with transaction.atomic():  # check row + trial score: both or neither (R7)
            self._record(CheckKind.REPLAY, trial=trial, res=_Result(
                CheckStatus.MATCH if reproduced else CheckStatus.MISMATCH,
                verified_reward=replay_reward, claimed_reward=claimed, reproduced=reproduced,
                flags=[] if reproduced else [FLAG_REPLAY], reason=reason,
                detail={"plan": plan.describe(), "output_identical": identical,
                        "collected": run.collected, "missing": run.missing,
                        "log_tail": run.result.text[-2000:],
                        # What the runner saw the replay do, for the screen.
                        "activity": {"written": run.written,
                                     "log": run.result.text[-REPLAY_LOG_KEPT:]},
                        **({"judge": v.judge} if v.judge else {})},
                grader_version=grader_version(task_dir, v), grader_digest=grader_digest(task_dir),
                duration_s=time.time() - t0,
                judge=v.judge))
            _set_trial_flag(trial.pk, FLAG_REPLAY, not reproduced,
                            level=VerificationLevel.REPLAYED if reproduced else None)

    # -- reward-hacking screen
    def screen(self, trial: Trial):
        """Screen a counted pass (by its grade: claimed, re-graded, infra not confirmed) with the
        rules of evaluation/screen_rules.toml over its trajectory and its replay's activity."""
        t = Trial.objects.only("claimed_outcome", "verified_reward", "infra_confirmed").get(
            pk=trial.pk)
        if site_outcome(claimed=t.claimed_outcome, verified_reward=t.verified_reward,
                        infra_confirmed=t.infra_confirmed) != Outcome.PASSED:
            return
        replay = TrialCheck.objects.filter(job=self.job, trial=trial,
                                           kind=CheckKind.REPLAY).first()
        activity = (replay.detail or {}).get("activity") if replay is not None else None
        rules, hits, evidence, trajectory = screen_trial(
            trial, harness=self.sub.agent.harness.slug, activity=activity)
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
            self._record(CheckKind.SCREEN, trial=trial, res=_Result(
                CheckStatus.MISMATCH if tripped else CheckStatus.MATCH,
                flags=[f"reward_hack:{r}" for r in tripped], reason=reason.strip(),
                detail={"rules_version": rules.version, "rules": [r.id for r in rules.rules],
                        "hits": [h.as_dict() for h in hits], "evidence_items": len(evidence),
                        "trajectory": trajectory is not None, "replay_activity": bool(activity)},
                grader_version=rules.version))
            trial_screen_record(trial_id=trial.pk, hits=tripped)

    # -- re-run
    def rerun_sample(self) -> list[tuple]:
        rng = random.Random(f"{settings.LEADERBOARD_RANDOM_SEED}:{self.sub.pk}:rerun")
        tasks = {t.benchmark_task_id: t.benchmark_task for t in self.trials}
        chosen = sorted(tasks.values(), key=lambda t: (t.position, t.pk))
        k = min(len(chosen), max(0, int(self.config["rerun_tasks"])))
        chosen = sorted(rng.sample(chosen, k), key=lambda t: (t.position, t.pk))
        return [(task, i) for task in chosen
                for i in range(max(1, int(self.config["rerun_attempts"])))]

    def rerun_agent(self) -> tuple:
        a = self.sub.agent
        return agents.resolve_site_agent(a.harness.slug, harness_version=a.harness_version or "",
                                         agent_settings=a.settings or {})

    def _claimed_rate(self, task) -> float:
        claimed_trials = [t for t in self.trials if t.benchmark_task_id == task.pk]
        return sum(1 for t in claimed_trials if t.claimed_success) / max(1, len(claimed_trials))

    def rerun(self, item):
        task, k = item
        claimed = self._claimed_rate(task)
        agent, why = self.rerun_agent()
        if agent is None:
            self._record(CheckKind.RERUN, task=task, sample_index=k, res=_Result(
                CheckStatus.NOT_RUNNABLE, claimed_reward=claimed, reason=why))
            return
        task_dir = task_dir_of(task)
        t0 = time.time()
        with tempfile.TemporaryDirectory(prefix="hab-rerun-") as tmp:
            out = Path(tmp) / "out"
            run = agents.run_site_agent(agent, task_dir, job_id=self._job_id(f"k{task.pk}-{k}-rr"),
                                        attempt=self.job.attempt, out_dir=out)
            try:
                v = self.grade_outputs(None, task_dir, out, f"k{task.pk}-{k}-rr")
            except judging.JudgeNotConfigured as exc:
                self._awaiting_judge(CheckKind.RERUN, None, exc, task=task, sample_index=k)
                return
            finally:
                shutil.rmtree(out, ignore_errors=True)
        reward = v.reward if v.reward is not None else 0.0
        self._record(CheckKind.RERUN, task=task, sample_index=k, res=_Result(
            CheckStatus.MATCH if reward >= 1.0 else CheckStatus.MISMATCH,
            verified_reward=reward, claimed_reward=claimed, reproduced=reward >= 1.0,
            reason=run.result.reason, detail={"agent": agent.name, "kind": agent.kind,
                                              "log_tail": run.result.text[-2000:]},
            grader_version=grader_version(task_dir, v), grader_digest=grader_digest(task_dir),
            duration_s=time.time() - t0, judge=v.judge))

    def rerun_harbor(self, agent, group) -> None:
        """Re-run one task len(ks) times with the real Harbor CLI; grade each trial's outputs
        with the site's verifier, like a re-grade."""
        task, ks = group
        claimed = self._claimed_rate(task)
        task_dir = task_dir_of(task)
        with tempfile.TemporaryDirectory(prefix="hab-harbor-") as tmp:
            hb = agents.run_harbor_agent(agent, task_dir, job_id=self._job_id(f"k{task.pk}-hb"),
                                         attempt=self.job.attempt, attempts=len(ks),
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
                    v = self.grade_outputs(None, task_dir, trial.artifacts_dir,
                                           f"k{task.pk}-{k}-rr")
                except judging.JudgeNotConfigured as exc:
                    self._awaiting_judge(CheckKind.RERUN, None, exc, task=task, sample_index=k)
                    continue
                grade_s = time.time() - t0
                reward = v.reward if v.reward is not None else 0.0
                reason = f"{trial.exception_type}: {trial.exception_message}".strip(": ") \
                    if trial.exception_type else ""
                self._record(CheckKind.RERUN, task=task, sample_index=k, res=_Result(
                    CheckStatus.MATCH if reward >= 1.0 else CheckStatus.MISMATCH,
                    verified_reward=reward, claimed_reward=claimed, reproduced=reward >= 1.0,
                    reason=reason[:2000], detail={
                        "agent": agent.name, "kind": agent.kind, "model": agent.model,
                        "harness_version": agent.version, "agent_version": trial.agent_version,
                        "harbor_version": runner.harbor_version(),
                        "dropped_kwargs": runner.site_kwargs(agent.kwargs)[1],
                        "harbor_trial": trial.name, "trial_s": trial.seconds,
                        "agent_s": trial.agent_seconds,
                        "harbor_job_s": hb.seconds, "harbor_trials": len(hb.trials),
                        "grade_s": grade_s, "log_tail": hb.log_tail[-2000:], **egress},
                    grader_version=grader_version(task_dir, v),
                    grader_digest=grader_digest(task_dir), duration_s=per_trial_s + grade_s, judge=v.judge))
        if len(graded) < len(ks):  # the rest are retried with the job (done ones are kept)
            why = "; ".join(f"{t.exception_type}: {t.exception_message[:300]}" for t in infra)
            raise runner.InfrastructureError(
                f"harbor re-run of {task.name}: {len(ks) - len(graded)} of {len(ks)} trials "
                f"ended without a result the site can grade ({why or hb.log_tail[-500:]})")
