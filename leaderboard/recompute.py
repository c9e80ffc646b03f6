"""The agent rows of the aggregate rebuild, set-based: called by
``services.leaderboard_recompute`` inside its transaction, for every agent or a few.

1. PostgreSQL: one ``GROUP BY (submission, task)`` over the trials of the latest published
   submissions returns, per cell, each attempt's outcome, claim, flag and known-value bits
   packed in one small integer and its duration (one column per attempt 1..attempts_per_task,
   no sort per cell), the scored cost (exact, in 1/10,000 dollars) and output tokens, read by
   binary COPY straight into numpy: no temporary table. The counts, sums and code strings are
   derived there. An attempt numbered outside that range (and SQLite, always): a temporary
   table of cells filled by one ``GROUP BY`` with ordered aggregates, read back.
2. Every agent's statistics are computed at once by ``stats_arrays`` (the same floats as
   ``stats``, bit for bit), then the entries and category entries are inserted in one
   statement each (PostgreSQL: ``INSERT ... SELECT FROM unnest(arrays)``).
3. The task cells are stored on their entry row (comma-separated outcome codes aligned with
   the task ids, per-task rates as float64 bytes, the few flagged cells' per-attempt flags):
   one row per entry, not one per entry x task.

SQLite (tests, ``make run``) runs the same SQL where it can (no ``string_agg ... ORDER BY``,
no COPY, no arrays: per-attempt CASE columns, plain fetches, bulk_create).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import defaultdict
from datetime import datetime
from decimal import Decimal

import numpy as np
from django.db import connection

from evaluation.models import BenchmarkVersion, Group
from leaderboard import stats_arrays
from leaderboard.models import CategoryEntry, EntryStanding, LeaderboardEntry
from leaderboard.trial_cells import cell_flags, packed_trials
from submissions.models import (
    OUTCOME_CODES,
    Outcome,
    Submission,
    Trial,
    coverage_badge,
)

CELLS = "lb_recompute_cells"
# Columns of the computed category rows: submission, category, successes, attempts, rate,
# ci_low, ci_high.
CATEGORY_WIDTH = 7
_CENT = Decimal("0.0001")
# The per-cell numbers read back, in this order (all integers but the duration sum).
_NUMBERS = ["successes", "present", "infra", "timeouts", "agent_errors", "claimed_passes",
            "claimed_infra", "flagged", "cost_n", "dur_n", "out_n", "out_sum"]


def entries_write(*, benchmark_version: BenchmarkVersion, agent_ids: list[int] | None,
                  now: datetime, rewrite: bool = False,
                  timings: dict[str, float] | None = None) -> int:
    """Bring the entries, category entries and task cells of the latest published submission
    of each agent (of ``agent_ids``, or every agent) up to date, without ranks (their
    ``EntryStanding`` rows are written by ``services._rank_entries``). Every row is computed
    from the trials; only those whose digest differs from the stored one (or all, with
    ``rewrite``) are deleted and inserted again, and entries of agents with no published
    submission left are deleted. Returns the number of entries written. ``timings``, when
    given, receives the seconds of each phase."""
    clock = Clock(timings)
    subs = _latest_submissions(benchmark_version, agent_ids)
    existing = _stored_digests(benchmark_version, agent_ids)
    if not subs:
        _entries_delete(list(existing))
        clock.lap("stale rows deleted")
        return 0
    submission_ids = [s[0] for s in subs]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # One pass, no temporary table: each submission's trials packed in one byte
            # string, scattered by numpy. Any attempt number outside 1..attempts_per_task:
            # the temporary table with ordered aggregates below.
            packed = packed_trials(cursor, subs, benchmark_version.attempts_per_task)
            clock.lap("trials grouped and read")
            if packed is not None:
                arrays, costs, cell_columns = packed
                computed = _compute(benchmark_version, subs, arrays, costs)
                computed.update(cell_columns)
                clock.lap("statistics")
                return _write_entries(cursor, benchmark_version, subs, computed, now,
                                      existing, rewrite, clock)
        cursor.execute(f"DROP TABLE IF EXISTS {CELLS}")
        cursor.execute(*_cells_sql(submission_ids))
        try:
            arrays = _read_cells(cursor, subs)
            costs = _read_costs(cursor)
            clock.lap("trials grouped and read")
            computed = _compute(benchmark_version, subs, arrays, costs)
            computed.update(_cell_columns(cursor, subs, arrays))
            clock.lap("statistics")
            return _write_entries(cursor, benchmark_version, subs, computed, now, existing,
                                  rewrite, clock)
        finally:
            cursor.execute(f"DROP TABLE IF EXISTS {CELLS}")


def _stored_digests(benchmark_version: BenchmarkVersion, agent_ids: list[int] | None
                    ) -> dict[int, tuple[int, str]]:
    """(submission pk, digest) of each stored entry in scope, by entry pk."""
    sql = (f"SELECT id, submission_id, digest FROM {LeaderboardEntry._meta.db_table} "
           "WHERE benchmark_version_id = %s")
    params: list = [benchmark_version.pk]
    if agent_ids is not None:
        if not agent_ids:
            return {}
        sql += f" AND agent_id IN ({', '.join(['%s'] * len(agent_ids))})"
        params += list(agent_ids)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {pk: (sub, digest) for pk, sub, digest in cursor.fetchall()}


def _entries_delete(pks: list[int]) -> None:
    """Delete entries with their category entries and standings: one statement per table
    (per 500 entries on SQLite). The ORM's cascade would first read every entry row, wide
    with its vectors, into a model instance."""
    if not pks:
        return
    tables = [(CategoryEntry._meta.db_table, "entry_id"),
              (EntryStanding._meta.db_table, "entry_id"),
              (LeaderboardEntry._meta.db_table, "id")]
    with connection.cursor() as cursor:
        for table, column in tables:
            if connection.vendor == "postgresql":
                cursor.execute(f"DELETE FROM {table} WHERE {column} = ANY(%s::int8[])", [pks])
                continue
            for i in range(0, len(pks), 500):
                chunk = pks[i:i + 500]
                cursor.execute(f"DELETE FROM {table} WHERE {column} IN "
                               f"({', '.join(['%s'] * len(chunk))})", chunk)


def row_digests(c: dict, required: int) -> list[str]:
    """One digest per computed entry over everything written on its row (but the digest and
    the time stamps) and its category rows: equal digests, equal rows. The integer and float
    columns go in as the bytes of two numpy matrices (floats exactly, with a null mask),
    decimals by value (the SQLite and PostgreSQL paths may carry other exponents), the rest
    by ``repr``. A digest that differs only costs a rewrite of that row."""
    n = len(c["submission_id"])
    ints, floats, others = [], [], []
    for name, kind in _ENTRY_COLUMNS:
        if name in ("digest", "task_rates"):
            continue
        values = c[name]
        if kind in ("int8", "float8", "bool"):
            column = np.array(values, dtype=object).reshape(n)
            nulls = np.equal(column, None)
            filled = np.where(nulls, 0, column)
            ints.append(nulls.astype(np.int64))
            if kind == "float8":
                floats.append(filled.astype(np.float64))
            else:
                ints.append(filled.astype(np.int64))
        elif kind == "numeric":
            others.append([None if v is None else format(v.normalize(), "f") for v in values])
        else:
            others.append(values)
    int_rows = np.ascontiguousarray(np.column_stack(ints) if ints else np.zeros((n, 0), np.int64))
    float_rows = np.ascontiguousarray(np.column_stack(floats) if floats
                                      else np.zeros((n, 0)))
    int_bytes, float_bytes = int_rows.tobytes(), float_rows.tobytes()
    iw, fw = int_rows.shape[1] * 8, float_rows.shape[1] * 8
    # The category rows (submission, category, counts, rate and interval; never null), each
    # entry's in the order given: one matrix sorted by submission, sliced per entry.
    cat_bytes, cat_width, cat_start, cat_end = b"", 0, [0] * n, [0] * n
    if len(c["categories"]):
        matrix = np.asarray(c["categories"], dtype=np.float64)
        order = np.argsort(matrix[:, 0], kind="stable")
        matrix = np.ascontiguousarray(matrix[order])
        keys = matrix[:, 0]
        subs = np.array(c["submission_id"], dtype=np.float64)
        cat_start = np.searchsorted(keys, subs, side="left").tolist()
        cat_end = np.searchsorted(keys, subs, side="right").tolist()
        cat_bytes, cat_width = matrix.tobytes(), matrix.shape[1] * 8
    head = repr(required).encode()
    out = []
    for i, (rates, rest) in enumerate(zip(c["task_rates"], zip(*others, strict=True),
                                          strict=True)):
        h = hashlib.blake2b(head, digest_size=16)
        h.update(int_bytes[i * iw:(i + 1) * iw])
        h.update(float_bytes[i * fw:(i + 1) * fw])
        h.update(cat_bytes[cat_start[i] * cat_width:cat_end[i] * cat_width])
        h.update(repr(rest).encode())
        h.update(rates)
        out.append(h.hexdigest())
    return out


def _select(c: dict, keep: list[int]) -> dict:
    """The computed columns of the entries at positions ``keep`` only."""
    subs = {c["submission_id"][i] for i in keep}
    out = {k: ([v[i] for i in keep] if isinstance(v, list) else v) for k, v in c.items()}
    out["categories"] = c["categories"][np.isin(c["categories"][:, 0], list(subs))]
    return out


class Clock:
    """Adds the seconds since the previous lap to ``timings[name]`` (nothing without a dict)."""

    def __init__(self, timings: dict[str, float] | None):
        self.timings, self.last = timings, time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        if self.timings is not None:
            self.timings[name] = self.timings.get(name, 0.0) + now - self.last
        self.last = now


def _latest_submissions(benchmark_version: BenchmarkVersion, agent_ids: list[int] | None
                        ) -> list[tuple]:
    """(pk, agent, coverage, is_verified, is_reconstructed, submitted_on, is_reference) of the
    latest published submission per agent, in agent order."""
    subs = Submission.objects.published().filter(benchmark_version=benchmark_version)
    if agent_ids is not None:
        subs = subs.filter(agent_id__in=agent_ids)
    latest: dict[int, tuple] = {}
    for row in subs.order_by("agent_id", "-published_at", "-pk").values_list(
            "pk", "agent_id", "coverage", "is_verified", "is_reconstructed", "submitted_on",
            "is_reference"):
        latest.setdefault(row[1], row)
    return list(latest.values())


def _code(column: str) -> str:
    whens = " ".join(f"WHEN '{o}' THEN '{c}'" for o, c in OUTCOME_CODES.items())
    return f"CASE {column} {whens} END"


def _per_attempt(expr: str, attempts: range, site: str | None = None) -> str:
    """The codes of attempts in order, one column per attempt (a missing one adds nothing): what
    string_agg(... ORDER BY attempt) gives, without sorting each cell's trials."""
    only = f" AND {site} IS NOT NULL" if site else ""
    return " || ".join(
        [f"COALESCE(MAX(CASE WHEN t.attempt = {k}{only} THEN {expr} END), '')" for k in attempts]
        or ["''"])


