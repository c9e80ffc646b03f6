"""Submissions of an agent's runs on a benchmark version, and their trials."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from config.models import BaseModel
from evaluation.models import Agent, BenchmarkTask, BenchmarkVersion
from submissions.flags import (  # noqa: F401 - the trial flags, re-exported for their callers
    FLAG_AWAITING_JUDGE, FLAG_AWAITING_TRAJECTORY_JUDGE, FLAG_INFRA_UNCONFIRMED,
    FLAG_NOT_REPLAYABLE, FLAG_REWARD_HACK, FLAG_TRAJECTORY_SUSPICIOUS, STATE_FLAGS,
    TRAJECTORY_JUDGE_HIT, is_flagged)


class SubmissionStatus(models.TextChoices):
    RECEIVED = "received", "Received"
    VALIDATING = "validating", "Validating"
    REJECTED = "rejected", "Rejected"
    # Validation refused the upload (its problems are listed on the status page and API).
    REFUSED = "refused", "Refused (invalid upload)"
    QUEUED = "queued", "Queued"
    VERIFYING = "verifying", "Verifying"
    # Every condition of the methods page held, the re-run among them (VERDICT_DEFINITIONS).
    VERIFIED = "verified", "Verified"
    # No check contradicted the claims, but the site has not re-run the agent (or another
    # condition of "verified" is missing; the badge says which).
    CONSISTENT = "consistent", "Consistent (not re-run by the site)"
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
                 infra_confirmed: bool = False, screened: bool = False) -> str:
    """The site's outcome of a trial from the submitter's claim and the site's checks.

    The re-grade decides between passed and failed whenever it exists (a claimed pass whose
    output grades below 1 is a failure, a claimed failure whose output grades 1 is a pass).
    Timeouts and agent errors stay what they are (they are failures whatever the output). A
    claimed infrastructure error is the site's to decide: it stays one (and leaves the
    denominator) only when the site confirmed it; otherwise it is a failure, or a pass if the
    site graded its output as one. Without a re-grade a claimed pass or failure stands (the
    trial's verification level says so). A pass the reward-hacking screen flagged
    (``screened``: a rule tripped and no maintainer cleared it) is a failure.
    """
    outcome = _graded_outcome(claimed, verified_reward, infra_confirmed)
    return Outcome.FAILED if screened and outcome == Outcome.PASSED else outcome


def _graded_outcome(claimed: str, verified_reward: float | None, infra_confirmed: bool) -> str:
    if claimed == Outcome.INFRA_ERROR:
        if infra_confirmed:
            return Outcome.INFRA_ERROR
        return (Outcome.PASSED if verified_reward is not None and verified_reward >= 1.0
                else Outcome.FAILED)
    if verified_reward is None or claimed not in (Outcome.PASSED, Outcome.FAILED):
        return claimed
    return Outcome.PASSED if verified_reward >= 1.0 else Outcome.FAILED


class InfraConfirmation(models.TextChoices):
    """Who confirmed a claimed infrastructure error (Trial.infra_confirmed_by)."""

    SITE = "site", "the site's re-attempt"
    MAINTAINER = "maintainer", "a maintainer"


class VerificationLevel(models.TextChoices):
    """How far the site checked one trial (methods page, "Verification levels"), strongest
    first: re-run > reproduced > re-graded > claimed. A trial keeps its strongest."""

    CLAIMED = "claimed", "Claimed (not checked)"
    REGRADED = "re-graded", "Re-graded"
    REPRODUCED = "reproduced", "Reproduced"
    RERUN = "re-run", "Re-run"
    RECONSTRUCTED = "reconstructed", "Reconstructed (paper aggregates)"


LEVEL_ORDER = {VerificationLevel.CLAIMED: 0, VerificationLevel.RECONSTRUCTED: 0,
               VerificationLevel.REGRADED: 1, VerificationLevel.REPRODUCED: 2,
               VerificationLevel.RERUN: 3}

# One line each, the same words on badges, trial rows, the methods page, /downloads/ and the API.
LEVEL_DEFINITIONS = {
    VerificationLevel.RERUN: "the site ran the same harness and model, with its own key and "
                             "endpoint, on this task and attempt",
    VerificationLevel.REPRODUCED: "the recorded commands, re-executed in a fresh container, "
                                  "produce an output that grades the same (consistency, not "
                                  "authorship)",
    VerificationLevel.REGRADED: "the submitted output was graded again by the site",
    VerificationLevel.CLAIMED: "not checked by the site: the submission's own outcome",
    VerificationLevel.RECONSTRUCTED: "rebuilt from the paper's published aggregates: not a run "
                                     "the site has",
}

VERDICT_DEFINITIONS = {
    SubmissionStatus.VERIFIED: "the site re-ran the agent on a secret sample it sized itself, "
                               "with enough power to detect the stated inflation, and the re-run "
                               "agrees with the site's own grading; every counted trial was "
                               "re-graded, every counted pass was reproduced or re-run, and no "
                               "flag is open",
    SubmissionStatus.CONSISTENT: "no check contradicts the claims, but the site has not re-run "
                                 "the agent (or another condition of verified is missing: the "
                                 "badge says which)",
    SubmissionStatus.DISCREPANCY: "a check contradicts the claims: a re-grade or replay that "
                                  "differs, an open reward-hacking flag, a re-run that "
                                  "succeeds significantly less often than the site's grading, or "
                                  "a link to an upload of the same runs that was a discrepancy",
}


def coverage_badge(coverage: dict | None, *, reconstructed: bool = False,
                   reference: bool = False) -> str:
    """The badge text of a submission (leaderboard row, agent page, submission page): its
    verdict and what the site checked, as fractions of counted trials, in the words of
    LEVEL_DEFINITIONS and VERDICT_DEFINITIONS; what keeps it from "verified", said."""
    if reconstructed:
        return "reconstructed from published aggregates: not checked by the site"
    if not coverage:
        return "unverified: not checked by the site"
    n = coverage["counted"]
    parts = (f"re-graded {coverage['regraded']}/{n}, reproduced {coverage['reproduced']}/{n}, "
             f"re-run {coverage['rerun']}/{n} counted trials")
    waiting = coverage.get("awaiting_judge", 0)
    if waiting:  # never silently: these trials count with their claimed outcome, unchecked
        parts += (f"; {waiting} trial{'' if waiting == 1 else 's'} awaiting the X-ray judge "
                  "(not scored by the site)")
    waiting = coverage.get("awaiting_trajectory_judge", 0)
    if waiting:
        parts += (f"; {waiting} pass{'' if waiting == 1 else 'es'} awaiting trajectory judge")
    label = "reference run (not ranked): " if reference else ""
    verdict = coverage["verdict"]
    earlier = coverage.get("agent_discrepancies") or []
    if earlier:
        parts += (f"; the same agent's submission{'' if len(earlier) == 1 else 's'} "
                  + ", ".join(str(s) for s in earlier) + " ended in a discrepancy")
    if verdict == SubmissionStatus.VERIFIED:
        return (f"{label}verified: {parts}; the site re-ran the agent and it agrees with the "
                f"site's grading; every counted pass ({coverage['passes']}) reproduced or re-run")
    if verdict == SubmissionStatus.DISCREPANCY:
        flagged = coverage.get("flagged", 0)
        linked = coverage.get("linked_discrepancies") or []
        return (f"{label}discrepancy: {parts}; the site's checks contradict the claims "
                f"({flagged} trial{'' if flagged == 1 else 's'} flagged"
                + ("; the re-run succeeds significantly less often than the site's grading"
                   if coverage.get("rerun_contradicts") else "")
                + ("; linked to discrepant submission" + ("s " if len(linked) > 1 else " ")
                   + ", ".join(str(s) for s in linked) if linked else "") + ")")
    missing = "; ".join(coverage.get("not_verified_because") or []) or "not re-run"
    return f"{label}consistent, not verified: {parts}; {missing}"


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
    # An upload is received (stored, not yet read), validated by the intake worker, then queued
    # for verification or refused with its problems.
    SubmissionStatus.RECEIVED: {SubmissionStatus.VALIDATING, SubmissionStatus.REFUSED},
    SubmissionStatus.VALIDATING: {SubmissionStatus.QUEUED, SubmissionStatus.REFUSED},
    # Only a verified, consistent or discrepancy (flags shown) submission can be published.
    SubmissionStatus.QUEUED: {SubmissionStatus.VERIFYING, SubmissionStatus.REJECTED},
    SubmissionStatus.VERIFYING: {
        SubmissionStatus.VERIFIED, SubmissionStatus.CONSISTENT, SubmissionStatus.DISCREPANCY,
        SubmissionStatus.FAILED, SubmissionStatus.REJECTED,
    },
    # A maintainer may re-verify (e.g. after a grader update): back in the queue, a new job;
    # every job keeps its own check rows, so the history stays.
    SubmissionStatus.VERIFIED: {
        SubmissionStatus.PUBLISHED, SubmissionStatus.REJECTED, SubmissionStatus.QUEUED,
    },
    SubmissionStatus.CONSISTENT: {
        SubmissionStatus.PUBLISHED, SubmissionStatus.REJECTED, SubmissionStatus.QUEUED,
    },
    SubmissionStatus.DISCREPANCY: {
        SubmissionStatus.PUBLISHED, SubmissionStatus.REJECTED, SubmissionStatus.QUEUED,
    },
    # A maintainer may put a submission whose verification broke (infrastructure) back in line.
    SubmissionStatus.FAILED: {SubmissionStatus.QUEUED, SubmissionStatus.REJECTED},
    SubmissionStatus.PUBLISHED: {SubmissionStatus.WITHDRAWN},
    SubmissionStatus.REJECTED: set(),
    SubmissionStatus.REFUSED: set(),
    SubmissionStatus.WITHDRAWN: set(),
}

# Statuses of an upload the intake worker has not finished (submissions.intake).
INTAKE_STATUSES = (SubmissionStatus.RECEIVED, SubmissionStatus.VALIDATING)


class Submission(BaseModel):
    # Both null only while an upload is received or validating, and when it was refused: they
    # come from its metadata, which the intake worker reads (submissions.intake).
    agent = models.ForeignKey(
        Agent, on_delete=models.PROTECT, related_name="submissions", null=True, blank=True
    )
    benchmark_version = models.ForeignKey(
        BenchmarkVersion, on_delete=models.PROTECT, related_name="submissions", null=True,
        blank=True,
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
    # A labelled reference run: one of the site's own agents (oracle, nop, replay) accepted on a
    # try-out version, or a maintainer's upload with `reference: true` (submissions.
    # harbor_intake). Never ranked, no model.
    is_reference = models.BooleanField(default=False)
    # Uploaded to a try-out version (BenchmarkVersion.allows_reference_runs), fixed at intake:
    # only there may a reference run be published, as an unranked row (the constraint below).
    on_tryout_version = models.BooleanField(default=False)
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
    # --- intake (submissions.intake): what the web request received, read by the intake worker
    upload_name = models.CharField(max_length=300, blank=True)  # the archive's claimed file name
    upload_metadata = models.TextField(blank=True)  # the metadata file sent beside the archive
    intake_attempts = models.PositiveSmallIntegerField(default=0)  # claims by intake workers
    intake_started_at = models.DateTimeField(null=True, blank=True)  # last claim (the lease)
    intake_published_at = models.DateTimeField(null=True, blank=True)  # last broker publish
    secret_findings = models.JSONField(default=list, blank=True)
    status_reason = models.TextField(blank=True)
    trials_total = models.PositiveIntegerField(default=0)
    trials_done = models.PositiveIntegerField(default=0)
    queued_at = models.DateTimeField(null=True, blank=True)
    # What the site's checks cover, over counted trials, and the verdict, recomputed from the
    # trials' current state after every change (submissions.trials.submission_verdict_record):
    # {"counted", "passes", "regraded", "reproduced", "rerun", "passes_uncovered", "verdict",
    # "not_verified_because", ...}; empty until verified.
    coverage = models.JSONField(default=dict, blank=True)
    # The re-run sample (submissions.verification.sample), fixed when intake accepts the
    # upload: the ordered (task, attempt) list chosen by an HMAC of the archive's digest under
    # VERIFICATION_SAMPLE_SECRET, and a random salt. Only the commitment, sha256 of the list and
    # the salt, is public until the verdict is recorded; then both are revealed.
    rerun_sample = models.JSONField(default=list, blank=True)
    rerun_salt = models.CharField(max_length=64, blank=True)
    rerun_commitment = models.CharField(max_length=64, blank=True)
    rerun_committed_at = models.DateTimeField(null=True, blank=True)
    rerun_revealed_at = models.DateTimeField(null=True, blank=True)
    # The first submission of the chain this one is linked to (submissions.linking: shared
    # trial ids or trajectories); null when it is linked to none. Its archive digest keys the
    # re-run order of the whole chain, so a re-rolled archive gets the same sample and the
    # re-runs already made, never fresh draws.
    lineage = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="lineage_members")

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
            # A reference run is never ranked, and is published (unranked) only on a try-out
            # version, where a newcomer's try-out ends in a row.
            models.CheckConstraint(
                condition=Q(is_reference=False) | ~Q(status="published")
                | Q(on_tryout_version=True),
                name="submission_reference_published_only_on_tryout",
            ),
            # Past intake every submission names its agent and benchmark version.
            models.CheckConstraint(
                condition=Q(agent__isnull=False, benchmark_version__isnull=False)
                | Q(status__in=["received", "validating", "refused"]),
                name="submission_agent_past_intake",
            ),
        ]
        indexes = [
            # Serves leaderboard_recompute: published submissions of one version.
            models.Index(fields=["benchmark_version", "status"], name="submission_version_status"),
            # Serves queue position: queued submissions in arrival order.
            models.Index(fields=["status", "queued_at"], name="submission_status_queued"),
            # Serves the intake reaper: received/validating uploads by claim age.
            models.Index(fields=["status", "intake_started_at"], name="submission_status_intake"),
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


class AccountOrigin(BaseModel):
    """The address an account signed up from (local or GitHub / Hugging Face sign-up): sign-ups
    per address are limited with it, and maintainers see the accounts one address made (admin).
    Accounts a maintainer made have none, which also exempts them from the new-account quota."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="account_origin")
    address = models.GenericIPAddressField(db_index=True)
    # "email" for a local sign-up, else the provider's id (github, huggingface).
    method = models.CharField(max_length=30, default="email")

    class Meta:
        indexes = [models.Index(fields=["address", "created_at"], name="origin_address_time")]

    def __str__(self) -> str:
        return f"{self.user_id} from {self.address}"


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
        BenchmarkTask, on_delete=models.PROTECT, related_name="trials"
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
    # Who confirmed it and why: the site's own re-attempt (its infrastructure failure) or a
    # maintainer (a written reason, in the audit log too); blank while not confirmed.
    infra_confirmed_by = models.CharField(max_length=20, choices=InfraConfirmation.choices,
                                          blank=True)
    infra_confirm_reason = models.TextField(blank=True)
    infra_confirmed_user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                             null=True, blank=True, related_name="+")
    infra_confirmed_at = models.DateTimeField(null=True, blank=True)
    verification_level = models.CharField(max_length=20, choices=VerificationLevel.choices,
                                          default=VerificationLevel.CLAIMED)
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
    # The grader that produced verified_reward ("<category>@<version>", R11).
    grader_version = models.CharField(max_length=64, blank=True)
    flags = models.JSONField(default=list, blank=True)
    # --- the reward-hacking screen (submissions.trials.trial_screen_record) ---
    screen_hits = models.JSONField(default=list, blank=True)  # rule ids the last screen tripped
    screen_cleared = models.JSONField(default=list, blank=True)  # rule ids a maintainer cleared
    screen_clear_reason = models.TextField(blank=True)
    screen_cleared_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                          null=True, blank=True, related_name="+")
    screen_cleared_at = models.DateTimeField(null=True, blank=True)
    # The LLM judge of the re-grade that set verified_reward (X-ray only; blank otherwise).
    judge_model = models.CharField(max_length=200, blank=True)
    judge_prompt_version = models.CharField(max_length=60, blank=True)
    # The trajectory judge's last judgement of this trial (a counted pass): clean, suspicious,
    # hack or awaiting (none configured); blank when it was not asked. With its model, prompt
    # version, reason and step numbers (submissions.trials.trial_trajectory_judgement_record).
    trajectory_judgement = models.CharField(max_length=20, blank=True)
    trajectory_judge_model = models.CharField(max_length=200, blank=True)
    trajectory_judge_prompt_version = models.CharField(max_length=60, blank=True)
    trajectory_judge_reason = models.TextField(blank=True)
    trajectory_judge_steps = models.JSONField(default=list, blank=True)
    # Fingerprints that link re-uploads of the same runs (submissions.linking): Harbor's trial
    # id, and sha256 digests of the stored trajectory and of the stored output files.
    harbor_trial_id = models.CharField(max_length=100, blank=True)
    trajectory_sha256 = models.CharField(max_length=64, blank=True)
    outputs_sha256 = models.CharField(max_length=64, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["harbor_trial_id"], name="trial_harbor_id",
                         condition=~Q(harbor_trial_id="")),
            models.Index(fields=["trajectory_sha256"], name="trial_trajectory_sha256",
                         condition=~Q(trajectory_sha256="")),
            models.Index(fields=["outputs_sha256"], name="trial_outputs_sha256",
                         condition=~Q(outputs_sha256="")),
        ]
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
            # A confirmed infrastructure error says who confirmed it; an unconfirmed one no one.
            models.CheckConstraint(
                condition=Q(infra_confirmed=True, infra_confirmed_by__in=InfraConfirmation.values)
                | Q(infra_confirmed=False, infra_confirmed_by=""),
                name="trial_infra_confirmed_by_iff_confirmed",
            ),
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

    @property
    def screen_open(self) -> list[str]:
        """Rules the screen tripped that no maintainer cleared: the trial counts as a failure."""
        return [r for r in self.screen_hits or [] if r not in (self.screen_cleared or [])]


