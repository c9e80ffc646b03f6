"""Benchmark catalogue (versions, categories, tasks), agents, and precomputed leaderboard rows."""

from django.db import models
from django.db.models import Q

from config.models import BaseModel


class Group(models.TextChoices):
    IMAGING = "imaging", "Imaging"
    TEXT = "text", "Text"


class BenchmarkVersion(BaseModel):
    """An immutable task set, addressed as ``name@version``."""

    name = models.SlugField(max_length=100)
    version = models.CharField(max_length=40)
    title = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    attempts_per_task = models.PositiveSmallIntegerField(default=3)
    # Demo versions hold per-trial rows reconstructed from published aggregates.
    is_reconstructed = models.BooleanField(default=False)
    is_default = models.BooleanField(default=False)
    content_digest = models.CharField(max_length=64, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="uniq_benchmark_name_version"),
            models.CheckConstraint(condition=Q(attempts_per_task__gte=1), name="attempts_positive"),
        ]
        ordering = ["name", "version"]

    def __str__(self) -> str:
        return self.slug

    @property
    def slug(self) -> str:
        return f"{self.name}@{self.version}"


class Category(BaseModel):
    benchmark_version = models.ForeignKey(
        BenchmarkVersion, on_delete=models.CASCADE, related_name="categories"
    )
    slug = models.SlugField(max_length=80)
    name = models.CharField(max_length=120)
    group = models.CharField(max_length=10, choices=Group.choices)
    modality = models.CharField(max_length=300)
    data_source = models.CharField(max_length=300)
    access = models.CharField(max_length=200)
    success_criterion = models.TextField()
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["benchmark_version", "slug"], name="uniq_category_per_version"
            ),
            models.CheckConstraint(condition=Q(group__in=Group.values), name="category_group_valid"),
        ]
        ordering = ["benchmark_version", "position", "slug"]
        verbose_name_plural = "categories"

    def __str__(self) -> str:
        return self.slug


class BenchmarkTask(BaseModel):
    benchmark_version = models.ForeignKey(
        BenchmarkVersion, on_delete=models.CASCADE, related_name="tasks"
    )
    category = models.ForeignKey(Category, on_delete=models.PROTECT, related_name="tasks")
    # "<category-slug>/case_NN" for the paper; "<category-slug>/<task_id>" for packages.
    name = models.CharField(max_length=200)
    content_digest = models.CharField(max_length=64, blank=True)
    # True when a Harbor package for it lives in tasks/ and can run on this site.
    runnable_here = models.BooleanField(default=False)
    package_path = models.CharField(max_length=300, blank=True)
    is_synthetic = models.BooleanField(default=False)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["benchmark_version", "name"], name="uniq_task_name_per_version"
            ),
        ]
        ordering = ["benchmark_version", "position", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def case(self) -> str:
        """The part of the name after the category ("case_01")."""
        return self.name.split("/", 1)[-1]


class Harness(BaseModel):
    slug = models.SlugField(max_length=80, unique=True)
    display_name = models.CharField(max_length=120)
    # Harness family groups versions/forks of one harness (e.g. "codex").
    family = models.SlugField(max_length=80)
    url = models.URLField(blank=True)

    class Meta:
        ordering = ["display_name"]
        verbose_name_plural = "harnesses"

    def __str__(self) -> str:
        return self.display_name


class AIModel(BaseModel):
    slug = models.SlugField(max_length=120, unique=True)
    display_name = models.CharField(max_length=120)
    provider = models.CharField(max_length=120)
    # Model line and its version order, for "versions within a harness" (GPT 5.3 < 5.4 < 5.5).
    family = models.CharField(max_length=120, blank=True)
    version_order = models.IntegerField(default=0)

    class Meta:
        ordering = ["provider", "family", "version_order", "display_name"]
        verbose_name = "model"

    def __str__(self) -> str:
        return self.display_name


class Agent(BaseModel):
    """A harness (at a version) driving a model with given settings."""

    harness = models.ForeignKey(Harness, on_delete=models.PROTECT, related_name="agents")
    harness_version = models.CharField(max_length=60, blank=True)
    model = models.ForeignKey(AIModel, on_delete=models.PROTECT, related_name="agents")
    settings = models.JSONField(default=dict, blank=True)
    settings_digest = models.CharField(max_length=64, blank=True)
    display_name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=200, unique=True)
    url = models.URLField(blank=True)
    organisation = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["harness", "harness_version", "model", "settings_digest"],
                name="uniq_agent_configuration",
            ),
        ]
        ordering = ["display_name"]

    def __str__(self) -> str:
        return self.display_name


class LeaderboardEntry(BaseModel):
    """One precomputed leaderboard row: an agent's published submission on a benchmark version.

    Rebuilt in one transaction by ``leaderboard_recompute``; pages read it with one query.
    """

    benchmark_version = models.ForeignKey(
        BenchmarkVersion, on_delete=models.CASCADE, related_name="entries"
    )
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="entries")
    submission = models.ForeignKey(
        "submissions.Submission", on_delete=models.CASCADE, related_name="entries"
    )
    rank = models.PositiveIntegerField()
    tie_group = models.PositiveIntegerField()
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
    reconstructed = models.BooleanField(default=False)
    submitted_on = models.DateField(null=True)
    # Per-task success rate over scored attempts ({task pk: rate}): the vector the paired tie
    # test reads, stored so ranks and tie groups are recomputed without reading any trial.
    task_rates = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["benchmark_version", "agent"], name="uniq_entry_per_agent_version"
            ),
            models.CheckConstraint(
                condition=Q(success_rate__gte=0) & Q(success_rate__lte=1), name="rate_in_unit"
            ),
        ]
        indexes = [
            # Serves the leaderboard page: entries of one version in rank order.
            models.Index(fields=["benchmark_version", "rank"], name="entry_version_rank"),
        ]
        ordering = ["benchmark_version", "rank", "agent__display_name"]
        verbose_name_plural = "leaderboard entries"

    def __str__(self) -> str:
        return f"{self.rank}. {self.agent_id}"

    @property
    def coverage(self) -> float:
        return self.attempts_present / self.attempts_required if self.attempts_required else 0.0


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


class TaskCell(BaseModel):
    """An entry's attempts on one task, for the task matrix: outcome codes in attempt order."""

    entry = models.ForeignKey(LeaderboardEntry, on_delete=models.CASCADE, related_name="cells")
    benchmark_task = models.ForeignKey(BenchmarkTask, on_delete=models.CASCADE, related_name="cells")
    # One letter per attempt: P passed, F failed, T timeout, E agent error, I infrastructure error,
    # "-" missing.
    outcomes = models.CharField(max_length=20)
    successes = models.PositiveSmallIntegerField()
    # The submission's claimed codes in the same order (equal to outcomes where the site
    # agrees), and each attempt's integrity flags.
    claimed_outcomes = models.CharField(max_length=20, blank=True, default="")
    flags = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["entry", "benchmark_task"], name="uniq_task_cell"),
        ]

    def __str__(self) -> str:
        return f"{self.entry_id}/{self.benchmark_task_id}: {self.outcomes}"


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
