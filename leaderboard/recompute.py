"""The agent rows of the aggregate rebuild, set-based (issue 12): called by
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

import json
import time
from collections import defaultdict
from datetime import datetime
from decimal import Decimal

import numpy as np
from django.db import connection

from evaluation.models import BenchmarkVersion, Group
from leaderboard import stats_arrays
from leaderboard.models import CategoryEntry, LeaderboardEntry
from submissions.models import (
    OUTCOME_CODES,
    Outcome,
    Submission,
    Trial,
    coverage_badge,
    is_flagged,
)

CELLS = "lb_recompute_cells"
_CENT = Decimal("0.0001")
# The per-cell numbers read back, in this order (all integers but the duration sum).
_NUMBERS = ["successes", "present", "infra", "timeouts", "agent_errors", "claimed_passes",
            "claimed_infra", "flagged", "cost_n", "dur_n", "out_n", "out_sum"]


def entries_insert(*, benchmark_version: BenchmarkVersion, agent_ids: list[int] | None,
                   now: datetime, timings: dict[str, float] | None = None) -> None:
    """Insert the entries, category entries and task cells of the latest published
    submission of each agent (of ``agent_ids``, or every agent), without ranks (their
    ``EntryStanding`` rows are written by ``services._rank_entries``).
    ``timings``, when given, receives the seconds of each phase."""
    clock = Clock(timings)
    subs = _latest_submissions(benchmark_version, agent_ids)
    if not subs:
        return
    submission_ids = [s[0] for s in subs]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # One pass, no temporary table: each cell's attempts 1..attempts_per_task packed
            # as small integers, read by binary COPY straight into numpy. Any attempt number
            # outside that range: the temporary table with ordered aggregates below.
            packed = _packed_cells(cursor, subs, benchmark_version.attempts_per_task)
            clock.lap("trials grouped and read")
            if packed is not None:
                arrays, costs, cell_columns = packed
                computed = _compute(benchmark_version, subs, arrays, costs)
                computed.update(cell_columns)
                clock.lap("statistics")
                _write_entries(cursor, benchmark_version, subs, computed, now)
                clock.lap("entries written")
                return
        cursor.execute(f"DROP TABLE IF EXISTS {CELLS}")
        cursor.execute(*_cells_sql(submission_ids))
        try:
            arrays = _read_cells(cursor, subs)
            costs = _read_costs(cursor)
            clock.lap("trials grouped and read")
            computed = _compute(benchmark_version, subs, arrays, costs)
            computed.update(_cell_columns(cursor, subs, arrays))
            clock.lap("statistics")
            _write_entries(cursor, benchmark_version, subs, computed, now)
            clock.lap("entries written")
        finally:
            cursor.execute(f"DROP TABLE IF EXISTS {CELLS}")


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
    """(pk, agent, coverage, is_verified, is_reconstructed, submitted_on) of the latest
    published submission per agent, in agent order."""
    subs = Submission.objects.published().filter(benchmark_version=benchmark_version)
    if agent_ids is not None:
        subs = subs.filter(agent_id__in=agent_ids)
    latest: dict[int, tuple] = {}
    for row in subs.order_by("agent_id", "-published_at", "-pk").values_list(
            "pk", "agent_id", "coverage", "is_verified", "is_reconstructed", "submitted_on"):
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
    cat_rows: list[tuple] = []
    by_group: dict[str, list] = defaultdict(list)
    for cat in categories:
        cols = [j for j, s in enumerate(strata) if s == cat.pk]
        est = stats_arrays.clustered_rates(y[:, cols], n[:, cols])
        kept = est.attempts > 0
        by_group[cat.group].append((est, kept))
        for i in np.flatnonzero(kept).tolist():
            cat_rows.append((subs[i][0], cat.pk, int(est.successes[i]), int(est.attempts[i]),
                             float(est.rate[i]), float(est.ci_low[i]), float(est.ci_high[i])))
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
    c["verification_level"] = ["reconstructed" if s[4] else (s[2] or {}).get(
        "verdict", "unverified") for s in subs]
    c["verification"] = [s[2] or {} for s in subs]
    c["badge"] = [coverage_badge(s[2], reconstructed=s[4]) for s in subs]
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
]


def _write_entries(cursor, benchmark_version: BenchmarkVersion, subs: list[tuple], c: dict,
                   now: datetime) -> None:
    required = benchmark_version.tasks.count() * benchmark_version.attempts_per_task
    c["flagged_trials"] = c.get("flagged_trials") or [0] * len(subs)
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
        columns = [list(col) for col in zip(*c["categories"], strict=True)] or [[]] * 7
        columns = [_pg_array(col, kind) for col, kind in zip(
            columns, ["int8", "int8", "int8", "int8", "float8", "float8", "float8"], strict=True)]
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
         for i in range(len(subs))], batch_size=500)
    entry_of = {e.submission_id: e.pk for e in entries}
    CategoryEntry.objects.bulk_create(
        [CategoryEntry(entry_id=entry_of[sub], category_id=cat, successes=s, attempts=n,
                       success_rate=rate, ci_low=low, ci_high=high)
         for sub, cat, s, n, rate, low, high in c["categories"]], batch_size=500)


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
    flags, flagged = _cell_flags(cursor.fetchall())
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


def _cell_flags(pairs: list[tuple[int, int]]
                ) -> tuple[dict[int, dict[str, list]], dict[int, int]]:
    """The few cells (submission, task) with an attempt that has flags: each present
    attempt's flags (in attempt order) by task pk, per submission; and each submission's count
    of flagged trials (those with a finding against the claim, ``is_flagged``; a state such as
    "not replayable" is shown with its attempt but not counted)."""
    if not pairs:
        return {}, {}
    subs = sorted({p[0] for p in pairs})
    wanted = set(pairs)
    cells: dict[tuple[int, int], list[list]] = defaultdict(list)
    for sub_id, task_id, flags in (
            Trial.objects.filter(submission_id__in=subs)
            .order_by("submission_id", "benchmark_task_id", "attempt")
            .values_list("submission_id", "benchmark_task_id", "flags")):
        if (sub_id, task_id) in wanted:
            cells[(sub_id, task_id)].append(list(flags) if flags else [])
    by_sub: dict[int, dict[str, list]] = defaultdict(dict)
    flagged: dict[int, int] = defaultdict(int)
    for (sub_id, task_id), attempts in sorted(cells.items()):
        flagged[sub_id] += sum(1 for f in attempts if is_flagged(f))
        by_sub[sub_id][str(task_id)] = attempts
    return by_sub, flagged


# PostgreSQL's one pass: each trial packed into a small integer, outcome code (1-5, the order
# of OUTCOME_CODES) in bits 0-2, claimed code in bits 3-5 (0: none), then whether it has flags
# and whether its cost, duration and output tokens are known, and a bit set for every trial.
_ORDER = list(OUTCOME_CODES)
_FLAGGED, _COST, _DUR, _OUT, _ROW = 64, 128, 256, 512, 1024
_LETTERS = np.frombuffer(b"\0" + "".join(OUTCOME_CODES[o] for o in _ORDER).encode()
                         + b"\0" * (7 - len(_ORDER)), dtype=np.uint8)


def _small_code(column: str) -> str:
    whens = " ".join(f"WHEN '{o}' THEN {i}" for i, o in enumerate(_ORDER, 1))
    return f"CASE {column} {whens} ELSE 0 END"


def _packed_cells(cursor, subs: list[tuple], attempts: int) -> tuple | None:
    """One ``GROUP BY (submission, task)`` over the trials returning, per cell, the packed
    code and the duration of each attempt 1..``attempts`` (one column each: no sort per cell),
    the scored cost (in 1/10,000 dollars, exact) and output tokens; read by binary COPY into
    numpy, where the counts, sums and code strings of ``_read_cells``, ``_read_costs`` and
    ``_cell_columns`` are derived. None when an attempt is numbered outside 1..``attempts``
    (the caller then takes the ordered aggregates)."""
    if attempts < 1:
        return None
    scored = f"t.outcome <> '{Outcome.INFRA_ERROR}'"
    code = (f"{_ROW} + {_small_code('t.outcome')} + 8 * {_small_code('t.claimed_outcome')} "
            f"+ CASE WHEN t.flags <> '[]'::jsonb THEN {_FLAGGED} ELSE 0 END "
            f"+ CASE WHEN t.cost_usd IS NULL THEN 0 ELSE {_COST} END "
            f"+ CASE WHEN t.duration_s IS NULL THEN 0 ELSE {_DUR} END "
            f"+ CASE WHEN t.output_tokens IS NULL THEN 0 ELSE {_OUT} END")
    ks = range(1, attempts + 1)
    columns = (["t.submission_id::int8", "t.benchmark_task_id::int8", "COUNT(*)::int8"]
               + [f"COALESCE(MAX(CASE WHEN t.attempt = {k} THEN {code} END), 0)::int8"
                  for k in ks]
               + [f"COALESCE(MAX(CASE WHEN t.attempt = {k} THEN t.duration_s END), 0)::float8"
                  for k in ks]
               + [f"(COALESCE(SUM(t.cost_usd) FILTER (WHERE {scored}), 0) * 10000)::int8",
                  f"COALESCE(SUM(t.output_tokens) FILTER (WHERE {scored}), 0)::int8"])
    fields = ["sub", "task", "rows", *[f"p{k}" for k in ks], *[f"d{k}" for k in ks],
              "cost", "out_sum"]
    dtype = [("n_fields", ">i2")]
    for f in fields:
        dtype += [(f"len_{f}", ">i4"), (f, ">f8" if f.startswith("d") else ">i8")]
    data = bytearray()
    # A streaming GroupAggregate over the (submission, task, attempt) unique index, in one
    # process: in memory it needs one cell at a time (a hash aggregate of every cell spilled
    # to disk with the default work_mem, and on 2 cores parallel workers did not pay), and it
    # measured 15% faster. The settings are put back for the rest of the transaction.
    cursor.execute("SELECT current_setting('enable_hashagg'), "
                   "current_setting('max_parallel_workers_per_gather')")
    hashagg, workers = cursor.fetchone()
    cursor.execute("SELECT set_config('enable_hashagg', 'off', true), "
                   "set_config('max_parallel_workers_per_gather', '0', true)")
    with cursor.cursor.copy(
            f"COPY (SELECT {', '.join(columns)} FROM {Trial._meta.db_table} t "
            "WHERE t.submission_id = ANY(%s::int8[]) GROUP BY t.submission_id, "
            "t.benchmark_task_id) TO STDOUT (FORMAT binary)", [[s[0] for s in subs]]) as copy:
        for block in copy:
            data += block
    cursor.execute("SELECT set_config('enable_hashagg', %s, true), "
                   "set_config('max_parallel_workers_per_gather', %s, true)", [hashagg, workers])
    records = np.frombuffer(bytes(data[19:-2]), dtype=np.dtype(dtype))
    packed = np.stack([records[f"p{k}"].astype(np.int64) for k in ks], axis=-1)
    if int(records["rows"].sum()) != int(((packed & _ROW) != 0).sum()):
        return None
    sub_ids = np.array([s[0] for s in subs], dtype=np.int64)
    order = np.argsort(sub_ids)
    row = order[np.searchsorted(sub_ids[order], records["sub"].astype(np.int64))]
    task_ids, col = np.unique(records["task"].astype(np.int64), return_inverse=True)
    shape = (len(subs), len(task_ids))
    cell = np.zeros(shape, dtype=bool)
    cell[row, col] = True
    p = np.zeros((*shape, attempts), dtype=np.int64)
    p[row, col] = packed
    d = np.zeros((*shape, attempts))
    d[row, col] = np.stack([records[f"d{k}"].astype(np.float64) for k in ks], axis=-1)
    outcome, claimed = p & 7, (p >> 3) & 7
    passed, timeout, agent_error, infra = (
        _ORDER.index(o) + 1 for o in (Outcome.PASSED, Outcome.TIMEOUT, Outcome.AGENT_ERROR,
                                      Outcome.INFRA_ERROR))
    is_scored = (outcome > 0) & (outcome != infra)

    def count(mask: np.ndarray) -> np.ndarray:
        return mask.sum(axis=-1, dtype=np.int64)

    a = {"task_ids": task_ids.tolist(), "cell": cell,
         "successes": count(outcome == passed), "present": count(outcome > 0),
         "infra": count(outcome == infra), "timeouts": count(outcome == timeout),
         "agent_errors": count(outcome == agent_error),
         "claimed_passes": count(claimed == passed), "claimed_infra": count(claimed == infra),
         "flagged": count((p & _FLAGGED) != 0), "cost_n": count(is_scored & ((p & _COST) != 0)),
         "dur_n": count(is_scored & ((p & _DUR) != 0)),
         "out_n": count(is_scored & ((p & _OUT) != 0))}
    for name in ("out_sum", "cost"):
        dense = np.zeros(shape, dtype=np.int64)
        dense[row, col] = records[name].astype(np.int64)
        a[name] = dense
    # Durations of scored attempts added in attempt order, ((d1 + d2) + d3), as before.
    known = np.where(is_scored & ((p & _DUR) != 0), d, 0.0)
    dur_sum = known[..., 0]
    for k in range(1, attempts):
        dur_sum = dur_sum + known[..., k]
    a["dur_sum"] = dur_sum
    total = a.pop("cost").sum(axis=1).tolist()
    costs: dict[int, Decimal] = {
        s[0]: Decimal(total[i]).scaleb(-4)
        for i, s in enumerate(subs) if a["cost_n"][i].any()}
    return a, costs, _packed_cell_columns(subs, a, outcome, claimed)


def _packed_cell_columns(subs: list[tuple], a: dict, outcome: np.ndarray, claimed: np.ndarray
                         ) -> dict:
    """``_cell_columns`` from the packed codes: each cell's letters in attempt order (a missing
    attempt adds none), cells comma-separated in task id order (a task without a cell adds
    nothing, not even its comma)."""
    cell = a["cell"]
    out: dict[str, list] = {}
    for name, codes in (("cell_outcomes", outcome), ("cell_claimed", claimed)):
        chars = np.zeros((*codes.shape[:2], codes.shape[2] + 1), dtype=np.uint8)
        chars[..., 0] = np.where(cell, ord(","), 0)
        chars[..., 1:] = _LETTERS[codes]
        out[name] = [r.tobytes().replace(b"\0", b"")[1:].decode() for r in chars]
    names = [str(t) for t in a["task_ids"]]
    if cell.all():
        out["cell_tasks"] = [",".join(names)] * len(subs)
    else:
        out["cell_tasks"] = [",".join(n for n, m in zip(names, r, strict=True) if m)
                             for r in cell.tolist()]
    rows, cols = np.nonzero(a["flagged"] > 0)
    flags, flagged = _cell_flags([(subs[i][0], a["task_ids"][j])
                                  for i, j in zip(rows.tolist(), cols.tolist(), strict=True)])
    out["cell_flags"] = [flags.get(s[0], {}) for s in subs]
    out["flagged_trials"] = [flagged.get(s[0], 0) for s in subs]
    return out
