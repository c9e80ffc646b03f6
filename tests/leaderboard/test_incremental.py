"""Publishing or taking down one submission rebuilds only its agent's rows, then ranks, tie
groups and family aggregates from stored rows; the result equals a full rebuild, table by table."""

from datetime import UTC, date, datetime
from decimal import Decimal
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaderboard import recompute
from leaderboard.models import (
    CategoryEntry,
    EntryStanding,
    GroupAggregate,
    LeaderboardEntry,
)
from leaderboard.services import _rank_inputs, leaderboard_recompute
from submissions.models import Submission, SubmissionStatus, Trial
from submissions.services import submission_publish, submission_withdraw
from tests.factories import AgentFactory, HarnessFactory, published_submission

_SKIP = {"id", "created_at", "updated_at"}


def _rows(model, key, extra=(), **filters):
    fields = [f.attname for f in model._meta.concrete_fields if f.attname not in _SKIP]
    fields += extra
    out = {}
    for row in model.objects.filter(**filters).values(*fields, *key):
        out[tuple(row[k] for k in key)] = {f: row[f] for f in fields
                                           if f not in ("entry_id",)}
    return out


def _tables(bv):
    return {
        # Rank and tie group (kept in EntryStanding) as the default manager reads them.
        "entries": _rows(LeaderboardEntry, ["agent_id"], ["rank", "tie_group"],
                         benchmark_version=bv),
        "standings": _rows(EntryStanding, ["entry__agent_id"], benchmark_version=bv),
        "categories": _rows(CategoryEntry, ["entry__agent_id", "category_id"],
                            entry__benchmark_version=bv),
        # The decoded cells too (the stored columns are compared with the entries).
        "cells": {(e.agent_id, task): cell for e in LeaderboardEntry.objects.filter(
            benchmark_version=bv) for task, cell in e.cells().items()},
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


def test_incremental_equals_full_with_flags_missing_tasks_and_infra_only_tasks(small_benchmark):
    """The set-based rebuild's other paths: a cell with a flagged attempt (an unconfirmed
    infrastructure error), a task without trials, a task whose attempts were all
    infrastructure errors (no scored attempt), unknown costs and fractional durations."""
    bv, tasks = small_benchmark
    agents = [AgentFactory(display_name=f"Agent {i}") for i in range(4)]
    published_submission(agents[0], tasks, ["PPP", "PFP", "", "FFF", "PPF"], duration_s=600.1)
    published_submission(agents[1], tasks, ["PPI", "III", "PFF", "PPP", ""],
                         infra_confirmed=False, cost=None, duration_s=33.3)
    leaderboard_recompute(benchmark_version=bv)
    late = published_submission(agents[2], tasks, ["PFI", "PPP", "FFF", "III", "PP"],
                                infra_confirmed=False, duration_s=0.7,
                                status=SubmissionStatus.VERIFIED, published_at=None)
    submission_publish(submission=late, actor=None)
    other = published_submission(agents[3], tasks, ["F", "", "", "", "P"],
                                 status=SubmissionStatus.VERIFIED, published_at=None)
    submission_publish(submission=other, actor=None)
    incremental = _tables(bv)

    leaderboard_recompute(benchmark_version=bv)
    assert _tables(bv) == incremental
    flagged = {k: v for k, v in incremental["cells"].items() if any(v.flags)}
    # Agent 1: PPI on task 1 and III on task 2 (unconfirmed: flagged, and counted as failures).
    assert flagged[(agents[1].pk, tasks[0].pk)].flags == [[], [], ["infra_unconfirmed"]]
    assert incremental["entries"][(agents[1].pk,)]["flagged_trials"] == 4
    assert incremental["entries"][(agents[2].pk,)]["flagged_trials"] == 4
    assert (agents[0].pk, tasks[2].pk) not in incremental["cells"]
    assert incremental["entries"][(agents[1].pk,)]["total_cost_usd"] is None


def test_cells_in_attempt_order_whatever_the_attempt_numbers(small_benchmark):
    """PostgreSQL builds each cell's codes from one column per attempt 1..attempts_per_task;
    an attempt numbered outside that range sends the rebuild to ordered aggregates. Both
    paths (and SQLite's) give the codes in attempt order and the same entry numbers."""
    bv, tasks = small_benchmark
    durations = [(3, 0.1), (1, 0.2), (2, 0.7)]
    sub = published_submission(AgentFactory(display_name="Gaps"), tasks,
                               ["PFT", "FPF", "PPP", "FFF", "PIF"])
    for attempt, d in durations:
        Trial.objects.filter(submission=sub, attempt=attempt).update(duration_s=d)
    leaderboard_recompute(benchmark_version=bv)
    within = _tables(bv)
    entry = LeaderboardEntry.objects.get(submission=sub)
    assert [c.outcomes for c in entry.cells().values()] == ["PFT", "FPF", "PPP", "FFF", "PIF"]
    # ((0.2 + 0.7) + 0.1) per task over 14 scored attempts (the PIF task: 0.2 + 0.1).
    assert entry.mean_duration_s == (4 * ((0.2 + 0.7) + 0.1) + (0.2 + 0.1)) / 14

    # Attempt 3 becomes attempt 7 (above attempts_per_task = 3) on the first task only.
    Trial.objects.filter(submission=sub, benchmark_task=tasks[0], attempt=3).update(attempt=7)
    leaderboard_recompute(benchmark_version=bv)
    entry = LeaderboardEntry.objects.get(submission=sub)
    assert entry.cells()[tasks[0].pk].outcomes == "PFT"
    assert _tables(bv) == within


def test_publish_and_take_down_touch_only_their_family_and_equal_a_full_rebuild(small_benchmark):
    """Incremental publishing recomputes only the harness families of the agents it rebuilds:
    a new family appears with its first agent and disappears with its last, the others keep
    their rows, and every table equals a full rebuild."""
    bv, tasks = small_benchmark
    codex = HarnessFactory(slug="codex-2", family="codex")
    agents = [AgentFactory(harness=codex, display_name=f"Codex {i}") for i in range(3)]
    for a, p in zip(agents, PATTERNS, strict=False):
        published_submission(a, tasks, p)
    leaderboard_recompute(benchmark_version=bv)
    before = GroupAggregate.objects.get(benchmark_version=bv, key="codex")

    solo = AgentFactory(harness=HarnessFactory(slug="solo-1", family="solo"))
    sub = published_submission(solo, tasks, ["PPP"] * 5, status=SubmissionStatus.VERIFIED,
                               published_at=None)
    submission_publish(submission=sub, actor=None)
    # The codex row was not rewritten (same primary key and numbers), the solo row is new.
    assert GroupAggregate.objects.get(benchmark_version=bv, key="codex").pk == before.pk
    assert GroupAggregate.objects.get(benchmark_version=bv, key="solo").agents == 1
    incremental = _tables(bv)
    leaderboard_recompute(benchmark_version=bv)
    assert _tables(bv) == incremental

    submission_withdraw(submission=sub, actor=None, reason="test")
    assert not GroupAggregate.objects.filter(benchmark_version=bv, key="solo").exists()
    incremental = _tables(bv)
    leaderboard_recompute(benchmark_version=bv)
    assert _tables(bv) == incremental


def test_packed_trials_equal_the_temporary_table_of_cells(small_benchmark, monkeypatch):
    """PostgreSQL's one-pass rebuild (each trial packed in 16 bytes, one byte string per
    submission scattered by numpy, no temporary table) writes the same tables as the temporary table of
    cells it falls back to: flagged cells, a task without trials, infrastructure-only tasks,
    unknown costs, missing attempts, fractional durations and costs. SQLite always takes the
    temporary table."""
    bv, tasks = small_benchmark
    agents = [AgentFactory(display_name=f"Agent {i}") for i in range(4)]
    published_submission(agents[0], tasks, ["PPP", "PFP", "", "FFF", "PPF"], duration_s=600.1,
                         cost=Decimal("0.1234"))
    published_submission(agents[1], tasks, ["PPI", "III", "PFF", "PPP", ""],
                         infra_confirmed=False, cost=None, duration_s=33.3)
    published_submission(agents[2], tasks, ["PFI", "PP", "FFF", "III", "TEP"],
                         infra_confirmed=False, duration_s=0.7, cost=Decimal("3.0001"))
    published_submission(agents[3], tasks, ["F", "", "", "", "P"])
    taken = []
    packed = recompute.packed_trials

    def spy(*args, **kwargs):
        result = packed(*args, **kwargs)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(recompute, "packed_trials", spy)
    leaderboard_recompute(benchmark_version=bv)
    one_pass = _tables(bv)
    assert taken == ([True] if connection.vendor == "postgresql" else [])
    monkeypatch.setattr(recompute, "packed_trials", lambda *args, **kwargs: None)
    leaderboard_recompute(benchmark_version=bv)
    assert _tables(bv) == one_pass
    assert one_pass["entries"][(agents[3].pk,)]["cell_outcomes"] == "F,P"
    assert one_pass["entries"][(agents[1].pk,)]["flagged_trials"] == 4
    assert one_pass["entries"][(agents[1].pk,)]["total_cost_usd"] is None


def test_the_rank_order_breaks_equal_rates_by_successes_cost_day_then_submission(
        small_benchmark):
    """The database sorts the entries for ranks and tie groups (services._rank_inputs): equal
    rates by more successes, then cheaper per attempt (no cost, or a zero one, last), then
    submitted earlier (else the UTC day the submission was created), then the older
    submission. Within a run of equal rates the order picks the next tie group's leader."""
    bv, tasks = small_benchmark
    half, twice = ["PF"] * 5, ["PPFF"] * 5  # 5/10 and 10/20: the same rate
    made = {}

    def entry(name, outcomes, cost=Decimal("1.0000"), submitted_on=date(2026, 1, 2)):
        made[name] = published_submission(AgentFactory(display_name=name), tasks, outcomes,
                                          cost=cost, submitted_on=submitted_on)

    entry("early-id", half)
    entry("more", twice)
    entry("dear", half, cost=Decimal("2.0000"))
    entry("zero", half, cost=Decimal("0.0000"), submitted_on=date(2026, 1, 5))
    entry("unknown", half, cost=None, submitted_on=date(2026, 1, 4))
    entry("first-day", half, submitted_on=date(2026, 1, 1))
    entry("created", half, submitted_on=None)
    # Created late on 31 December, UTC: the day that counts is the 31st.
    Submission.objects.filter(pk=made["created"].pk).update(
        created_at=datetime(2025, 12, 31, 23, 30, tzinfo=UTC))
    entry("late-id", half)
    leaderboard_recompute(benchmark_version=bv)

    name_of = dict(LeaderboardEntry.objects.filter(benchmark_version=bv).values_list(
        "pk", "agent__display_name"))
    order = [name_of[r[0]] for r in _rank_inputs(bv)]
    assert order == ["more", "created", "first-day", "early-id", "late-id", "dear", "unknown",
                     "zero"]
    assert sorted(LeaderboardEntry.objects.values_list("rank", flat=True)) == [1] * 8


def test_a_publish_writes_only_the_standings_that_moved(small_benchmark):
    """Ranks and tie groups live in narrow EntryStanding rows: a new last entry inserts its own
    and rewrites none; a new first entry moves every other one down."""
    bv, tasks = small_benchmark
    for p in PATTERNS:
        published_submission(AgentFactory(), tasks, p)
    leaderboard_recompute(benchmark_version=bv)
    before = dict(EntryStanding.objects.values_list("entry_id", "rank"))
    table = EntryStanding._meta.db_table

    def standing_writes(outcomes):
        sub = published_submission(AgentFactory(), tasks, outcomes,
                                   status=SubmissionStatus.VERIFIED, published_at=None)
        with CaptureQueriesContext(connection) as ctx:
            submission_publish(submission=sub, actor=None)
        return [q["sql"].split()[0] for q in ctx.captured_queries
                if table in q["sql"] and q["sql"].split()[0] in ("UPDATE", "INSERT")], sub

    writes, last = standing_writes(["FFF"] * 5)
    assert writes == ["INSERT"]
    assert LeaderboardEntry.objects.get(submission=last).rank == len(PATTERNS) + 1
    assert dict(EntryStanding.objects.exclude(entry__submission=last).values_list(
        "entry_id", "rank")) == before
    writes, first = standing_writes(["PPP"] * 5)
    assert sorted(writes) == ["INSERT", "UPDATE"]
    assert LeaderboardEntry.objects.get(submission=first).rank == 1
    assert {e: r + 1 for e, r in before.items()} == dict(EntryStanding.objects.filter(
        entry_id__in=before).values_list("entry_id", "rank"))


def _writes(ctx, *models):
    tables = [m._meta.db_table for m in models]
    return [q["sql"].split()[0] for q in ctx.captured_queries
            if q["sql"].split()[0] in ("INSERT", "UPDATE", "DELETE")
            and any(t in q["sql"].split("(")[0] or f"FROM {t}" in q["sql"]
                    or f'FROM "{t}"' in q["sql"] for t in tables)]


def test_a_rebuild_writes_only_the_rows_whose_numbers_changed(small_benchmark):
    """Every row is computed from the trials, but a row whose digest equals the stored one is
    left as it is: a rebuild of a current leaderboard writes no entry or category row, and
    after one trial is re-graded only that agent's rows are rewritten, with the new numbers
    (hand-checked), equal to rewriting every row."""
    bv, tasks = small_benchmark
    agents = [AgentFactory(display_name=f"Agent {i}") for i in range(len(PATTERNS))]
    subs = [published_submission(a, tasks, p) for a, p in zip(agents, PATTERNS, strict=True)]
    leaderboard_recompute(benchmark_version=bv)
    pks = dict(LeaderboardEntry.objects.values_list("agent_id", "pk"))
    before = _tables(bv)
    assert all(len(e["digest"]) == 32 for e in before["entries"].values())

    with CaptureQueriesContext(connection) as ctx:
        assert leaderboard_recompute(benchmark_version=bv) == len(PATTERNS)
    assert _writes(ctx, LeaderboardEntry, CategoryEntry, EntryStanding) == []
    assert dict(LeaderboardEntry.objects.values_list("agent_id", "pk")) == pks
    assert _tables(bv) == before

    # Agent 1 (PPI FFF FFF FFF FFF: 2 of 14 scored) has a failed attempt re-graded a pass.
    Trial.objects.filter(submission=subs[1], benchmark_task=tasks[1], attempt=1).update(
        outcome="passed", success=True)
    leaderboard_recompute(benchmark_version=bv)
    after = dict(LeaderboardEntry.objects.values_list("agent_id", "pk"))
    assert {a for a in after if after[a] != pks[a]} == {agents[1].pk}
    entry = LeaderboardEntry.objects.get(agent=agents[1])
    assert (entry.successes, entry.attempts, entry.success_rate) == (3, 14, 3 / 14)
    assert entry.cells()[tasks[1].pk].outcomes == "PFF"
    img = entry.category_entries.get(category=tasks[1].category)
    assert (img.successes, img.attempts) == (3, 5)
    changed = _tables(bv)

    with CaptureQueriesContext(connection) as ctx:
        leaderboard_recompute(benchmark_version=bv, rewrite=True)
    # Each table's rows deleted and inserted again (standings: inserted with their entry).
    assert sorted(set(_writes(ctx, LeaderboardEntry, CategoryEntry))) == ["DELETE", "INSERT"]
    assert set(dict(LeaderboardEntry.objects.values_list("agent_id", "pk")).values()).isdisjoint(
        after.values())
    assert _tables(bv) == changed


def test_the_rebuild_deletes_every_table_that_refers_to_an_entry():
    """Stale entries are deleted by one statement per table (recompute._entries_delete), not
    by the ORM's cascade: the tables it names must be every one that refers to an entry."""
    related = {r.related_model for r in LeaderboardEntry._meta.related_objects}
    assert related == {CategoryEntry, EntryStanding}


def test_rebuild_leaderboard_command(small_benchmark):
    bv, tasks = small_benchmark
    for p in PATTERNS[:3]:
        published_submission(AgentFactory(), tasks, p)
    out = StringIO()
    call_command("rebuild_leaderboard", "small@1.0", stdout=out)
    assert "small@1.0: 3 entries, 3 rewritten, 0 already current" in out.getvalue()
    out = StringIO()
    call_command("rebuild_leaderboard", stdout=out)
    assert "small@1.0: 3 entries, 0 rewritten, 3 already current" in out.getvalue()
    out = StringIO()
    call_command("rebuild_leaderboard", "small@1.0", "--rewrite", stdout=out)
    assert "small@1.0: 3 entries, 3 rewritten, 0 already current" in out.getvalue()
    with pytest.raises(CommandError, match="unknown benchmark version nope@1"):
        call_command("rebuild_leaderboard", "nope@1")


def _computed(n=2):
    """Computed columns of n entries as the rebuild hands them to ``row_digests``."""
    sample = {"int8": 7, "float8": 0.25, "numeric": Decimal("1.2500"), "bool": False,
              "text": "PFP,FFF", "jsonb": {"b": 1, "a": [2]}, "date": date(2026, 1, 1),
              "bytea": b"\x00" * 16}
    c = {name: [sample[kind]] * n for name, kind in recompute._ENTRY_COLUMNS
         if name != "digest"}
    c["submission_id"] = list(range(1, n + 1))
    c["categories"] = np.array([(sub, cat, 3, 6, 0.5, 0.2, 0.8) for sub in range(1, n + 1)
                                for cat in (1, 2)], dtype=np.float64)
    return c


@pytest.mark.parametrize("change", [
    "a count", "a rate", "null for zero", "a decimal", "a text", "a JSON value", "a date",
    "a task rate", "a category rate", "a category row less", "attempts required",
])
def test_a_digest_changes_with_any_value_written_on_the_row(change):
    base = recompute.row_digests(_computed(), 162)
    c, required = _computed(), 162
    if change == "a count":
        c["successes"][0] = 8
    elif change == "a rate":
        c["success_rate"][0] = 0.25000000000000006  # the next float up
    elif change == "null for zero":
        c["timeouts"][0], c["ci_low"][0] = 0, None
    elif change == "a decimal":
        c["total_cost_usd"][0] = Decimal("1.2501")
    elif change == "a text":
        c["cell_outcomes"][0] = "PFP,FFP"
    elif change == "a JSON value":
        c["verification"][0] = {"b": 1, "a": [3]}
    elif change == "a date":
        c["submitted_on"][0] = date(2026, 1, 2)
    elif change == "a task rate":
        c["task_rates"][0] = b"\x01" + b"\x00" * 15
    elif change == "a category rate":
        c["categories"][1, 6] = 0.81
    elif change == "a category row less":
        c["categories"] = np.delete(c["categories"], 1, axis=0)
    else:
        required = 161
    changed = recompute.row_digests(c, required)
    if change == "attempts required":
        assert changed[0] != base[0] and changed[1] != base[1]
    else:
        assert changed[0] != base[0]
        assert changed[1] == base[1]  # the other entry's row is untouched


def test_a_digest_ignores_how_a_decimal_is_spelled():
    c = _computed()
    c["total_cost_usd"][0] = Decimal("1.25")  # SQLite and PostgreSQL may carry other exponents
    assert recompute.row_digests(c, 162) == recompute.row_digests(_computed(), 162)


def test_an_entry_written_again_loses_the_category_it_has_no_scored_attempt_in(
        small_benchmark):
    """A re-verification that confirms every attempt of a category an infrastructure error
    leaves that entry without the category's row, exactly as a rebuild from nothing."""
    bv, tasks = small_benchmark
    agents = [AgentFactory(display_name=f"Agent {i}") for i in range(2)]
    subs = [published_submission(a, tasks, p) for a, p in zip(agents, PATTERNS, strict=False)]
    leaderboard_recompute(benchmark_version=bv)
    category = tasks[0].category
    in_category = [t for t in tasks if t.category_id == category.pk]
    assert CategoryEntry.objects.filter(entry__agent=agents[0], category=category).exists()
    Trial.objects.filter(submission=subs[0], benchmark_task__in=in_category).update(
        outcome="infra_error", success=False, infra_confirmed=True, infra_confirmed_by="site",
        infra_confirm_reason="test: the environment failed")
    leaderboard_recompute(benchmark_version=bv)
    assert not CategoryEntry.objects.filter(entry__agent=agents[0], category=category).exists()
    assert CategoryEntry.objects.filter(entry__agent=agents[1], category=category).exists()
    entry = LeaderboardEntry.objects.get(agent=agents[0])
    assert entry.attempts == 15 - 3 * len(in_category)
    incremental = _tables(bv)
    LeaderboardEntry.objects.filter(benchmark_version=bv).delete()
    leaderboard_recompute(benchmark_version=bv)
    assert _tables(bv) == incremental
