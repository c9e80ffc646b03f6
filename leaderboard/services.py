"""Writes to the leaderboard: the aggregate version and the precomputed aggregate rebuild."""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from evaluation.models import Agent, BenchmarkVersion, Category, Group, Harness
from leaderboard import caching, history, recompute, stats
from leaderboard.models import (
    UNRANKED_LEVELS,
    AggregateVersion,
    CategoryEntry,
    EntryStanding,
    GroupAggregate,
    LeaderboardEntry,
)
from submissions.models import Submission


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


@transaction.atomic
def leaderboard_recompute(
    *, benchmark_version: BenchmarkVersion, agent_ids: list[int] | None = None,
    rewrite: bool = False, timings: dict[str, float] | None = None,
) -> int:
    """Bring the precomputed rows of one benchmark version up to date, in a single transaction.

    With ``agent_ids`` (a publish or take-down) only those agents' entries, category entries and
    task cells are recomputed from their trials; without, every agent's. Only rows whose
    numbers changed are written (each entry keeps a digest of its rows; ``rewrite`` writes them
    all). Either way ranks and tie groups are then recomputed from the stored per-task vectors
    and the group aggregates from the stored entries, by the same code, so both give identical
    tables. Idempotent; readers see the old rows or the new ones. Returns the number of entries
    of the version. ``timings``, when given, receives the seconds of each phase
    (``bench_scale`` prints them; the commit is not among them).
    """
    clock = recompute.Clock(timings)
    # Serialise concurrent rebuilds of the same version (a no-op lock on SQLite).
    BenchmarkVersion.objects.select_for_update().filter(pk=benchmark_version.pk).first()
    aggregate_version_bump(benchmark_version_ids=[benchmark_version.pk])
    entries = LeaderboardEntry.objects.filter(benchmark_version=benchmark_version)
    if agent_ids is not None and entries.filter(attempts__gt=0, cell_tasks="").exists():
        agent_ids = None  # rows from before task vectors were stored: rebuild them all once
    clock.lap("lock and version")
    recompute.entries_write(benchmark_version=benchmark_version, agent_ids=agent_ids,
                            now=timezone.now(), rewrite=rewrite, timings=timings)
    clock.last = time.perf_counter()
    n = _rank_entries(benchmark_version)
    clock.lap("ranks and tie groups")
    groups = GroupAggregate.objects.filter(benchmark_version=benchmark_version)
    families = None
    if agent_ids is not None:
        # Only the families of the agents rebuilt change: the others keep their members, their
        # members' order (ranks shift together) and their top member.
        families = sorted(set(Agent.objects.filter(pk__in=agent_ids).values_list(
            "harness__family", flat=True)))
        groups = groups.filter(kind=GroupAggregate.Kind.HARNESS_FAMILY, key__in=families)
    groups.delete()
    _recompute_groups(benchmark_version, families=families)
    clock.lap("family aggregates")
    history.snapshot_after_commit(benchmark_version)
    return n


def _rank_entries(benchmark_version: BenchmarkVersion) -> int:
    """Competition ranks and tie groups of every ranked entry, from the stored rows and
    per-task vectors (one read, sorted by the database, no trials); only the ``EntryStanding``
    rows of entries whose rank or group changed are written, and those of new entries
    inserted. Entries of an unranked level (``UNRANKED_LEVELS``: a discrepancy) take no part
    and keep no standing. Returns the number of entries, ranked or not."""
    everything = _rank_inputs(benchmark_version)
    rows = [r[:4] for r in everything if r[4] not in UNRANKED_LEVELS]
    rates = [r[1] for r in rows]
    ranks = stats.competition_ranks(rates)
    groups = stats.tie_groups_vectorised(_rate_matrix(rows), settings.LEADERBOARD_TIE_ALPHA,
                                         rates=rates)
    current = {pk: (rank, group) for pk, rank, group in EntryStanding.objects.filter(
        benchmark_version=benchmark_version).values_list("entry_id", "rank", "tie_group")}
    moved, new = [], []
    for r, rank, group in zip(rows, ranks, groups, strict=True):
        was = current.get(r[0])
        if was is None:
            new.append((r[0], rank, group))
        elif was != (rank, group):
            moved.append((r[0], rank, group))
    _write_standings(benchmark_version, moved, new)
    # A row that turned unranked (a re-screen flag, say) loses the standing it had.
    ranked = {r[0] for r in rows}
    if stale := [pk for pk in current if pk not in ranked]:
        EntryStanding.objects.filter(entry_id__in=stale).delete()
    return len(everything)


