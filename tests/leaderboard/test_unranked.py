"""Rows the site's checks contradict (verdict discrepancy) are never ranked: no rank, no tie
group, left out of the others' ranks and tie groups, listed apart with the site's reasons.

Hand-checked data (5 tasks x 3 attempts, per-task success rates):
  D  PPP PPP PPP PPP PPP  (1, 1, 1, 1, 1)          15/15, the discrepant one
  A  PPP PPP PPP PPF PFF  (1, 1, 1, 2/3, 1/3)      12/15
  B  PPF PPF PPF PPF PPF  (2/3, 2/3, 2/3, 2/3, 2/3) 10/15

With D ranked: D 1, A 2, B 3. A vs D: differences (0, 0, 0, 1/3, 2/3), mean 0.2, sd 0.298,
t = 1.5 < 2.776 (df 4, two agents): A ties with D. B vs D (three agents): the difference is
1/3 on every task, no noise, so B differs and leads group 2. Groups (1, 1, 2).
Without D: A 1, B 2. B vs A: differences (1/3, 1/3, 1/3, 0, -1/3), mean 2/15, sd 0.298,
t = 1.0 < 2.776: B ties with A. Groups (1, 1).
"""

import csv
import html
import io

import pytest
from django.test import override_settings

from leaderboard import selectors
from leaderboard.models import EntryStanding, GroupAggregate, LeaderboardEntry
from leaderboard.services import leaderboard_recompute
from submissions.models import Submission, coverage_badge
from tests.factories import AgentFactory, published_submission

Q = "?benchmark=small@1.0"
DISCREPANCY = {"counted": 15, "passes": 15, "regraded": 15, "reproduced": 0, "rerun": 3,
               "passes_uncovered": 12, "verdict": "discrepancy", "flagged": 2,
               "rerun_contradicts": True}
VERIFIED = {"counted": 15, "passes": 15, "regraded": 15, "reproduced": 12, "rerun": 3,
            "passes_uncovered": 0, "verdict": "verified"}


@pytest.fixture
def three_agents(small_benchmark):
    bv, tasks = small_benchmark
    d = AgentFactory(display_name="Discrepant (M0)", slug="discrepant")
    a = AgentFactory(display_name="Alpha (M1)", slug="alpha")
    b = AgentFactory(display_name="Beta (M2)", slug="beta")
    sub = published_submission(d, tasks, ["PPP"] * 5, coverage=DISCREPANCY)
    published_submission(a, tasks, ["PPP", "PPP", "PPP", "PPF", "PFF"])
    published_submission(b, tasks, ["PPF"] * 5)
    leaderboard_recompute(benchmark_version=bv)
    return bv, sub


def _standings(bv) -> dict[str, tuple]:
    return {e.agent.slug: (e.rank, e.tie_group) for e in LeaderboardEntry.objects.filter(
        benchmark_version=bv).select_related("agent")}


def test_the_same_agents_with_the_row_verified_rank_it_first(three_agents):
    """The control: ranked, D would move both others down and split B from A."""
    bv, sub = three_agents
    Submission.objects.filter(pk=sub.pk).update(coverage=VERIFIED, is_verified=True)
    leaderboard_recompute(benchmark_version=bv)
    assert _standings(bv) == {"discrepant": (1, 1), "alpha": (2, 1), "beta": (3, 2)}


def test_a_discrepant_row_has_no_rank_and_the_others_are_ranked_without_it(three_agents):
    bv, _sub = three_agents
    assert _standings(bv) == {"discrepant": (None, None), "alpha": (1, 1), "beta": (2, 1)}
    d = LeaderboardEntry.objects.get(benchmark_version=bv, agent__slug="discrepant")
    assert not d.ranked and not EntryStanding.objects.filter(entry=d).exists()
    assert d.success_rate == 1.0  # its numbers are kept, only its place is not given
    # The harness families average ranked rows only (every agent here has its own harness).
    families = GroupAggregate.objects.filter(benchmark_version=bv)
    assert sorted(g.agents for g in families) == [1, 1]
    assert d.agent.harness.family not in {g.key for g in families}
    # The link-preview card's top rows are ranked rows.
    assert [e.agent.slug for e in selectors.top_entries(benchmark_version=bv)] == [
        "alpha", "beta"]


def test_a_row_that_turns_discrepant_loses_its_standing(three_agents):
    bv, sub = three_agents
    Submission.objects.filter(pk=sub.pk).update(coverage=VERIFIED, is_verified=True)
    leaderboard_recompute(benchmark_version=bv)
    # Through a re-verification (the row is rewritten) ...
    Submission.objects.filter(pk=sub.pk).update(coverage=DISCREPANCY, is_verified=False)
    leaderboard_recompute(benchmark_version=bv, agent_ids=[sub.agent_id])
    assert _standings(bv) == {"discrepant": (None, None), "alpha": (1, 1), "beta": (2, 1)}
    # ... or on a row stored before this rule (its standing is left over, the row unchanged).
    Submission.objects.filter(pk=sub.pk).update(coverage=VERIFIED, is_verified=True)
    leaderboard_recompute(benchmark_version=bv)
    LeaderboardEntry.objects.filter(submission=sub).update(verification_level="discrepancy")
    leaderboard_recompute(benchmark_version=bv, agent_ids=[])
    assert _standings(bv) == {"discrepant": (None, None), "alpha": (1, 1), "beta": (2, 1)}