# --------------------------------------------------------------------------------------------
# Verification of submissions: one job per verification run, one row per check of a trial.
#
# The database is the truth (house style HS16): a job is claimed with a conditional UPDATE, results
# are written with update_or_create keyed by the unique constraints below, so a redelivered or
# duplicated message never writes a second row, and a job's final states are never left.
# --------------------------------------------------------------------------------------------
class JobStatus(models.TextChoices):
    PENDING = "pending", "Pending"  # waiting in the broker queue (or for the reconciler)
    RUNNING = "running", "Running"  # claimed by a worker that heartbeats
    DONE = "done", "Done"  # verdict written
    FAILED = "failed", "Failed (infrastructure)"  # attempt cap reached; never scored
    CANCELLED = "cancelled", "Cancelled"  # the submission left the verification path


class JobPurpose(models.TextChoices):
    VERIFY = "verify", "Verification"  # the checks of a new (or re-verified) submission
    # Re-grade a published submission's stored outputs with the current graders; its trials and
    # the leaderboard switch in one transaction when the job finishes (R11).
    RESCORE = "rescore", "Re-score"


ACTIVE_JOB_STATUSES = (JobStatus.PENDING, JobStatus.RUNNING)
FINAL_JOB_STATUSES = (JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED)


class VerificationJob(BaseModel):
    submission = models.ForeignKey(
        Submission, on_delete=models.CASCADE, related_name="verification_jobs"
    )
    status = models.CharField(max_length=12, choices=JobStatus.choices, default=JobStatus.PENDING)
    purpose = models.CharField(max_length=10, choices=JobPurpose.choices,
                               default=JobPurpose.VERIFY)
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
    SCREEN = "screen", "Reward-hacking screen"
    # The site re-attempts a trial the submission reports as an infrastructure error: match =
    # the site hit an infrastructure failure too (confirmed), mismatch = its attempt completed
    # normally (not confirmed), skipped = over VERIFICATION_INFRA_REATTEMPT_MAX (not attempted).
    INFRA = "infra", "Infrastructure re-attempt"
    # The trajectory judge's reading of a counted pass: match = clean, mismatch = hack,
    # suspicious = to the maintainer's queue, awaiting_judge = none configured.
    TRAJECTORY_JUDGE = "traj_judge", "Trajectory judge"


