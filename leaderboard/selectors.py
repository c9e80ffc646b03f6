"""Reads for the leaderboard pages, CSVs and API. Each selector is a fixed number of queries,
independent of the number of agents (see tests/leaderboard/test_query_counts.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from django.conf import settings
from django.db.models import Count, F, Max, Prefetch, Q, QuerySet, Sum
from django.db.models.functions import Lower
from django.utils import timezone

from evaluation import screen as screen_rules
from evaluation.models import BenchmarkTask, BenchmarkVersion, Category
from evaluation.published import published_image
from leaderboard.filters import EntryFilters, EntryFilterSet
from leaderboard.models import (
    UNRANKED_LEVELS,
    AggregateVersion,
    CategoryEntry,
    GroupAggregate,
    LeaderboardEntry,
)
from submissions.models import (
    ScoreRevision,
    Submission,
    SubmissionEvent,
    SubmissionStatus,
    Trial,
)


class UnknownBenchmark(Exception):
    """The requested benchmark version does not exist."""


def benchmark_version_list() -> list[BenchmarkVersion]:
    return list(BenchmarkVersion.objects.order_by("-is_default", "name", "version"))


def public_registry_versions() -> list[BenchmarkVersion]:
    """Versions whose every task is a package inside the repository (relative package_path).
    Two queries."""
    versions = BenchmarkVersion.objects.filter(is_reconstructed=False).prefetch_related(
        Prefetch("tasks", queryset=BenchmarkTask.objects.order_by("position", "name")))
    return [bv for bv in versions.order_by("name", "version")
            if bv.tasks.all() and all(t.package_path and not t.package_path.startswith("/")
                                      for t in bv.tasks.all())]


def registry_datasets() -> list[dict]:
    """Harbor's registry format (a JSON array of datasets) for the public benchmark versions:
    each task fetched from REGISTRY_GIT_URL (default REPOSITORY_URL) at REGISTRY_GIT_COMMIT.
    A task whose package has a published image (evaluation/published.py) also names it as
    ``docker_image``: a key Harbor ignores (the served task.toml carries it), listed for the
    submitter and for checking. Two queries."""
    git_url = settings.REGISTRY_GIT_URL or settings.REPOSITORY_URL or None
    datasets = []
    for bv in public_registry_versions():
        tasks = []
        for t in bv.tasks.all():
            entry = {"name": t.name.replace("/", "-", 1), "git_url": git_url,
                     "git_commit_id": settings.REGISTRY_GIT_COMMIT or None,
                     "path": t.package_path}
            if image := published_image(t.content_digest):
                entry["docker_image"] = image
            tasks.append(entry)
        datasets.append({"name": bv.name, "version": bv.version,
                         "description": bv.title or bv.description, "tasks": tasks,
                         "metrics": [{"type": "mean", "kwargs": {}}]})
    return datasets


def benchmark_version_get(*, slug: str | None) -> BenchmarkVersion:
    """``name@version``, or the default version when slug is empty, with its aggregate version
    (``bv.aggregate_version``, the cache key of every page, None if never bumped). One query."""
    # Raw SQL: every request makes this lookup, cache hits included, and building the ORM
    # query (select_related of a reverse one-to-one) cost more than running it.
    bv_table = BenchmarkVersion._meta.db_table
    sql = (f"SELECT bv.*, av.number AS av_number, av.updated_at AS av_updated_at "
           f"FROM {bv_table} bv LEFT JOIN {AggregateVersion._meta.db_table} av "
           f"ON av.benchmark_version_id = bv.id ")
    if not slug:
        found = list(BenchmarkVersion.objects.raw(
            sql + "ORDER BY bv.is_default DESC, bv.name, bv.version LIMIT 1"))
        if not found:
            raise UnknownBenchmark("no benchmark version is registered yet")
        return _with_aggregate_version(found[0])
    name, sep, version = slug.partition("@")
    found = list(BenchmarkVersion.objects.raw(sql + "WHERE bv.name = %s AND bv.version = %s",
                                              [name, version])) if sep else []
    if not found:
        raise UnknownBenchmark(f"unknown benchmark version {slug!r} (expected name@version)")
    return _with_aggregate_version(found[0])


def _with_aggregate_version(bv: BenchmarkVersion) -> BenchmarkVersion:
    """Fill bv.aggregate_version from the joined columns, as select_related would (templates
    and the cache layer read it without a query)."""
    av = None
    if bv.av_number is not None:
        updated = bv.av_updated_at
        if isinstance(updated, str):  # SQLite hands raw() extra columns over as text
            updated = datetime.fromisoformat(updated)
        if timezone.is_naive(updated):
            updated = timezone.make_aware(updated, UTC)
        av = AggregateVersion(benchmark_version_id=bv.pk, number=bv.av_number,
                              updated_at=updated)
    BenchmarkVersion.aggregate_version.related.set_cached_value(bv, av)
    return bv


CELL_FIELDS = ("cell_tasks", "cell_outcomes", "cell_claimed", "cell_flags", "task_rates")


# Unranked rows (a discrepancy) have no standing, so no rank: they sort after every ranked one
# (SQLite would put nulls first).
RANK_ORDER = F("rank").asc(nulls_last=True)


def _entries(benchmark_version: BenchmarkVersion, filters: EntryFilters,
             ranked: bool | None = None) -> QuerySet:
    """The entries matching the filters, ranked ones first in rank order; only the ranked ones
    (``ranked=True``), only the unranked ones (``False``) or both (``None``)."""
    # agent, harness and model are shown on every row: join them instead of N lookups.
    qs = LeaderboardEntry.objects.filter(benchmark_version=benchmark_version).select_related(
        "agent", "agent__harness", "agent__model"
    ).defer(*CELL_FIELDS)  # only the task matrix and the agent page read the cells
    if ranked is not None:
        unranked = Q(verification_level__in=UNRANKED_LEVELS)
        qs = qs.exclude(unranked) if ranked else qs.filter(unranked)
    qs = EntryFilterSet.from_filters(filters, queryset=qs).qs
    return qs.order_by(RANK_ORDER, "agent__display_name")


# Sort keys of the list pages (kept in the URL) -> the entry column they order by.
SORTABLE = {
    "rank": F("rank"), "success": F("success_rate"), "cost": F("cost_per_attempt_usd"),
    "time": F("mean_duration_s"), "tokens": F("mean_output_tokens"),
    "agent": Lower("agent__display_name"),
}


@dataclass(frozen=True)
class EntryWindow:
    """Which slice of the ranked entries a page shows: sorted, searched, ``limit`` rows from
    ``offset`` (``limit=None``: all of them)."""

    sort: str = "rank"
    descending: bool = False
    search: str = ""
    offset: int = 0
    limit: int | None = None


def leaderboard_window(
    *, benchmark_version: BenchmarkVersion, filters: EntryFilters = EntryFilters(),
    window: EntryWindow = EntryWindow(), ranked: bool | None = None,
) -> tuple[list[LeaderboardEntry], int]:
    """One window of the entries (only the ranked ones with ``ranked=True``; unranked ones sort
    last by rank) and how many match in all. Two queries (rows, count)."""
    base = _entries(benchmark_version, filters, ranked)
    return list(_windowed(base, window)), _searched(base, window.search).count()


def unranked_rows(*, benchmark_version: BenchmarkVersion, filters: EntryFilters = EntryFilters(),
                  search: str = "") -> list[LeaderboardEntry]:
    """Every entry matching the filters and search that is never ranked (a discrepancy), by
    agent name: the leaderboard lists them apart, under its ranked table. One query."""
    qs = _searched(_entries(benchmark_version, filters, ranked=False), search)
    return list(qs.order_by("agent__display_name", "pk"))


def entry_count(*, benchmark_version: BenchmarkVersion, filters: EntryFilters = EntryFilters(),
                search: str = "") -> int:
    """How many entries match the filters and search. One query."""
    return _searched(_entries(benchmark_version, filters), search).count()


def _searched(qs: QuerySet, search: str) -> QuerySet:
    if search:
        qs = qs.filter(Q(agent__display_name__icontains=search)
                       | Q(agent__harness__display_name__icontains=search)
                       | Q(agent__model__display_name__icontains=search))
    return qs


def _windowed(qs: QuerySet, window: EntryWindow) -> QuerySet:
    """Searched, sorted and sliced as the window says."""
    qs = _searched(qs, window.search)
    expr = SORTABLE.get(window.sort, SORTABLE["rank"])
    # Missing values (no cost reported, ...) sort last either way.
    key = expr.desc(nulls_last=True) if window.descending else expr.asc(nulls_last=True)
    qs = qs.order_by(key, RANK_ORDER, "agent__display_name", "pk")
    if window.limit is not None:
        qs = qs[window.offset:window.offset + window.limit]
    return qs


def entries_for_export(
    *, benchmark_version: BenchmarkVersion, filters: EntryFilters = EntryFilters()
) -> QuerySet:
    """The entries a CSV covers (every one matching the filters), as a queryset to embed."""
    return _entries(benchmark_version, filters)


def leaderboard_rows(
    *, benchmark_version: BenchmarkVersion, filters: EntryFilters = EntryFilters()
) -> list[LeaderboardEntry]:
    """Entries: the ranked ones in rank order, then the unranked ones (no rank) by agent
    name. One query."""
    return list(_entries(benchmark_version, filters))


def filter_choices(*, benchmark_version: BenchmarkVersion) -> dict[str, list[tuple[str, str]]]:
    """Harnesses and providers present in a version, for the filter form. Two queries."""
    base = LeaderboardEntry.objects.filter(benchmark_version=benchmark_version)
    harnesses = sorted(set(base.values_list("agent__harness__slug",
                                            "agent__harness__display_name")))
    providers = sorted({(p, p) for p in base.values_list("agent__model__provider", flat=True)})
    return {"harnesses": harnesses, "providers": providers}


def categories_for(*, benchmark_version: BenchmarkVersion) -> list[Category]:
    return list(benchmark_version.categories.order_by("position", "slug"))


def category_matrix(
    *, benchmark_version: BenchmarkVersion, filters: EntryFilters = EntryFilters(),
    window: EntryWindow = EntryWindow(),
) -> tuple[list[Category], list[LeaderboardEntry]]:
    """Entries (one window of them) with ``category_results`` (dict slug -> CategoryEntry).
    Three queries."""
    categories = categories_for(benchmark_version=benchmark_version)
    qs = _windowed(_entries(benchmark_version, filters), window)
    entries = list(
        qs.prefetch_related(
            # One query for all entries' per-category rows instead of one per entry.
            Prefetch(
                "category_entries",
                queryset=CategoryEntry.objects.select_related("category"),
                to_attr="category_rows",
            )
        )
    )
    for e in entries:
        e.category_results = {ce.category.slug: ce for ce in e.category_rows}
    return categories, entries


def harness_family_aggregates(*, benchmark_version: BenchmarkVersion) -> list[GroupAggregate]:
    return list(
        GroupAggregate.objects.filter(
            benchmark_version=benchmark_version, kind=GroupAggregate.Kind.HARNESS_FAMILY
        ).order_by("-mean_success_rate", "key")
    )


@dataclass
class ComparisonRow:
    key: str
    label: str
    entries: list[LeaderboardEntry] = field(default_factory=list)


def same_model_across_harnesses(*, benchmark_version: BenchmarkVersion) -> list[ComparisonRow]:
    """Models run under more than one harness, each with its entries. One query."""
    by_model: dict[str, ComparisonRow] = {}
    for e in _entries(benchmark_version, EntryFilters()):
        row = by_model.setdefault(e.agent.model.slug,
                                  ComparisonRow(e.agent.model.slug, e.agent.model.display_name))
        row.entries.append(e)
    return [r for r in by_model.values() if len({e.agent.harness_id for e in r.entries}) > 1]


def versions_within_harness(*, benchmark_version: BenchmarkVersion) -> list[ComparisonRow]:
    """Per (harness, model family) with two or more versions, entries by model version. One query."""
    lines: dict[tuple[str, str], ComparisonRow] = {}
    for e in _entries(benchmark_version, EntryFilters()):
        key = (e.agent.harness.slug, e.agent.model.family or e.agent.model.display_name)
        row = lines.setdefault(key, ComparisonRow(
            f"{key[0]}:{key[1]}", f"{e.agent.harness.display_name} · {key[1]}"))
        row.entries.append(e)
    out = [r for r in lines.values() if len(r.entries) > 1]
    for r in out:
        r.entries.sort(key=lambda e: e.agent.model.version_order)
    return out


def task_matrix(
    *, benchmark_version: BenchmarkVersion, filters: EntryFilters = EntryFilters(),
    window: EntryWindow = EntryWindow(),
) -> tuple[list[BenchmarkTask], list[LeaderboardEntry]]:
    """Tasks, and entries (one window of them) with ``cell_list`` (list aligned with tasks).
    Two queries."""
    tasks = list(benchmark_version.tasks.select_related("category").order_by("position", "name"))
    qs = _windowed(_entries(benchmark_version, filters), window)
    entries = list(qs.defer(None).select_related("agent", "agent__harness", "agent__model")
                   .defer("task_rates"))
    for e in entries:
        by_task = e.cells()  # stored on the entry row itself
        e.cell_list = [by_task.get(t.pk) for t in tasks]
    return tasks, entries


def top_entries(*, benchmark_version: BenchmarkVersion, n: int = 5) -> list[LeaderboardEntry]:
    """The first ``n`` ranked entries, with their agents (the link-preview card). One query."""
    return list(LeaderboardEntry.objects.filter(benchmark_version=benchmark_version)
                .exclude(verification_level__in=UNRANKED_LEVELS)
                .select_related("agent").defer("task_rates").order_by("rank", "agent__slug")[:n])


def submission_entry(*, submission_id: int) -> LeaderboardEntry | None:
    """The leaderboard row of a published submission (withdrawn or unpublished: none)."""
    return (LeaderboardEntry.objects.filter(submission_id=submission_id,
                                            submission__status="published")
            .select_related("agent", "benchmark_version").defer("task_rates").first())


def entry_get(*, benchmark_version: BenchmarkVersion, agent_slug: str) -> LeaderboardEntry | None:
    """One entry with its categories and cells (``cell_rows``, in task order). Three
    queries."""
    entry = (
        LeaderboardEntry.objects.filter(benchmark_version=benchmark_version, agent__slug=agent_slug)
        .select_related("agent", "agent__harness", "agent__model", "submission")
        .defer("task_rates")
        .prefetch_related(
            Prefetch("category_entries",
                     queryset=CategoryEntry.objects.select_related("category")
                     .order_by("category__position"), to_attr="category_rows"),
        )
        .first()
    )
    if entry is not None:
        cells = entry.cells()
        entry.cell_rows = [
            replace(cells[t.pk], benchmark_task=t)
            for t in BenchmarkTask.objects.filter(pk__in=list(cells)).select_related(
                "category").order_by("position")]
    return entry


def score_history(*, benchmark_version: BenchmarkVersion, agent_id: int) -> list[ScoreRevision]:
    """The agent's published submissions' score revisions on this version (re-scores after a
    grader update that changed a number, R11), newest first. One query."""
    return list(ScoreRevision.objects.filter(
        submission__agent_id=agent_id, submission__benchmark_version=benchmark_version)
        .order_by("-created_at", "-pk"))


def task_get(*, benchmark_version: BenchmarkVersion, name: str) -> BenchmarkTask | None:
    return (
        BenchmarkTask.objects.filter(benchmark_version=benchmark_version, name=name)
        .select_related("category", "benchmark_version")
        .first()
    )


def task_attempts(*, benchmark_task: BenchmarkTask) -> list[tuple[LeaderboardEntry, list[Trial]]]:
    """Every ranked agent's trials on one task. Two queries."""
    entries = list(_entries(benchmark_task.benchmark_version, EntryFilters()))
    by_sub: dict[int, list[Trial]] = defaultdict(list)
    for t in Trial.objects.filter(
        benchmark_task=benchmark_task, submission_id__in=[e.submission_id for e in entries]
    ).order_by("attempt"):
        by_sub[t.submission_id].append(t)
    return [(e, by_sub.get(e.submission_id, [])) for e in entries]


