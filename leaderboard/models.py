"""Precomputed leaderboard rows (the read side), rebuilt from published submissions."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models
from django.db.models import F, Q

from config.models import BaseModel
from evaluation.models import Agent, BenchmarkTask, BenchmarkVersion, Category
from submissions.models import Submission

# Verification levels whose rows are never ranked (no rank, no tie group, left out of the
# others' ranks and tie groups): the site's own checks contradict the claims, so the site does
# not stand behind the row's place. They are listed apart, with the site's reasons (the badge).
# A discrepancy, or a reference run (the site's own agent, published only on a try-out version).
UNRANKED_LEVELS = ("discrepancy", "reference")
UNRANKED_TITLE = "Not ranked: discrepancies and reference runs"


class EntryManager(models.Manager):
    """Entries with their ``rank`` and ``tie_group`` (kept in ``EntryStanding``) annotated, so
    every read, sort and filter uses them as if they were columns of the entry."""

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().annotate(rank=F("standing__rank"),
                                               tie_group=F("standing__tie_group"))


class LeaderboardEntry(BaseModel):
    """One precomputed leaderboard row: an agent's published submission on a benchmark version.

    Rebuilt in one transaction by ``leaderboard_recompute``; pages read it with one query.
    Its rank and tie group live in the narrow ``EntryStanding`` row (read as ``rank`` and
    ``tie_group`` through the default manager): a publish moves the rank of about half the
    entries, and rewriting those narrow rows costs a tenth of rewriting the wide entry rows.
    """

    benchmark_version = models.ForeignKey(
        BenchmarkVersion, on_delete=models.CASCADE, related_name="entries"
    )
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="entries")
    submission = models.ForeignKey(
        Submission, on_delete=models.CASCADE, related_name="entries"
    )
    successes = models.PositiveIntegerField()
    attempts = models.PositiveIntegerField()  # scored attempts (infrastructure errors excluded)
    attempts_present = models.PositiveIntegerField()
    attempts_required = models.PositiveIntegerField()
    # Infrastructure errors the site confirmed (they leave the denominator), and those the
    # submission claims (unconfirmed ones count as failures).
    infra_errors = models.PositiveIntegerField(default=0)
    infra_errors_claimed = models.PositiveIntegerField(default=0)
    timeouts = models.PositiveIntegerField(default=0)
    agent_errors = models.PositiveIntegerField(default=0)
    # The claim beside the site's count: passes the submission claims, and trials with an
    # integrity flag (re-grade or replay mismatch, not replayable, ...).
    claimed_successes = models.PositiveIntegerField(default=0)
    flagged_trials = models.PositiveIntegerField(default=0)
    success_rate = models.FloatField()
    ci_low = models.FloatField()
    ci_high = models.FloatField()
    design_effect = models.FloatField(default=1.0)
    pass_at_k = models.FloatField()  # fraction of tasks solved in at least one attempt
    pass_hat_k = models.FloatField()  # fraction of tasks solved in every attempt
    imaging_macro = models.FloatField(null=True)
    text_macro = models.FloatField(null=True)
    imaging_pooled = models.FloatField(null=True)
    text_pooled = models.FloatField(null=True)
    total_cost_usd = models.DecimalField(max_digits=14, decimal_places=4, null=True)
    cost_per_attempt_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True)
    cost_per_success_usd = models.DecimalField(max_digits=12, decimal_places=4, null=True)
    mean_duration_s = models.FloatField(null=True)
    mean_output_tokens = models.FloatField(null=True)
    verified = models.BooleanField(default=False)
    # What the site checked (submissions.models.coverage_badge): verified / checked /
    # discrepancy / unverified / reconstructed, the counts behind it, and the badge text.
    verification_level = models.CharField(max_length=20, default="unverified")
    verification = models.JSONField(default=dict, blank=True)  # Submission.coverage
    badge = models.TextField(blank=True)
    reconstructed = models.BooleanField(default=False)
    submitted_on = models.DateField(null=True)
    # The entry's task cells, one row per entry (the matrix used to be one row per
    # entry x task): the tasks the submission has trials on (pks, ascending, comma-separated),
    # and aligned with them the site's outcome codes of each cell in attempt order (one letter
    # per attempt: P passed, F failed, T timeout, E agent error, I infrastructure error) and the
    # claimed codes, comma-separated; each flagged cell's per-attempt integrity flags keyed by
    # task pk (a cell without a flagged attempt has none); and each cell's success rate over
    # scored attempts as little-endian float64 (NaN where none was scored), the vector the
    # paired tie test reads, so ranks and tie groups are recomputed without reading any trial.
    cell_tasks = models.TextField(default="", blank=True)
    cell_outcomes = models.TextField(default="", blank=True)
    cell_claimed = models.TextField(default="", blank=True)
    cell_flags = models.JSONField(default=dict, blank=True)
    task_rates = models.BinaryField(default=b"")
    # A digest of everything the rebuild wrote on this row and its category rows
    # (``recompute.row_digests``): a rebuild that computes the same digest leaves the rows as
    # they are (no delete, insert, index or foreign-key work); "" is never current.
    digest = models.CharField(max_length=32, default="", blank=True, editable=False)

    objects = EntryManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["benchmark_version", "agent"], name="uniq_entry_per_agent_version"
            ),
            models.CheckConstraint(
                condition=Q(success_rate__gte=0) & Q(success_rate__lte=1), name="rate_in_unit"
            ),
        ]
        base_manager_name = "objects"  # refresh_from_db() reads rank and tie group too
        ordering = ["benchmark_version", "standing__rank", "agent__display_name"]
        verbose_name_plural = "leaderboard entries"

    def __str__(self) -> str:
        return f"{getattr(self, 'rank', None)}. {self.agent_id}"

    @property
    def coverage(self) -> float:
        return self.attempts_present / self.attempts_required if self.attempts_required else 0.0

    @property
    def ranked(self) -> bool:
        return self.verification_level not in UNRANKED_LEVELS

    @property
    def unranked_reason(self) -> str:
        """Why the row has no rank, in the site's words (its coverage badge); "" when ranked."""
        return "" if self.ranked else self.badge

    def cells(self) -> dict[int, TaskCell]:
        """The entry's task cells by task pk (tasks without trials have none)."""
        if not self.cell_tasks:
            return {}
        flags = self.cell_flags or {}
        out = {}
        for task, outcomes, claimed in zip(self.cell_tasks.split(","),
                                           self.cell_outcomes.split(","),
                                           self.cell_claimed.split(","), strict=True):
            out[int(task)] = TaskCell(int(task), outcomes, claimed,
                                      flags.get(task) or [[]] * len(outcomes))
        return out


