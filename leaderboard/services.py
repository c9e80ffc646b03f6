"""Writes to the leaderboard: catalogue upserts and the precomputed aggregate rebuild."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from django.db import transaction

from leaderboard import stats
from leaderboard.models import (
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


@transaction.atomic
def leaderboard_recompute(*, benchmark_version: BenchmarkVersion) -> int:
    """Rebuild every precomputed row of one benchmark version in a single transaction.

    Idempotent; readers see either the old rows or the new ones. Returns the number of entries.
    """
    # Serialise concurrent rebuilds of the same version (a no-op lock on SQLite).
    BenchmarkVersion.objects.select_for_update().filter(pk=benchmark_version.pk).first()
    categories = list(benchmark_version.categories.all())
    tasks = list(benchmark_version.tasks.all())
    results = _collect_results(benchmark_version)

    LeaderboardEntry.objects.filter(benchmark_version=benchmark_version).delete()
    GroupAggregate.objects.filter(benchmark_version=benchmark_version).delete()
    if not results:
        return 0

    required = len(tasks) * benchmark_version.attempts_per_task
    task_category = {t.pk: t.category_id for t in tasks}
    computed = [_compute_entry(r, categories, task_category, required) for r in results]
    computed.sort(key=lambda c: (-c["row"]["success_rate"], -c["row"]["successes"],
                                 c["row"]["cost_per_attempt_usd"] or Decimal(10**9),
                                 c["submission"].submitted_on or c["submission"].created_at.date(),
                                 c["submission"].pk))
    ranks = stats.competition_ranks([c["row"]["success_rate"] for c in computed])
    groups = stats.tie_groups([c["task_rates"] for c in computed], settings.LEADERBOARD_TIE_ALPHA)

    entries = LeaderboardEntry.objects.bulk_create(
        [
            LeaderboardEntry(
                benchmark_version=benchmark_version,
                agent_id=c["submission"].agent_id,
                submission=c["submission"],
                rank=rank,
                tie_group=group,
                **c["row"],
            )
            for c, rank, group in zip(computed, ranks, groups, strict=True)
        ]
    )
    CategoryEntry.objects.bulk_create(
        [CategoryEntry(entry=e, **ce) for e, c in zip(entries, computed, strict=True)
         for ce in c["categories"]]
    )
    TaskCell.objects.bulk_create(
        [TaskCell(entry=e, **cell) for e, c in zip(entries, computed, strict=True)
         for cell in c["cells"]],
        batch_size=5000,
    )
    _recompute_groups(benchmark_version, entries, computed)
    return len(entries)


def _collect_results(benchmark_version: BenchmarkVersion) -> list[_AgentResult]:
    """Latest published submission per agent, with its trials (two queries, streamed)."""
    latest: dict[int, Submission] = {}
    for sub in (
        Submission.objects.published()
        .filter(benchmark_version=benchmark_version)
        .order_by("agent_id", "-published_at", "-pk")
    ):
        latest.setdefault(sub.agent_id, sub)
    results = {s.pk: _AgentResult(submission=s) for s in latest.values()}
    rows = (
        Trial.objects.filter(submission_id__in=list(results))
        .order_by("submission_id", "benchmark_task_id", "attempt")
        .values_list("submission_id", "benchmark_task_id", "attempt", "outcome", "cost_usd",
                     "duration_s", "output_tokens", "verified_reward")
    )
    for sub_id, task_id, _attempt, outcome, cost, duration, out_tokens, verified in rows.iterator(
            2000):
        r = results[sub_id]
        # The site's own re-grade overrides the claim: a claimed pass that does not re-grade
        # as a pass is a failure (and a claimed failure stays one, as timeouts do).
        if outcome == Outcome.PASSED and verified is not None and verified < 1.0:
            outcome = Outcome.FAILED
        r.per_task[task_id].append((1 if outcome == Outcome.PASSED else 0, outcome))
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
         "successes": sum(s for s, _ in attempts)}
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


def _recompute_groups(benchmark_version, entries, computed) -> None:
    """Harness-family aggregates: means of agent-level values, and pooled counts."""
    families: dict[str, list[tuple[LeaderboardEntry, dict]]] = defaultdict(list)
    harness_by_agent = {
        pk: (family, name) for pk, family, name in Agent.objects.filter(
            pk__in=[e.agent_id for e in entries]).values_list(
            "pk", "harness__family", "harness__display_name")
    }
    labels: dict[str, str] = {}
    for e, c in zip(entries, computed, strict=True):
        family, name = harness_by_agent[e.agent_id]
        families[family].append((e, c))
        labels.setdefault(family, name)
    rows = []
    for family, members in families.items():
        es = [e for e, _ in members]
        rows.append(
            GroupAggregate(
                benchmark_version=benchmark_version,
                kind=GroupAggregate.Kind.HARNESS_FAMILY,
                key=family,
                label=labels[family],
                agents=len(es),
                successes=sum(e.successes for e in es),
                attempts=sum(e.attempts for e in es),
                pooled_success_rate=(sum(e.successes for e in es) / sum(e.attempts for e in es))
                if sum(e.attempts for e in es) else 0.0,
                mean_success_rate=sum(e.success_rate for e in es) / len(es),
                imaging_macro=stats.macro_mean([e.imaging_macro for e in es
                                                if e.imaging_macro is not None]),
                text_macro=stats.macro_mean([e.text_macro for e in es if e.text_macro is not None]),
                imaging_pooled=_group_pooled(members, Group.IMAGING),
                text_pooled=_group_pooled(members, Group.TEXT),
            )
        )
    GroupAggregate.objects.bulk_create(rows)


def _group_pooled(members, group: str) -> float | None:
    s = n = 0
    for _, c in members:
        for ce in c["categories"]:
            if ce["category"].group == group:
                s += ce["successes"]
                n += ce["attempts"]
    return s / n if n else None
