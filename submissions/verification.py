"""Verification of a submission: re-grade every trial, replay a sample, re-run a sample.

Pipeline (house style sections 5-6):

* `verification_enqueue(submission=...)` creates the submission's one live VerificationJob (a
  partial unique constraint) and publishes its id on commit. A broker that is down loses
  nothing: the row is committed and `reap_stuck_submissions()` publishes it later (R5).
* `verification_run(job_id=...)` (the Celery task's body) claims the job with a conditional
  UPDATE (status, attempt and owner compared and set at once), heartbeats while it works,
  resumes from the checks already written (update_or_create keyed by the unique constraints,
  so a redelivered message never duplicates a row), and writes the verdict and the
  submission's status in one transaction, only while it still holds the claim.
* Infrastructure errors (Docker, broker, database) release the job for a retry and never
  score anything; after VERIFICATION_MAX_ATTEMPTS claims the job and the submission are
  `failed` (infrastructure) (R4).
* `reap_stuck_submissions()` (beat, every minute; under a cache.add lock; bounded batches)
  requeues jobs whose worker stopped heartbeating (their containers are reaped), fails those
  past the attempt cap, creates jobs for `queued` submissions that have none, and re-publishes
  pending jobs that were never (or long ago) published.

Checks (each configurable in settings, VERIFICATION_*):
  regrade  the trial's submitted output, taken from storage (declared outputs only, as data),
           graded in a fresh verifier container; mismatch with the claim -> `regrade_mismatch`.
  replay   the trajectory's recorded tool calls run in a fresh agent container, the result is
           graded; a grade different from the submitted output's -> `replay_mismatch`; an
           unknown tool -> `not_replayable` (reported, not hidden).
  rerun    the site runs the submission's agent (oracle, nop, command agents) on a sample of
           tasks; re-run vs claimed success on the same tasks, two-sided Fisher exact test.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import logging
import os
import random
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.cache import cache
from django.core.files.storage import default_storage
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from config.celery import app as celery_app
from evaluation import agents, runner
from evaluation.health import worker_health
from evaluation.replay import plan_from_trajectory
from submissions.models import (
    ACTIVE_JOB_STATUSES,
    FINAL_JOB_STATUSES,
    CheckKind,
    CheckStatus,
    JobStatus,
    Outcome,
    Submission,
    SubmissionStatus,
    Trial,
    TrialCheck,
    VerificationJob,
)
from submissions.states import InvalidTransition, submission_transition
from submissions.trials import trial_check_record

log = logging.getLogger(__name__)

FLAG_REGRADE = "regrade_mismatch"
FLAG_REPLAY = "replay_mismatch"
FLAG_NOT_REPLAYABLE = "not_replayable"
VERIFICATION_FLAGS = (FLAG_REGRADE, FLAG_REPLAY, FLAG_NOT_REPLAYABLE)
REAPER_LOCK = "evaluation:reap-stuck-submissions"
# Published by name (submissions/tasks.py defines it), so the task module, whose bodies import
# this one (R14), is not imported back.
VERIFY_TASK = "evaluation.verify_submission"
MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024


class LeaseLost(Exception):
    """Another worker (or the reaper) took the job back: stop without writing anything."""


def run_prefix(job_id: int) -> str:
    """Container job label prefix of a verification job: deterministic, unique per site."""
    return f"{settings.VERIFICATION_RUN_PREFIX}{job_id}-"


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_dead(claimed_by: str) -> bool:
    """True when the claim belongs to a process of this host that no longer exists."""
    host, _, pid = (claimed_by or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def job_config() -> dict:
    return {
        "checks": [c for c in settings.VERIFICATION_CHECKS if c in CheckKind.values],
        "replay_passing": settings.VERIFICATION_REPLAY_PASSING,
        "replay_failing": settings.VERIFICATION_REPLAY_FAILING,
        "replay_max": settings.VERIFICATION_REPLAY_MAX,
        "rerun_tasks": settings.VERIFICATION_RERUN_TASKS,
        "rerun_attempts": settings.VERIFICATION_RERUN_ATTEMPTS,
        "rerun_alpha": settings.VERIFICATION_RERUN_ALPHA,
    }


# --------------------------------------------------------------------------------------------
# Enqueue and publish
# --------------------------------------------------------------------------------------------
def verification_enqueue(*, submission: Submission) -> VerificationJob:
    """The submission's live job (created if none) and its publication on commit.

    Call it inside the transaction that moves the submission to `queued`; the job row commits
    with it, and a broker error after the commit only delays the job (the reconciler retries).
    """
    job = VerificationJob.objects.filter(
        submission_id=submission.pk, status__in=ACTIVE_JOB_STATUSES
    ).first()
    if job is None:
        try:
            with transaction.atomic():
                job = VerificationJob.objects.create(submission_id=submission.pk,
                                                     config=job_config())
        except IntegrityError:  # a concurrent enqueue created it first
            job = VerificationJob.objects.get(
                submission_id=submission.pk, status__in=ACTIVE_JOB_STATUSES
            )
    transaction.on_commit(partial(verification_publish, job_id=job.pk), robust=True)
    return job


def verification_publish(*, job_id: int) -> bool:
    """Send the job id to the evaluation queue. Never raises: False when the broker is down."""
    try:
        celery_app.send_task(VERIFY_TASK, args=[job_id], queue=settings.VERIFICATION_QUEUE)
    except Exception as exc:  # noqa: BLE001 - the broker's errors vary by transport
        log.warning("could not publish verification job %s: %s", job_id, exc)
        VerificationJob.objects.filter(pk=job_id, status=JobStatus.PENDING).update(
            last_error=f"broker unavailable, will retry: {exc}"[:2000], updated_at=timezone.now()
        )
        return False
    VerificationJob.objects.filter(pk=job_id, status=JobStatus.PENDING).update(
        enqueued_at=timezone.now(), updated_at=timezone.now()
    )
    return True


# --------------------------------------------------------------------------------------------
# Claim, heartbeat, release
# --------------------------------------------------------------------------------------------
def _fail_job(job: VerificationJob, reason: str) -> bool:
    """Job -> failed (from whatever live state it is in) and its submission -> failed."""
    now = timezone.now()
    with transaction.atomic():
        n = VerificationJob.objects.filter(
            pk=job.pk, status__in=ACTIVE_JOB_STATUSES, attempt=job.attempt
        ).update(status=JobStatus.FAILED, finished_at=now, last_error=reason[:5000],
                 updated_at=now)
        if n != 1:
            return False
        sub = Submission.objects.get(pk=job.submission_id)
        note = f"verification failed (infrastructure, not scored): {reason}"[:5000]
        if sub.status == SubmissionStatus.QUEUED:
            submission_transition(submission=sub, to_status=SubmissionStatus.VERIFYING,
                                  note=f"verification job {job.pk}")
        if sub.status == SubmissionStatus.VERIFYING:
            submission_transition(submission=sub, to_status=SubmissionStatus.FAILED, note=note,
                                  status_reason=note)
    return True


def _claim(job_id: int, worker: str) -> tuple[VerificationJob | None, str]:
    job = VerificationJob.objects.filter(pk=job_id).first()
    if job is None:
        return None, "missing"
    if job.status in FINAL_JOB_STATUSES:
        return None, "final"
    now = timezone.now()
    if job.status == JobStatus.RUNNING:
        stale = (
            job.heartbeat_at is None
            or job.heartbeat_at < now - timedelta(seconds=settings.VERIFICATION_STALE_AFTER_S)
            or (job.deadline_at is not None and job.deadline_at < now)
        )
        if not (stale or _owner_dead(job.claimed_by)):
            return None, "busy"  # R2: a duplicate delivery while the first copy runs
    if job.attempt >= settings.VERIFICATION_MAX_ATTEMPTS:
        _fail_job(job, f"gave up after {job.attempt} attempts; last error: {job.last_error}")
        return None, "attempt_cap"
    lease = settings.VERIFICATION_TIME_LIMIT_S + settings.VERIFICATION_STALE_AFTER_S
    claimed = VerificationJob.objects.filter(
        pk=job.pk, status=job.status, attempt=job.attempt, claimed_by=job.claimed_by
    ).update(
        status=JobStatus.RUNNING,
        attempt=F("attempt") + 1,
        claimed_by=worker,
        heartbeat_at=now,
        deadline_at=now + timedelta(seconds=lease),
        started_at=Coalesce("started_at", now),
        updated_at=now,
    )
    if claimed != 1:
        return None, "busy"
    job.refresh_from_db()
    return job, "claimed"


class _Heartbeat(threading.Thread):
    """Writes heartbeat_at while the job runs; sets `lost` when the claim is no longer ours."""

    def __init__(self, job: VerificationJob, worker: str):
        super().__init__(daemon=True, name=f"heartbeat-{job.pk}")
        self.job_id, self.worker, self.attempt = job.pk, worker, job.attempt
        self.lost = threading.Event()
        self._halt = threading.Event()

    def beat(self) -> None:
        n = VerificationJob.objects.filter(
            pk=self.job_id, status=JobStatus.RUNNING, claimed_by=self.worker,
            attempt=self.attempt,
        ).update(heartbeat_at=timezone.now())
        if n != 1:
            self.lost.set()

    def run(self):
        try:
            while not self._halt.wait(settings.VERIFICATION_HEARTBEAT_S):
                try:
                    self.beat()
                except DatabaseError as exc:  # a database outage: keep trying
                    log.warning("heartbeat of job %s failed: %s", self.job_id, exc)
                    connection.close()
                if self.lost.is_set():
                    return
        finally:
            connection.close()

    def stop(self):
        self._halt.set()
        self.join(timeout=10)


def _release(job: VerificationJob, worker: str, error: str) -> None:
    """Give the job back after an infrastructure error (the task then retries with backoff)."""
    if job.attempt >= settings.VERIFICATION_MAX_ATTEMPTS:
        _fail_job(job, f"gave up after {job.attempt} attempts; last error: {error}")
        return
    VerificationJob.objects.filter(
        pk=job.pk, status=JobStatus.RUNNING, claimed_by=worker, attempt=job.attempt
    ).update(status=JobStatus.PENDING, last_error=error[:5000], updated_at=timezone.now())


# --------------------------------------------------------------------------------------------
# The job
# --------------------------------------------------------------------------------------------
def verification_run(*, job_id: int, worker: str | None = None) -> str:
    """Run one verification job to its verdict. Returns what happened (for logs and tests).

    Raises runner.InfrastructureError / DatabaseError after releasing the job, so the Celery
    task retries with backoff; returns quietly for duplicates, final jobs and lost leases.
    """
    from celery.exceptions import SoftTimeLimitExceeded

    worker = worker or worker_identity()
    # R12: an unhealthy worker (disk nearly full, engine away, an image missing) claims nothing;
    # the job stays pending and the task is retried with backoff, so a healthy worker takes it.
    health = worker_health()  # a fraction of a second; jobs take minutes
    if not health["healthy"]:
        why = "; ".join(health["problems"])
        VerificationJob.objects.filter(pk=job_id, status=JobStatus.PENDING).update(
            last_error=f"worker {worker} unhealthy, not claimed: {why}"[:2000],
            updated_at=timezone.now()
        )
        raise runner.InfrastructureError(f"worker unhealthy: {why}")
    job, outcome = _claim(job_id, worker)
    if job is None:
        log.info("verification job %s: %s", job_id, outcome)
        return outcome
    heartbeat = _Heartbeat(job, worker)
    heartbeat.start()
    try:
        if not _submission_verifying(job):
            VerificationJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING,
                                           claimed_by=worker).update(
                status=JobStatus.CANCELLED, finished_at=timezone.now(),
                last_error="the submission left the verification path")
            return "cancelled"
        if job.attempt > 1:
            reaped = runner.reap_job_prefix(run_prefix(job.pk), keep_attempt=job.attempt)
            if reaped:
                log.warning("job %s: reaped containers of dead attempts: %s", job.pk, reaped)
                VerificationJob.objects.filter(pk=job.pk).update(reaped=job.reaped + reaped)
        _Checks(job, heartbeat).run()
        _finish(job, worker)
        return "done"
    except LeaseLost:
        log.warning("job %s: lease lost, stopping", job.pk)
        return "lease_lost"
    except SoftTimeLimitExceeded:
        _fail_job(job, "verification time limit exceeded")
        return "failed"
    except (runner.InfrastructureError, DatabaseError, ConnectionError, OSError) as exc:
        try:
            _release(job, worker, f"{type(exc).__name__}: {exc}")
        except DatabaseError:
            log.exception("job %s: could not release after %s", job.pk, exc)
        raise
    except Exception as exc:
        # A bug, not the infrastructure: release it; the reconciler publishes it again later
        # and the attempt cap ends it as failed (never scored).
        log.exception("job %s failed unexpectedly", job.pk)
        _release(job, worker, f"{type(exc).__name__}: {exc}")
        raise
    finally:
        heartbeat.stop()


def _submission_verifying(job: VerificationJob) -> bool:
    sub = Submission.objects.get(pk=job.submission_id)
    if sub.status == SubmissionStatus.VERIFYING:
        return True
    if sub.status != SubmissionStatus.QUEUED:
        return False
    try:
        submission_transition(submission=sub, to_status=SubmissionStatus.VERIFYING,
                              note=f"verification job {job.pk} started", trials_done=0)
    except InvalidTransition:
        return Submission.objects.filter(pk=sub.pk,
                                         status=SubmissionStatus.VERIFYING).exists()
    return True


def _finish(job: VerificationJob, worker: str) -> None:
    summary = verification_summary(job)
    verdict = summary["verdict"]
    now = timezone.now()
    with transaction.atomic():
        n = VerificationJob.objects.filter(
            pk=job.pk, status=JobStatus.RUNNING, claimed_by=worker, attempt=job.attempt
        ).update(status=JobStatus.DONE, verdict=verdict, summary=summary, finished_at=now,
                 last_error="", updated_at=now)
        if n != 1:
            raise LeaseLost()
        sub = Submission.objects.select_for_update().get(pk=job.submission_id)
        if sub.status != SubmissionStatus.VERIFYING:
            VerificationJob.objects.filter(pk=job.pk).update(status=JobStatus.CANCELLED)
            return
        submission_transition(
            submission=sub,
            to_status=verdict,
            note=summary["headline"],
            is_verified=verdict == SubmissionStatus.VERIFIED,
        )


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------
def task_dir_of(benchmark_task) -> Path:
    path = Path(benchmark_task.package_path or "")
    if not path.is_absolute():
        path = Path(settings.BASE_DIR) / path
    if not benchmark_task.package_path or not (path / "task.toml").is_file():
        raise runner.InfrastructureError(
            f"task package of {benchmark_task.name} is not on this worker ({path})"
        )
    return path


def grader_version(task_dir: Path) -> str:
    """Digest of what decides a grade: the task's tests/ and the base image (graders)."""
    h = hashlib.sha256()
    h.update(runner.tree_digest(Path(task_dir) / "tests").encode())
    h.update(runner.ensure_base_image().encode())
    return h.hexdigest()[:16]


