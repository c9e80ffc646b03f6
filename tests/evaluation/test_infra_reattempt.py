"""The site decides what an infrastructure error is, end to end: a REAL Celery worker, REAL
containers.

* An oracle submission reports two trials as infrastructure errors; the site re-attempts both
  (the oracle agent in a fresh container, then the verifier): they complete normally, so neither
  is confirmed and both count as failures (claimed 2, confirmed 0).
* A submission of a harness the site cannot run, on a task whose environment cannot start (its
  image has no `sleep`, so no container of it starts): the re-attempt falls back to the bare
  environment, which fails to start, a control container shows the engine works, and both
  claims are confirmed: they leave the denominator, and the published leaderboard row says so
  (hand-checked numbers).
* The cap: with VERIFICATION_INFRA_REATTEMPT_MAX = 1 the second claim is not re-attempted, stays
  a failure, and its check row and the submission page say why; with the cap at 0 the broken
  environment's claims are not re-attempted either: not graded (the environment fails), they
  stay failures and the job still ends.

Needs PostgreSQL (the worker shares the test database) and Docker.
"""

import json
import shutil

import pytest

from tests.evaluation import verification_support as vs

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

CT = "ct-abnormality-classification/synthetic_01"
BROKEN = "ehr-format-conversion/broken_env"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, docker_engine):
    return vs.oracle_outputs(tmp_path_factory.mktemp("oracle-outputs"), only=[CT])


@pytest.fixture(autouse=True)
def _media_and_broker(settings, media_root):
    settings.MEDIA_ROOT = str(media_root)
    settings.VERIFICATION_QUEUE = vs.INPROC_QUEUE
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    settings.XRAY_JUDGE_URL = vs.judge_stub().url
    settings.XRAY_JUDGE_MODEL = vs.JUDGE_MODEL
    # Re-grade and the infrastructure re-attempt (not optional); no replay, no re-run sample.
    settings.VERIFICATION_CHECKS = ["regrade"]
    vs.point_celery_at(vs.BROKER_URL)


@pytest.fixture(scope="module")
def broken_package(tmp_path_factory):
    """A copy of a synthetic task whose environment builds but cannot start a container."""
    root = tmp_path_factory.mktemp("broken-tasks") / "ehr-format-conversion-broken" / "broken_env"
    shutil.copytree(vs.REPO / "tasks" / "ehr-format-conversion" / "synthetic_01", root)
    dockerfile = root / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace(
        "WORKDIR /workspace",
        "# No container of this image can start: its PID 1 (sleep) is gone.\n"
        "RUN rm -f /usr/bin/sleep /bin/sleep\nWORKDIR /workspace"))
    toml = root / "task.toml"
    toml.write_text(toml.read_text().replace("ehr-format-conversion-synthetic_01",
                                             "ehr-format-conversion-broken_env"))
    return root


def _broken_task(bv, package):
    from evaluation.models import BenchmarkTask

    etl = bv.tasks.get(name="ehr-format-conversion/synthetic_01")
    return BenchmarkTask.objects.create(
        benchmark_version=bv, category=etl.category, name=BROKEN, package_path=str(package),
        runnable_here=True, is_synthetic=True, position=99)


def _wrong_ct(oracle) -> bytes:
    right = json.loads((oracle[CT] / "workspace" / "submission.json").read_text())
    return json.dumps({"labels": {k: ("no" if v == "yes" else "yes")
                                  for k, v in right["labels"].items()}}).encode()


def _wait_final(sub, worker, timeout=600):
    from submissions.models import Submission

    def final():
        s = Submission.objects.get(pk=sub.pk)
        return s if s.status in ("verified", "consistent", "discrepancy", "failed") else None

    return vs.wait_for(final, timeout, f"submission {sub.pk} to be verified", worker=worker)


def _infra_checks(sub):
    from submissions.models import CheckKind, TrialCheck

    return {(c.trial.benchmark_task.name, c.trial.attempt): c for c in TrialCheck.objects.filter(
        trial__submission=sub, kind=CheckKind.INFRA).select_related("trial__benchmark_task")}


