"""A claimed infrastructure error on a published submission counts as a failure everywhere until
it is confirmed; a maintainer confirms (or revokes) with a written reason, on the Moderation
controls of the submission page or with `manage.py confirm_infra`, through one service: the
leaderboard row changes in the same transaction, the change is audited, and the page, the CSVs
and the API agree (claimed and confirmed counts, per-trial infra_confirmed, by whom and why)."""

import csv
import html as htmllib
import io

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction

from leaderboard.models import LeaderboardEntry
from submissions.models import SubmissionEvent, SubmissionStatus, Trial
from submissions.services import infra_error_confirm, submission_publish
from tests.factories import AgentFactory, published_submission

Q = "?benchmark=small@1.0"
AGENT = "Flaky (M1)"
pytestmark = pytest.mark.django_db


def _csv(client, name):
    response = client.get(f"/{name}.csv{Q}")
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def _numbers(client):
    lb = {r["agent"]: r for r in _csv(client, "leaderboard")}[AGENT]
    api = {r["agent"]: r for r in client.get(f"/api/v1/leaderboard/{Q}").json()["results"]}[AGENT]
    trials = {(r["task"], int(r["attempt"])): r for r in _csv(client, "trials")
              if r["agent"] == AGENT}
    api_trials = {(r["task"], r["attempt"]): r for r in client.get(
        f"/api/v1/trials/{Q}&limit=5000").json()["results"] if r["agent"] == AGENT}
    # The CSV and the API agree on every number.
    for key in ("successes", "attempts", "infra_errors", "infra_errors_claimed",
                "infra_errors_confirmed"):
        assert int(lb[key]) == api[key], key
    assert float(lb["success_rate"]) == pytest.approx(api["success_rate"])
    for key, row in trials.items():
        a = api_trials[key]
        assert (row["outcome"], row["infra_confirmed"], row["infra_confirmed_by"],
                row["infra_confirm_reason"]) == (
            a["outcome"], "true" if a["infra_confirmed"] else "false", a["infra_confirmed_by"],
            a["infra_confirm_reason"])
    return {"successes": api["successes"], "attempts": api["attempts"],
            "rate": api["success_rate"], "claimed": api["infra_errors_claimed"],
            "confirmed": api["infra_errors_confirmed"], "trials": trials}


@pytest.fixture
def flaky(small_benchmark, django_user_model):
    bv, tasks = small_benchmark
    # Claims: two infrastructure errors (task 0 attempt 3, task 3 attempt 2), neither confirmed.
    sub = published_submission(AgentFactory(display_name=AGENT, slug="flaky"), tasks,
                               ["PPI", "FFF", "PPF", "FIF", "PPP"], infra_confirmed=False,
                               status=SubmissionStatus.VERIFIED, published_at=None)
    maintainer = django_user_model.objects.create_user("maint", is_staff=True)
    sub = submission_publish(submission=sub, actor=maintainer)
    return tasks, sub, maintainer


