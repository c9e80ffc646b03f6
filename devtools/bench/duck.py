"""The rebuild's floor: DuckDB group-bys producing the same aggregates from the same trials.

The trials (with each one's agent, category, group and harness family) are exported once with
PostgreSQL COPY and loaded into an in-memory DuckDB (not timed); what is timed is the group-bys
that yield what ``leaderboard_recompute`` stores: per agent x task (outcome string, successes,
scored attempts), per agent x category, per agent (totals, cost/time/token means, outcome
counts, pass@k, pass^k, macro and pooled group rates) and per harness family.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import duckdb
from django.db import connection

from evaluation.models import Agent, BenchmarkTask, BenchmarkVersion, Category, Harness
from submissions.models import Submission, Trial

_EXPORT = """
COPY (
  SELECT s.id AS submission_id, s.agent_id, h.family, t.benchmark_task_id AS task_id,
         bt.category_id, c."group" AS grp, t.attempt, t.outcome, t.claimed_outcome, t.cost_usd,
         t.duration_s, t.output_tokens, s.published_at
  FROM {trial} t
  JOIN {submission} s ON s.id = t.submission_id
  JOIN {agent} a ON a.id = s.agent_id
  JOIN {harness} h ON h.id = a.harness_id
  JOIN {task} bt ON bt.id = t.benchmark_task_id
  JOIN {category} c ON c.id = bt.category_id
  WHERE s.benchmark_version_id = %s AND s.status = 'published'
) TO STDOUT WITH (FORMAT csv, HEADER)
"""

_GROUP_BYS = [
    # The latest published submission per agent (outcome is the site's, the claim beside it).
    """CREATE TEMP TABLE t AS
       WITH latest AS (SELECT agent_id, arg_max(submission_id, published_at) AS submission_id
                       FROM trials GROUP BY agent_id)
       SELECT tr.*, outcome AS o FROM trials tr JOIN latest USING (submission_id)""",
    """CREATE TEMP TABLE cells AS
       SELECT submission_id, task_id, any_value(category_id) AS category_id,
              any_value(grp) AS grp,
              string_agg(CASE o WHEN 'passed' THEN 'P' WHEN 'failed' THEN 'F'
                         WHEN 'timeout' THEN 'T' WHEN 'agent_error' THEN 'E' ELSE 'I' END, ''
                         ORDER BY attempt) AS outcomes,
              string_agg(CASE claimed_outcome WHEN 'passed' THEN 'P' WHEN 'failed' THEN 'F'
                         WHEN 'timeout' THEN 'T' WHEN 'agent_error' THEN 'E' ELSE 'I' END, ''
                         ORDER BY attempt) AS claimed_outcomes,
              count(*) FILTER (WHERE claimed_outcome = 'passed') AS claimed_passes,
              count(*) FILTER (WHERE o = 'passed') AS successes,
              count(*) FILTER (WHERE o <> 'infra_error') AS scored
       FROM t GROUP BY submission_id, task_id""",
    # The clustered variance needs sum (y - p n)^2 = sum y^2 - 2 p sum y n + p^2 sum n^2.
    """CREATE TEMP TABLE cats AS
       SELECT submission_id, category_id, any_value(grp) AS grp, sum(successes) AS successes,
              sum(scored) AS scored, sum(successes) / sum(scored) AS rate, count(*) AS tasks,
              sum(successes * successes) AS yy, sum(successes * scored) AS yn,
              sum(scored * scored) AS nn
       FROM cells WHERE scored > 0 GROUP BY submission_id, category_id""",
    """CREATE TEMP TABLE agents AS
       SELECT submission_id, any_value(agent_id) AS agent_id, any_value(family) AS family,
              count(*) FILTER (WHERE o = 'passed') AS successes,
              count(*) FILTER (WHERE o <> 'infra_error') AS attempts, count(*) AS present,
              count(*) FILTER (WHERE o = 'infra_error') AS infra,
              count(*) FILTER (WHERE o = 'timeout') AS timeouts,
              count(*) FILTER (WHERE o = 'agent_error') AS agent_errors,
              sum(cost_usd) FILTER (WHERE o <> 'infra_error') AS cost,
              avg(cost_usd) FILTER (WHERE o <> 'infra_error') AS cost_per_attempt,
              avg(duration_s) FILTER (WHERE o <> 'infra_error') AS mean_duration,
              avg(output_tokens) FILTER (WHERE o <> 'infra_error') AS mean_output
       FROM t GROUP BY submission_id""",
    """CREATE TEMP TABLE agent_tasks AS
       SELECT submission_id, avg((successes > 0)::INT) AS pass_at_k,
              avg((successes = scored)::INT) AS pass_hat_k, count(*) AS tasks,
              sum(successes * successes) AS yy, sum(successes * scored) AS yn,
              sum(scored * scored) AS nn
       FROM cells WHERE scored > 0 GROUP BY submission_id""",
    """CREATE TEMP TABLE agent_groups AS
       SELECT submission_id, grp, avg(rate) AS macro, sum(successes) / sum(scored) AS pooled
       FROM cats GROUP BY submission_id, grp""",
    """CREATE TEMP TABLE families AS
       SELECT family, count(*) AS agents, sum(successes) AS successes, sum(attempts) AS attempts,
              sum(successes) / sum(attempts) AS pooled, avg(successes / attempts) AS mean_rate
       FROM agents GROUP BY family""",
]


def _export_sql() -> str:
    return _EXPORT.format(
        trial=Trial._meta.db_table, submission=Submission._meta.db_table,
        agent=Agent._meta.db_table, harness=Harness._meta.db_table,
        task=BenchmarkTask._meta.db_table, category=Category._meta.db_table)


def duckdb_rebuild_seconds(*, benchmark_version: BenchmarkVersion) -> tuple[float, int]:
    """Seconds DuckDB takes for the group-bys (best of 3), and the number of trials loaded."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trials.csv"
        with (path.open("wb") as out, connection.cursor() as cursor,
              cursor.cursor.copy(_export_sql(), (benchmark_version.pk,)) as copy):
            for chunk in copy:
                out.write(chunk)
        db = duckdb.connect(":memory:")
        db.execute("SET threads TO 2")
        db.execute(f"CREATE TABLE trials AS SELECT * FROM read_csv_auto('{path}')")
        n = db.execute("SELECT count(*) FROM trials").fetchone()[0]
    best = float("inf")
    for _ in range(3):
        for table in ("t", "cells", "cats", "agents", "agent_tasks", "agent_groups", "families"):
            db.execute(f"DROP TABLE IF EXISTS {table}")
        started = time.perf_counter()
        for sql in _GROUP_BYS:
            db.execute(sql)
        best = min(best, time.perf_counter() - started)
    db.close()
    return best, n
