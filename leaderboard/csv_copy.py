"""The large CSVs (/trials.csv, /task-matrix.csv) streamed by PostgreSQL itself: ``COPY (SELECT
...) TO STDOUT WITH (FORMAT csv)`` through psycopg, one row at a time, so memory stays flat and
no row is formatted in Python.

The SELECT produces exactly the text the Python path (tables.py + csv_export, kept for SQLite)
writes: text cells neutralised against spreadsheet formulas in SQL (a leading = + - @ tab or
CR gets a single quote), empty text as NULL (COPY would quote an empty string, csv.writer does
not), booleans as true/false, floats in Python's repr (an integral float keeps its ".0"), CRLF
line ends. tests/leaderboard/test_csv_copy.py asserts identical bytes from both paths. The one
known difference: a text cell that is exactly ``\\.`` is quoted by COPY and not by csv.writer
(the same value once parsed).
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db import connection

from leaderboard import selectors
from leaderboard.csv_export import header_line
from evaluation.models import Agent, BenchmarkTask, BenchmarkVersion, Category
from leaderboard.models import EntryStanding, LeaderboardEntry
from submissions.models import Submission, Trial
from leaderboard.tables import (
    OUTCOME_LETTERS,
    RECONSTRUCTED,
    TASK_MATRIX_COLUMNS,
    TRIAL_COLUMNS,
)


def _tables() -> dict[str, str]:
    """Table names from the models (the catalogue may move between apps)."""
    return {"trial": Trial._meta.db_table, "entry": LeaderboardEntry._meta.db_table,
            "standing": EntryStanding._meta.db_table,
            "submission": Submission._meta.db_table, "agent": Agent._meta.db_table,
            "task": BenchmarkTask._meta.db_table, "category": Category._meta.db_table}


def supported() -> bool:
    return connection.vendor == "postgresql"


def _text(expr: str) -> str:
    """A text cell as csv_export.neutralise writes it."""
    return (f"CASE WHEN left({expr}, 1) IN ('=', '+', '-', '@', E'\\t', E'\\r') "
            f"THEN '''' || {expr} ELSE NULLIF({expr}, '') END")


def _bool(expr: str) -> str:
    return f"CASE WHEN {expr} THEN 'true' WHEN NOT {expr} THEN 'false' END"


def _float(expr: str) -> str:
    """Python's repr of a float: PostgreSQL prints the same shortest digits, but an integral
    value without the ".0"."""
    return (f"CASE WHEN {expr} = trunc({expr}) AND abs({expr}) < 1e15 "
            f"THEN trunc({expr})::numeric::text || '.0' ELSE ({expr})::float8::text END")


def _provenance(reconstructed: str, verified: str) -> str:
    return (f"CASE WHEN {reconstructed} THEN '{RECONSTRUCTED}' WHEN {verified} THEN 'verified' "
            "ELSE 'submitted' END")


def _flags_text(expr: str) -> str:
    """tables.flags_text: a JSON list of flags joined with ';'."""
    return (f"array_to_string(ARRAY(SELECT x.v FROM jsonb_array_elements_text({expr}) "
            "WITH ORDINALITY AS x(v, i) ORDER BY x.i), ';')")


def _outcome_names(expr: str) -> str:
    """tables.outcome_names: "PF" -> "passed|failed". The names are lower case, so replacing
    one upper-case letter never touches another's name."""
    out = f"regexp_replace({expr}, '(.)(?!$)', '\\1|', 'g')"
    for code, name in OUTCOME_LETTERS.items():
        out = f"replace({out}, '{code}', '{name}')"
    return out


