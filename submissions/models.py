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


def site_outcome(*, claimed: str, verified_reward: float | None,
                 infra_confirmed: bool = False) -> str:
    """The site's outcome of a trial from the submitter's claim and the site's checks.

    The re-grade decides between passed and failed whenever it exists (a claimed pass whose
    output grades below 1 is a failure, a claimed failure whose output grades 1 is a pass).
    Timeouts and agent errors stay what they are (they are failures whatever the output). A
    claimed infrastructure error is the site's to decide: it stays one (and leaves the
    denominator) only when the site confirmed it; otherwise it is a failure, or a pass if the
    site graded its output as one. Without a re-grade a claimed pass or failure stands (the
    trial's verification level says so).
    """
    if claimed == Outcome.INFRA_ERROR:
        if infra_confirmed:
            return Outcome.INFRA_ERROR
        return (Outcome.PASSED if verified_reward is not None and verified_reward >= 1.0
                else Outcome.FAILED)
    if verified_reward is None or claimed not in (Outcome.PASSED, Outcome.FAILED):
        return claimed
    return Outcome.PASSED if verified_reward >= 1.0 else Outcome.FAILED


# Integrity flag of a trial whose claimed infrastructure error the site has not confirmed.
FLAG_INFRA_UNCONFIRMED = "infra_unconfirmed"


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