class EntryStanding(BaseModel):
    """An entry's competition rank and tie group, written by ``leaderboard_recompute`` after
    the entries (only the rows that moved). Apart from the entry so that a publish, which
    shifts every rank below the new row, rewrites these narrow rows (two indexes) and not the
    wide entry rows with their six indexes: 0.5 s of a 10,000-agent publish."""

    entry = models.OneToOneField(LeaderboardEntry, on_delete=models.CASCADE, primary_key=True,
                                 related_name="standing")
    # Covered by the (benchmark_version, rank) index.
    benchmark_version = models.ForeignKey(BenchmarkVersion, on_delete=models.CASCADE,
                                          related_name="+", db_index=False)
    rank = models.PositiveIntegerField()
    tie_group = models.PositiveIntegerField()
    # Not indexed (BaseModel's index would be one more to update per moved row).
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # Entries of one version in rank order.
            models.Index(fields=["benchmark_version", "rank"], name="standing_version_rank"),
        ]

    def __str__(self) -> str:
        return f"{self.rank}. entry {self.entry_id}"


class CategoryEntry(BaseModel):
    """Per-category result of one leaderboard entry."""

    entry = models.ForeignKey(
        LeaderboardEntry, on_delete=models.CASCADE, related_name="category_entries"
    )
    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="entries")
    successes = models.PositiveIntegerField()
    attempts = models.PositiveIntegerField()
    success_rate = models.FloatField()
    ci_low = models.FloatField()
    ci_high = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["entry", "category"], name="uniq_category_entry"),
        ]
        ordering = ["entry", "category__position"]

    def __str__(self) -> str:
        return f"{self.entry_id}/{self.category_id}"