def _cells_sql(submission_ids: list[int]) -> tuple[str, list]:
    """CREATE TEMP TABLE of the task cells: one row per (submission, task). PostgreSQL takes
    this path only when an attempt is numbered outside 1..attempts_per_task (ordered
    aggregates); SQLite always (one column per attempt up to the highest number)."""
    site, claimed = _code("t.outcome"), _code("t.claimed_outcome")
    scored = f"t.outcome <> '{Outcome.INFRA_ERROR}'"
    if connection.vendor == "postgresql":
        outcomes = f"string_agg({site}, '' ORDER BY t.attempt)"
        claims = f"COALESCE(string_agg({claimed}, '' ORDER BY t.attempt), '')"
        flagged = "t.flags <> '[]'::jsonb"
        where, params = "t.submission_id = ANY(%s::int8[])", [submission_ids]
        # Durations added in attempt order, whatever the plan (a parallel plan's partial sums
        # used to change the last bit of a mean now and then).
        dur_sum = f"SUM(CASE WHEN {scored} THEN t.duration_s END ORDER BY t.attempt)"
    else:
        last = Trial.objects.filter(submission_id__in=submission_ids).order_by(
            "-attempt").values_list("attempt", flat=True).first() or 0
        outcomes = _per_attempt(site, range(1, last + 1))
        claims = _per_attempt(claimed, range(1, last + 1), site=site)
        flagged = "t.flags <> '[]'"
        where = f"t.submission_id IN ({', '.join(['%s'] * len(submission_ids))})"
        params = list(submission_ids)
        dur_sum = f"SUM(CASE WHEN {scored} THEN t.duration_s END)"

    def count(condition: str) -> str:
        return f"SUM(CASE WHEN {condition} THEN 1 ELSE 0 END)"

    sql = f"""
        CREATE TEMP TABLE {CELLS} AS
        SELECT t.submission_id AS submission_id, t.benchmark_task_id AS benchmark_task_id,
               COALESCE({outcomes}, '') AS outcomes, {claims} AS claimed_outcomes,
               COUNT({site}) AS present,
               {count(f"t.outcome = '{Outcome.PASSED}'")} AS successes,
               {count(f"t.outcome = '{Outcome.INFRA_ERROR}'")} AS infra,
               {count(f"t.outcome = '{Outcome.TIMEOUT}'")} AS timeouts,
               {count(f"t.outcome = '{Outcome.AGENT_ERROR}'")} AS agent_errors,
               {count(f"t.claimed_outcome = '{Outcome.PASSED}'")} AS claimed_passes,
               {count(f"t.claimed_outcome = '{Outcome.INFRA_ERROR}'")} AS claimed_infra,
               {count(flagged)} AS flagged,
               SUM(CASE WHEN {scored} THEN t.cost_usd END) AS cost_sum,
               COUNT(CASE WHEN {scored} THEN t.cost_usd END) AS cost_n,
               {dur_sum} AS dur_sum,
               COUNT(CASE WHEN {scored} THEN t.duration_s END) AS dur_n,
               SUM(CASE WHEN {scored} THEN t.output_tokens END) AS out_sum,
               COUNT(CASE WHEN {scored} THEN t.output_tokens END) AS out_n
        FROM {Trial._meta.db_table} t
        WHERE {where}
        GROUP BY t.submission_id, t.benchmark_task_id
    """
    return sql, params