def task_catalogue(*, benchmark_version: BenchmarkVersion) -> list[BenchmarkTask]:
    """Tasks with their category and solve counts over ranked agents. Two queries."""
    tasks = list(benchmark_version.tasks.select_related("category").order_by("position", "name"))
    totals: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for cell_tasks, cell_outcomes in LeaderboardEntry.objects.filter(
        benchmark_version=benchmark_version
    ).values_list("cell_tasks", "cell_outcomes"):
        if not cell_tasks:
            continue
        for task_id, outcomes in zip(cell_tasks.split(","), cell_outcomes.split(","),
                                     strict=True):
            total = totals[int(task_id)]
            total[0] += outcomes.count("P")
            total[1] += len(outcomes) - outcomes.count("I") - outcomes.count("-")
    for t in tasks:
        t.solved, t.scored = totals[t.pk]
        t.solve_rate = t.solved / t.scored if t.scored else None
    return tasks


def trial_rows(
    *, benchmark_version: BenchmarkVersion, filters: EntryFilters = EntryFilters(),
    offset: int = 0, limit: int | None = None,
) -> Iterator[dict]:
    """Per-trial rows of every ranked entry's submission, as dicts (what ``tables.TRIALS``
    reads: the site's outcome, then the claim and the checks), streamed with a server-side
    cursor. ``offset``/``limit`` page in the database (LIMIT/OFFSET); the order is total (id
    last), so pages neither overlap nor skip."""
    sub_ids = list(_entries(benchmark_version, filters).values_list("submission_id", flat=True))
    rows = (
        Trial.objects.filter(submission_id__in=sub_ids)
        .order_by("submission__agent__display_name", "benchmark_task__position", "attempt",
                  "submission_id", "pk")
        .values(
            "attempt", "outcome", "success", "cost_usd", "duration_s", "output_tokens",
            "input_tokens", "cached_tokens", "claimed_outcome", "claimed_success", "reward",
            "verified_reward", "flags", "submission_id", "verification_level", "judge_model",
            "judge_prompt_version", "pk", "grader_version", "infra_confirmed",
            "infra_confirmed_by", "infra_confirm_reason", "trajectory_judgement",
            "trajectory_judge_model", "trajectory_judge_prompt_version",
            agent=F("submission__agent__display_name"), task=F("benchmark_task__name"),
            category=F("benchmark_task__category__slug"),
            reconstructed=F("submission__is_reconstructed"),
            verified=F("submission__is_verified"), agent_id=F("submission__agent_id"),
        )
    )
    rows = rows[offset:] if limit is None else rows[offset:offset + limit]
    return rows.iterator(chunk_size=2000)