def _judge_for(task_dir: Path):
    spec = runner.load_task_toml(task_dir)
    needs_judge = "XRAY_JUDGE_URL" in ((spec.get("verifier") or {}).get("env") or {})
    if needs_judge and settings.VERIFICATION_JUDGE_STANDIN:
        return runner.JudgeSpec(script=Path(settings.VERIFICATION_JUDGE_STANDIN))
    return None


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
    duration_s: float | None = None


class _Checks:
    def __init__(self, job: VerificationJob, heartbeat: _Heartbeat):
        self.job = job
        self.heartbeat = heartbeat
        self.config = {**job_config(), **(job.config or {})}
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
        if CheckKind.REGRADE in checks:
            done = self._done(CheckKind.REGRADE)
            self._progress()
            self._parallel(self.regrade, [t for t in self.trials if t.pk not in done])
        if CheckKind.REPLAY in checks:
            done = self._done(CheckKind.REPLAY)
            self._parallel(self.replay, [t for t in self.replay_sample() if t.pk not in done])
        if CheckKind.RERUN in checks:
            done = self._done(CheckKind.RERUN)
            todo = [(task, k) for task, k in self.rerun_sample() if (task.pk, k) not in done]
            self._parallel(self.rerun, todo)

    def _progress(self):
        n = TrialCheck.objects.filter(job=self.job, kind=CheckKind.REGRADE).count()
        if n:  # Greatest: parallel trials may finish their counts out of order
            Submission.objects.filter(pk=self.sub.pk).update(
                trials_done=Greatest(F("trials_done"), Value(n)))

    # -- re-grade
    def grade_outputs(self, trial, task_dir: Path, artifacts: Path, what: str):
        image, _built = runner.build_task_image(task_dir)  # cached by digest; rebuilt if pruned
        return runner.run_verifier(
            task_dir, job_id=self._job_id(what), attempt=self.job.attempt,
            artifacts_dir=artifacts, judge=_judge_for(task_dir), image=image,
        )

    def regrade(self, trial: Trial):
        claimed = _claimed_reward(trial)
        # A claimed infrastructure error is graded too: the site decides what it counts as
        # (site_outcome); having claimed no grade, it is no mismatch.
        no_claim = trial.claimed_outcome == Outcome.INFRA_ERROR
        task_dir = task_dir_of(trial.benchmark_task)
        t0 = time.time()
        with tempfile.TemporaryDirectory(prefix="hab-regrade-") as tmp:
            out = Path(tmp) / "outputs"
            out.mkdir()
            got = materialize_outputs(trial, task_dir, out)
            v = self.grade_outputs(trial, task_dir, out, f"t{trial.pk}-rg")
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
        with transaction.atomic():  # check row + trial score: both or neither (R7)
            self._record(CheckKind.REGRADE, trial=trial, res=_Result(
                CheckStatus.MATCH if match else CheckStatus.MISMATCH,
                verified_reward=verified, claimed_reward=claimed,
                flags=[] if match else [FLAG_REGRADE], reason=reason.strip(),
                detail={"rewards": v.rewards, "outputs": got, "verifier": v.result.reason},
                grader_version=grader_version(task_dir), duration_s=time.time() - t0))
            _set_trial_flag(trial.pk, FLAG_REGRADE, not match, verified_reward=verified)
        self._progress()

    # -- replay
    def replay_sample(self) -> list[Trial]:
        rng = random.Random(f"{settings.LEADERBOARD_RANDOM_SEED}:{self.sub.pk}:replay")
        # By the claim: the sample does not depend on an earlier job's re-grade.
        passing = ([t for t in self.trials if t.claimed_success]
                   if self.config["replay_passing"] else [])
        failing = [t for t in self.trials
                   if not t.claimed_success and t.claimed_outcome != Outcome.INFRA_ERROR]
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
            v = self.grade_outputs(trial, task_dir, tmp / "replayed", f"t{trial.pk}-rp")
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
                        "log_tail": run.result.text[-2000:]},
                grader_version=grader_version(task_dir), duration_s=time.time() - t0))
            _set_trial_flag(trial.pk, FLAG_REPLAY, not reproduced)

    # -- re-run
    def rerun_sample(self) -> list[tuple]:
        rng = random.Random(f"{settings.LEADERBOARD_RANDOM_SEED}:{self.sub.pk}:rerun")
        tasks = {t.benchmark_task_id: t.benchmark_task for t in self.trials}
        chosen = sorted(tasks.values(), key=lambda t: (t.position, t.pk))
        k = min(len(chosen), max(0, int(self.config["rerun_tasks"])))
        chosen = sorted(rng.sample(chosen, k), key=lambda t: (t.position, t.pk))
        return [(task, i) for task in chosen
                for i in range(max(1, int(self.config["rerun_attempts"])))]

    def rerun(self, item):
        task, k = item
        claimed_trials = [t for t in self.trials if t.benchmark_task_id == task.pk]
        claimed = sum(1 for t in claimed_trials if t.claimed_success) / max(1, len(claimed_trials))
        agent = agents.site_agent_for(self.sub.agent.harness.slug)
        if agent is None:
            self._record(CheckKind.RERUN, task=task, sample_index=k, res=_Result(
                CheckStatus.NOT_RUNNABLE, claimed_reward=claimed,
                reason=f"the site cannot run harness {self.sub.agent.harness.slug!r} "
                       "(configure VERIFICATION_COMMAND_AGENTS)"))
            return
        task_dir = task_dir_of(task)
        t0 = time.time()
        with tempfile.TemporaryDirectory(prefix="hab-rerun-") as tmp:
            out = Path(tmp) / "out"
            run = agents.run_site_agent(agent, task_dir, job_id=self._job_id(f"k{task.pk}-{k}-rr"),
                                        attempt=self.job.attempt, out_dir=out)
            v = self.grade_outputs(None, task_dir, out, f"k{task.pk}-{k}-rr")
            shutil.rmtree(out, ignore_errors=True)
        reward = v.reward if v.reward is not None else 0.0
        self._record(CheckKind.RERUN, task=task, sample_index=k, res=_Result(
            CheckStatus.MATCH if reward >= 1.0 else CheckStatus.MISMATCH,
            verified_reward=reward, claimed_reward=claimed, reproduced=reward >= 1.0,
            reason=run.result.reason, detail={"agent": agent.name, "kind": agent.kind,
                                              "log_tail": run.result.text[-2000:]},
            grader_version=grader_version(task_dir), duration_s=time.time() - t0))


