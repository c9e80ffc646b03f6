"""One truth per trial: a published submission whose claims the site's checks contradict shows
the site's outcome on every public route and in every CSV and API row, the claim beside it, and
its flags; and every per-trial view adds up to the aggregates."""

import csv
import html as htmllib
import io
import json
import re
from collections import Counter, defaultdict

import pytest

from leaderboard.services import leaderboard_recompute
from submissions.models import SubmissionStatus, Trial
from submissions.models import coverage_badge, is_flagged
from submissions.services import (
    submission_verdict_record,
    submission_publish,
    trial_check_record,
)
from tests.factories import AgentFactory, published_submission

Q = "?benchmark=small@1.0"
# Claims per task (5 tasks x 3 attempts); the site's re-grades below contradict four of them.
CLAIMS = ["PPP", "FFF", "PPF", "FTE", "PPP"]
# (task index, attempt) -> (site re-grade, flag): two claimed passes fail, one claimed failure
# passes, a timeout whose output passes stays a timeout (it is flagged), and one pass is not
# replayable (flagged, outcome unchanged).
CHECKS = {(0, 1): (0.0, "regrade_mismatch"), (2, 2): (0.0, "regrade_mismatch"),
          (1, 3): (1.0, "regrade_mismatch"), (3, 2): (1.0, "regrade_mismatch")}
SITE = {"passed": "P", "failed": "F", "timeout": "T", "agent_error": "E", "infra_error": "I"}


@pytest.fixture
def published(small_benchmark, settings, tmp_path, django_user_model):
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    settings.MEDIA_ROOT = str(tmp_path / "media")
    bv, tasks = small_benchmark
    honest = published_submission(AgentFactory(display_name="Honest (M0)", slug="honest"),
                                  tasks, ["PFF", "FFF", "PPP", "FFF", "PFF"])
    sub = published_submission(AgentFactory(display_name="Mixed (M1)", slug="mixed"), tasks,
                               CLAIMS, status=SubmissionStatus.DISCREPANCY, published_at=None,
                               files_prefix="submissions/mixed/tree")
    for t in Trial.objects.filter(submission__in=[honest, sub]):
        trial_check_record(trial_id=t.pk, flag="regrade_mismatch", on=False,
                           verified_reward=t.reward)
    trials = {(tasks.index(t.benchmark_task), t.attempt): t
              for t in Trial.objects.filter(submission=sub).select_related("benchmark_task")}
    for key, (reward, flag) in CHECKS.items():
        trial_check_record(trial_id=trials[key].pk, flag=flag, on=True, verified_reward=reward)
    trial_check_record(trial_id=trials[4, 1].pk, flag="not_replayable", on=True)
    # None of the honest agent's trajectories could be replayed: states, not findings.
    for t in Trial.objects.filter(submission=honest):
        trial_check_record(trial_id=t.pk, flag="not_replayable", on=True)
    leaderboard_recompute(benchmark_version=bv)  # the honest agent's row (Mixed is published below)
    # The first mismatched trial has a trajectory, for the viewer.
    default_storage.save("submissions/mixed/tree/job/t1/agent/trajectory.json",
                         ContentFile(json.dumps({"schema_version": "ATIF-v1.7", "steps": []})))
    Trial.objects.filter(pk=trials[0, 1].pk).update(
        trajectory_path="job/t1/agent/trajectory.json")
    submission_verdict_record(submission_id=sub.pk)
    maintainer = django_user_model.objects.create_user("m", is_staff=True)
    submission_publish(submission=sub, actor=maintainer)
    return bv, tasks, sub, trials


def _csv(client, name):
    response = client.get(f"/{name}.csv{Q}")
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def _spans(html: str, marker: str) -> list[tuple[str, str, str]]:
    """(site, claimed, flags) of every outcome span after ``marker`` in a page."""
    part = html.split(marker, 1)[1] if marker else html
    return re.findall(r'data-outcome="([^"]*)" data-claimed="([^"]*)" data-flags="([^"]*)"', part)


def _site_code(v: str) -> str:
    return SITE.get(v, v)


