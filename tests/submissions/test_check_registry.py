"""Verification checks are a registry (submissions/verification/checks/): each kind is one module
that says what it runs and what it contributes, the job walks the registry in order, and the
verdict is made of every registered check's contribution, so adding a check touches one module
(no Docker: the checks' work itself is covered by tests/evaluation/test_verification*.py)."""

import pytest

from submissions.models import CheckKind, CheckStatus, SubmissionStatus, TrialCheck, VerificationJob
from submissions.verification import checks, verification_summary
from submissions.verification.checks import base
from tests.factories import BenchmarkTaskFactory, SubmissionFactory, TrialFactory


def test_every_check_kind_has_exactly_one_module_that_describes_itself():
    kinds = [c.kind for c in checks.REGISTRY]
    assert len(kinds) == len(set(kinds))
    assert set(CheckKind.values) <= set(kinds)  # every kind a TrialCheck row can have
    for check in checks.REGISTRY:
        assert check.title and check.runs and check.contributes, check
        assert type(check).__module__.startswith("submissions.verification.checks.")


def test_the_registry_runs_in_the_order_the_checks_depend_on():
    order = [c.kind for c in checks.REGISTRY]
    # The infrastructure re-attempt decides what the re-grade grades; the screen reads the
    # replay's container activity.
    assert order.index(CheckKind.INFRA) < order.index(CheckKind.REGRADE)
    assert order.index(CheckKind.REPLAY) < order.index(CheckKind.SCREEN)


class _Recorder(base.Check):
    kind = "regrade"  # reuses a kind only to exist in this test
    title, runs, contributes = "recorder", "nothing", "a clause"
    report_order = 99

    def __init__(self, contradicts):
        self.contradicts, self.ran = contradicts, []

    def applies(self, ctx):
        return True

    def run(self, ctx):
        self.ran.append(ctx.job.pk)

    def summarize(self, job, rows):
        return base.Contribution("recorder", {"rows": rows.count()},
                                 headline=f"recorder saw {rows.count()} rows",
                                 contradicts=self.contradicts)


@pytest.mark.django_db
@pytest.mark.parametrize("contradicts", [False, True])
def test_a_new_check_in_the_registry_is_run_and_shapes_the_verdict(monkeypatch, contradicts):
    task = BenchmarkTaskFactory()
    sub = SubmissionFactory(status=SubmissionStatus.VERIFYING,
                            benchmark_version=task.benchmark_version)
    trial = TrialFactory(submission=sub, benchmark_task=task)
    job = VerificationJob.objects.create(submission=sub, attempt=1)
    TrialCheck.objects.create(job=job, kind=CheckKind.REGRADE, trial=trial, benchmark_task=task,
                              status=CheckStatus.MATCH, claimed_reward=1.0, verified_reward=1.0)
    recorder = _Recorder(contradicts)
    monkeypatch.setattr(checks, "REGISTRY", (recorder,))
    checks.run_checks(job, heartbeat=None)
    assert recorder.ran == [job.pk]
    summary = verification_summary(job)
    assert summary["recorder"] == {"rows": 1}
    assert summary["headline"] == (f"{'discrepancy' if contradicts else 'verified'}: "
                                   "recorder saw 1 rows")
    assert summary["verdict"] == ("discrepancy" if contradicts else "verified")


@pytest.mark.django_db
def test_the_summary_has_every_registered_checks_section_in_headline_order():
    task = BenchmarkTaskFactory()
    sub = SubmissionFactory(status=SubmissionStatus.VERIFYING,
                            benchmark_version=task.benchmark_version)
    trials = [TrialFactory(submission=sub, benchmark_task=task, attempt=i) for i in (1, 2)]
    job = VerificationJob.objects.create(submission=sub, attempt=1)
    TrialCheck.objects.create(job=job, kind=CheckKind.REGRADE, trial=trials[0],
                              benchmark_task=task, status=CheckStatus.MATCH)
    TrialCheck.objects.create(job=job, kind=CheckKind.REGRADE, trial=trials[1],
                              benchmark_task=task, status=CheckStatus.MISMATCH)
    TrialCheck.objects.create(job=job, kind=CheckKind.REPLAY, trial=trials[0],
                              benchmark_task=task, status=CheckStatus.MATCH)
    summary = verification_summary(job)
    for key in ("regrade", "replay", "screen", "rerun", "infra", "judge"):
        assert key in summary
    assert summary["regrade"]["mismatched_trials"] == [trials[1].pk]
    assert summary["verdict"] == "discrepancy"
    assert summary["headline"].startswith("discrepancy: 1/2 re-grades match; 1/1 replays "
                                          "reproduce")