def _read_cells(cursor, subs: list[tuple]) -> dict:
    """The cells' numbers as (agents x tasks) arrays, tasks in id order (the order the
    per-task lists of leaderboard/stats.py take them in); a task without a cell is zeros."""
    select = (f"SELECT submission_id, benchmark_task_id, "
              f"{', '.join(f'COALESCE({c}, 0)' for c in _NUMBERS)}, COALESCE(dur_sum, 0) "
              f"FROM {CELLS}")
    if connection.vendor == "postgresql":
        # Binary COPY: fixed-width rows read straight into a numpy record array.
        casts = ", ".join(["submission_id::int8", "benchmark_task_id::int8"]
                          + [f"COALESCE({c}, 0)::int8" for c in _NUMBERS]
                          + ["COALESCE(dur_sum, 0)::float8"])
        fields = ["sub", "task", *_NUMBERS, "dur_sum"]
        dtype = [("n_fields", ">i2")]
        for f in fields:
            dtype += [(f"len_{f}", ">i4"), (f, ">f8" if f == "dur_sum" else ">i8")]
        data = bytearray()
        with cursor.cursor.copy(
                f"COPY (SELECT {casts} FROM {CELLS}) TO STDOUT (FORMAT binary)") as copy:
            for block in copy:
                data += block
        records = np.frombuffer(bytes(data[19:-2]), dtype=np.dtype(dtype))
        columns = {f: records[f].astype(np.float64 if f == "dur_sum" else np.int64)
                   for f in fields}
    else:
        cursor.execute(select)
        rows = cursor.fetchall()
        fields = ["sub", "task", *_NUMBERS, "dur_sum"]
        columns = {f: np.array([r[i] for r in rows],
                               dtype=np.float64 if f == "dur_sum" else np.int64)
                   for i, f in enumerate(fields)}
    sub_ids = np.array([s[0] for s in subs], dtype=np.int64)
    order = np.argsort(sub_ids)
    row = order[np.searchsorted(sub_ids[order], columns["sub"])]
    task_ids, col = np.unique(columns["task"], return_inverse=True)
    shape = (len(subs), len(task_ids))
    out = {"task_ids": task_ids.tolist()}
    out["cell"] = np.zeros(shape, dtype=bool)
    out["cell"][row, col] = True
    for f in fields[2:]:
        dense = np.zeros(shape, dtype=columns[f].dtype)
        dense[row, col] = columns[f]
        out[f] = dense
    return out


