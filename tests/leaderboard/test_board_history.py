"""The board as it stood (``?as_of=``): a publish, a re-grade and a withdrawal on three days,
each day's board read back from the page, the CSV and the API, with hand-checked figures, and
the rank change a month later. Alpha is 8/15 (53.3%) and Beta 2/14 (14.3%) (conftest)."""

from __future__ import annotations

import csv
import datetime as dt
import io

from django.contrib.auth import get_user_model

from leaderboard import history
from leaderboard.models import LeaderboardSnapshot
from leaderboard.services import leaderboard_recompute
from submissions.models import Outcome, Submission, Trial
from submissions.services import submission_withdraw

D1, D2, D3 = dt.date(2026, 9, 1), dt.date(2026, 9, 11), dt.date(2026, 9, 21)


def _days(two_agents):
    """Day 1: both published. Day 2: a re-grade turns 10 of Beta's failures into passes
    (12/14 = 85.7%: Beta leads). Day 3: Alpha is withdrawn."""
    bv, _tasks, alpha, beta = two_agents
    leaderboard_recompute(benchmark_version=bv)
    assert history.snapshot_take(benchmark_version_id=bv.pk, day=D1)
    assert not history.snapshot_take(benchmark_version_id=bv.pk, day=D1)  # unchanged: no write
    failed = Trial.objects.filter(submission__agent=beta, outcome=Outcome.FAILED)
    Trial.objects.filter(pk__in=list(failed.values_list("pk", flat=True)[:10])).update(
        outcome=Outcome.PASSED, success=True, verified_reward=1.0)
    leaderboard_recompute(benchmark_version=bv)
    assert history.snapshot_take(benchmark_version_id=bv.pk, day=D2)
    staff = get_user_model().objects.create_user("maint", is_staff=True)
    submission_withdraw(submission=Submission.objects.get(agent=alpha), actor=staff,
                        reason="withdrawn by its team")
    assert history.snapshot_take(benchmark_version_id=bv.pk, day=D3)
    return bv


def _page_rows(client, bv, day):
    html = client.get(f"/?benchmark={bv.slug}&as_of={day}").content.decode()
    table = html.split('data-testid="as-of-table"')[1].split("</tbody>")[0]
    return [row.split("</th>")[0].split(">")[-1]
            for row in table.split('<th scope="row">')[1:]], html


def test_each_day_shows_its_own_rows_ranks_and_figures(client, two_agents):
    bv = _days(two_agents)
    assert LeaderboardSnapshot.objects.filter(benchmark_version=bv).count() == 3
    agents, html = _page_rows(client, bv, D1)
    assert agents == ["Alpha (M1)", "Beta (M2)"] and "53.3%" in html and "14.3%" in html
    assert "from the board recorded on 2026-09-01" in html
    agents, html = _page_rows(client, bv, D2 + dt.timedelta(days=3))  # a day with no change
    assert agents == ["Beta (M2)", "Alpha (M1)"] and "85.7%" in html
    assert "from the board recorded on 2026-09-11" in html
    agents, _ = _page_rows(client, bv, D3)
    assert agents == ["Beta (M2)"]


def test_a_day_before_the_history_says_where_it_starts(client, two_agents):
    bv = _days(two_agents)
    html = client.get(f"/?benchmark={bv.slug}&as_of=2026-08-01").content.decode()
    assert "No board of small@1.0 was recorded on or before 2026-08-01" in html
    assert "its history starts on" in html and "as_of=2026-09-01" in html
    assert client.get(f"/?benchmark={bv.slug}&as_of=yesterday").status_code == 404


def test_the_csv_and_the_api_read_the_same_day(client, two_agents):
    bv = _days(two_agents)
    response = client.get(f"/leaderboard.csv?benchmark={bv.slug}&as_of={D1}")
    assert response.status_code == 200
    assert "leaderboard-as-of-2026-09-01.csv" in response["Content-Disposition"]
    body = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert [(r["rank"], r["agent"], r["success_rate"]) for r in rows] == [
        ("1", "Alpha (M1)", "0.533333"), ("2", "Beta (M2)", "0.142857")]
    api = client.get(f"/api/v1/leaderboard/?benchmark={bv.slug}&as_of={D2}").json()
    assert api["count"] == 2
    assert [(r["rank"], r["agent"], round(r["success_rate"], 6)) for r in api["results"]] == [
        (1, "Beta (M2)", 0.857143), (2, "Alpha (M1)", 0.533333)]
    assert client.get(f"/api/v1/leaderboard/?benchmark={bv.slug}&as_of=2026-13-01"
                      ).status_code == 400


def test_the_rank_change_compares_with_the_board_a_month_before(two_agents):
    bv = _days(two_agents)
    _bv, _tasks, alpha, beta = two_agents
    # On day 1 + 30 the board of day 1 (Alpha 1st, Beta 2nd) meets day 3's (Beta 1st).
    assert history.rank_changes(bv, today=D1 + dt.timedelta(days=30)) == {beta.pk: 1}
    assert history.rank_changes(bv, today=D2) == {}  # no board a month before day 2
