""""Verified" means the site re-ran the agent, and the verdict follows the trials.

* Levels, strongest first: re-run > reproduced > re-graded > claimed; "verified" only with a
  re-run that agrees, every counted trial re-graded, every counted pass reproduced or re-run,
  no open flag. Reproduced passes without a re-run are "consistent", never "verified".
* The verdict is one function of the trials' current state: a re-screen that flags a published
  pass turns the badge to "discrepancy" in the same transaction as the aggregates, and a
  maintainer's clearance turns both back.
* The re-run order is fixed by an HMAC under the site secret and published only as a
  commitment until the verdict; `check --deploy` refuses the default secret.
"""

import hashlib
import json

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from leaderboard.models import LeaderboardEntry
from submissions.models import (
    CheckKind,
    CheckStatus,
    JobPurpose,
    JobStatus,
    SubmissionStatus,
    Trial,
    TrialCheck,
    VerificationJob,
    VerificationLevel,
    coverage_badge,
)
from submissions.services import (
    screen_flag_clear,
    screen_result_apply,
    submission_publish,
    submission_verdict_record,
)
from submissions.verification import rerun_commit, rerun_reveal
from submissions.verification.checks import job_config
from submissions.verification.checks.rerun import rerun_state
from submissions.verification.design import mcnemar_p_value as paired_inflation_p
from submissions.verification.sample import commitment, sample_order
from tests.factories import AgentFactory, published_submission

Q = "?benchmark=small@1.0"
pytestmark = pytest.mark.django_db


def _verified_by_rerun(tasks, settings, *, first=5, per_task=3, rerun_pass=True,
                       level=VerificationLevel.REPRODUCED, floor=0.0):
    """A submission whose 15 trials were re-graded (all agree), every pass at ``level``, and a
    done verification job that re-ran what the design queued (``first`` tasks of the secret
    order, ``per_task`` trials each), passing as graded or (``rerun_pass`` False) failing.
    ``floor``: the power floor; 0 by default here (an operator's choice), because no design on
    five tasks reaches the default's (test_five_tasks_are_underpowered_under_the_default_floor)."""
    settings.VERIFICATION_RERUN_FIRST_TASKS = first
    settings.VERIFICATION_RERUN_PER_TASK = per_task
    settings.VERIFICATION_RERUN_MAX_TRIALS = first * per_task
    settings.VERIFICATION_RERUN_POWER_FLOOR = floor
    sub = published_submission(AgentFactory(display_name="Rerun (M1)", slug="rerun"), tasks,
                               ["PPP", "PPF", "FFF", "PFF", "PPP"],
                               status=SubmissionStatus.CONSISTENT, published_at=None)
    trials = Trial.objects.filter(submission=sub)
    for t in trials:
        Trial.objects.filter(pk=t.pk).update(
            verified_reward=1.0 if t.success else 0.0,
            verification_level=level if t.success else VerificationLevel.REGRADED)
    rerun_commit(submission_id=sub.pk)
    job = VerificationJob.objects.create(submission=sub, attempt=1, status=JobStatus.DONE,
                                         purpose=JobPurpose.VERIFY, config=job_config())
    state, _pks = rerun_state(job)
    by_name = {t.name: t for t in tasks}
    for group in state.queue():
        for t in group:
            ok = t.passed if rerun_pass else False
            TrialCheck.objects.create(
                job=job, kind=CheckKind.RERUN, benchmark_task=by_name[t.task],
                sample_index=t.attempt, status=CheckStatus.MATCH if ok else CheckStatus.MISMATCH,
                verified_reward=1.0 if ok else 0.0, claimed_reward=1.0 if t.passed else 0.0)
    return sub, job


def test_levels_rank_rerun_first_and_say_what_they_prove():
    from submissions.models import LEVEL_DEFINITIONS, LEVEL_ORDER

    ranked = sorted(LEVEL_DEFINITIONS, key=lambda lv: -LEVEL_ORDER[lv])
    assert [str(v) for v in ranked[:4]] == ["re-run", "reproduced", "re-graded", "claimed"]
    assert "not authorship" in LEVEL_DEFINITIONS[VerificationLevel.REPRODUCED]
    assert "its own key" in LEVEL_DEFINITIONS[VerificationLevel.RERUN]


def test_the_methods_page_defines_every_level_and_verdict(client):
    page = client.get("/methods/").content.decode()
    for word in ("re-run", "reproduced", "re-graded", "claimed", "verified", "consistent",
                 "discrepancy"):
        assert f"<dt><strong>{word}</strong></dt>" in page
    assert "consistency, not authorship" in page
    assert 'data-testid="checks"' in page and "Infrastructure re-attempt" in page