def _read_costs(cursor) -> dict[int, Decimal]:
    """Each submission's cost over scored attempts, exact (PostgreSQL numeric; SQLite's
    float sums rounded to cents of a cent per task, as they are stored)."""
    costs: dict[int, Decimal] = defaultdict(Decimal)
    if connection.vendor == "postgresql":
        cursor.execute(f"SELECT submission_id, SUM(cost_sum) FROM {CELLS} "
                       "WHERE cost_n > 0 GROUP BY submission_id")
        costs.update(cursor.fetchall())
        return costs
    cursor.execute(f"SELECT submission_id, cost_sum FROM {CELLS} WHERE cost_n > 0 "
                   "ORDER BY submission_id, benchmark_task_id")
    for sub_id, cost in cursor.fetchall():
        costs[sub_id] += Decimal(str(cost)).quantize(_CENT)
    return costs


def _none(values: np.ndarray) -> list:
    return [None if v != v else v for v in values.tolist()]


def _compute(benchmark_version: BenchmarkVersion, subs: list[tuple], a: dict,
             costs: dict[int, Decimal]) -> dict:
    """Every entry's row and category rows, as columns."""
    rows = len(subs)
    task_category = dict(benchmark_version.tasks.values_list("pk", "category_id"))
    strata = [task_category.get(t) for t in a["task_ids"]]
    y = a["successes"]
    n = a["present"] - a["infra"]
    overall = stats_arrays.clustered_rates(y, n, strata)
    categories = list(benchmark_version.categories.all())
    sub_ids = np.array([s[0] for s in subs], dtype=np.float64)
    cat_parts: list[np.ndarray] = []
    by_group: dict[str, list] = defaultdict(list)
    for cat in categories:
        cols = [j for j, s in enumerate(strata) if s == cat.pk]
        est = stats_arrays.clustered_rates(y[:, cols], n[:, cols])
        kept = est.attempts > 0
        by_group[cat.group].append((est, kept))
        i = np.flatnonzero(kept)
        cat_parts.append(np.column_stack([
            sub_ids[i], np.full(len(i), float(cat.pk)), est.successes[i], est.attempts[i],
            est.rate[i], est.ci_low[i], est.ci_high[i]]).astype(np.float64))
    # The category rows as one float64 matrix (submission, category, successes, attempts,
    # rate, interval: the ids and counts exact as floats), in category then entry order.
    cat_rows = np.concatenate(cat_parts) if cat_parts else np.zeros((0, CATEGORY_WIDTH))
    group_cols = {}
    for group in (Group.IMAGING, Group.TEXT):
        members = by_group.get(group, [])
        macro = stats_arrays.macro_means([e.rate for e, _ in members], [k for _, k in members],
                                         rows)
        s = sum((np.where(k, e.successes, 0) for e, k in members), np.zeros(rows, np.int64))
        t = sum((np.where(k, e.attempts, 0) for e, k in members), np.zeros(rows, np.int64))
        pooled = [si / ti if ti else None for si, ti in zip(s.tolist(), t.tolist(), strict=True)]
        group_cols[group] = (_none(macro), pooled)
    # Durations summed task by task in id order, as the per-task loop did.
    dur = np.zeros(rows)
    for j in range(y.shape[1]):
        dur = dur + np.where(a["dur_n"][:, j] > 0, a["dur_sum"][:, j], 0.0)
    sums = {f: a[f].sum(axis=1).tolist() for f in _NUMBERS}
    rates = np.where(n > 0, y / np.where(n > 0, n, 1), np.nan).astype("<f8")
    if a["cell"].all():
        task_rates = [r.tobytes() for r in rates]
    else:
        task_rates = [r[m].tobytes() for r, m in zip(rates, a["cell"], strict=True)]
    successes = overall.successes.tolist()
    dur_list = dur.tolist()
    c = {"submission_ids": [s[0] for s in subs], "submission_id": [s[0] for s in subs],
         "agent_id": [s[1] for s in subs],
         "successes": successes, "attempts": overall.attempts.tolist(),
         "attempts_present": sums["present"], "infra_errors": sums["infra"],
         "infra_errors_claimed": sums["claimed_infra"], "timeouts": sums["timeouts"],
         "agent_errors": sums["agent_errors"], "claimed_successes": sums["claimed_passes"],
         "success_rate": overall.rate.tolist(), "ci_low": overall.ci_low.tolist(),
         "ci_high": overall.ci_high.tolist(), "design_effect": overall.design_effect.tolist(),
         "pass_at_k": stats_arrays.pass_at_k(y, n).tolist(),
         "pass_hat_k": stats_arrays.pass_hat_k(y, n).tolist(),
         "imaging_macro": group_cols[Group.IMAGING][0], "text_macro": group_cols[Group.TEXT][0],
         "imaging_pooled": group_cols[Group.IMAGING][1],
         "text_pooled": group_cols[Group.TEXT][1],
         "task_rates": task_rates, "categories": cat_rows}
    total, per_attempt, per_success = [], [], []
    for i, s in enumerate(subs):
        known = sums["cost_n"][i]
        cost = costs.get(s[0], Decimal(0))
        total.append(cost if known else None)
        per_attempt.append((cost / known).quantize(_CENT) if known else None)
        per_success.append((cost / successes[i]).quantize(_CENT)
                           if known and successes[i] else None)
    c.update(total_cost_usd=total, cost_per_attempt_usd=per_attempt,
             cost_per_success_usd=per_success,
             mean_duration_s=[d / k if k else None
                              for d, k in zip(dur_list, sums["dur_n"], strict=True)],
             mean_output_tokens=[o / k if k else None
                                 for o, k in zip(sums["out_sum"], sums["out_n"], strict=True)])
    c["verified"] = [s[3] for s in subs]
    c["reconstructed"] = [s[4] for s in subs]
    c["verification_level"] = ["reconstructed" if s[4] else "reference" if s[6] else (
        s[2] or {}).get("verdict", "unverified") for s in subs]
    c["verification"] = [s[2] or {} for s in subs]
    c["badge"] = [coverage_badge(s[2], reconstructed=s[4], reference=s[6]) for s in subs]
    c["submitted_on"] = [s[5] for s in subs]
    return c