def _row(client, agent):
    import csv
    import io

    q = "?benchmark=healthagentbench-synthetic@1.0"
    api = {r["agent"]: r for r in client.get(f"/api/v1/leaderboard/{q}").json()["results"]}
    resp = client.get(f"/leaderboard.csv{q}")
    lb = {r["agent"]: r for r in csv.DictReader(io.StringIO(
        b"".join(resp.streaming_content).decode()))}
    for key in ("successes", "attempts", "infra_errors_claimed", "infra_errors_confirmed"):
        assert int(lb[agent][key]) == api[agent][key], key
    return api[agent]


def test_claims_confirmed_only_when_the_site_hits_an_infrastructure_failure(
        settings, client, oracle, broken_package, on_worker, django_user_model):
    from django.db import transaction

    from submissions.models import CheckStatus
    from submissions.services import submission_publish
    from submissions.verification import verification_enqueue

    bv = vs.synthetic_version()
    broken = _broken_task(bv, broken_package)
    with transaction.atomic():
        # Oracle: CT attempt 1 passes; attempts 2 and 3 claim infrastructure errors (their
        # collected outputs are wrong answers, so the site grades them as failures).
        healthy = vs.make_submission(
            bv, outputs=oracle, tasks=[CT], claims={(CT, 2): "infra", (CT, 3): "infra"},
            replace={(CT, a): {"/workspace/submission.json": _wrong_ct(oracle)} for a in (2, 3)})
        # A harness the site cannot run, no trajectory: CT passes 3 times; the broken task's
        # two attempts claim infrastructure errors.
        outputs = {CT: oracle[CT], BROKEN: oracle[CT]}
        unrunnable = vs.make_submission(
            bv, outputs=outputs, harness="closed-harness", attempts=2, tasks=[CT, BROKEN],
            claims={(BROKEN, 1): "infra", (BROKEN, 2): "infra"})
        verification_enqueue(submission=healthy)
        verification_enqueue(submission=unrunnable)
    healthy = _wait_final(healthy, on_worker)
    unrunnable = _wait_final(unrunnable, on_worker)
    assert healthy.status != "failed", (healthy.status_reason, on_worker.tail())
    assert unrunnable.status != "failed", (unrunnable.status_reason, on_worker.tail())

    # The site's re-attempts of the healthy task completed: not confirmed, failures.
    checks = _infra_checks(healthy)
    assert set(checks) == {(CT, 2), (CT, 3)}
    for key, check in checks.items():
        assert check.status == CheckStatus.MISMATCH and check.executions == 1, check.reason
        assert check.reason.startswith("not confirmed: the site re-ran the oracle agent and it "
                                       "completed normally (verifier reward 1)"), check.reason
        assert check.detail["mode"] == "rerun"
        print(f"non-confirming re-attempt: {check.duration_s:.1f} s")
    trials = {(t.benchmark_task.name, t.attempt): t for t in healthy.trials.all()}
    assert [(trials[(CT, a)].outcome, trials[(CT, a)].infra_confirmed) for a in (1, 2, 3)] == [
        ("passed", False), ("failed", False), ("failed", False)]
    assert trials[(CT, 2)].flags == ["infra_unconfirmed"]
    assert healthy.coverage["counted"] == 3
    job = healthy.verification_jobs.first()
    assert job.summary["infra"]["claimed"] == 2 and job.summary["infra"]["confirmed_trials"] == []

    # The broken environment: confirmed by the site, not graded, out of the denominator.
    checks = _infra_checks(unrunnable)
    assert set(checks) == {(BROKEN, 1), (BROKEN, 2)}
    for check in checks.values():
        assert check.status == CheckStatus.MATCH, check.reason
        assert check.detail["mode"] == "environment"
        assert "the task environment failed to start" in check.reason, check.reason
        print(f"confirmation re-attempt: {check.duration_s:.1f} s ({check.reason[:160]})")
    trials = {(t.benchmark_task.name, t.attempt): t for t in unrunnable.trials.all()}
    for a in (1, 2):
        t = trials[(BROKEN, a)]
        assert (t.outcome, t.infra_confirmed, t.infra_confirmed_by, t.flags) == (
            "infra_error", True, "site", [])
        assert t.infra_confirm_reason.startswith("confirmed: the site started the task "
                                                 "environment")
        assert t.verified_reward is None and t.verification_level == "claimed"
    assert unrunnable.coverage["counted"] == 2  # the two CT passes

    maintainer = django_user_model.objects.create_user("maint", is_staff=True)
    submission_publish(submission=healthy, actor=maintainer)
    submission_publish(submission=unrunnable, actor=maintainer)
    row = _row(client, healthy.agent.display_name)
    # Hand-checked: 1 pass over 3 counted attempts (both claims count as failures).
    assert (row["successes"], row["attempts"], row["infra_errors_claimed"],
            row["infra_errors_confirmed"]) == (1, 3, 2, 0)
    assert row["success_rate"] == pytest.approx(1 / 3)
    row = _row(client, unrunnable.agent.display_name)
    # Hand-checked: 2 passes over 2 counted attempts; unconfirmed it would be 2/4.
    assert (row["successes"], row["attempts"], row["infra_errors_claimed"],
            row["infra_errors_confirmed"]) == (2, 2, 2, 2)
    assert row["success_rate"] == pytest.approx(1.0)
    page = client.get(f"/submissions/{unrunnable.pk}/").content.decode()
    assert page.count("confirmed by the site&#x27;s re-attempt: not counted") == 2
    assert "the task environment failed to start" in page
    del broken