def _rank_inputs(benchmark_version: BenchmarkVersion) -> list[tuple]:
    """(pk, success rate, cell_tasks, task_rates, verification level) of every entry in rank
    order, with the explicit tie-breaks: more successes, cheaper per attempt (no cost, or a
    zero one, last), submitted earlier (else the day the submission was created, UTC), then
    the older submission. Sorted by the database, so only the columns the ranks and tie groups
    need become Python objects."""
    if connection.vendor == "postgresql":
        created_day = "(s.created_at AT TIME ZONE 'UTC')::date"
    else:
        created_day = "date(s.created_at)"
    sql = (
        "SELECT e.id, e.success_rate, e.cell_tasks, e.task_rates, e.verification_level "
        f"FROM {LeaderboardEntry._meta.db_table} e "
        f"JOIN {Submission._meta.db_table} s ON s.id = e.submission_id "
        "WHERE e.benchmark_version_id = %s "
        "ORDER BY e.success_rate DESC, e.successes DESC, "
        "COALESCE(NULLIF(e.cost_per_attempt_usd, 0), 1000000000), "
        f"COALESCE(e.submitted_on, {created_day}), e.submission_id")
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The vectors make the rows wide: sort them in memory (about 0.7 KB an entry), not
            # in a temporary file; put back for the rest of the transaction.
            cursor.execute("SELECT current_setting('work_mem')")
            work_mem = cursor.fetchone()[0]
            cursor.execute("SELECT set_config('work_mem', '64MB', true)")
            cursor.execute(sql, [benchmark_version.pk])
            rows = cursor.fetchall()
            cursor.execute("SELECT set_config('work_mem', %s, true)", [work_mem])
            return rows
        cursor.execute(sql, [benchmark_version.pk])
        return cursor.fetchall()


def _rate_matrix(rows: list[tuple]) -> np.ndarray:
    """Entries x tasks of per-task rates (NaN: not scored) from the stored vectors, columns
    in the order of the task pks as strings (the order the tie test has always summed in).
    When every entry has cells on the same tasks (the usual case) the bytes are stacked."""
    if not rows:
        return np.zeros((0, 0))
    first = rows[0][2]
    if first and all(r[2] == first for r in rows):
        keys = first.split(",")
        matrix = np.frombuffer(b"".join(bytes(r[3]) for r in rows), dtype="<f8").reshape(
            len(rows), len(keys))
        order = sorted(range(len(keys)), key=keys.__getitem__)
        return matrix[:, order].astype(float)
    keys = sorted({k for r in rows if r[2] for k in r[2].split(",")})
    column = {k: j for j, k in enumerate(keys)}
    matrix = np.full((len(rows), len(keys)), np.nan)
    for i, r in enumerate(rows):
        if r[2]:
            matrix[i, [column[k] for k in r[2].split(",")]] = np.frombuffer(bytes(r[3]), "<f8")
    return matrix


def _write_standings(benchmark_version: BenchmarkVersion, moved: list[tuple[int, int, int]],
                     new: list[tuple[int, int, int]]) -> None:
    """Update the standings that moved and insert those of new entries: (entry pk, rank, tie
    group) each. One statement each on PostgreSQL, however many rows."""
    now = timezone.now()
    if connection.vendor == "postgresql":
        table = EntryStanding._meta.db_table
        with connection.cursor() as cursor:
            if moved:
                cursor.execute(
                    f"UPDATE {table} AS st SET rank = v.rank, tie_group = v.tie_group, "
                    "updated_at = %s FROM unnest(%s::bigint[], %s::int[], %s::int[]) "
                    "AS v(id, rank, tie_group) WHERE st.entry_id = v.id",
                    [now, *map(list, zip(*moved, strict=True))])
            if new:
                cursor.execute(
                    f"INSERT INTO {table} (entry_id, benchmark_version_id, rank, tie_group, "
                    "created_at, updated_at) SELECT v.id, %s, v.rank, v.tie_group, %s, %s "
                    "FROM unnest(%s::bigint[], %s::int[], %s::int[]) AS v(id, rank, tie_group)",
                    [benchmark_version.pk, now, now, *map(list, zip(*new, strict=True))])
        return
    EntryStanding.objects.bulk_update(
        [EntryStanding(entry_id=pk, rank=rank, tie_group=group, updated_at=now)
         for pk, rank, group in moved], ["rank", "tie_group", "updated_at"], batch_size=500)
    EntryStanding.objects.bulk_create(
        [EntryStanding(entry_id=pk, benchmark_version=benchmark_version, rank=rank,
                       tie_group=group) for pk, rank, group in new], batch_size=500)