# Entry columns written from the computed columns: (name, PostgreSQL array type).
_ENTRY_COLUMNS = [
    ("agent_id", "int8"), ("submission_id", "int8"), ("successes", "int8"),
    ("attempts", "int8"), ("attempts_present", "int8"), ("infra_errors", "int8"),
    ("infra_errors_claimed", "int8"), ("timeouts", "int8"), ("agent_errors", "int8"),
    ("claimed_successes", "int8"), ("flagged_trials", "int8"), ("success_rate", "float8"),
    ("ci_low", "float8"), ("ci_high", "float8"), ("design_effect", "float8"),
    ("pass_at_k", "float8"), ("pass_hat_k", "float8"), ("imaging_macro", "float8"),
    ("text_macro", "float8"), ("imaging_pooled", "float8"), ("text_pooled", "float8"),
    ("total_cost_usd", "numeric"), ("cost_per_attempt_usd", "numeric"),
    ("cost_per_success_usd", "numeric"), ("mean_duration_s", "float8"),
    ("mean_output_tokens", "float8"), ("verified", "bool"), ("verification_level", "text"),
    ("verification", "jsonb"), ("badge", "text"), ("reconstructed", "bool"),
    ("submitted_on", "date"), ("task_rates", "bytea"), ("cell_tasks", "text"),
    ("cell_outcomes", "text"), ("cell_claimed", "text"), ("cell_flags", "jsonb"),
    ("digest", "text"),
]