def test_over_the_cap_is_not_attempted_and_stays_a_failure(settings, oracle, on_worker, client,
                                                          django_user_model):
    from django.db import transaction

    from submissions.models import CheckStatus
    from submissions.verification import verification_enqueue

    settings.VERIFICATION_INFRA_REATTEMPT_MAX = 1  # stored in the job's config
    bv = vs.synthetic_version()
    with transaction.atomic():
        sub = vs.make_submission(
            bv, outputs=oracle, tasks=[CT], claims={(CT, 2): "infra", (CT, 3): "infra"},
            replace={(CT, a): {"/workspace/submission.json": _wrong_ct(oracle)} for a in (2, 3)})
        verification_enqueue(submission=sub)
    sub = _wait_final(sub, on_worker)
    checks = _infra_checks(sub)
    assert checks[(CT, 2)].status == CheckStatus.MISMATCH
    assert checks[(CT, 3)].status == CheckStatus.SKIPPED
    assert "not re-attempted: the site re-attempts at most 1 claimed" in checks[(CT, 3)].reason
    t3 = sub.trials.get(benchmark_task__name=CT, attempt=3)
    assert (t3.outcome, t3.infra_confirmed) == ("failed", False)
    assert sub.verification_jobs.first().summary["infra"]["not_attempted_trials"] == [t3.pk]
    client.force_login(django_user_model.objects.create_user("staff", is_staff=True))
    page = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert "not re-attempted: the site re-attempts at most 1 claimed" in page
    assert page.count("not confirmed: counted as a failure") == 2


def test_over_the_cap_on_a_broken_environment_stays_a_failure(settings, oracle, broken_package,
                                                             on_worker):
    from django.db import transaction

    from submissions.models import CheckKind, CheckStatus, TrialCheck
    from submissions.verification import verification_enqueue

    settings.VERIFICATION_INFRA_REATTEMPT_MAX = 0
    bv = vs.synthetic_version()
    _broken_task(bv, broken_package)
    with transaction.atomic():
        sub = vs.make_submission(
            bv, outputs={CT: oracle[CT], BROKEN: oracle[CT]}, harness="closed-harness",
            attempts=1, tasks=[CT, BROKEN], claims={(BROKEN, 1): "infra"})
        verification_enqueue(submission=sub)
    sub = _wait_final(sub, on_worker)
    assert sub.status == "consistent", (sub.status_reason, on_worker.tail())
    t = sub.trials.get(benchmark_task__name=BROKEN)
    assert (t.outcome, t.infra_confirmed, t.verified_reward) == ("failed", False, None)
    assert _infra_checks(sub)[(BROKEN, 1)].status == CheckStatus.SKIPPED
    regrade = TrialCheck.objects.get(trial=t, kind=CheckKind.REGRADE)
    assert regrade.status == CheckStatus.ERROR and "the task environment failed" in regrade.reason
    assert sub.coverage["counted"] == 2 and sub.coverage["regraded"] == 1


