"""Verification of a submission: re-grade every trial, replay a sample, re-run a sample.

Modules: `jobs` (enqueue, publish, run, reaper), `lease` (claim, heartbeat, release),
`checks` (the registry of checks, one module per kind: checks/__init__.py), `verdict` (the
verdict from every check's contribution, status-page progress), `rescore`
(the switch that ends a re-score job of a published submission, R11).

Pipeline (house style HS14-HS24):

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
  screen   the reward-hacking screen (evaluation/screen.py, rules in evaluation/screen_rules.toml)
           on every counted pass, after the replay: a tripped rule flags the trial and counts it
           as a failure until a maintainer clears it (submissions.services.screen_flag_clear).
  rerun    the site runs the submission's agent (oracle, nop, command agents) on a sample of
           tasks; re-run vs claimed success on the same tasks, two-sided Fisher exact test.
"""

from submissions.verification.checks import (
    FLAG_NOT_REPLAYABLE,
    FLAG_REGRADE,
    FLAG_REPLAY,
    MAX_TRAJECTORY_BYTES,
    VERIFICATION_FLAGS,
    grader_digest,
    grader_version,
    load_trajectory,
    materialize_outputs,
    outputs_digest,
    screen_trial,
    task_dir_of,
)
from submissions.verification.jobs import (
    REAPER_LOCK,
    VERIFY_TASK,
    job_config,
    reap_stuck_submissions,
    verification_enqueue,
    verification_publish,
    verification_run,
)
from submissions.verification.lease import LeaseLost, run_prefix, worker_identity
from submissions.verification.sample import public_sample, rerun_commit, rerun_reveal
from submissions.verification.verdict import (
    rerun_statistics,
    submission_verdict_record,
    verification_progress,
    verification_summary,
)

__all__ = [
    "FLAG_NOT_REPLAYABLE", "FLAG_REGRADE", "FLAG_REPLAY", "MAX_TRAJECTORY_BYTES", "REAPER_LOCK",
    "VERIFICATION_FLAGS", "VERIFY_TASK", "LeaseLost", "grader_digest",
    "grader_version",
    "job_config", "load_trajectory", "materialize_outputs", "outputs_digest",
    "public_sample", "reap_stuck_submissions", "rerun_commit", "rerun_reveal", "rerun_statistics",
    "run_prefix", "screen_trial", "submission_verdict_record", "task_dir_of",
    "verification_enqueue", "verification_progress", "verification_publish", "verification_run",
    "verification_summary", "worker_identity",
]