def _csv(client, path: str) -> list[dict]:
    response = client.get(path)
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_the_csv_and_the_api_carry_it_unranked_with_the_sites_reason(three_agents, client):
    _bv, sub = three_agents
    reason = coverage_badge(DISCREPANCY)
    assert reason.startswith("discrepancy: ") and "contradict the claims" in reason
    rows = _csv(client, f"/leaderboard.csv{Q}")
    assert [(r["agent"], r["rank"], r["tie_group"], r["ranked"]) for r in rows] == [
        ("Alpha (M1)", "1", "1", "true"), ("Beta (M2)", "2", "1", "true"),
        ("Discrepant (M0)", "", "", "false")]
    assert [r["unranked_reason"] for r in rows] == ["", "", reason]
    api = client.get(f"/api/v1/leaderboard/{Q}").json()
    assert api["count"] == 3
    assert [(r["agent"], r["rank"], r["tie_group"], r["ranked"], r["unranked_reason"])
            for r in api["results"]] == [
        ("Alpha (M1)", 1, 1, True, ""), ("Beta (M2)", 2, 1, True, ""),
        ("Discrepant (M0)", None, None, False, reason)]
    assert api["results"][2]["submission_id"] == sub.pk
    # Sorted by success, it keeps its figure and its missing rank.
    by_success = client.get(f"/api/v1/leaderboard/{Q}&sort=success").json()["results"]
    assert (by_success[0]["agent"], by_success[0]["rank"]) == ("Discrepant (M0)", None)


def test_the_page_lists_it_apart_below_the_ranked_table_with_the_reasons(three_agents, client):
    page = client.get(f"/{Q}").content.decode()
    ranked, _, apart = page.partition('data-testid="unranked"')
    assert apart, "no section of unranked rows"
    table = ranked.split('data-testid="leaderboard-table"', 1)[1]
    assert ">Alpha (M1)<" in table and ">Beta (M2)<" in table
    assert "Discrepant (M0)" not in table
    assert "Not ranked: discrepancies and reference runs" in apart
    assert ">Discrepant (M0)<" in apart and html.escape(coverage_badge(DISCREPANCY)) in apart
    assert apart.count('data-testid="unranked-row"') == 1
    # The agent's own page says so instead of a rank.
    agent = client.get(f"/agents/discrepant/{Q}").content.decode()
    assert 'data-testid="not-ranked"' in agent and "not ranked" in agent
    # Filters apply to it as to the ranked rows: "verified only" leaves it out.
    assert 'data-testid="unranked"' not in client.get(f"/{Q}&verified=1").content.decode()


def test_a_version_with_only_unranked_rows_says_so_rather_than_be_the_first(small_benchmark,
                                                                           client):
    bv, tasks = small_benchmark
    published_submission(AgentFactory(display_name="Only (M0)"), tasks, ["PPP"] * 5,
                         coverage=DISCREPANCY)
    leaderboard_recompute(benchmark_version=bv)
    page = client.get(f"/{Q}").content.decode()
    assert 'data-testid="no-ranked"' in page and 'data-testid="unranked-row"' in page
    assert 'data-testid="empty-leaderboard"' not in page


@override_settings(LEADERBOARD_PAGE_SIZE=1)
def test_the_pager_counts_ranked_rows_and_every_page_lists_the_unranked_ones(three_agents,
                                                                             client):
    first = client.get(f"/{Q}").content.decode()
    assert "1–1 of 2" in first and 'data-testid="unranked-row"' in first
    second = client.get(f"/{Q}&page=2").content.decode()
    assert ">Beta (M2)<" in second and 'data-testid="unranked-row"' in second


def test_the_verified_toggle_sits_beside_the_version_selector_and_needs_no_script(
        three_agents, client):
    page = client.get(f"/{Q}").content.decode()
    form = page.split('<form class="filters"', 1)[1].split("</form>", 1)[0]
    assert 'method="get"' in form  # the filters are the URL: no JavaScript involved
    benchmark, toggle = form.index('name="benchmark"'), form.index('name="verified"')
    assert benchmark < toggle < form.index('name="harness"')  # first after the version
    control = form[form.rindex("<label", 0, toggle):form.index("</label>", toggle)]
    assert 'type="checkbox"' in control and 'role="switch"' in control
    assert "Verified only" in control and "checked" not in control
    on = client.get(f"/{Q}&verified=1").content.decode()
    assert 'name="verified" value="1" checked' in on