@dataclass
class SoftMetricSummary:
    """Means and sums of one category's per-trial soft metrics for one agent."""

    trials: int = 0
    sums: dict[str, float] = field(default_factory=dict)
    failure_sums: dict[str, float] = field(default_factory=dict)

    def mean(self, metric: str) -> float | None:
        return self.sums[metric] / self.trials if self.trials and metric in self.sums else None


def soft_metric_summary(
    *, benchmark_version: BenchmarkVersion, category_slug: str
) -> dict[str, SoftMetricSummary]:
    """Agent display name -> summary of soft metrics on one category's trials. Two queries."""
    entries = list(_entries(benchmark_version, EntryFilters()))
    names = {e.submission_id: e.agent.display_name for e in entries}
    out: dict[str, SoftMetricSummary] = {}
    for sub_id, metrics, success in Trial.objects.filter(
        submission_id__in=list(names), benchmark_task__category__slug=category_slug
    ).values_list("submission_id", "soft_metrics", "success").iterator(chunk_size=2000):
        s = out.setdefault(names[sub_id], SoftMetricSummary())
        s.trials += 1
        for k, v in (metrics or {}).items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                s.sums[k] = s.sums.get(k, 0.0) + v
                if not success:
                    s.failure_sums[k] = s.failure_sums.get(k, 0.0) + v
    return out