# --------------------------------------------------------------------------------------------
# Verdict
# --------------------------------------------------------------------------------------------
def fisher_exact_two_sided(a: int, b: int, c: int, d: int) -> float:
    """p of the 2x2 table [[a, b], [c, d]] (re-run pass/fail vs claimed pass/fail)."""
    from scipy.stats import fisher_exact

    if (a + b) == 0 or (c + d) == 0:
        return 1.0
    return float(fisher_exact([[a, b], [c, d]], alternative="two-sided").pvalue)


def rerun_statistics(job: VerificationJob) -> dict | None:
    reruns = list(TrialCheck.objects.filter(job=job, kind=CheckKind.RERUN))
    ran = [r for r in reruns if r.status in (CheckStatus.MATCH, CheckStatus.MISMATCH)]
    if not ran:
        reason = reruns[0].reason if reruns else "re-run not configured"
        return {"ran": False, "reason": reason, "significant": False}
    tasks = {r.benchmark_task_id for r in ran}
    claimed = Trial.objects.filter(submission_id=job.submission_id, benchmark_task_id__in=tasks)
    c_pass = claimed.filter(claimed_success=True).count()
    c_fail = claimed.count() - c_pass
    r_pass = sum(1 for r in ran if (r.verified_reward or 0) >= 1.0)
    r_fail = len(ran) - r_pass
    p = fisher_exact_two_sided(r_pass, r_fail, c_pass, c_fail)
    alpha = (job.config or {}).get("rerun_alpha", settings.VERIFICATION_RERUN_ALPHA)
    return {
        "ran": True,
        "tasks": len(tasks),
        "rerun_success": r_pass,
        "rerun_runs": len(ran),
        "rerun_rate": r_pass / len(ran),
        "claimed_success": c_pass,
        "claimed_runs": c_pass + c_fail,
        "claimed_rate": c_pass / max(1, c_pass + c_fail),
        "test": "Fisher exact, two-sided (re-run vs claimed pass/fail on the same tasks)",
        "p_value": p,
        "alpha": alpha,
        "significant": p < alpha,
    }