def _write_entries(cursor, benchmark_version: BenchmarkVersion, subs: list[tuple], c: dict,
                   now: datetime, existing: dict[int, tuple[int, str]], rewrite: bool,
                   clock: Clock) -> int:
    """Delete the stored entries in scope that are gone or differ from their computed
    digest (all, with ``rewrite``), and insert the computed ones not stored as they are."""
    required = benchmark_version.tasks.count() * benchmark_version.attempts_per_task
    c["flagged_trials"] = c.get("flagged_trials") or [0] * len(subs)
    c["digest"] = row_digests(c, required)
    clock.lap("digests")
    digest_of = dict(zip(c["submission_id"], c["digest"], strict=True))
    stale = [pk for pk, (sub, digest) in existing.items()
             if rewrite or digest_of.get(sub) != digest]
    _entries_delete(stale)
    clock.lap("stale rows deleted")
    current = {sub for pk, (sub, _) in existing.items()} - {existing[pk][0] for pk in stale}
    keep = [i for i, sub in enumerate(c["submission_id"]) if sub not in current]
    if not keep:
        return 0
    if len(keep) < len(subs):
        c = _select(c, keep)
    _insert_entries(cursor, benchmark_version, required, c, now)
    clock.lap("entries written")
    return len(keep)


def _insert_entries(cursor, benchmark_version: BenchmarkVersion, required: int, c: dict,
                    now: datetime) -> None:
    if connection.vendor == "postgresql":
        names = [name for name, _ in _ENTRY_COLUMNS]
        values = [_pg_array(c[name], kind) for name, kind in _ENTRY_COLUMNS]
        unnest = ", ".join(f"%s::{'text' if k in ('jsonb', 'bytea') else k}[]"
                           for _, k in _ENTRY_COLUMNS)
        select = ", ".join(f"v.{n}::jsonb" if k == "jsonb" else
                           f"decode(v.{n}, 'hex')" if k == "bytea" else f"v.{n}"
                           for n, k in _ENTRY_COLUMNS)
        cursor.execute(
            f"INSERT INTO {LeaderboardEntry._meta.db_table} (benchmark_version_id, "
            f"attempts_required, created_at, updated_at, {', '.join(names)}) "
            f"SELECT %s, %s, %s, %s, {select} FROM unnest({unnest}) AS v({', '.join(names)})",
            [benchmark_version.pk, required, now, now, *values])
        cats = c["categories"]
        columns = [_pg_array((cats[:, j].astype(np.int64) if kind == "int8" else cats[:, j])
                             .tolist(), kind)
                   for j, kind in enumerate(["int8"] * 4 + ["float8"] * 3)]
        cursor.execute(
            f"INSERT INTO {CategoryEntry._meta.db_table} (entry_id, category_id, successes, "
            "attempts, success_rate, ci_low, ci_high, created_at, updated_at) "
            "SELECT e.id, v.category_id, v.successes, v.attempts, v.rate, v.low, v.high, %s, %s "
            "FROM unnest(%s::int8[], %s::int8[], %s::int8[], %s::int8[], %s::float8[], "
            "%s::float8[], %s::float8[]) AS v(submission_id, category_id, successes, attempts, "
            f"rate, low, high) JOIN {LeaderboardEntry._meta.db_table} e "
            "ON e.submission_id = v.submission_id AND e.benchmark_version_id = %s",
            [now, now, *columns, benchmark_version.pk])
        return
    entries = LeaderboardEntry.objects.bulk_create(
        [LeaderboardEntry(benchmark_version=benchmark_version, attempts_required=required,
                          **{name: c[name][i] for name, _ in _ENTRY_COLUMNS})
         for i in range(len(c["submission_id"]))], batch_size=500)
    entry_of = {e.submission_id: e.pk for e in entries}
    cats = c["categories"]
    ids = cats[:, :4].astype(np.int64).tolist()
    CategoryEntry.objects.bulk_create(
        [CategoryEntry(entry_id=entry_of[sub], category_id=cat, successes=s, attempts=n,
                       success_rate=rate, ci_low=low, ci_high=high)
         for (sub, cat, s, n), (rate, low, high) in zip(ids, cats[:, 4:].tolist(),
                                                        strict=True)], batch_size=500)


