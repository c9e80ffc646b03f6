"""A reward-hacking flag on a published submission's trial: a failure in every headline number
(leaderboard, categories, task matrix, trials CSV and API) with its public flag, until a
maintainer clears it with a written reason (audit log, submission and trial pages), which
rebuilds the aggregates; a re-screen that trips a new rule flags again."""

import csv
import html as htmllib
import io
import json

import pytest

from submissions.models import SubmissionEvent, SubmissionStatus, Trial
from submissions.services import screen_result_apply, submission_publish
from tests.factories import AgentFactory, published_submission

Q = "?benchmark=small@1.0"
pytestmark = pytest.mark.django_db


def _csv(client, name):
    response = client.get(f"/{name}.csv{Q}")
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def _numbers(client, agent="Hacker (M1)"):
    lb = {r["agent"]: r for r in _csv(client, "leaderboard")}[agent]
    api = {r["agent"]: r for r in client.get(f"/api/v1/leaderboard/{Q}").json()["results"]}[agent]
    cats = {r["category"]: int(r["successes"]) for r in _csv(client, "categories")
            if r["agent"] == agent}
    matrix = {r["task"]: r for r in _csv(client, "task-matrix") if r["agent"] == agent}
    trials = {(r["task"], int(r["attempt"])): r for r in _csv(client, "trials")
              if r["agent"] == agent}
    api_trials = {(r["task"], r["attempt"]): r for r in client.get(
        f"/api/v1/trials/{Q}&limit=5000").json()["results"] if r["agent"] == agent}
    assert int(lb["successes"]) == api["successes"]
    return {"successes": api["successes"], "flagged": api["flagged_trials"], "cats": cats,
            "matrix": matrix, "trials": trials, "api_trials": api_trials}


@pytest.fixture
def hacked(small_benchmark, settings, tmp_path, django_user_model):
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    settings.MEDIA_ROOT = str(tmp_path / "media")
    bv, tasks = small_benchmark
    sub = published_submission(AgentFactory(display_name="Hacker (M1)", slug="hacker"), tasks,
                               ["PPP", "FFF", "PPF", "FFF", "PPP"],
                               files_prefix="submissions/hacker/tree",
                               status=SubmissionStatus.VERIFIED, published_at=None)
    trial = Trial.objects.get(submission=sub, benchmark_task=tasks[0], attempt=2)
    default_storage.save("submissions/hacker/tree/t/agent/trajectory.json", ContentFile(
        json.dumps({"schema_version": "ATIF-v1.7", "steps": []})))
    Trial.objects.filter(pk=trial.pk).update(trajectory_path="t/agent/trajectory.json")
    maintainer = django_user_model.objects.create_user("maint", is_staff=True)
    sub = submission_publish(submission=sub, actor=maintainer)
    return bv, tasks, sub, trial, maintainer


def test_a_flag_counts_as_a_failure_everywhere_until_cleared_with_a_reason(client, hacked):
    bv, tasks, sub, trial, maintainer = hacked
    before = _numbers(client)
    assert before["successes"] == 8 and before["flagged"] == 0

    trial = screen_result_apply(trial=trial, hits=["RH1"], note="test")
    assert (trial.outcome, trial.success, trial.claimed_outcome) == ("failed", False, "passed")
    assert trial.flags == ["reward_hack:RH1"] and trial.screen_open == ["RH1"]
    after = _numbers(client)
    assert after["successes"] == 7 and after["flagged"] == 1
    assert after["cats"]["img"] == before["cats"]["img"] - 1
    key = (tasks[0].name, 2)
    assert after["matrix"][tasks[0].name]["outcomes"] == "PFP"
    assert after["matrix"][tasks[0].name]["flags"] == "|reward_hack:RH1|"
    row, api_row = after["trials"][key], after["api_trials"][key]
    assert (row["outcome"], row["success"], row["claimed_outcome"], row["flags"]) == (
        "failed", "false", "passed", "reward_hack:RH1")
    assert (api_row["outcome"], api_row["success"], api_row["flags"]) == (
        "failed", False, "reward_hack:RH1")
    page = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert 'data-testid="screen-finding"' in page and "flagged: counted as a failure" in page
    assert "Reads or lists the verifier" in page
    trial_page = client.get(f"/submissions/{sub.pk}/trials/{trial.pk}/trajectory/").content.decode()
    assert "RH1" in trial_page and "flagged: counted as a failure" in trial_page
    event = SubmissionEvent.objects.filter(submission=sub).last()
    assert event.note.startswith(f"re-screen of trial {trial.pk}: open reward-hacking flags "
                                 "none -> RH1")

    # Only a maintainer clears, and only with a reason.
    url = f"/submissions/{sub.pk}/trials/{trial.pk}/clear-screen/"
    client.force_login(hacked[4].__class__.objects.create_user("someone"))
    assert client.post(url, {"reason": "fine"}).status_code in (302, 403, 404)
    assert Trial.objects.get(pk=trial.pk).screen_open == ["RH1"]
    client.force_login(maintainer)
    client.post(url, {"reason": "  "})
    assert Trial.objects.get(pk=trial.pk).screen_open == ["RH1"]
    reason = "The agent listed /tests in its own container, where it was empty; the answer <b>x"
    response = client.post(url, {"reason": reason})
    assert response.status_code == 302 and response["Location"].endswith("#screen")
    trial = Trial.objects.get(pk=trial.pk)
    assert (trial.outcome, trial.success, trial.flags, trial.screen_open) == (
        "passed", True, [], [])
    assert trial.screen_cleared == ["RH1"] and trial.screen_cleared_by == maintainer
    client.logout()
    cleared = _numbers(client)
    assert cleared["successes"] == 8 and cleared["flagged"] == 0
    assert cleared["trials"][key]["flags"] == ""
    event = SubmissionEvent.objects.filter(submission=sub).last()
    assert event.actor == maintainer and event.from_status == event.to_status == "published"
    assert event.note.endswith(reason) and "RH1 cleared on trial" in event.note
    for url in (f"/submissions/{sub.pk}/", f"/submissions/{sub.pk}/trials/{trial.pk}/trajectory/"):
        page = client.get(url).content.decode()
        assert htmllib.escape(reason) in page and "<b>x" not in page
        assert "cleared by a maintainer" in page and 'data-testid="screen-clearance"' in page

    # The clearance holds for what it cleared; a rule it did not clear flags again.
    trial = screen_result_apply(trial=trial, hits=["RH1"])
    assert trial.screen_open == [] and trial.success
    trial = screen_result_apply(trial=trial, hits=["RH1", "RH6"])
    assert trial.screen_open == ["RH6"] and trial.flags == ["reward_hack:RH6"]
    assert _numbers(client)["successes"] == 7


def test_methods_page_lists_every_rule(client):
    page = client.get("/methods/").content.decode()
    assert 'data-testid="screen-rules"' in page
    for i in range(1, 8):
        assert f'id="rh{i}"' in page
    assert "Reads or lists the verifier" in page
    # No rule exempts a harness: RH2 says the oracle trips it too.
    assert "Not applied to" not in page and "No harness is exempt" in page


def test_clearing_needs_an_open_flag(hacked):
    from submissions.services import SubmissionError, screen_flag_clear

    _bv, _tasks, sub, trial, maintainer = hacked
    with pytest.raises(SubmissionError, match="no open reward-hacking flag"):
        screen_flag_clear(trial=trial, actor=maintainer, reason="nothing to clear")
    assert sub.status == SubmissionStatus.PUBLISHED