def test_reproduced_passes_without_a_rerun_are_consistent_never_verified(small_benchmark,
                                                                        settings):
    bv, tasks = small_benchmark
    sub, job = _verified_by_rerun(tasks, settings)
    TrialCheck.objects.filter(job=job).delete()  # no re-run at all
    cov = submission_verdict_record(submission_id=sub.pk, job=job)
    assert cov["verdict"] == "consistent"
    assert coverage_badge(cov) == (
        "consistent, not verified: re-graded 15/15, reproduced 9/15, re-run 0/15 counted "
        "trials; not re-run by the site (re-run not configured)")


def test_five_tasks_are_underpowered_under_the_default_floor(small_benchmark, settings):
    """Every trial of five tasks re-run and agreeing is still not "verified" at the default
    floor: no design on five tasks detects a 15-point inflation half the time."""
    bv, tasks = small_benchmark
    sub, job = _verified_by_rerun(tasks, settings, floor=0.5)
    cov = submission_verdict_record(submission_id=sub.pk, job=job)
    assert cov["verdict"] == "consistent" and cov["rerun"] == 9, cov
    badge = coverage_badge(cov)
    assert "re-run underpowered: the site's design detects a 15-point inflation" in badge
    assert "(the site requires 50%; 3 re-runs per task, at most 15 re-run trials)" in badge


def test_two_reruns_never_verify(small_benchmark, settings):
    """The red-team's case: a sample of two re-runs, both agreeing, at the default floor."""
    bv, tasks = small_benchmark
    sub, job = _verified_by_rerun(tasks, settings, first=2, per_task=1, floor=0.5)
    cov = submission_verdict_record(submission_id=sub.pk, job=job)
    assert cov["verdict"] == "consistent"
    assert any(w.startswith("re-run underpowered") for w in cov["not_verified_because"])


def test_a_rerun_that_agrees_verifies(small_benchmark, settings):
    bv, tasks = small_benchmark
    sub, job = _verified_by_rerun(tasks, settings)  # every trial re-run, as claimed
    cov = submission_verdict_record(submission_id=sub.pk, job=job)
    assert cov["verdict"] == "verified", cov
    # Only the nine passes reach the level re-run: a failing re-run vouches for nothing.
    assert (cov["rerun"], cov["reproduced"], cov["passes"]) == (9, 0, 9)
    assert coverage_badge(cov) == (
        "verified: re-graded 15/15, reproduced 0/15, re-run 9/15 counted trials; the site "
        "re-ran the agent and it agrees with the site's grading; every counted pass (9) "
        "reproduced or re-run")


def test_a_rerun_attempt_covers_only_the_trial_it_reproduces(small_benchmark, settings):
    bv, tasks = small_benchmark
    sub, job = _verified_by_rerun(tasks, settings, first=2, per_task=1)
    cov = submission_verdict_record(submission_id=sub.pk, job=job)
    rerun = set(Trial.objects.filter(submission=sub, verification_level="re-run")
                .values_list("benchmark_task__name", "attempt"))
    state, _pks = rerun_state(job)
    queued = {t.key for group in state.queue() for t in group}
    assert rerun == {t.key for group in state.queue() for t in group if t.passed}
    assert rerun <= queued and len(queued) == 2
    # The other passes were reproduced: every counted pass is covered, and the re-run agrees.
    assert cov["rerun"] == len(rerun) and cov["verdict"] == "verified", cov


def test_claimed_passes_that_fail_when_rerun_are_a_discrepancy(small_benchmark, settings):
    bv, tasks = small_benchmark
    sub, job = _verified_by_rerun(tasks, settings, rerun_pass=False)
    # Every re-run fails. Per task (claims PPP, PPF, FFF, PFF, PPP), the chance that 3 fresh
    # attempts all fail given the task's totals: 1/20, 1/5, 1, 1/2, 1/20 -> p = 1/4000.
    from submissions.verification.checks.rerun import rerun_statistics

    stats = rerun_statistics(job)
    assert stats["p_value"] == pytest.approx(1 / 4000) and stats["decision"] == "inflated"
    cov = submission_verdict_record(submission_id=sub.pk, job=job)
    assert cov["verdict"] == "discrepancy" and cov["rerun_contradicts"]
    assert coverage_badge(cov).endswith(
        "the re-run succeeds significantly less often than the site's grading)")
    assert paired_inflation_p(5, 0) == pytest.approx(1 / 32)  # McNemar's view of the same


def test_paired_exact_test_hand_checked():
    assert paired_inflation_p(0, 0) == 1.0
    assert paired_inflation_p(0, 4) == 1.0
    assert paired_inflation_p(3, 0) == pytest.approx(0.125)
    # b=6, c=1: P(X >= 6 | n=7) = (7 + 1) / 128
    assert paired_inflation_p(6, 1) == pytest.approx(8 / 128)
    assert paired_inflation_p(2, 2) == pytest.approx(11 / 16)