def _entry_ids(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> tuple[str, tuple]:
    qs = selectors.entries_for_export(benchmark_version=bv, filters=filters)
    return qs.values("pk").order_by().query.sql_with_params()


def trials_sql(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> tuple[str, tuple]:
    """The rows of tables.trials_table, in its order."""
    ids_sql, ids_params = _entry_ids(bv, filters)
    select = ", ".join([
        _text("a.display_name"), _text("bt.name"), _text("c.slug"), "t.attempt",
        _text("t.outcome"), _bool("t.success"), _float("t.cost_usd"), _float("t.duration_s"),
        "t.output_tokens", "t.input_tokens", "t.cached_tokens", _provenance("s.is_reconstructed", "s.is_verified"),
        _text("t.claimed_outcome"), _bool("t.claimed_success"), _float("t.reward"),
        _float("t.verified_reward"),
        "CASE WHEN s.is_reconstructed THEN 'reconstructed' ELSE t.verification_level END",
        _text(_flags_text("t.flags")), "t.submission_id", _text("t.judge_model"),
        _text("t.judge_prompt_version"), "t.id", "s.agent_id", _text("t.grader_version"),
        _bool("t.infra_confirmed"), _text("t.infra_confirmed_by"),
        _text("t.infra_confirm_reason"), _text("t.trajectory_judgement"),
        _text("t.trajectory_judge_model"), _text("t.trajectory_judge_prompt_version"),
    ])
    n = _tables()
    sql = (
        f"SELECT {select} FROM {n['trial']} t "
        f"JOIN {n['entry']} e ON e.submission_id = t.submission_id "
        f"JOIN {n['submission']} s ON s.id = t.submission_id "
        f"JOIN {n['agent']} a ON a.id = s.agent_id "
        f"JOIN {n['task']} bt ON bt.id = t.benchmark_task_id "
        f"JOIN {n['category']} c ON c.id = bt.category_id "
        f"WHERE e.id IN ({ids_sql}) "
        "ORDER BY a.display_name, bt.position, t.attempt, t.submission_id, t.id"
    )
    return sql, ids_params


def task_matrix_sql(bv: BenchmarkVersion, filters: selectors.EntryFilters) -> tuple[str, tuple]:
    """The rows of tables.task_matrix_table (every entry x every task), in its order."""
    ids_sql, ids_params = _entry_ids(bv, filters)
    # An unflagged cell has no stored flags: one empty list per attempt, "||" for three.
    cell_flags = ("CASE WHEN cell.flags IS NULL THEN repeat('|', length(cell.outcomes) - 1) "
                  "ELSE array_to_string(ARRAY(SELECT " + _flags_text("x.f") + " FROM "
                  "jsonb_array_elements(cell.flags) WITH ORDINALITY AS x(f, i) ORDER BY x.i), "
                  "'|') END")
    select = ", ".join([
        _text("a.display_name"), _text("bt.name"), _text("c.slug"), _text("cell.outcomes"),
        "COALESCE(length(cell.outcomes) - length(replace(cell.outcomes, 'P', '')), 0)",
        _provenance("e.reconstructed", "e.verified"),
        _text("cell.claimed_outcomes"), _text(f"COALESCE({cell_flags}, '')"),
        _text(_outcome_names("cell.outcomes")), "e.agent_id", "e.submission_id", "bt.id",
    ])
    n = _tables()
    # The entries' cells, unnested from their comma-separated columns (models.LeaderboardEntry).
    cells = (
        "SELECT ce.id AS entry_id, u.task_id, u.outcomes, u.claimed_outcomes, "
        "ce.cell_flags -> u.task_id::text AS flags "
        f"FROM {n['entry']} ce, unnest(string_to_array(ce.cell_tasks, ',')::int8[], "
        "string_to_array(ce.cell_outcomes, ','), string_to_array(ce.cell_claimed, ',')) "
        "AS u(task_id, outcomes, claimed_outcomes) WHERE ce.benchmark_version_id = %s"
    )
    # An unranked entry (a discrepancy) has no standing: listed after the ranked ones.
    sql = (
        f"SELECT {select} FROM {n['entry']} e "
        f"LEFT JOIN {n['standing']} st ON st.entry_id = e.id "
        f"JOIN {n['agent']} a ON a.id = e.agent_id "
        f"CROSS JOIN {n['task']} bt "
        f"JOIN {n['category']} c ON c.id = bt.category_id "
        f"LEFT JOIN ({cells}) cell ON cell.entry_id = e.id AND cell.task_id = bt.id "
        f"WHERE e.id IN ({ids_sql}) AND bt.benchmark_version_id = %s "
        "ORDER BY st.rank NULLS LAST, a.display_name, e.id, bt.position, bt.name"
    )
    return sql, (bv.pk, *ids_params, bv.pk)


# Table name -> (columns, SQL builder) of the CSVs PostgreSQL streams itself.
COPY_TABLES = {
    "trials": (TRIAL_COLUMNS, trials_sql),
    "task-matrix": (TASK_MATRIX_COLUMNS, task_matrix_sql),
}


def copy_lines(columns: tuple[str, ...], sql: str, params: tuple) -> Iterator[bytes]:
    """The header as csv.writer writes it, then COPY's rows in blocks of about 256 KiB."""
    yield header_line(columns).encode()
    with connection.cursor() as cursor, cursor.cursor.copy(
            f"COPY ({sql}) TO STDOUT WITH (FORMAT csv)", params) as copy:
        block: list[bytes] = []
        size = 0
        # libpq hands over exactly one row per read: its final "\n" becomes csv.writer's "\r\n"
        # (a newline inside a quoted cell stays as it is, as csv.writer leaves it).
        for row in copy:
            row = bytes(row)
            block.append(row[:-1] + b"\r\n")
            size += len(row)
            if size >= 256 * 1024:
                yield b"".join(block)
                block, size = [], 0
        if block:
            yield b"".join(block)