def trial_count(
    *, benchmark_version: BenchmarkVersion, filters: EntryFilters = EntryFilters()
) -> int:
    """How many rows trial_rows yields for the same arguments. One query (a subquery)."""
    sub_ids = _entries(benchmark_version, filters).values("submission_id")
    return Trial.objects.filter(submission_id__in=sub_ids).count()


def verification_described() -> dict:
    """The words of verification, from their one home: the levels strongest first and the
    verdicts with their one-line definitions, and every registered check (what it runs, what
    it contributes)."""
    from submissions.models import (
        LEVEL_DEFINITIONS,
        VERDICT_DEFINITIONS,
        SubmissionStatus,
        VerificationLevel,
    )
    from submissions.verification.checks import REGISTRY

    levels = (VerificationLevel.RERUN, VerificationLevel.REPRODUCED, VerificationLevel.REGRADED,
              VerificationLevel.CLAIMED)
    verdicts = (SubmissionStatus.VERIFIED, SubmissionStatus.CONSISTENT,
                SubmissionStatus.DISCREPANCY)
    return {"levels": [(str(v), LEVEL_DEFINITIONS[v]) for v in levels],
            "verdicts": [(str(v), VERDICT_DEFINITIONS[v]) for v in verdicts],
            "checks": [(c.title, c.runs, c.contributes) for c in REGISTRY]}


