"""Publishing or taking down one submission rebuilds only its agent's rows, then ranks, tie
groups and family aggregates from stored rows; the result equals a full rebuild, table by table."""

from decimal import Decimal

from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaderboard.models import CategoryEntry, GroupAggregate, LeaderboardEntry, TaskCell
from leaderboard.services import leaderboard_recompute
from submissions.models import SubmissionStatus, Trial
from submissions.services import submission_publish, submission_withdraw
from tests.factories import AgentFactory, HarnessFactory, published_submission

_SKIP = {"id", "created_at", "updated_at"}


def _rows(model, key, **filters):
    fields = [f.attname for f in model._meta.concrete_fields if f.attname not in _SKIP]
    out = {}
    for row in model.objects.filter(**filters).values(*fields, *key):
        out[tuple(row[k] for k in key)] = {f: row[f] for f in fields
                                           if f not in ("entry_id",)}
    return out


def _tables(bv):
    return {
        "entries": _rows(LeaderboardEntry, ["agent_id"], benchmark_version=bv),
        "categories": _rows(CategoryEntry, ["entry__agent_id", "category_id"],
                            entry__benchmark_version=bv),
        "cells": _rows(TaskCell, ["entry__agent_id", "benchmark_task_id"],
                       entry__benchmark_version=bv),
        "groups": _rows(GroupAggregate, ["kind", "key"], benchmark_version=bv),
    }


PATTERNS = [
    ["PPP", "PPF", "PPP", "PFP", "PPP"], ["PPI", "FFF", "FFF", "FFF", "FFF"],
    ["PFT", "FFF", "PPP", "EFF", "PFP"], ["PPP", "PPP", "PPP", "PPP", "PPF"],
    ["FFF", "PFF", "PPF", "FFP", "TTT"], ["PPF", "PPF", "PPF", "PPF", "PPF"],
]


def test_incremental_publish_and_take_down_equal_a_full_rebuild(small_benchmark):
    bv, tasks = small_benchmark
    codex, claude = HarnessFactory(slug="codex-1", family="codex"), HarnessFactory(
        slug="claude-1", family="claude")
    agents = [AgentFactory(harness=codex if i % 2 else claude, display_name=f"Agent {i}")
              for i in range(len(PATTERNS) + 1)]
    subs = [published_submission(a, tasks, p, cost=Decimal(f"{i + 1}.0000"))
            for i, (a, p) in enumerate(zip(agents, PATTERNS, strict=False))]
    leaderboard_recompute(benchmark_version=bv)

    # A new agent, a second (newer) submission of an existing agent, and a take-down.
    new = published_submission(agents[-1], tasks, ["PPP"] * 4 + ["PPI"],
                               status=SubmissionStatus.VERIFIED, published_at=None)
    submission_publish(submission=new, actor=None)
    newer = published_submission(agents[1], tasks, ["PPP", "PPP", "FFF", "FFF", "PFF"],
                                 status=SubmissionStatus.VERIFIED, published_at=None)
    submission_publish(submission=newer, actor=None)
    submission_withdraw(submission=subs[3], actor=None, reason="test")
    incremental = _tables(bv)

    leaderboard_recompute(benchmark_version=bv)
    assert _tables(bv) == incremental
    assert len(incremental["entries"]) == 6
    ranks = sorted(e["rank"] for e in incremental["entries"].values())
    assert ranks[0] == 1 and incremental["groups"].keys() == {("harness_family", "codex"),
                                                             ("harness_family", "claude")}


def test_publishing_one_reads_only_its_agents_trials(small_benchmark):
    bv, tasks = small_benchmark
    for p in PATTERNS:
        published_submission(AgentFactory(), tasks, p)
    leaderboard_recompute(benchmark_version=bv)
    sub = published_submission(AgentFactory(), tasks, ["PPP"] * 5,
                               status=SubmissionStatus.VERIFIED, published_at=None)
    with CaptureQueriesContext(connection) as ctx:
        submission_publish(submission=sub, actor=None)
    trial_reads = [q["sql"] for q in ctx.captured_queries if Trial._meta.db_table in q["sql"]]
    # Trials are read for this submission only: publishing's check for trials awaiting the
    # X-ray judge, then the rebuild's last attempt number, flagged trials and cells.
    assert 1 <= len(trial_reads) <= 4, trial_reads
    assert all(f"IN ({sub.pk})" in sql or f'"submission_id" = {sub.pk}' in sql
               or f"ANY('{{{sub.pk}}}'" in sql for sql in trial_reads), trial_reads
    assert LeaderboardEntry.objects.get(submission=sub).rank == 1