def test_a_rescreen_flag_and_its_clearance_move_badge_and_aggregates_together(
        small_benchmark, client, django_user_model, settings):
    bv, tasks = small_benchmark
    sub, job = _verified_by_rerun(tasks, settings)
    submission_verdict_record(submission_id=sub.pk, job=job)
    sub.refresh_from_db()
    assert sub.status == "verified"
    maintainer = django_user_model.objects.create_user("maint", is_staff=True)
    submission_publish(submission=sub, actor=maintainer)

    def row():
        api = {r["agent"]: r for r in client.get(f"/api/v1/leaderboard/{Q}").json()["results"]}
        return api["Rerun (M1)"]

    before = row()
    assert (before["successes"], before["verification_level"], before["verified"]) == (
        9, "verified", True)
    trial = Trial.objects.get(submission=sub, benchmark_task=tasks[0], attempt=1)
    screen_result_apply(trial=trial, hits=["RH1"], note="rules v-test")  # manage.py screen_trials
    flagged = row()
    assert (flagged["successes"], flagged["verification_level"], flagged["verified"]) == (
        8, "discrepancy", False)
    assert flagged["badge"].startswith("discrepancy: ") and "1 trial flagged" in flagged["badge"]
    screen_flag_clear(trial=trial, actor=maintainer, reason="reads its own notes, not answers")
    cleared = row()
    assert (cleared["successes"], cleared["verification_level"], cleared["verified"]) == (
        9, "verified", True)
    assert cleared["badge"] == before["badge"]
    assert LeaderboardEntry.objects.get(submission=sub).verified


def test_the_sample_is_secret_committed_and_revealed(small_benchmark, settings, client,
                                                    django_user_model):
    bv, tasks = small_benchmark
    settings.VERIFICATION_SAMPLE_SECRET = "site-secret-one"
    sub, job = _verified_by_rerun(tasks, settings)
    owner = django_user_model.objects.create_user("owner")
    sub.owner = owner
    sub.save(update_fields=["owner"])
    client.force_login(owner)
    sub.refresh_from_db()
    order, salt = sub.rerun_sample, sub.rerun_salt
    assert sorted(map(tuple, order)) == sorted(
        (t.name, a) for t in tasks for a in (1, 2, 3))
    # Public before the verdict: the commitment only, nothing that predicts the order.
    before = client.get(f"/api/v1/submissions/{sub.pk}/").json()["rerun_sample"]
    assert before == {"commitment": sub.rerun_commitment, "revealed": False,
                      "committed_at": before["committed_at"], "how": before["how"]}
    page = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert sub.rerun_commitment in page and salt not in page
    assert json.dumps(order) not in page
    # After the verdict: the order and the salt, which hash to the commitment.
    rerun_reveal(submission_id=sub.pk)
    after = client.get(f"/api/v1/submissions/{sub.pk}/").json()["rerun_sample"]
    assert after["revealed"] and after["matches"] and after["salt"] == salt
    canonical = json.dumps(after["order"], separators=(",", ":")).encode()
    assert hashlib.sha256(canonical + salt.encode()).hexdigest() == sub.rerun_commitment
    assert commitment(after["order"], after["salt"]) == sub.rerun_commitment
    assert 'data-testid="rerun-order"' in client.get(f"/submissions/{sub.pk}/").content.decode()
    # The same archive under another secret gives another order; the same secret the same.
    trials = [(t.name, a) for t in tasks for a in (1, 2, 3)]
    one = sample_order(secret="site-secret-one", archive_sha256="ab" * 32, trials=trials)
    two = sample_order(secret="site-secret-two", archive_sha256="ab" * 32, trials=trials)
    assert one != two and sorted(one) == sorted(two)
    assert one == sample_order(secret="site-secret-one", archive_sha256="ab" * 32,
                               trials=list(reversed(trials)))
    # Another archive under the same secret: another order (not predictable from the ids).
    assert one != sample_order(secret="site-secret-one", archive_sha256="cd" * 32,
                               trials=trials)


def test_check_deploy_refuses_the_default_sample_secret(settings):
    settings.VERIFICATION_SAMPLE_SECRET = settings.VERIFICATION_SAMPLE_SECRET_DEFAULT
    with pytest.raises(SystemCheckError, match="VERIFICATION_SAMPLE_SECRET"):
        call_command("check", "--deploy", "--fail-level", "ERROR", "--tag", "security")
    settings.VERIFICATION_SAMPLE_SECRET = "a-long-private-value"
    from evaluation.checks import sample_secret_not_default

    assert sample_secret_not_default() == []