def _pg_array(values: list, kind: str) -> str:
    """A PostgreSQL array literal of ``values`` (cast to ``kind[]`` in the statement): written
    with str.join, many times faster than adapting a list element by element. Floats as
    repr (shortest round trip: the same double back)."""
    if kind == "float8":
        items = ["NULL" if v is None else repr(v) for v in values]
    elif kind in ("int8", "numeric"):
        items = ["NULL" if v is None else str(v) for v in values]
    elif kind == "bool":
        items = ["NULL" if v is None else ("t" if v else "f") for v in values]
    elif kind == "bytea":
        items = ["NULL" if v is None else v.hex() for v in values]
    elif kind == "date":
        items = ["NULL" if v is None else v.isoformat() for v in values]
    else:  # text, and JSON as text
        items = ["NULL" if v is None else '"' + (json.dumps(v) if kind == "jsonb" else v)
                 .replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values]
    return "{" + ",".join(items) + "}"


def _cell_columns(cursor, subs: list[tuple], a: dict) -> dict:
    """Each entry's cell columns (models.LeaderboardEntry): task ids, outcome codes and claimed
    codes comma-separated in task id order, the flagged cells' per-attempt flags, and the
    count of flagged trials."""
    if connection.vendor == "postgresql":
        cursor.execute(
            "SELECT submission_id, string_agg(benchmark_task_id::text, ',' ORDER BY "
            "benchmark_task_id), string_agg(outcomes, ',' ORDER BY benchmark_task_id), "
            "string_agg(claimed_outcomes, ',' ORDER BY benchmark_task_id) "
            f"FROM {CELLS} GROUP BY submission_id")
        joined = {row[0]: row[1:] for row in cursor.fetchall()}
    else:
        cursor.execute(f"SELECT submission_id, benchmark_task_id, outcomes, claimed_outcomes "
                       f"FROM {CELLS} ORDER BY submission_id, benchmark_task_id")
        parts: dict[int, list[list[str]]] = defaultdict(lambda: [[], [], []])
        for sub_id, task_id, outcomes, claimed in cursor.fetchall():
            p = parts[sub_id]
            p[0].append(str(task_id))
            p[1].append(outcomes)
            p[2].append(claimed)
        joined = {k: tuple(",".join(x) for x in v) for k, v in parts.items()}
    cursor.execute(f"SELECT submission_id, benchmark_task_id FROM {CELLS} WHERE flagged > 0")
    flags, flagged = cell_flags(cursor.fetchall())
    out: dict[str, list] = {"cell_tasks": [], "cell_outcomes": [], "cell_claimed": [],
                            "cell_flags": [], "flagged_trials": []}
    for s in subs:
        tasks, outcomes, claimed = joined.get(s[0], ("", "", ""))
        out["cell_tasks"].append(tasks)
        out["cell_outcomes"].append(outcomes)
        out["cell_claimed"].append(claimed)
        out["cell_flags"].append(flags.get(s[0], {}))
        out["flagged_trials"].append(flagged.get(s[0], 0))
    return out