def screen_rules_described() -> dict:
    """The reward-hacking screen's rules and evidence sources, for the methods page (no query:
    the rules are a file, evaluation/screen_rules.toml)."""
    return {"screen": screen_rules.load_rules(), "screen_sources": screen_rules.SOURCES}


def site_data_state() -> tuple[tuple, datetime]:
    """What every benchmark version's pages depend on, for pages about all of them (the
    changelog): the versions (count, last change) and their aggregate versions (sum of numbers,
    last bump), and the latest of those times (Last-Modified). One query."""
    row = BenchmarkVersion.objects.aggregate(
        n=Count("pk"), bv_latest=Max("updated_at"),
        numbers=Sum("aggregate_version__number"), bumped=Max("aggregate_version__updated_at"))
    times = [t for t in (row["bv_latest"], row["bumped"]) if t is not None]
    modified = max(times) if times else datetime(2026, 1, 1, tzinfo=UTC)
    state = (row["n"], row["numbers"] or 0, *(t.timestamp() for t in times))
    return state, modified


def changelog_versions() -> list[BenchmarkVersion]:
    """Every benchmark version, newest first, with its task and published-submission counts.
    One query."""
    return list(BenchmarkVersion.objects.annotate(
        n_tasks=Count("tasks", distinct=True),
        n_published=Count("submissions", filter=Q(submissions__status=SubmissionStatus.PUBLISHED),
                          distinct=True),
    ).order_by("-created_at", "name", "version"))


