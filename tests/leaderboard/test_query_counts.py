"""Every list page, CSV and API reads a fixed number of queries: the same for 1 agent as for N
(no N+1). Aggregates are precomputed, so the counts are small constants."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaderboard.services import leaderboard_recompute
from tests.factories import AgentFactory, published_submission

# Path -> expected queries on a cache miss (each request below follows a rebuild, which bumps the
# aggregate version). Common to every page: benchmark version lookup with its aggregate version
# joined (1), version list for the selector (1), filter choices (harnesses 1, providers 1) = 4;
# then the page's own reads. Windowed pages count the matching agents (1).
PAGES = {
    # one window of ranked entries (agent/harness/model joined), their count, the unranked rows,
    # the boards of today and a month before (the rank changes)
    "/": 4 + 3 + 2,
    "/categories/": 4 + 4,             # categories, entries, prefetched category entries, count
    "/imaging-vs-text/": 4 + 3,        # entries, count, harness-family aggregates
    "/harness-effect/": 4 + 3,         # same-model entries, version entries, families
    "/cost/": 4 + 3,                   # window of entries, count, every entry for the chart
    "/task-matrix/": 4 + 3,            # tasks, entries (cells on the row), count
    "/tasks/": 4 + 3,                  # tasks, categories, cell totals
    "/leaderboard.csv": 1 + 1,         # version, entries
    "/categories.csv": 1 + 3,          # version, categories, entries, category entries
    "/groups.csv": 1 + 1,              # version, entries
    "/harness-families.csv": 1 + 1,    # version, aggregates
    # SQLite: version, submission ids, streamed trials. PostgreSQL: version, then one COPY
    # statement (leaderboard/csv_copy.py), which Django's query capture does not see.
    "/trials.csv": {"sqlite": 1 + 2, "postgresql": 1},
    # SQLite: version, tasks, entries (cells on the row). PostgreSQL: version, then one COPY.
    "/task-matrix.csv": {"sqlite": 1 + 2, "postgresql": 1},
    "/tasks.csv": 1 + 2,               # version, tasks, cell totals
    "/api/v1/leaderboard/": 1 + 2,     # version, one page of entries, their count
    "/api/v1/categories/": 1 + 3,
    "/api/v1/groups/": 1 + 1,
    "/api/v1/harness-families/": 1 + 1,
    "/api/v1/trials/": 1 + 3,          # version, submission ids, trials, total count
    "/api/v1/benchmarks/": 1,
}


def _count(client, path: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(path + ("&" if "?" in path else "?") + "benchmark=small@1.0")
        assert response.status_code == 200, path
        if response.streaming:
            b"".join(response.streaming_content)
    return len(ctx.captured_queries)


def _add_agents(bv, tasks, n: int) -> None:
    for _ in range(n):
        published_submission(AgentFactory(), tasks, ["PFT", "FFF", "PPP", "EFF", "PFP"])
    leaderboard_recompute(benchmark_version=bv)


@pytest.mark.parametrize("path", list(PAGES))
def test_query_count_is_the_same_for_1_and_for_n_agents(path, client, small_benchmark):
    bv, tasks = small_benchmark
    _add_agents(bv, tasks, 1)
    one = _count(client, path)
    _add_agents(bv, tasks, 6)
    many = _count(client, path)
    expected = PAGES[path]
    if isinstance(expected, dict):
        expected = expected[connection.vendor]
    assert one == many == expected, (path, one, many)


def test_agent_and_task_pages_have_fixed_query_counts(client, small_benchmark):
    bv, tasks = small_benchmark
    _add_agents(bv, tasks, 1)
    from leaderboard.models import LeaderboardEntry

    slug = LeaderboardEntry.objects.first().agent.slug
    counts = []
    for n in (0, 6):
        _add_agents(bv, tasks, n)
        counts.append((_count(client, f"/agents/{slug}/"), _count(client, "/tasks/img/case_01/")))
    assert counts[0] == counts[1]


def test_a_trials_api_page_reads_only_that_page_from_the_database(client, small_benchmark):
    """A page of 50 trials out of 3,000 is read with LIMIT/OFFSET in SQL, never by reading
    the trials before it; the count still covers all of them, and the page is the same rows,
    in the same order, as that slice of the full trials table."""
    bv, tasks = small_benchmark
    published_submission(AgentFactory(), tasks, ["P" * 600, "F" * 600, "PF" * 300,
                                                 "T" * 600, "FP" * 300])
    leaderboard_recompute(benchmark_version=bv)
    from leaderboard import selectors, tables

    with CaptureQueriesContext(connection) as ctx:
        body = client.get("/api/v1/trials/?benchmark=small@1.0&limit=50&offset=1000").json()
    assert len(ctx.captured_queries) == PAGES["/api/v1/trials/"]
    trial_sql = [q["sql"] for q in ctx.captured_queries if '"attempt"' in q["sql"]]
    assert len(trial_sql) == 1 and "LIMIT 50 OFFSET 1000" in trial_sql[0], trial_sql
    assert body["count"] == 3000 and len(body["results"]) == 50
    full = list(tables.trials_table(bv, selectors.EntryFilters()).dicts())
    assert len(full) == 3000
    assert body["results"] == full[1000:1050]


def test_the_comparison_reads_a_fixed_number_of_queries_for_2_and_for_8_agents(
        client, small_benchmark):
    """The compare page, its CSV and its API: the version, the named entries, their category
    rows (prefetched) and the tasks, however many agents are compared."""
    bv, tasks = small_benchmark
    _add_agents(bv, tasks, 8)
    from leaderboard.models import LeaderboardEntry

    slugs = list(LeaderboardEntry.objects.values_list("agent__slug", flat=True))
    for path, expected in (("/compare/", 1 + 3), ("/compare.csv", 1 + 3),
                           ("/api/v1/compare/", 1 + 3)):
        counts = [_count(client, f"{path}?" + "&".join(f"a={s}" for s in slugs[:n]))
                  for n in (2, 8)]
        assert counts == [expected, expected], (path, counts)