UNBUILDABLE = "ehr-format-conversion/unbuildable_env"


@pytest.fixture(scope="module")
def unbuildable_package(tmp_path_factory):
    """A copy of a synthetic task whose environment cannot even be built: its Dockerfile copies
    a directory its build context does not have."""
    root = (tmp_path_factory.mktemp("unbuildable-tasks") / "ehr-format-conversion-unbuildable"
            / "unbuildable_env")
    shutil.copytree(vs.REPO / "tasks" / "ehr-format-conversion" / "synthetic_01", root)
    dockerfile = root / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text()
                          + "COPY not-in-the-build-context/ /opt/never-there/\n")
    toml = root / "task.toml"
    toml.write_text(toml.read_text().replace("ehr-format-conversion-synthetic_01",
                                             "ehr-format-conversion-unbuildable_env"))
    return root


def test_an_environment_that_fails_to_build_confirms_the_claims(
        settings, client, oracle, unbuildable_package, on_worker, django_user_model):
    """A harness the site cannot run, on a task whose image cannot be built: the re-attempt of
    the bare environment fails at the build (not at the start), a control container shows the
    engine works, and both claims are confirmed by the site with that reason, on the trial and
    on the public submission page; the published row leaves them out of the denominator
    (hand-checked: 2/2, 2 claimed, 2 confirmed)."""
    from django.db import transaction

    from evaluation import runner
    from evaluation.models import BenchmarkTask
    from submissions.models import CheckStatus
    from submissions.services import submission_publish
    from submissions.verification import verification_enqueue

    with pytest.raises(runner.ImageBuildError):
        runner.build_task_image(unbuildable_package)
    bv = vs.synthetic_version()
    etl = bv.tasks.get(name="ehr-format-conversion/synthetic_01")
    BenchmarkTask.objects.create(
        benchmark_version=bv, category=etl.category, name=UNBUILDABLE,
        package_path=str(unbuildable_package), runnable_here=True, is_synthetic=True,
        position=98)
    with transaction.atomic():
        sub = vs.make_submission(
            bv, outputs={CT: oracle[CT], UNBUILDABLE: oracle[CT]}, harness="closed-harness",
            attempts=2, tasks=[CT, UNBUILDABLE],
            claims={(UNBUILDABLE, 1): "infra", (UNBUILDABLE, 2): "infra"})
        verification_enqueue(submission=sub)
    sub = _wait_final(sub, on_worker)
    assert sub.status != "failed", (sub.status_reason, on_worker.tail())

    checks = _infra_checks(sub)
    assert set(checks) == {(UNBUILDABLE, 1), (UNBUILDABLE, 2)}
    for check in checks.values():
        assert check.status == CheckStatus.MATCH, check.reason
        assert check.detail["mode"] == "environment"
        assert check.reason.startswith(
            "confirmed: the site started the task environment and ran the verifier on an empty "
            "output (no re-runnable harness, no replayable trajectory) and hit an "
            "infrastructure failure too: the task environment failed to build: building "
            "hab-task/ehr-format-conversion-unbuildable/unbuildable_env:"), check.reason
        assert "not-in-the-build-context" in check.reason, check.reason
        print(f"build-failure confirmation: {check.duration_s:.1f} s")
    for t in sub.trials.filter(benchmark_task__name=UNBUILDABLE):
        assert (t.outcome, t.infra_confirmed, t.infra_confirmed_by, t.verified_reward) == (
            "infra_error", True, "site", None)
        assert "the task environment failed to build" in t.infra_confirm_reason

    maintainer = django_user_model.objects.create_user("maint-build", is_staff=True)
    submission_publish(submission=sub, actor=maintainer)
    row = _row(client, sub.agent.display_name)
    assert (row["successes"], row["attempts"], row["infra_errors_claimed"],
            row["infra_errors_confirmed"]) == (2, 2, 2, 2)
    page = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert page.count("confirmed by the site&#x27;s re-attempt: not counted") == 2
    assert "the task environment failed to build" in page