def verification_summary(job: VerificationJob) -> dict:
    checks = TrialCheck.objects.filter(job=job)

    def count(kind, status=None):
        qs = checks.filter(kind=kind)
        return qs.filter(status=status).count() if status else qs.count()

    regrade_mismatch = sorted(checks.filter(kind=CheckKind.REGRADE, status=CheckStatus.MISMATCH)
                              .values_list("trial_id", flat=True))
    replay_mismatch = sorted(checks.filter(kind=CheckKind.REPLAY, status=CheckStatus.MISMATCH)
                             .values_list("trial_id", flat=True))
    not_replayable = sorted(checks.filter(kind=CheckKind.REPLAY,
                                          status=CheckStatus.NOT_REPLAYABLE)
                            .values_list("trial_id", flat=True))
    rerun = rerun_statistics(job)
    discrepancy = bool(regrade_mismatch or replay_mismatch or (rerun and rerun["significant"]))
    verdict = SubmissionStatus.DISCREPANCY if discrepancy else SubmissionStatus.VERIFIED
    regraded = count(CheckKind.REGRADE)
    replayed = count(CheckKind.REPLAY)
    parts = [f"{regraded - len(regrade_mismatch)}/{regraded} re-grades match"]
    if replayed:
        parts.append(f"{count(CheckKind.REPLAY, CheckStatus.MATCH)}/{replayed} replays reproduce"
                     + (f" ({len(not_replayable)} not replayable)" if not_replayable else ""))
    if rerun and rerun["ran"]:
        parts.append(f"re-run {rerun['rerun_success']}/{rerun['rerun_runs']} vs claimed "
                     f"{rerun['claimed_success']}/{rerun['claimed_runs']} "
                     f"(Fisher p={rerun['p_value']:.3g}"
                     f"{', significant' if rerun['significant'] else ''})")
    return {
        "verdict": str(verdict),
        "headline": f"{verdict}: " + "; ".join(parts),
        "regrade": {"checked": regraded, "mismatched_trials": regrade_mismatch,
                    "skipped": count(CheckKind.REGRADE, CheckStatus.SKIPPED)},
        "replay": {"checked": replayed, "mismatched_trials": replay_mismatch,
                   "not_replayable_trials": not_replayable},
        "rerun": rerun,
    }


