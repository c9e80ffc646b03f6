"""Submissions of an agent's runs on a benchmark version, and their trials."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from config.models import BaseModel


class SubmissionStatus(models.TextChoices):
    RECEIVED = "received", "Received"
    VALIDATING = "validating", "Validating"
    REJECTED = "rejected", "Rejected"
    QUEUED = "queued", "Queued"
    VERIFYING = "verifying", "Verifying"
    VERIFIED = "verified", "Verified"
    DISCREPANCY = "discrepancy", "Discrepancy"
    FAILED = "failed", "Failed (infrastructure)"
    PUBLISHED = "published", "Published"
    WITHDRAWN = "withdrawn", "Withdrawn"


class Outcome(models.TextChoices):
    PASSED = "passed", "Passed"
    FAILED = "failed", "Failed"
    TIMEOUT = "timeout", "Timeout"
    AGENT_ERROR = "agent_error", "Agent error"
    INFRA_ERROR = "infra_error", "Infrastructure error"


# One letter per outcome for the task matrix.
OUTCOME_CODES = {
    Outcome.PASSED: "P",
    Outcome.FAILED: "F",
    Outcome.TIMEOUT: "T",
    Outcome.AGENT_ERROR: "E",
    Outcome.INFRA_ERROR: "I",
}


class SubmissionQuerySet(models.QuerySet):
    def published(self):
        return self.filter(status=SubmissionStatus.PUBLISHED)


class Submission(BaseModel):
    agent = models.ForeignKey(
        "leaderboard.Agent", on_delete=models.PROTECT, related_name="submissions"
    )
    benchmark_version = models.ForeignKey(
        "leaderboard.BenchmarkVersion", on_delete=models.PROTECT, related_name="submissions"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="submissions",
    )
    status = models.CharField(
        max_length=20, choices=SubmissionStatus.choices, default=SubmissionStatus.RECEIVED
    )
    is_verified = models.BooleanField(default=False)
    # Demo rows reconstructed from the paper's published aggregates, not real runs.
    is_reconstructed = models.BooleanField(default=False)
    source = models.CharField(max_length=200, blank=True)
    # sha256 of the trial data as loaded; lets loaders be idempotent.
    data_digest = models.CharField(max_length=64, blank=True)
    notes = models.TextField(blank=True)
    submitted_on = models.DateField(null=True, blank=True)
    published_at = models.DateTimeField(null=True, blank=True)

    objects = SubmissionQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=SubmissionStatus.values), name="submission_status_valid"
            ),
        ]
        indexes = [
            # Serves leaderboard_recompute: published submissions of one version.
            models.Index(fields=["benchmark_version", "status"], name="submission_version_status"),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Submission {self.pk} ({self.status})"


class Trial(BaseModel):
    """One attempt of an agent on one benchmark task."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="trials")
    benchmark_task = models.ForeignKey(
        "leaderboard.BenchmarkTask", on_delete=models.PROTECT, related_name="trials"
    )
    attempt = models.PositiveSmallIntegerField()
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    reward = models.FloatField(null=True)
    success = models.BooleanField()
    soft_metrics = models.JSONField(default=dict, blank=True)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True)
    input_tokens = models.PositiveBigIntegerField(null=True)
    cached_tokens = models.PositiveBigIntegerField(null=True)
    output_tokens = models.PositiveBigIntegerField(null=True)
    duration_s = models.FloatField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["submission", "benchmark_task", "attempt"], name="uniq_trial_attempt"
            ),
            models.CheckConstraint(condition=Q(attempt__gte=1), name="trial_attempt_positive"),
            models.CheckConstraint(condition=Q(outcome__in=Outcome.values), name="trial_outcome_valid"),
            # A success is exactly a passed outcome.
            models.CheckConstraint(
                condition=Q(success=True, outcome=Outcome.PASSED)
                | (Q(success=False) & ~Q(outcome=Outcome.PASSED)),
                name="trial_success_iff_passed",
            ),
        ]
        ordering = ["submission", "benchmark_task", "attempt"]

    def __str__(self) -> str:
        return f"{self.benchmark_task_id}#{self.attempt}: {self.outcome}"
