"""Verification of submissions: one job per verification run, one row per check of a trial.

The database is the truth (house style R16): a job is claimed with a conditional UPDATE, results
are written with update_or_create keyed by the unique constraints below, so a redelivered or
duplicated message never writes a second row, and a job's final states are never left.
"""

from django.db import models
from django.db.models import Q

from config.models import BaseModel


class JobStatus(models.TextChoices):
    PENDING = "pending", "Pending"  # waiting in the broker queue (or for the reconciler)
    RUNNING = "running", "Running"  # claimed by a worker that heartbeats
    DONE = "done", "Done"  # verdict written
    FAILED = "failed", "Failed (infrastructure)"  # attempt cap reached; never scored
    CANCELLED = "cancelled", "Cancelled"  # the submission left the verification path


ACTIVE_JOB_STATUSES = (JobStatus.PENDING, JobStatus.RUNNING)
FINAL_JOB_STATUSES = (JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED)


class VerificationJob(BaseModel):
    submission = models.ForeignKey(
        "submissions.Submission", on_delete=models.CASCADE, related_name="verification_jobs"
    )
    status = models.CharField(max_length=12, choices=JobStatus.choices, default=JobStatus.PENDING)
    attempt = models.PositiveSmallIntegerField(default=0)  # claims so far (the attempt cap)
    claimed_by = models.CharField(max_length=200, blank=True)  # "<hostname>:<pid>"
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Lease: past it (or with a stale heartbeat) the reaper takes the job back.
    deadline_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)  # last successful broker publish
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)  # shown on the status page while a job waits
    config = models.JSONField(default=dict, blank=True)  # checks and samples this job runs
    summary = models.JSONField(default=dict, blank=True)  # the verdict report
    verdict = models.CharField(max_length=20, blank=True)  # verified | discrepancy
    reaped = models.JSONField(default=list, blank=True)  # containers of dead attempts removed

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=JobStatus.values), name="verification_job_status_valid"
            ),
            # At most one live job per submission: enqueueing twice reuses it.
            models.UniqueConstraint(
                fields=["submission"],
                condition=Q(status__in=["pending", "running"]),
                name="uniq_active_verification_job",
            ),
        ]
        indexes = [
            # Serves the reaper: running jobs by heartbeat age.
            models.Index(fields=["status", "heartbeat_at"], name="vjob_status_heartbeat"),
            # Serves the reconciler: pending jobs never (or long ago) published.
            models.Index(fields=["status", "enqueued_at"], name="vjob_status_enqueued"),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"VerificationJob {self.pk} of submission {self.submission_id} ({self.status})"


class CheckKind(models.TextChoices):
    REGRADE = "regrade", "Re-grade"
    REPLAY = "replay", "Replay"
    RERUN = "rerun", "Re-run"


class CheckStatus(models.TextChoices):
    MATCH = "match", "Matches the claim"
    MISMATCH = "mismatch", "Differs from the claim"
    NOT_REPLAYABLE = "not_replayable", "Not replayable"
    NOT_RUNNABLE = "not_runnable", "Not runnable here"
    SKIPPED = "skipped", "Skipped"
    ERROR = "error", "Error"


class TrialCheck(BaseModel):
    """One check: a re-grade or a replay of a submitted trial, or one re-run of a task."""

    job = models.ForeignKey(VerificationJob, on_delete=models.CASCADE, related_name="checks")
    kind = models.CharField(max_length=10, choices=CheckKind.choices)
    # Null for re-runs, which belong to a task rather than to a submitted trial.
    trial = models.ForeignKey(
        "submissions.Trial",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="verification_checks",
    )
    benchmark_task = models.ForeignKey(
        "leaderboard.BenchmarkTask", on_delete=models.PROTECT, related_name="verification_checks"
    )
    sample_index = models.PositiveSmallIntegerField(default=0)  # re-run attempt number
    status = models.CharField(max_length=16, choices=CheckStatus.choices)
    claimed_reward = models.FloatField(null=True, blank=True)
    verified_reward = models.FloatField(null=True, blank=True)
    reproduced = models.BooleanField(null=True, blank=True)  # replay/re-run only
    flags = models.JSONField(default=list, blank=True)
    reason = models.TextField(blank=True)
    detail = models.JSONField(default=dict, blank=True)
    grader_version = models.CharField(max_length=64, blank=True)
    job_attempt = models.PositiveSmallIntegerField(default=1)  # the attempt that wrote it
    executions = models.PositiveIntegerField(default=1)  # times written (1 = exactly once)
    duration_s = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=CheckKind.values), name="trial_check_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(status__in=CheckStatus.values), name="trial_check_status_valid"
            ),
            models.UniqueConstraint(
                fields=["job", "trial", "kind"],
                condition=Q(trial__isnull=False),
                name="uniq_check_per_job_trial_kind",
            ),
            models.UniqueConstraint(
                fields=["job", "benchmark_task", "kind", "sample_index"],
                condition=Q(trial__isnull=True),
                name="uniq_rerun_per_job_task_sample",
            ),
        ]
        ordering = ["job", "kind", "benchmark_task", "trial", "sample_index"]

    def __str__(self) -> str:
        return f"{self.kind} {self.trial_id or self.benchmark_task_id}: {self.status}"