def test_maintainer_confirms_and_revokes_with_a_reason(client, flaky):
    tasks, sub, maintainer = flaky
    key = (tasks[0].name, 3)
    trial = Trial.objects.get(submission=sub, benchmark_task=tasks[0], attempt=3)
    before = _numbers(client)
    # Hand-checked: 2+0+2+0+3 = 7 passes over all 15 attempts (both claims count as failures).
    assert (before["successes"], before["attempts"], before["claimed"], before["confirmed"]) == (
        7, 15, 2, 0)
    assert before["rate"] == pytest.approx(7 / 15)
    assert before["trials"][key]["outcome"] == "failed"
    assert before["trials"][key]["infra_confirmed"] == "false"

    # Only a maintainer, and only with a reason.
    url = f"/submissions/{sub.pk}/trials/{trial.pk}/infra/confirm/"
    client.force_login(maintainer.__class__.objects.create_user("someone"))
    assert client.post(url, {"reason": "trust me"}).status_code in (302, 403, 404)
    client.force_login(maintainer)
    client.post(url, {"reason": "   "})
    assert not Trial.objects.get(pk=trial.pk).infra_confirmed
    page = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert page.count('data-testid="infra-claim"') == 2
    assert page.count('data-testid="infra-confirm"') == 2  # the staff controls

    reason = "Docker Hub <outage> on 2026-11-30 broke this environment's build (status page)"
    response = client.post(url, {"reason": reason})
    assert response.status_code == 302 and response["Location"].endswith("#infra")
    trial = Trial.objects.get(pk=trial.pk)
    assert (trial.outcome, trial.infra_confirmed, trial.infra_confirmed_by,
            trial.infra_confirmed_user, trial.flags) == (
        "infra_error", True, "maintainer", maintainer, [])
    event = SubmissionEvent.objects.filter(submission=sub).last()
    assert event.actor == maintainer and event.from_status == event.to_status == "published"
    assert f"infrastructure error confirmed on trial {trial.pk}" in event.note
    assert event.note.endswith(reason)
    client.logout()
    after = _numbers(client)
    # The confirmed trial leaves the denominator: 7 passes over 14 attempts.
    assert (after["successes"], after["attempts"], after["claimed"], after["confirmed"]) == (
        7, 14, 2, 1)
    assert after["rate"] == pytest.approx(0.5)
    row = after["trials"][key]
    assert (row["outcome"], row["infra_confirmed"], row["infra_confirmed_by"],
            row["infra_confirm_reason"]) == ("infra_error", "true", "maintainer", reason)
    other = after["trials"][(tasks[3].name, 2)]
    assert (other["outcome"], other["infra_confirmed"], other["infra_confirmed_by"]) == (
        "failed", "false", "")
    # The public page shows the reason (escaped), who confirmed, and the counts.
    page = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert htmllib.escape(reason) in page and "<outage>" not in page
    assert "confirmed by a maintainer: not counted" in page
    assert "2 claimed, 1 confirmed" in page
    assert 'data-testid="infra-confirm"' not in page  # no controls for the public
    api = client.get(f"/api/v1/submissions/{sub.pk}/").json()["infra_errors"]
    assert (api["claimed"], api["confirmed"]) == (2, 1)
    by_trial = {t["trial_id"]: t for t in api["trials"]}
    assert by_trial[trial.pk]["infra_confirmed_by"] == "maintainer"
    assert by_trial[trial.pk]["infra_confirm_reason"] == reason
    agent_page = client.get(f"/agents/{sub.agent.slug}/{Q}").content.decode()
    assert "2 infrastructure errors claimed, of which 1 confirmed" in agent_page
    trial_page = client.get(f"/submissions/{sub.pk}/trials/{trial.pk}/trajectory/")
    assert trial_page.status_code in (200, 404)  # no trajectory stored: no viewer

    # Revoke, with a reason: a failure again, audited, the row follows.
    client.force_login(maintainer)
    revoke = f"/submissions/{sub.pk}/trials/{trial.pk}/infra/revoke/"
    client.post(revoke, {"reason": ""})
    assert Trial.objects.get(pk=trial.pk).infra_confirmed
    client.post(revoke, {"reason": "the outage was over before this run"})
    trial = Trial.objects.get(pk=trial.pk)
    assert (trial.outcome, trial.infra_confirmed, trial.infra_confirmed_by, trial.flags) == (
        "failed", False, "", ["infra_unconfirmed"])
    assert "revoked by a maintainer: the outage was over" in trial.infra_confirm_reason
    event = SubmissionEvent.objects.filter(submission=sub).last()
    assert "confirmation revoked on trial" in event.note and event.actor == maintainer
    client.logout()
    again = _numbers(client)
    assert (again["successes"], again["attempts"], again["confirmed"]) == (7, 15, 0)


def test_the_leaderboard_row_changes_in_the_same_transaction(flaky):
    tasks, sub, maintainer = flaky
    trial = Trial.objects.get(submission=sub, benchmark_task=tasks[3], attempt=2)
    entry = LeaderboardEntry.objects.get(submission=sub)
    assert (entry.attempts, entry.infra_errors) == (15, 0)

    class Boom(Exception):
        pass

    # Everything or nothing: a failure after the service leaves trial, log and row unchanged.
    with pytest.raises(Boom), transaction.atomic():
        infra_error_confirm(trial=trial, actor=maintainer, reason="rolled back")
        assert LeaderboardEntry.objects.get(submission=sub).attempts == 14  # same transaction
        raise Boom
    assert not Trial.objects.get(pk=trial.pk).infra_confirmed
    assert LeaderboardEntry.objects.get(submission=sub).attempts == 15
    assert not SubmissionEvent.objects.filter(note__contains="rolled back").exists()


def test_confirm_infra_command(flaky, capsys):
    tasks, sub, maintainer = flaky
    trial = Trial.objects.get(submission=sub, benchmark_task=tasks[3], attempt=2)
    passed = Trial.objects.get(submission=sub, benchmark_task=tasks[0], attempt=1)
    with pytest.raises(CommandError, match="only a trial the submission reports"):
        call_command("confirm_infra", str(passed.pk), "--reason", "no")
    with pytest.raises(CommandError, match="no trial"):
        call_command("confirm_infra", "999999", "--reason", "no")
    with pytest.raises(CommandError, match="needs a written reason"):
        call_command("confirm_infra", str(trial.pk), "--reason", " ")
    call_command("confirm_infra", str(trial.pk), "--reason", "engine restarted mid-trial")
    assert "infra_confirmed=True outcome=infra_error" in capsys.readouterr().out
    entry = LeaderboardEntry.objects.get(submission=sub)
    assert (entry.successes, entry.attempts, entry.infra_errors, entry.infra_errors_claimed) == (
        7, 14, 1, 2)
    assert SubmissionEvent.objects.filter(submission=sub, note__contains="engine restarted",
                                          actor=None).exists()
    with pytest.raises(CommandError, match="already confirmed"):
        call_command("confirm_infra", str(trial.pk), "--reason", "twice")
    call_command("confirm_infra", str(trial.pk), "--revoke", "--reason", "wrong trial")
    entry = LeaderboardEntry.objects.get(submission=sub)  # rows are rebuilt, not updated
    assert (entry.attempts, entry.infra_errors) == (15, 0)
