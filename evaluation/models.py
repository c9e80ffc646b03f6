"""The benchmark catalogue: versions, categories, tasks, harnesses, models and agents.

This is the bottom layer's data: submissions and the leaderboard point at it, it points at
nothing above it.
"""

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
    # A try-out version (the synthetic benchmark the Submit page's try-out uses): an upload of
    # one of the site's own agents (oracle, nop, replay) is accepted here as a labelled
    # reference run, never ranked. Set from the version's manifest by sync_tasks.
    allows_reference_runs = models.BooleanField(default=False)

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


class JudgeCacheEntry(BaseModel):
    """The X-ray judge's replies for one (prompt version, model, report, answer), in the order
    they were given: the n-th vote of a grading is the n-th reply (evaluation/judge/cache.py), so
    re-grading the same output is deterministic and asks the judge nothing."""

    key = models.CharField(max_length=64, unique=True)  # judge_gateway.cache_key
    prompt_version = models.CharField(max_length=60)
    model = models.CharField(max_length=200)
    # The task whose gradings asked (the gateway of that task's verifier is given these rows).
    scope = models.CharField(max_length=200)
    replies = models.JSONField(default=list)  # message contents, in vote order
    hits = models.PositiveIntegerField(default=0)  # replies served from here so far

    class Meta:
        indexes = [
            models.Index(fields=["scope", "prompt_version", "model"], name="judge_cache_scope"),
        ]
        verbose_name_plural = "judge cache entries"

    def __str__(self) -> str:
        return f"{self.prompt_version} {self.model} {self.key[:12]}"