@dataclass(frozen=True)
class TaskCell:
    """An entry's attempts on one task (decoded from the entry's cell columns): outcome codes
    in attempt order, the submission's claimed codes in the same order (equal to outcomes
    where the site agrees), and each attempt's integrity flags."""

    benchmark_task_id: int
    outcomes: str
    claimed_outcomes: str
    flags: list
    benchmark_task: BenchmarkTask | None = None

    @property
    def successes(self) -> int:
        return self.outcomes.count("P")


class GroupAggregate(BaseModel):
    """Aggregates over several entries: a harness family, or a model across harnesses."""

    class Kind(models.TextChoices):
        HARNESS_FAMILY = "harness_family", "Harness family"

    benchmark_version = models.ForeignKey(
        BenchmarkVersion, on_delete=models.CASCADE, related_name="group_aggregates"
    )
    kind = models.CharField(max_length=30, choices=Kind.choices)
    key = models.CharField(max_length=120)
    label = models.CharField(max_length=200)
    agents = models.PositiveIntegerField()
    successes = models.PositiveIntegerField()
    attempts = models.PositiveIntegerField()
    pooled_success_rate = models.FloatField()
    mean_success_rate = models.FloatField()
    imaging_macro = models.FloatField(null=True)
    text_macro = models.FloatField(null=True)
    imaging_pooled = models.FloatField(null=True)
    text_pooled = models.FloatField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["benchmark_version", "kind", "key"], name="uniq_group_aggregate"
            ),
        ]
        ordering = ["benchmark_version", "kind", "-mean_success_rate"]

    def __str__(self) -> str:
        return f"{self.kind}:{self.key}"


class AggregateVersion(BaseModel):
    """A counter per benchmark version, bumped in the same transaction as every change to its
    aggregates (publish, take-down, re-verify, rebuild) or to the catalogue they show.

    Cached pages, fragments and API payloads are keyed by it, so when a change commits every
    stale key becomes unreachable at once (nothing to delete, no window where old and new mix).
    ``updated_at`` is the pages' Last-Modified.
    """

    benchmark_version = models.OneToOneField(
        BenchmarkVersion, on_delete=models.CASCADE, related_name="aggregate_version"
    )
    number = models.PositiveBigIntegerField(default=1)

    def __str__(self) -> str:
        return f"{self.benchmark_version_id}@{self.number}"


class LeaderboardSnapshot(BaseModel):
    """The board of one benchmark version as it stood at the end of a day: every row of the
    leaderboard table (ranked and not), as its CSV had it. Taken after each rebuild that changed
    the board (leaderboard.history), so ``?as_of=`` shows the rows, ranks and levels of a day
    from the publish, withdrawal and re-grade history, not from today's rows."""

    benchmark_version = models.ForeignKey(
        BenchmarkVersion, on_delete=models.CASCADE, related_name="snapshots")
    day = models.DateField()
    taken_at = models.DateTimeField()
    digest = models.CharField(max_length=64)  # sha256 of the rows, to skip unchanged boards
    rows = models.JSONField(default=list)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["benchmark_version", "day"],
                                               name="uniq_snapshot_per_version_day")]
        ordering = ["benchmark_version", "-day"]

    def __str__(self) -> str:
        return f"{self.benchmark_version_id} on {self.day}"