class CheckStatus(models.TextChoices):
    MATCH = "match", "Matches the claim"
    MISMATCH = "mismatch", "Differs from the claim"
    NOT_REPLAYABLE = "not_replayable", "Not replayable"
    NOT_RUNNABLE = "not_runnable", "Not runnable here"
    SKIPPED = "skipped", "Skipped"
    ERROR = "error", "Error"
    AWAITING_JUDGE = "awaiting_judge", "Awaiting judge (no X-ray judge configured)"
    SUSPICIOUS = "suspicious", "Suspicious (the trajectory judge; maintainer's queue)"


class TrialCheck(BaseModel):
    """One check: a re-grade or a replay of a submitted trial, or one re-run of a task."""

    job = models.ForeignKey(VerificationJob, on_delete=models.CASCADE, related_name="checks")
    kind = models.CharField(max_length=10, choices=CheckKind.choices)
    # Null for re-runs, which belong to a task rather than to a submitted trial.
    trial = models.ForeignKey(
        Trial,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="verification_checks",
    )
    benchmark_task = models.ForeignKey(
        BenchmarkTask, on_delete=models.PROTECT, related_name="verification_checks"
    )
    sample_index = models.PositiveSmallIntegerField(default=0)  # re-run attempt number
    status = models.CharField(max_length=16, choices=CheckStatus.choices)
    claimed_reward = models.FloatField(null=True, blank=True)
    verified_reward = models.FloatField(null=True, blank=True)
    reproduced = models.BooleanField(null=True, blank=True)  # replay/re-run only
    flags = models.JSONField(default=list, blank=True)
    reason = models.TextField(blank=True)
    detail = models.JSONField(default=dict, blank=True)
    # "<category>@<version>" of the grader that produced verified_reward (reported by the
    # verifier container), and a digest of the task's tests/ and the base image it ran in.
    grader_version = models.CharField(max_length=64, blank=True)
    grader_digest = models.CharField(max_length=64, blank=True)
    # The LLM judge that gave this verdict (X-ray): model and prompt version (blank otherwise).
    judge_model = models.CharField(max_length=200, blank=True)
    judge_prompt_version = models.CharField(max_length=60, blank=True)
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