def changelog_events(*, limit: int = 200) -> list[SubmissionEvent]:
    """The most recent publishes and withdrawals (the site's data changes), newest first.
    One query."""
    return list(
        SubmissionEvent.objects.filter(
            to_status__in=[SubmissionStatus.PUBLISHED, SubmissionStatus.WITHDRAWN],
            submission__is_reconstructed=False)
        .select_related("submission__agent", "submission__benchmark_version")
        .order_by("-created_at", "-pk")[:limit])


def reconstructed_loads() -> list[Submission]:
    """The paper's reconstructed rows, as loaded (no status history of their own). One query."""
    return list(Submission.objects.published().filter(is_reconstructed=True)
                .select_related("agent", "benchmark_version").order_by("-created_at", "pk"))


def compare_entries(
    *, benchmark_version: BenchmarkVersion, agent_slugs: list[str],
) -> tuple[list[LeaderboardEntry], list[BenchmarkTask], list[str]]:
    """The entries of the named agents on one version in rank order (unranked ones last), with
    their cells and per-category rows (``category_rows``, in category order); the version's
    tasks; and the slugs that have no entry there. Three queries."""
    if not agent_slugs:
        return [], [], []
    entries = list(
        LeaderboardEntry.objects.filter(benchmark_version=benchmark_version,
                                        agent__slug__in=agent_slugs)
        .select_related("agent", "agent__harness", "agent__model")
        .defer("task_rates")
        .prefetch_related(
            # One query for every compared entry's category rows instead of one per entry.
            Prefetch("category_entries",
                     queryset=CategoryEntry.objects.select_related("category")
                     .order_by("category__position", "category__slug"),
                     to_attr="category_rows"))
        .order_by(RANK_ORDER, "agent__display_name"))
    found = {e.agent.slug for e in entries}
    tasks = list(benchmark_version.tasks.select_related("category").order_by("position", "name"))
    return entries, tasks, [s for s in agent_slugs if s not in found]
