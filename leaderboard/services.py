"""Writes to the leaderboard: the aggregate version and the precomputed aggregate rebuild."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, CharField, Count, Max, Q, Sum, Value, When
from django.utils import timezone

from evaluation.models import BenchmarkVersion, Group
from leaderboard import caching, stats
from leaderboard.models import (
    AggregateVersion,
    CategoryEntry,
    GroupAggregate,
    LeaderboardEntry,
    TaskCell,
)
from submissions.models import OUTCOME_CODES, Outcome, Submission, Trial, coverage_badge


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
    caching.state_forget()


# ---------------------------------------------------------------------------------------------
# Aggregate rebuild
# ---------------------------------------------------------------------------------------------


@dataclass
class _AgentResult:
    submission: Submission
    # Task pk -> outcome code of each present attempt in attempt order ("PPF", see OUTCOME_CODES).
    per_task: dict[int, str] = field(default_factory=dict)
    cost: Decimal = Decimal(0)
    cost_known: int = 0
    duration_sum: float = 0.0
    duration_n: int = 0
    output_sum: int = 0
    output_n: int = 0
    present: int = 0
    claimed_successes: int = 0
    infra_claimed: int = 0
    flagged: int = 0
    # Beside per_task's site outcomes, in the same order: the claimed codes, and each attempt's
    # integrity flags (only tasks with a flagged attempt are listed).
    claimed: dict[int, str] = field(default_factory=dict)
    flags: dict[int, list[list]] = field(default_factory=dict)


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
    now = timezone.now()
    _insert_rows(CategoryEntry, ["entry_id", "category_id", "successes", "attempts",
                                 "success_rate", "ci_low", "ci_high", "created_at", "updated_at"],
                 [(e.pk, ce["category"].pk, ce["successes"], ce["attempts"], ce["success_rate"],
                   ce["ci_low"], ce["ci_high"], now, now)
                  for e, c in zip(entries, computed, strict=True) for ce in c["categories"]])
    cell_columns = ["entry_id", "benchmark_task_id", "outcomes", "successes",
                    "claimed_outcomes", "flags", "created_at", "updated_at"]
    if connection.vendor == "postgresql":
        # Tens of thousands of cells: each COPY line formatted at once (outcome codes are
        # letters; the flags' JSON is serialised once per distinct value).
        json_text: dict = {}
        stamp = now.isoformat()
        _copy_lines(TaskCell, cell_columns, [
            f"{e.pk}\t{cell['benchmark_task_id']}\t{cell['outcomes']}\t{cell['successes']}\t"
            f"{cell['claimed_outcomes']}\t{_copy_text(cell['flags'], json_text)}\t{stamp}\t"
            f"{stamp}\n"
            for e, c in zip(entries, computed, strict=True) for cell in c["cells"]])
        return
    _insert_rows(TaskCell, cell_columns,
                 [(e.pk, cell["benchmark_task_id"], cell["outcomes"], cell["successes"],
                   cell["claimed_outcomes"], cell["flags"], now, now)
                  for e, c in zip(entries, computed, strict=True) for cell in c["cells"]])


def _insert_rows(model, columns: list[str], rows: list[tuple]) -> None:
    """Insert plain rows: PostgreSQL COPY (tens of thousands of task cells per rebuild, where
    building model instances for bulk_create was most of the rebuild's time), else bulk_create."""
    if not rows:
        return
    if connection.vendor == "postgresql":
        # COPY's text format written by us in blocks: psycopg's write_row (and a json.dumps per
        # cell) was most of the rebuild's time at 1,000 agents.
        json_text: dict = {}
        _copy_lines(model, columns, ["\t".join(_copy_text(v, json_text) for v in row) + "\n"
                                     for row in rows])
        return
    model.objects.bulk_create([model(**dict(zip(columns, row, strict=True))) for row in rows],
                              batch_size=2000)


def _copy_lines(model, columns: list[str], lines: list[str]) -> None:
    """COPY ... FROM STDIN of lines already in COPY's text format, in blocks."""
    sql = f"COPY {model._meta.db_table} ({', '.join(columns)}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for start in range(0, len(lines), 5000):
            copy.write("".join(lines[start:start + 5000]))


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_text(value, json_text: dict) -> str:
    """One value in COPY's text format (NULL is \\N); JSON serialised once per distinct value
    (most cells' flags are the same few empty lists)."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int | float | Decimal):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list) and not any(value):
        key = len(value)  # a cell without flags: one empty list per attempt
        if key not in json_text:
            json_text[key] = "[" + ", ".join(["[]"] * key) + "]"
        return json_text[key]
    if isinstance(value, list | dict):
        key = repr(value)
        if key not in json_text:
            json_text[key] = json.dumps(value).translate(_COPY_ESCAPES)
        return json_text[key]
    return str(value).translate(_COPY_ESCAPES)


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
    groups = stats.tie_groups_vectorised([r[7] for r in rows], settings.LEADERBOARD_TIE_ALPHA,
                                         rates=[r[1] for r in rows])
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
    if not results:
        return []
    trials = Trial.objects.filter(submission_id__in=list(results))
    last_attempt = trials.aggregate(m=Max("attempt"))["m"] or 0
    # ``outcome`` is the site's (the claim corrected by the re-grade, site_outcome): the same
    # value every per-trial page, CSV and API row shows; the claim is kept beside it.
    def code(column: str) -> Case:
        return Case(*[When(**{column: o}, then=Value(c)) for o, c in OUTCOME_CODES.items()],
                    output_field=CharField())

    def at(k: int, column: str) -> Max:
        return Max(Case(When(attempt=k, then=code(column)), output_field=CharField()))

    scored = ~Q(outcome=Outcome.INFRA_ERROR)  # infra errors leave the denominator and the means
    # One row per (submission, task), grouped in the database: each attempt's site and claimed
    # outcome codes in order, and the sums the entry needs (cost, time, tokens over scored
    # attempts, claimed passes).
    rows = (
        trials.values("submission_id", "benchmark_task_id")
        .annotate(
            cost=Sum("cost_usd", filter=scored), cost_n=Count("cost_usd", filter=scored),
            dur=Sum("duration_s", filter=scored), dur_n=Count("duration_s", filter=scored),
            out=Sum("output_tokens", filter=scored),
            out_n=Count("output_tokens", filter=scored),
            claimed_passes=Count("pk", filter=Q(claimed_outcome=Outcome.PASSED)),
            claimed_infra=Count("pk", filter=Q(claimed_outcome=Outcome.INFRA_ERROR)),
            **{f"a{k}": at(k, "outcome") for k in range(1, last_attempt + 1)},
            **{f"c{k}": at(k, "claimed_outcome") for k in range(1, last_attempt + 1)},
        )
        .order_by("submission_id", "benchmark_task_id")
    )
    flagged = _flags(trials)
    # Raw tuples: Django's per-row converters were a large part of the rebuild at 1,000 agents.
    sql, params = rows.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for (sub_id, task_id, cost, cost_n, dur, dur_n, out, out_n, claimed_passes,
             claimed_infra, *codes) in cursor.fetchall():
            r = results[sub_id]
            site, claims = codes[:last_attempt], codes[last_attempt:]
            present = [k for k, c in enumerate(site, start=1) if c is not None]
            r.per_task[task_id] = "".join(site[k - 1] for k in present)
            r.claimed[task_id] = "".join(claims[k - 1] or "" for k in present)
            r.claimed_successes += claimed_passes
            r.infra_claimed += claimed_infra
            if (sub_id, task_id) in flagged:
                by_attempt = flagged[(sub_id, task_id)]
                r.flags[task_id] = [by_attempt.get(k, []) for k in present]
                r.flagged += len(by_attempt)
            r.present += len(present)
            if cost_n:
                r.cost += _decimal(cost)
                r.cost_known += cost_n
            if dur_n:
                r.duration_sum += dur
                r.duration_n += dur_n
            if out_n:
                r.output_sum += int(out)
                r.output_n += out_n
    return list(results.values())


def _flags(trials) -> dict[tuple[int, int], dict[int, list]]:
    """(submission, task) -> attempt -> integrity flags, for the (few) flagged trials."""
    out: dict[tuple[int, int], dict[int, list]] = defaultdict(dict)
    for sub_id, task_id, attempt, flags in trials.exclude(flags=[]).values_list(
            "submission_id", "benchmark_task_id", "attempt", "flags"):
        if flags:
            out[(sub_id, task_id)][attempt] = list(flags)
    return out


def _decimal(value) -> Decimal:
    """A money sum as PostgreSQL returns it (Decimal), or as SQLite does (a float)."""
    return value if isinstance(value, Decimal) else Decimal(str(value)).quantize(Decimal("0.0001"))


def _compute_entry(r: _AgentResult, categories, task_category, required: int) -> dict:
    """One entry's row, category rows, task cells and per-task vector. Tasks are visited in
    per_task order everywhere, so float sums come out the same on every path."""
    passed, infra = OUTCOME_CODES[Outcome.PASSED], OUTCOME_CODES[Outcome.INFRA_ERROR]
    # (task, successes, scored attempts): infrastructure errors are not scored attempts.
    per = [(t, codes.count(passed), len(codes) - codes.count(infra))
           for t, codes in r.per_task.items()]
    # Stratified by category: a benchmark's category sizes are fixed (issue 14's simulation).
    overall = stats.clustered_rate([(y, n) for _, y, n in per],
                                   [task_category.get(t) for t, _, _ in per])
    task_rates = {str(t): y / n for t, y, n in per if n}
    by_category: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for t, y, n in per:
        by_category[task_category.get(t)].append((y, n))
    cat_rows, by_group_rates, by_group_counts = [], defaultdict(list), defaultdict(lambda: [0, 0])
    for cat in categories:
        est = stats.clustered_rate(by_category.get(cat.pk, []))
        if est.attempts == 0:
            continue
        cat_rows.append({"category": cat, "successes": est.successes, "attempts": est.attempts,
                         "success_rate": est.rate, "ci_low": est.ci_low, "ci_high": est.ci_high})
        by_group_rates[cat.group].append(est.rate)
        by_group_counts[cat.group][0] += est.successes
        by_group_counts[cat.group][1] += est.attempts
    all_codes = "".join(r.per_task.values())
    cost_per_attempt = (r.cost / r.cost_known).quantize(Decimal("0.0001")) if r.cost_known else None
    row = {
        "successes": overall.successes,
        "attempts": overall.attempts,
        "attempts_present": r.present,
        "attempts_required": required,
        "infra_errors": all_codes.count(infra),
        "infra_errors_claimed": r.infra_claimed,
        "timeouts": all_codes.count(OUTCOME_CODES[Outcome.TIMEOUT]),
        "agent_errors": all_codes.count(OUTCOME_CODES[Outcome.AGENT_ERROR]),
        "claimed_successes": r.claimed_successes,
        "flagged_trials": r.flagged,
        "success_rate": overall.rate,
        "ci_low": overall.ci_low,
        "ci_high": overall.ci_high,
        "design_effect": overall.design_effect,
        # solved in at least one scored attempt / in every scored attempt
        "pass_at_k": stats.pass_at_k([(y, n) for _, y, n in per]),
        "pass_hat_k": stats.pass_hat_k([(y, n) for _, y, n in per]),
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
        "verification_level": ("reconstructed" if r.submission.is_reconstructed
                               else (r.submission.coverage or {}).get("verdict", "unverified")),
        "verification": r.submission.coverage or {},
        "badge": coverage_badge(r.submission.coverage,
                                reconstructed=r.submission.is_reconstructed),
        "reconstructed": r.submission.is_reconstructed,
        "submitted_on": r.submission.submitted_on,
    }
    cells = [{"benchmark_task_id": t, "outcomes": r.per_task[t], "successes": y,
              "claimed_outcomes": r.claimed[t],
              "flags": r.flags.get(t) or [[] for _ in r.per_task[t]]}
             for t, y, _ in per]
    return {"submission": r.submission, "row": row, "categories": cat_rows, "cells": cells,
            "task_rates": task_rates}


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