def verification_progress(*, submission: Submission) -> dict:
    """For the status page: the live job, its checks done per kind, and why it waits."""
    job = submission.verification_jobs.order_by("-created_at").first()
    if job is None:
        return {"job": None}
    done = {k: TrialCheck.objects.filter(job=job, kind=k).count() for k in CheckKind.values}
    return {
        "job": job.pk,
        "status": job.status,
        "attempt": job.attempt,
        "waiting_because": job.last_error if job.status == JobStatus.PENDING else "",
        "heartbeat_at": job.heartbeat_at,
        "regrade": {"done": done["regrade"], "total": submission.trials_total
                    or submission.trials.count()},
        "replay": {"done": done["replay"]},
        "rerun": {"done": done["rerun"]},
        "verdict": job.verdict,
        "summary": job.summary,
    }


# --------------------------------------------------------------------------------------------
# Reaper and reconciler
# --------------------------------------------------------------------------------------------
def reap_stuck_submissions(*, batch: int | None = None) -> dict:
    """Requeue or fail stale running jobs, enqueue forgotten queued submissions, re-publish.

    Runs under a cache.add lock (overlapping runs return at once) and handles bounded batches.
    """
    batch = batch or settings.VERIFICATION_REAPER_BATCH
    report = {"locked": False, "requeued": [], "failed": [], "enqueued": [], "published": []}
    if not cache.add(REAPER_LOCK, worker_identity(), timeout=300):
        report["locked"] = True
        return report
    try:
        now = timezone.now()
        stale_before = now - timedelta(seconds=settings.VERIFICATION_STALE_AFTER_S)
        stuck = (VerificationJob.objects.filter(status=JobStatus.RUNNING)
                 .filter(Q(heartbeat_at__lt=stale_before) | Q(heartbeat_at__isnull=True)
                         | Q(deadline_at__lt=now))
                 .order_by("heartbeat_at")[:batch])
        published: set[int] = set()
        for job in stuck:
            if job.attempt >= settings.VERIFICATION_MAX_ATTEMPTS:
                if _fail_job(job, f"worker {job.claimed_by} stopped after attempt {job.attempt} "
                                  f"of {settings.VERIFICATION_MAX_ATTEMPTS}"):
                    report["failed"].append(job.pk)
                continue
            n = VerificationJob.objects.filter(
                pk=job.pk, status=JobStatus.RUNNING, attempt=job.attempt,
                claimed_by=job.claimed_by,
            ).update(status=JobStatus.PENDING, updated_at=now,
                     last_error=f"worker {job.claimed_by} stopped heartbeating at "
                                f"{job.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC; requeued")
            if n != 1:
                continue
            try:
                reaped = runner.reap_job_prefix(run_prefix(job.pk))
                if reaped:
                    VerificationJob.objects.filter(pk=job.pk).update(reaped=job.reaped + reaped)
            except runner.InfrastructureError as exc:
                log.warning("could not reap containers of job %s: %s", job.pk, exc)
            report["requeued"].append(job.pk)
            if verification_publish(job_id=job.pk):
                published.add(job.pk)
        forgotten = (Submission.objects.filter(status=SubmissionStatus.QUEUED)
                     .exclude(verification_jobs__status__in=ACTIVE_JOB_STATUSES)
                     .order_by("queued_at", "pk")[:batch])
        for sub in forgotten:
            job = verification_enqueue(submission=sub)  # publishes at once (no transaction)
            report["enqueued"].append(job.pk)
            published.add(job.pk)
        republish_before = now - timedelta(seconds=settings.VERIFICATION_REPUBLISH_AFTER_S)
        unsent = (VerificationJob.objects.filter(status=JobStatus.PENDING)
                  .filter(Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=republish_before))
                  .exclude(pk__in=published).order_by("created_at")[:batch])
        for job in unsent:
            if verification_publish(job_id=job.pk):
                report["published"].append(job.pk)
    finally:
        cache.delete(REAPER_LOCK)
    return report