def test_every_public_view_of_a_trial_shows_the_sites_outcome_and_adds_up(client, published):
    bv, tasks, sub, trials = published
    db = {k: (t.outcome, t.claimed_outcome, t.flags) for k, t in
          ((k, Trial.objects.get(pk=t.pk)) for k, t in trials.items())}
    # The site's outcomes: checks applied to the claims.
    assert db[0, 1][:2] == ("failed", "passed") and db[1, 3][:2] == ("passed", "failed")
    assert db[3, 2][:2] == ("timeout", "timeout") and db[4, 1] == ("passed", "passed",
                                                                    ["not_replayable"])
    site_successes = sum(o == "passed" for o, _, _ in db.values())
    claimed_successes = sum(c == "passed" for _, c, _ in db.values())
    # "Flagged" counts findings against the claim: the not-replayable pass (4, 1) has a flag
    # that says what could not be checked, shown with the trial but not counted.
    flagged = sum(is_flagged(f) for _, _, f in db.values())
    assert sum(bool(f) for _, _, f in db.values()) == 5
    assert (site_successes, claimed_successes, flagged) == (7, 8, 4)

    # /trials.csv and /api/v1/trials/: the same rows; outcome/success are the site's.
    csv_rows = [r for r in _csv(client, "trials") if r["agent"] == "Mixed (M1)"]
    api = client.get(f"/api/v1/trials/{Q}&limit=5000").json()["results"]
    api_rows = [r for r in api if r["agent"] == "Mixed (M1)"]
    assert len(csv_rows) == len(api_rows) == 15
    for c, a in zip(csv_rows, api_rows, strict=True):
        key = ([t.name for t in tasks].index(c["task"]), int(c["attempt"]))
        outcome, claimed, flags = db[key]
        assert (c["outcome"], c["claimed_outcome"], c["flags"]) == (
            outcome, claimed, ";".join(flags))
        assert (a["outcome"], a["claimed_outcome"], a["flags"]) == (
            outcome, claimed, ";".join(flags))
        assert c["success"] == ("true" if outcome == "passed" else "false")
        assert a["success"] is (outcome == "passed")
        assert a["claimed_success"] is (claimed == "passed")
        assert a["verification_level"] == c["verification_level"] == "re-graded"
        assert a["submission"] == sub.pk and a["verified_reward"] is not None
    mismatched = next(r for r in api_rows if r["task"] == tasks[0].name and r["attempt"] == 1)
    assert (mismatched["outcome"], mismatched["success"], mismatched["claimed_outcome"],
            mismatched["claimed_success"], mismatched["claimed_reward"],
            mismatched["verified_reward"], mismatched["flags"]) == (
        "failed", False, "passed", True, 1.0, 0.0, "regrade_mismatch")

    # Leaderboard (CSV, API, page): successes are the per-trial site successes.
    lb_csv = {r["agent"]: r for r in _csv(client, "leaderboard")}["Mixed (M1)"]
    lb_api = {r["agent"]: r for r in client.get(f"/api/v1/leaderboard/{Q}").json()["results"]}["Mixed (M1)"]
    assert int(lb_csv["successes"]) == lb_api["successes"] == site_successes == sum(
        r["success"] == "true" for r in csv_rows)
    assert int(lb_csv["attempts"]) == lb_api["attempts"] == 15
    assert lb_api["claimed_successes"] == claimed_successes
    assert lb_api["flagged_trials"] == int(lb_csv["flagged_trials"]) == flagged
    # An honest agent whose 15 trials are all "not replayable" is not "15 flagged" anywhere.
    honest_api = {r["agent"]: r for r in client.get(f"/api/v1/leaderboard/{Q}").json()[
        "results"]}["Honest (M0)"]
    honest_csv = {r["agent"]: r for r in _csv(client, "leaderboard")}["Honest (M0)"]
    assert honest_api["flagged_trials"] == int(honest_csv["flagged_trials"]) == 0
    honest_row = client.get(f"/{Q}").content.decode().split(">Honest (M0)<", 1)[1].split(
        "</tr>", 1)[0]
    assert "flagged" not in honest_row
    assert all(r["flags"] == "not_replayable" for r in _csv(client, "trials")
               if r["agent"] == "Honest (M0)")  # the state is still shown with each trial
    # The badge: the same text on the row (CSV, API, page), the agent page and the status page.
    sub.refresh_from_db()
    badge = coverage_badge(sub.coverage)
    assert badge == ("discrepancy: re-graded 15/15, reproduced 0/15, re-run 0/15 counted trials; "
                     "the site's checks contradict the claims (4 trials flagged)")
    assert lb_csv["badge"] == lb_api["badge"] == badge
    assert lb_api["verification_level"] == "discrepancy" and lb_api["verified"] is False
    assert (lb_api["regraded_trials"], lb_api["reproduced_trials"], lb_api["counted_trials"]) == (
        15, 0, 15)
    shown = htmllib.escape(badge)
    assert shown in client.get(f"/agents/mixed/{Q}").content.decode()
    assert shown in client.get(f"/submissions/{sub.pk}/").content.decode()
    page = client.get(f"/{Q}").content.decode()
    assert shown in page
    assert f"{site_successes}/15 (claimed {claimed_successes})" in page
    assert f"{flagged} flagged" in page

    # Categories (CSV and API): per-category sums of the per-trial rows.
    per_cat = defaultdict(int)
    for r in csv_rows:
        per_cat[r["category"]] += r["success"] == "true"
    cat_csv = {r["category"]: int(r["successes"]) for r in _csv(client, "categories")
               if r["agent"] == "Mixed (M1)"}
    cat_api = {r["category"]: r["successes"] for r in client.get(f"/api/v1/categories/{Q}").json()
               if r["agent"] == "Mixed (M1)"}
    assert cat_csv == cat_api == dict(per_cat)

    # Task matrix CSV: outcome codes per task are the per-trial rows in attempt order.
    by_task = defaultdict(list)
    for r in csv_rows:
        by_task[r["task"]].append((int(r["attempt"]), r))
    matrix = {r["task"]: r for r in _csv(client, "task-matrix") if r["agent"] == "Mixed (M1)"}
    for task, rows in by_task.items():
        rows = [r for _, r in sorted(rows, key=lambda x: x[0])]
        assert matrix[task]["outcomes"] == "".join(_site_code(r["outcome"]) for r in rows)
        assert matrix[task]["claimed_outcomes"] == "".join(
            _site_code(r["claimed_outcome"]) for r in rows)
        assert matrix[task]["flags"] == "|".join(r["flags"] for r in rows)
        assert int(matrix[task]["successes"]) == sum(r["success"] == "true" for r in rows)

    # Tasks CSV: solved attempts per task = site successes of every ranked agent.
    all_rows = _csv(client, "trials")
    solved = Counter(r["task"] for r in all_rows if r["success"] == "true")
    for r in _csv(client, "tasks"):
        assert int(r["solved_attempts"]) == solved[r["task"]]

    # Task matrix page and agent page: the same codes, the claim, the flags.
    expected = [(_site_code(db[i, a][0]), _site_code(db[i, a][1]), ";".join(db[i, a][2]))
                for i in range(5) for a in (1, 2, 3)]
    html = client.get(f"/task-matrix/{Q}").content.decode()
    mixed_row = html.split('>Mixed (M1)</a>', 1)[1].split("</tr>", 1)[0]
    assert _spans(mixed_row, "") == expected
    agent_html = client.get(f"/agents/mixed/{Q}").content.decode()
    assert _spans(agent_html, 'data-testid="agent-tasks"') == expected
    assert f"{site_successes}/15 as the site graded them" in agent_html

    # Task pages: every attempt of the agent, as the site counts it.
    for i, t in enumerate(tasks):
        task_html = client.get(f"/tasks/{t.name}/{Q}").content.decode()
        row_spans = [s for row in task_html.split("<tr>") if "Mixed (M1)" in row
                     for s in _spans(row, "")]
        assert row_spans == [(db[i, a][0], db[i, a][1], ";".join(db[i, a][2]))
                             for a in (1, 2, 3)]
        assert ("(claimed passed)" in task_html) == any(
            db[i, a][0] != db[i, a][1] and db[i, a][1] == "passed" for a in (1, 2, 3))

    # The public status page and the trajectory viewer.
    status_html = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert _spans(status_html, 'data-testid="trials"') == [
        (db[i, a][0], db[i, a][1], ";".join(db[i, a][2])) for i in range(5) for a in (1, 2, 3)]
    viewer = client.get(f"/submissions/{sub.pk}/trials/{trials[0, 1].pk}/trajectory/")
    assert viewer.status_code == 200
    viewer_html = viewer.content.decode()
    assert _spans(viewer_html, 'data-testid="trial-outcome"')[0] == (
        "failed", "passed", "regrade_mismatch")
    assert "(claimed passed)" in viewer_html


def test_the_status_pages_cost_footnote_appears_only_beside_a_computed_cost(client, small_benchmark):
    """"* cost computed from tokens" explains an asterisk; a page with no asterisk has no
    footnote (it used to be printed under every trial table)."""
    bv, tasks = small_benchmark
    sub = published_submission(AgentFactory(slug="c"), tasks[:1], ["PF"])
    page = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert 'data-testid="cost-computed-note"' not in page and "$1.00*" not in page
    Trial.objects.filter(submission=sub, attempt=2).update(cost_computed=True)
    page = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert 'data-testid="cost-computed-note"' in page
    rows = page.split('data-testid="trials"', 1)[1].split("</table>", 1)[0]
    assert rows.count("$1.00* · ") == 1  # the reported cost cell, before the time