# Allowed status changes; anything else is refused by the service layer (never backwards).
TRANSITIONS: dict[str, set[str]] = {
    SubmissionStatus.RECEIVED: {SubmissionStatus.VALIDATING, SubmissionStatus.REJECTED},
    SubmissionStatus.VALIDATING: {SubmissionStatus.QUEUED, SubmissionStatus.REJECTED},
    # Only a verified (or discrepancy, with its flags shown) submission can be published.
    SubmissionStatus.QUEUED: {SubmissionStatus.VERIFYING, SubmissionStatus.REJECTED},
    SubmissionStatus.VERIFYING: {
        SubmissionStatus.VERIFIED, SubmissionStatus.DISCREPANCY, SubmissionStatus.FAILED,
        SubmissionStatus.REJECTED,
    },
    # A maintainer may re-verify (e.g. after a grader update): back in the queue, a new job;
    # every job keeps its own check rows, so the history stays.
    SubmissionStatus.VERIFIED: {
        SubmissionStatus.PUBLISHED, SubmissionStatus.REJECTED, SubmissionStatus.QUEUED,
    },
    SubmissionStatus.DISCREPANCY: {
        SubmissionStatus.PUBLISHED, SubmissionStatus.REJECTED, SubmissionStatus.QUEUED,
    },
    # A maintainer may put a submission whose verification broke (infrastructure) back in line.
    SubmissionStatus.FAILED: {SubmissionStatus.QUEUED, SubmissionStatus.REJECTED},
    SubmissionStatus.PUBLISHED: {SubmissionStatus.WITHDRAWN},
    SubmissionStatus.REJECTED: set(),
    SubmissionStatus.WITHDRAWN: set(),
}


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
    # --- uploads (empty for demo rows) ---
    metadata = models.JSONField(default=dict, blank=True)
    archive = models.CharField(max_length=300, blank=True)  # storage name of the original upload
    archive_sha256 = models.CharField(max_length=64, blank=True)
    archive_bytes = models.PositiveBigIntegerField(default=0)
    files_prefix = models.CharField(max_length=300, blank=True)  # storage prefix of stored files
    # Retries with the same key replay the original response (unique per owner, see Meta).
    idempotency_key = models.CharField(max_length=200, blank=True)
    request_digest = models.CharField(max_length=64, blank=True)
    secret_findings = models.JSONField(default=list, blank=True)
    status_reason = models.TextField(blank=True)
    trials_total = models.PositiveIntegerField(default=0)
    trials_done = models.PositiveIntegerField(default=0)
    queued_at = models.DateTimeField(null=True, blank=True)

    objects = SubmissionQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=SubmissionStatus.values), name="submission_status_valid"
            ),
            models.UniqueConstraint(
                fields=["owner", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="uniq_submission_idempotency_key",
            ),
        ]
        indexes = [
            # Serves leaderboard_recompute: published submissions of one version.
            models.Index(fields=["benchmark_version", "status"], name="submission_version_status"),
            # Serves queue position: queued submissions in arrival order.
            models.Index(fields=["status", "queued_at"], name="submission_status_queued"),
            # Serves "my submissions".
            models.Index(fields=["owner", "-created_at"], name="submission_owner_created"),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Submission {self.pk} ({self.status})"

    @property
    def is_final(self) -> bool:
        return not TRANSITIONS[self.status]


class SubmissionEvent(BaseModel):
    """Audit log: every status change, who made it and why. Append-only."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="events")
    from_status = models.CharField(max_length=20, blank=True)
    to_status = models.CharField(max_length=20)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["submission", "created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.submission_id}: {self.from_status} -> {self.to_status}"


class ValidationProblem(BaseModel):
    """A problem found while validating an upload, kept for the submitter's status page."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="problems")
    code = models.CharField(max_length=60)
    path = models.CharField(max_length=500, blank=True)
    message = models.TextField()

    class Meta:
        ordering = ["submission", "pk"]

    def __str__(self) -> str:
        return f"{self.code} {self.path}"


class DailyQuota(BaseModel):
    """Submissions accepted per user per UTC day; incremented under a row lock."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    day = models.DateField()
    used = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "day"], name="uniq_quota_user_day"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} {self.day}: {self.used}"


class ApiToken(BaseModel):
    """A personal API token. Only a SHA-256 of the secret is stored; the prefix identifies it."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    key_sha256 = models.CharField(max_length=64, unique=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user", "-created_at"]
        constraints = [
            # A user tells their tokens apart by name (revoked ones keep theirs).
            models.UniqueConstraint(fields=["user", "name"],
                                    condition=models.Q(revoked_at__isnull=True),
                                    name="uniq_active_token_name_per_user"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.prefix}"

class Trial(BaseModel):
    """One attempt of an agent on one benchmark task."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="trials")
    benchmark_task = models.ForeignKey(
        "leaderboard.BenchmarkTask", on_delete=models.PROTECT, related_name="trials"
    )
    attempt = models.PositiveSmallIntegerField()
    # The site's outcome (``site_outcome``: the claim corrected by the site's checks). Every
    # public page, CSV, API and aggregate reads these two; the claim is kept beside them.
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    success = models.BooleanField()
    # What the submitter's run recorded (Harbor's result.json), never changed by the site.
    claimed_outcome = models.CharField(max_length=20, choices=Outcome.choices)
    claimed_success = models.BooleanField()
    reward = models.FloatField(null=True)  # the claimed reward; the site's is verified_reward
    # The site itself hit an infrastructure failure on this trial (only then does a claimed
    # infrastructure error leave the denominator; site_outcome).
    infra_confirmed = models.BooleanField(default=False)
    soft_metrics = models.JSONField(default=dict, blank=True)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True)
    input_tokens = models.PositiveBigIntegerField(null=True)
    cached_tokens = models.PositiveBigIntegerField(null=True)
    output_tokens = models.PositiveBigIntegerField(null=True)
    duration_s = models.FloatField(null=True)
    # --- uploads ---
    trial_dir = models.CharField(max_length=500, blank=True)  # path inside the stored tree
    trajectory_path = models.CharField(max_length=500, blank=True)
    artifact_paths = models.JSONField(default=list, blank=True)
    cost_computed = models.BooleanField(default=False)  # from tokens x the dated price table
    # --- verification (re-grade / replay); null until checked ---
    verified_reward = models.FloatField(null=True, blank=True)
    flags = models.JSONField(default=list, blank=True)

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
            models.CheckConstraint(condition=Q(claimed_outcome__in=Outcome.values),
                                   name="trial_claimed_outcome_valid"),
            models.CheckConstraint(
                condition=Q(claimed_success=True, claimed_outcome=Outcome.PASSED)
                | (Q(claimed_success=False) & ~Q(claimed_outcome=Outcome.PASSED)),
                name="trial_claimed_success_iff_passed",
            ),
        ]
        ordering = ["submission", "benchmark_task", "attempt"]

    def __str__(self) -> str:
        return f"{self.benchmark_task_id}#{self.attempt}: {self.outcome}"

    @property
    def outcome_differs(self) -> bool:
        """The site's outcome is not what the submission claims."""
        return self.outcome != self.claimed_outcome