def _pooled(counts: list[int] | None) -> float | None:
    return counts[0] / counts[1] if counts and counts[1] else None


def _recompute_groups(benchmark_version: BenchmarkVersion,
                      families: list[str] | None = None) -> None:
    """Harness-family aggregates (of ``families``, or all) from the stored ranked entries (an
    unranked row's figures are not the site's to average): means of agent-level values and
    pooled counts. Members are read in rank order, so float sums (and the label, the top
    member's harness) do not depend on which path wrote the entries. One query: each entry
    with its imaging and text counts summed from its category rows."""
    families_by: dict[str, list[tuple]] = defaultdict(list)
    for m in _family_members(benchmark_version, families):
        families_by[m[0]].append(m)
    rows = []
    for family, ms in families_by.items():
        successes, attempts = sum(m[2] for m in ms), sum(m[3] for m in ms)
        imaging = [sum(m[7] for m in ms), sum(m[8] for m in ms)]
        text = [sum(m[9] for m in ms), sum(m[10] for m in ms)]
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
            imaging_pooled=_pooled(imaging),
            text_pooled=_pooled(text),
        ))
    GroupAggregate.objects.bulk_create(rows)


def _family_members(benchmark_version: BenchmarkVersion, families: list[str] | None
                    ) -> list[tuple]:
    """(family, harness label, successes, attempts, success rate, imaging macro, text macro,
    imaging successes, imaging attempts, text successes, text attempts) of every ranked entry
    (of ``families``), in rank order (then agent name, then entry). The category rows are summed
    per entry first (a hash aggregate over the version's categories), then joined: one row
    per entry is sorted, not one per category row."""
    entry, standing = LeaderboardEntry._meta.db_table, EntryStanding._meta.db_table
    agent, harness = Agent._meta.db_table, Harness._meta.db_table
    cell, category = CategoryEntry._meta.db_table, Category._meta.db_table
    params: list = [Group.IMAGING, Group.IMAGING, Group.TEXT, Group.TEXT,
                    benchmark_version.pk, benchmark_version.pk, *UNRANKED_LEVELS]
    where = f" AND e.verification_level NOT IN ({', '.join(['%s'] * len(UNRANKED_LEVELS))})"
    if families is not None:
        if not families:
            return []
        where += f" AND h.family IN ({', '.join(['%s'] * len(families))})"
        params += list(families)

    def summed(column: str, name: str) -> str:
        return f'SUM(CASE WHEN c."group" = %s THEN ce.{column} ELSE 0 END) AS {name}'

    sql = (
        "SELECT h.family, h.display_name, e.successes, e.attempts, e.success_rate, "
        "e.imaging_macro, e.text_macro, COALESCE(g.imaging_s, 0), COALESCE(g.imaging_n, 0), "
        "COALESCE(g.text_s, 0), COALESCE(g.text_n, 0) "
        f"FROM {entry} e LEFT JOIN {standing} st ON st.entry_id = e.id "
        f"JOIN {agent} a ON a.id = e.agent_id JOIN {harness} h ON h.id = a.harness_id "
        f"LEFT JOIN (SELECT ce.entry_id, {summed('successes', 'imaging_s')}, "
        f"{summed('attempts', 'imaging_n')}, {summed('successes', 'text_s')}, "
        f"{summed('attempts', 'text_n')} FROM {cell} ce JOIN {category} c "
        "ON c.id = ce.category_id WHERE c.benchmark_version_id = %s GROUP BY ce.entry_id) g "
        "ON g.entry_id = e.id "
        f"WHERE e.benchmark_version_id = %s{where} "
        "ORDER BY st.rank, a.display_name, e.id")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
