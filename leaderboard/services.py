"""Writes to the leaderboard: catalogue upserts and the precomputed aggregate rebuild."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone

from leaderboard import stats
from leaderboard.models import (
    AggregateVersion,
    Agent,
    AIModel,
    BenchmarkVersion,
    CategoryEntry,
    Group,
    GroupAggregate,
    Harness,
    LeaderboardEntry,
    TaskCell,
)
from submissions.models import OUTCOME_CODES, Outcome, Submission, Trial


def agent_get_or_create(
    *,
    harness: Harness,
    model: AIModel,
    harness_version: str = "",
    agent_settings: dict | None = None,
    display_name: str | None = None,
) -> Agent:
    """Idempotent: one Agent per (harness, harness version, model, settings digest)."""
    agent_settings = agent_settings or {}
    digest = hashlib.sha256(json.dumps(agent_settings, sort_keys=True).encode()).hexdigest()
    name = display_name or f"{harness.display_name} ({model.display_name})"
    slug_source = f"{harness.slug}-{harness_version}-{model.slug}-{digest[:8]}"
    agent, _ = Agent.objects.get_or_create(
        harness=harness,
        harness_version=harness_version,
        model=model,
        settings_digest=digest,
        defaults={
            "settings": agent_settings,
            "display_name": name,
            "slug": _slugify(slug_source if harness_version or agent_settings else name),
        },
    )
    return agent


def _slugify(text: str) -> str:
    from django.utils.text import slugify

    return slugify(text.replace(".", "-"))[:200]


def aggregate_version_bump(*, benchmark_version_ids: list[int]) -> None:
    """Increment the aggregate version of each benchmark version (creating it at 1), inside the
    caller's transaction: cached pages keyed by the old number become unreachable exactly when
    the change commits. One statement per version; the row lock also orders concurrent bumps."""
    table = AggregateVersion._meta.db_table
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        for pk in benchmark_version_ids:
            # An upsert (PostgreSQL and SQLite >= 3.24): no get-then-create race.
            cursor.execute(
                f"INSERT INTO {table} (benchmark_version_id, number, created_at, updated_at) "
                f"VALUES (%s, 1, %s, %s) ON CONFLICT (benchmark_version_id) DO UPDATE "
                f"SET number = {table}.number + 1, updated_at = excluded.updated_at",
                [pk, now, now])


# ---------------------------------------------------------------------------------------------
# Aggregate rebuild
# ---------------------------------------------------------------------------------------------


@dataclass
class _AgentResult:
    submission: Submission
    per_task: dict[int, list[tuple[int, str]]] = field(default_factory=lambda: defaultdict(list))
    cost: Decimal = Decimal(0)
    cost_known: int = 0
    duration_sum: float = 0.0
    duration_n: int = 0
    output_sum: int = 0
    output_n: int = 0
    present: int = 0
    claimed_successes: int = 0
    flagged: int = 0
    # Per task, in attempt order: (claimed outcome, flags) beside per_task's site outcome.
    claims: dict[int, list[tuple[str, list]]] = field(default_factory=lambda: defaultdict(list))


@transaction.atomic
def leaderboard_recompute(
    *, benchmark_version: BenchmarkVersion, agent_ids: list[int] | None = None
) -> int:
    """Bring the precomputed rows of one benchmark version up to date, in a single transaction.

    With ``agent_ids`` (a publish or take-down) only those agents' entries, category entries and
    task cells are rebuilt from their trials; without, every agent's. Either way ranks and tie
    groups are then recomputed from the stored per-task vectors and the group aggregates from
    the stored entries, by the same code, so both give identical tables. Idempotent; readers see
    the old rows or the new ones. Returns the number of entries of the version.
    """
    # Serialise concurrent rebuilds of the same version (a no-op lock on SQLite).
    BenchmarkVersion.objects.select_for_update().filter(pk=benchmark_version.pk).first()
    aggregate_version_bump(benchmark_version_ids=[benchmark_version.pk])
    entries = LeaderboardEntry.objects.filter(benchmark_version=benchmark_version)
    if agent_ids is not None and entries.filter(attempts__gt=0, task_rates={}).exists():
        agent_ids = None  # rows from before task vectors were stored: rebuild them all once
    if agent_ids is None:
        entries.delete()
    else:
        entries.filter(agent_id__in=agent_ids).delete()
    categories = list(benchmark_version.categories.all())
    tasks = list(benchmark_version.tasks.all())
    results = _collect_results(benchmark_version, agent_ids)
    required = len(tasks) * benchmark_version.attempts_per_task
    task_category = {t.pk: t.category_id for t in tasks}
    computed = [_compute_entry(r, categories, task_category, required) for r in results]
    _insert_entries(benchmark_version, computed)
    n = _rank_entries(benchmark_version)
    GroupAggregate.objects.filter(benchmark_version=benchmark_version).delete()
    _recompute_groups(benchmark_version)
    return n


def _insert_entries(benchmark_version: BenchmarkVersion, computed: list[dict]) -> None:
    """Entries (unranked until _rank_entries), their category entries and task cells."""
    entries = LeaderboardEntry.objects.bulk_create(
        [
            LeaderboardEntry(
                benchmark_version=benchmark_version,
                agent_id=c["submission"].agent_id,
                submission=c["submission"],
                rank=0,
                tie_group=0,
                task_rates=c["task_rates"],
                **c["row"],
            )
            for c in computed
        ],
        batch_size=2000,
    )
    CategoryEntry.objects.bulk_create(
        [CategoryEntry(entry=e, **ce) for e, c in zip(entries, computed, strict=True)
         for ce in c["categories"]],
        batch_size=5000,
    )
    TaskCell.objects.bulk_create(
        [TaskCell(entry=e, **cell) for e, c in zip(entries, computed, strict=True)
         for cell in c["cells"]],
        batch_size=5000,
    )


def _rank_entries(benchmark_version: BenchmarkVersion) -> int:
    """Competition ranks and tie groups of every entry, from the stored rows and per-task
    vectors (one read, no trials); only rows whose rank or group changed are written."""
    rows = list(
        LeaderboardEntry.objects.filter(benchmark_version=benchmark_version).values_list(
            "pk", "success_rate", "successes", "cost_per_attempt_usd", "submitted_on",
            "submission__created_at", "submission_id", "task_rates", "rank", "tie_group")
    )
    # Explicit tie-breaks: more successes, cheaper, earlier, then the older submission.
    rows.sort(key=lambda r: (-r[1], -r[2], r[3] or Decimal(10**9), r[4] or r[5].date(), r[6]))
    ranks = stats.competition_ranks([r[1] for r in rows])
    groups = stats.tie_groups([r[7] for r in rows], settings.LEADERBOARD_TIE_ALPHA)
    changed = [(r[0], rank, group) for r, rank, group in zip(rows, ranks, groups, strict=True)
               if (r[8], r[9]) != (rank, group)]
    _write_ranks(changed)
    return len(rows)


def _write_ranks(changed: list[tuple[int, int, int]]) -> None:
    if not changed:
        return
    if connection.vendor == "postgresql":
        # One statement however many rows moved (bulk_update would build a CASE per row).
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {LeaderboardEntry._meta.db_table} AS e SET rank = v.rank, "
                "tie_group = v.tie_group FROM unnest(%s::bigint[], %s::int[], %s::int[]) "
                "AS v(id, rank, tie_group) WHERE e.id = v.id",
                [[c[0] for c in changed], [c[1] for c in changed], [c[2] for c in changed]])
        return
    LeaderboardEntry.objects.bulk_update(
        [LeaderboardEntry(pk=pk, rank=rank, tie_group=group) for pk, rank, group in changed],
        ["rank", "tie_group"], batch_size=500)


def _collect_results(
    benchmark_version: BenchmarkVersion, agent_ids: list[int] | None = None
) -> list[_AgentResult]:
    """Latest published submission per agent (of agent_ids, or every agent), with its trials
    (two queries, streamed)."""
    latest: dict[int, Submission] = {}
    subs = Submission.objects.published().filter(benchmark_version=benchmark_version)
    if agent_ids is not None:
        subs = subs.filter(agent_id__in=agent_ids)
    for sub in subs.order_by("agent_id", "-published_at", "-pk"):
        latest.setdefault(sub.agent_id, sub)
    results = {s.pk: _AgentResult(submission=s) for s in latest.values()}
    rows = (
        Trial.objects.filter(submission_id__in=list(results))
        .order_by("submission_id", "benchmark_task_id", "attempt")
        .values_list("submission_id", "benchmark_task_id", "attempt", "outcome", "cost_usd",
                     "duration_s", "output_tokens", "claimed_outcome", "flags")
    )
    for sub_id, task_id, _attempt, outcome, cost, duration, out_tokens, claimed, flags in (
            rows.iterator(2000)):
        r = results[sub_id]
        # ``outcome`` is the site's (the claim corrected by the re-grade, site_outcome): the
        # same value every per-trial page, CSV and API row shows.
        r.per_task[task_id].append((1 if outcome == Outcome.PASSED else 0, outcome))
        r.claims[task_id].append((claimed, list(flags or [])))
        r.claimed_successes += claimed == Outcome.PASSED
        r.flagged += bool(flags)
        r.present += 1
        if outcome == Outcome.INFRA_ERROR:
            continue  # shown, but leaves the denominator and the cost/time means
        if cost is not None:
            r.cost += cost
            r.cost_known += 1
        if duration is not None:
            r.duration_sum += duration
            r.duration_n += 1
        if out_tokens is not None:
            r.output_sum += out_tokens
            r.output_n += 1
    return list(results.values())


def _compute_entry(r: _AgentResult, categories, task_category, required: int) -> dict:
    scored = {
        t: [(s, o) for s, o in attempts if o != Outcome.INFRA_ERROR]
        for t, attempts in r.per_task.items()
    }
    overall = stats.clustered_rate([(sum(s for s, _ in a), len(a)) for a in scored.values()])
    task_rates = {str(t): sum(s for s, _ in a) / len(a) for t, a in scored.items() if a}
    cat_rows, by_group_rates, by_group_counts = [], defaultdict(list), defaultdict(lambda: [0, 0])
    for cat in categories:
        clusters = [(sum(s for s, _ in a), len(a)) for t, a in scored.items()
                    if task_category.get(t) == cat.pk]
        est = stats.clustered_rate(clusters)
        if est.attempts == 0:
            continue
        cat_rows.append({"category": cat, "successes": est.successes, "attempts": est.attempts,
                         "success_rate": est.rate, "ci_low": est.ci_low, "ci_high": est.ci_high})
        by_group_rates[cat.group].append(est.rate)
        by_group_counts[cat.group][0] += est.successes
        by_group_counts[cat.group][1] += est.attempts
    all_outcomes = [o for a in r.per_task.values() for _, o in a]
    n_tasks_scored = len([a for a in scored.values() if a])
    cost_per_attempt = (r.cost / r.cost_known).quantize(Decimal("0.0001")) if r.cost_known else None
    row = {
        "successes": overall.successes,
        "attempts": overall.attempts,
        "attempts_present": r.present,
        "attempts_required": required,
        "infra_errors": all_outcomes.count(Outcome.INFRA_ERROR),
        "timeouts": all_outcomes.count(Outcome.TIMEOUT),
        "agent_errors": all_outcomes.count(Outcome.AGENT_ERROR),
        "claimed_successes": r.claimed_successes,
        "flagged_trials": r.flagged,
        "success_rate": overall.rate,
        "ci_low": overall.ci_low,
        "ci_high": overall.ci_high,
        "design_effect": overall.design_effect,
        "pass_at_k": _task_fraction(scored, any, n_tasks_scored),
        "pass_hat_k": _task_fraction(scored, all, n_tasks_scored),
        "imaging_macro": stats.macro_mean(by_group_rates[Group.IMAGING]),
        "text_macro": stats.macro_mean(by_group_rates[Group.TEXT]),
        "imaging_pooled": _pooled(by_group_counts.get(Group.IMAGING)),
        "text_pooled": _pooled(by_group_counts.get(Group.TEXT)),
        "total_cost_usd": r.cost if r.cost_known else None,
        "cost_per_attempt_usd": cost_per_attempt,
        "cost_per_success_usd": (
            (r.cost / overall.successes).quantize(Decimal("0.0001"))
            if r.cost_known and overall.successes else None
        ),
        "mean_duration_s": r.duration_sum / r.duration_n if r.duration_n else None,
        "mean_output_tokens": r.output_sum / r.output_n if r.output_n else None,
        "verified": r.submission.is_verified,
        "reconstructed": r.submission.is_reconstructed,
        "submitted_on": r.submission.submitted_on,
    }
    cells = [
        {"benchmark_task_id": t, "outcomes": "".join(OUTCOME_CODES[o] for _, o in attempts),
         "successes": sum(s for s, _ in attempts),
         "claimed_outcomes": "".join(OUTCOME_CODES[c] for c, _ in r.claims[t]),
         "flags": [f for _, f in r.claims[t]]}
        for t, attempts in r.per_task.items()
    ]
    return {"submission": r.submission, "row": row, "categories": cat_rows, "cells": cells,
            "task_rates": task_rates}


def _task_fraction(scored: dict, quantifier, n_tasks: int) -> float:
    if not n_tasks:
        return 0.0
    return sum(1 for a in scored.values() if a and quantifier(s for s, _ in a)) / n_tasks


def _pooled(counts: list[int] | None) -> float | None:
    return counts[0] / counts[1] if counts and counts[1] else None


def _recompute_groups(benchmark_version: BenchmarkVersion) -> None:
    """Harness-family aggregates from the stored entries: means of agent-level values and
    pooled counts. Members are read in rank order, so float sums (and the label, the top
    member's harness) do not depend on which path wrote the entries. Two queries."""
    members = list(
        LeaderboardEntry.objects.filter(benchmark_version=benchmark_version)
        .order_by("rank", "agent__display_name", "pk")
        .values_list("agent__harness__family", "agent__harness__display_name", "successes",
                     "attempts", "success_rate", "imaging_macro", "text_macro")
    )
    pooled: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for family, group, successes, attempts in (
        CategoryEntry.objects.filter(entry__benchmark_version=benchmark_version)
        .values_list("entry__agent__harness__family", "category__group")
        .annotate(s=Sum("successes"), n=Sum("attempts")).values_list(
            "entry__agent__harness__family", "category__group", "s", "n")
    ):
        pooled[(family, group)] = [successes, attempts]
    families: dict[str, list[tuple]] = defaultdict(list)
    for m in members:
        families[m[0]].append(m)
    rows = []
    for family, ms in families.items():
        successes, attempts = sum(m[2] for m in ms), sum(m[3] for m in ms)
        rows.append(GroupAggregate(
            benchmark_version=benchmark_version,
            kind=GroupAggregate.Kind.HARNESS_FAMILY,
            key=family,
            label=ms[0][1],
            agents=len(ms),
            successes=successes,
            attempts=attempts,
            pooled_success_rate=successes / attempts if attempts else 0.0,
            mean_success_rate=sum(m[4] for m in ms) / len(ms),
            imaging_macro=stats.macro_mean([m[5] for m in ms if m[5] is not None]),
            text_macro=stats.macro_mean([m[6] for m in ms if m[6] is not None]),
            imaging_pooled=_pooled(pooled.get((family, Group.IMAGING))),
            text_pooled=_pooled(pooled.get((family, Group.TEXT))),
        ))
    GroupAggregate.objects.bulk_create(rows)