class SubmissionLink(BaseModel):
    """``submission`` shares runs with the earlier ``linked``: the same Harbor trial ids, the
    same trajectories or the same outputs (submissions.linking), each counted in
    ``submission``'s trials. Within an account and across
    accounts; maintainers see them, and the re-run evidence of linked submissions of the same
    agent is pooled."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="links")
    linked = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="linked_by")
    shared_trial_ids = models.PositiveIntegerField(default=0)
    shared_trajectories = models.PositiveIntegerField(default=0)
    shared_outputs = models.PositiveIntegerField(default=0)
    same_owner = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["submission", "linked"], name="uniq_submission_link"),
            models.CheckConstraint(condition=~Q(submission=models.F("linked")),
                                   name="submission_link_not_self"),
        ]
        ordering = ["submission", "linked"]

    def __str__(self) -> str:
        return f"{self.submission_id} -> {self.linked_id}"


class ScoreRevision(BaseModel):
    """A published submission's score before and after a re-score that changed a number (R11).

    Written once per re-score job (unique), in the transaction that switches the trials and the
    leaderboard; the agent page, the submission page and the API list them as the history.
    Counts are over counted trials (infrastructure errors excluded), as on the leaderboard.
    """

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE,
                                   related_name="score_revisions")
    job = models.OneToOneField(VerificationJob, on_delete=models.CASCADE,
                               related_name="score_revision")
    successes_before = models.PositiveIntegerField()
    attempts_before = models.PositiveIntegerField()
    successes_after = models.PositiveIntegerField()
    attempts_after = models.PositiveIntegerField()
    graders_before = models.JSONField(default=list)  # grader versions of the replaced scores
    graders_after = models.JSONField(default=list)
    # [{"trial", "task", "attempt", "reward_before", "reward_after", "outcome_before",
    #   "outcome_after", "grader_before", "grader_after"}] for the trials whose score changed.
    changes = models.JSONField(default=list)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["submission", "-created_at", "-pk"]

    def __str__(self) -> str:
        return (f"{self.submission_id}: {self.successes_before}/{self.attempts_before} -> "
                f"{self.successes_after}/{self.attempts_after}")

    @property
    def rate_before(self) -> float | None:
        return self.successes_before / self.attempts_before if self.attempts_before else None

    @property
    def rate_after(self) -> float | None:
        return self.successes_after / self.attempts_after if self.attempts_after else None
