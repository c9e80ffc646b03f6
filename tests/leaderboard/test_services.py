"""leaderboard_recompute against a hand-checked two-agent data set (see conftest.two_agents)."""

from decimal import Decimal

import pytest

from leaderboard.models import CategoryEntry, GroupAggregate, LeaderboardEntry
from leaderboard.services import leaderboard_recompute
from submissions.models import SubmissionStatus
from tests.factories import AgentFactory, published_submission


def _entries(bv):
    return {e.agent.slug: e for e in LeaderboardEntry.objects.filter(benchmark_version=bv)
            .select_related("agent")}


def test_it_pools_success_over_attempts_with_a_clustered_interval(two_agents):
    bv, _tasks, _a, _b = two_agents
    assert leaderboard_recompute(benchmark_version=bv) == 2
    a = _entries(bv)["alpha"]
    assert (a.successes, a.attempts, a.rank) == (8, 15, 1)
    assert a.success_rate == pytest.approx(8 / 15)
    # Clusters 3,0,2,0,3 of 3, stratified by category: residuals y - 3p = 1.4,-1.6
    # (img), 0.4,-1.6 (txt-one), 1.4 (txt-two, a one-task stratum: no variance). Within
    # strata 2/1*(1.5^2+1.5^2) + 2/1*(1^2+1^2) = 13, V = 13/15^2, binomial (8/15)(7/15)/15:
    # design effect 3.48 (3.08 unstratified before) clamped to 3 -> Wilson(8/15, n=5), unchanged.
    assert a.design_effect == 3.0
    assert a.ci_low == pytest.approx(0.189689, abs=1e-6)
    assert a.ci_high == pytest.approx(0.848013, abs=1e-6)


def test_infrastructure_errors_leave_the_denominator_but_count_as_present(two_agents):
    """Beta's infrastructure error is one the site confirmed (conftest)."""
    bv, *_ = two_agents
    leaderboard_recompute(benchmark_version=bv)
    b = _entries(bv)["beta"]
    assert (b.successes, b.attempts, b.attempts_present, b.infra_errors) == (2, 14, 15, 1)
    assert b.infra_errors_claimed == 1
    assert b.success_rate == pytest.approx(2 / 14)
    assert b.coverage == 1.0
    # cost mean over the 14 scored attempts of $1 each
    assert b.cost_per_attempt_usd == Decimal("1.0000")
    assert b.cost_per_success_usd == Decimal("7.0000")
    assert b.rank == 2


def test_timeouts_and_agent_errors_are_failures(two_agents):
    bv, *_ = two_agents
    leaderboard_recompute(benchmark_version=bv)
    a = _entries(bv)["alpha"]
    assert (a.timeouts, a.agent_errors) == (1, 1)
    assert a.attempts == 15


def test_macro_and_pooled_group_rates_differ_as_hand_computed(two_agents):
    bv, *_ = two_agents
    leaderboard_recompute(benchmark_version=bv)
    a = _entries(bv)["alpha"]
    assert a.imaging_macro == pytest.approx(0.5)
    assert a.imaging_pooled == pytest.approx(0.5)
    # text categories: txt-one 2/6, txt-two 3/3 -> macro (1/3 + 1)/2, pooled 5/9
    assert a.text_macro == pytest.approx(2 / 3)
    assert a.text_pooled == pytest.approx(5 / 9)


def test_pass_at_k_and_pass_hat_k(two_agents):
    bv, *_ = two_agents
    leaderboard_recompute(benchmark_version=bv)
    a = _entries(bv)["alpha"]
    assert a.pass_at_k == pytest.approx(3 / 5)
    assert a.pass_hat_k == pytest.approx(2 / 5)
    assert a.cost_per_attempt_usd == Decimal("1.0000")
    assert a.cost_per_success_usd == Decimal("1.8750")


def test_category_entries_and_task_cells(two_agents):
    bv, *_ = two_agents
    leaderboard_recompute(benchmark_version=bv)
    a = _entries(bv)["alpha"]
    cats = {ce.category.slug: ce for ce in CategoryEntry.objects.filter(entry=a)
            .select_related("category")}
    assert (cats["img"].successes, cats["img"].attempts) == (3, 6)
    assert (cats["txt-one"].successes, cats["txt-one"].attempts) == (2, 6)
    assert (cats["txt-two"].successes, cats["txt-two"].attempts) == (3, 3)
    names = dict(bv.tasks.values_list("pk", "name"))
    cells = {names[pk]: c.outcomes for pk, c in a.cells().items()}
    assert cells == {"img/case_01": "PPP", "img/case_02": "FFF", "txt-one/case_01": "PPF",
                     "txt-one/case_02": "FTE", "txt-two/case_01": "PPP"}


def test_tie_group_uses_paired_test_over_tasks(two_agents):
    # per-task rates A (1, 0, 2/3, 0, 1) vs B (1, 0, 0, 0, 0): paired t = 1.58, df 4, p = 0.189
    bv, *_ = two_agents
    leaderboard_recompute(benchmark_version=bv)
    e = _entries(bv)
    assert (e["alpha"].tie_group, e["beta"].tie_group) == (1, 1)


def test_harness_family_aggregates_are_means_of_agents(two_agents):
    bv, _tasks, a, b = two_agents
    b.harness = a.harness
    b.save()
    leaderboard_recompute(benchmark_version=bv)
    g = GroupAggregate.objects.get(benchmark_version=bv, key=a.harness.family)
    assert g.agents == 2
    assert g.mean_success_rate == pytest.approx((8 / 15 + 2 / 14) / 2)
    assert g.pooled_success_rate == pytest.approx(10 / 29)
    assert g.imaging_macro == pytest.approx((0.5 + 2 / 5) / 2)


def test_only_the_latest_published_submission_of_an_agent_counts(two_agents):
    bv, tasks, a, _b = two_agents
    from datetime import UTC, datetime
    published_submission(a, tasks, ["FFF"] * 5, published_at=datetime(2026, 8, 1, tzinfo=UTC))
    published_submission(a, tasks, ["PPP"] * 5, status=SubmissionStatus.QUEUED,
                         published_at=None)
    leaderboard_recompute(benchmark_version=bv)
    assert _entries(bv)["alpha"].successes == 0


def test_recompute_is_idempotent(two_agents):
    bv, *_ = two_agents
    leaderboard_recompute(benchmark_version=bv)
    first = list(LeaderboardEntry.objects.filter(benchmark_version=bv).order_by("rank").values(
        "agent_id", "rank", "success_rate", "ci_low", "tie_group"))
    leaderboard_recompute(benchmark_version=bv)
    second = list(LeaderboardEntry.objects.filter(benchmark_version=bv).order_by("rank").values(
        "agent_id", "rank", "success_rate", "ci_low", "tie_group"))
    assert first == second
    assert LeaderboardEntry.objects.filter(benchmark_version=bv).count() == 2


def test_equal_rates_share_a_rank(small_benchmark):
    bv, tasks = small_benchmark
    for slug in ("x", "y"):
        published_submission(AgentFactory(slug=slug), tasks, ["PFF"] * 5)
    leaderboard_recompute(benchmark_version=bv)
    assert sorted(e.rank for e in _entries(bv).values()) == [1, 1]


def test_means_exclude_infrastructure_errors(small_benchmark):
    """Scored attempts: 100 s / 1k tokens / $0.5 and 200 s / 2k / $1.5; an infrastructure error
    of 10,000 s / 1M tokens / $99 must not count: means 150 s, 1,500 tokens, $1 per attempt,
    $2 per success; coverage 3 of the 15 required attempts."""
    from submissions.models import Trial

    bv, tasks = small_benchmark
    sub = published_submission(AgentFactory(slug="m"), tasks[:1], ["PFI"])
    for attempt, (dur, out, cost) in enumerate(
            [(100, 1000, "0.5"), (200, 2000, "1.5"), (10_000, 1_000_000, "99")], start=1):
        Trial.objects.filter(submission=sub, attempt=attempt).update(
            duration_s=dur, output_tokens=out, cost_usd=Decimal(cost))
    leaderboard_recompute(benchmark_version=bv)
    e = _entries(bv)["m"]
    assert (e.successes, e.attempts, e.infra_errors) == (1, 2, 1)
    assert e.mean_duration_s == pytest.approx(150)
    assert e.mean_output_tokens == pytest.approx(1500)
    assert e.cost_per_attempt_usd == Decimal("1.0000")
    assert e.cost_per_success_usd == Decimal("2.0000")
    assert e.coverage == pytest.approx(3 / 15)


def test_a_claimed_pass_that_regrades_as_a_failure_counts_as_a_failure(small_benchmark):
    from submissions.models import Trial
    from submissions.services import trial_check_record

    bv, tasks = small_benchmark
    sub = published_submission(AgentFactory(slug="v"), tasks[:2], ["PPP", "FFT"])
    trials = {(t.benchmark_task_id, t.attempt): t.pk for t in Trial.objects.filter(submission=sub)}
    # What the verification job writes: the re-grade, and a flag where it differs.
    trial_check_record(trial_id=trials[tasks[0].pk, 1], flag="regrade_mismatch", on=True,
                       verified_reward=0.0)
    trial_check_record(trial_id=trials[tasks[0].pk, 2], flag="regrade_mismatch", on=False,
                       verified_reward=1.0)
    # A claimed failure whose output the site grades as a pass is a pass; a timeout stays one.
    trial_check_record(trial_id=trials[tasks[1].pk, 1], flag="regrade_mismatch", on=True,
                       verified_reward=1.0)
    trial_check_record(trial_id=trials[tasks[1].pk, 3], flag="regrade_mismatch", on=True,
                       verified_reward=1.0)
    leaderboard_recompute(benchmark_version=bv)
    e = _entries(bv)["v"]
    assert (e.successes, e.attempts, e.claimed_successes, e.flagged_trials) == (3, 6, 3, 3)
    cells = e.cells()
    assert (cells[tasks[0].pk].outcomes, cells[tasks[0].pk].claimed_outcomes) == ("FPP", "PPP")
    assert (cells[tasks[1].pk].outcomes, cells[tasks[1].pk].claimed_outcomes) == ("PFT", "FFT")
    assert cells[tasks[0].pk].flags == [["regrade_mismatch"], [], []]
    first = Trial.objects.get(pk=trials[tasks[0].pk, 1])
    assert (first.outcome, first.success, first.claimed_outcome, first.claimed_success) == (
        "failed", False, "passed", True)


def test_an_unconfirmed_infrastructure_error_counts_as_a_failure_until_the_site_confirms_it(
        small_benchmark):
    from submissions.models import Trial
    from submissions.services import SubmissionError, trial_check_record, trial_infra_confirm

    bv, tasks = small_benchmark
    sub = published_submission(AgentFactory(slug="u"), tasks[:2], ["PFI", "PII"],
                               infra_confirmed=False)
    leaderboard_recompute(benchmark_version=bv)
    e = _entries(bv)["u"]
    # Renaming failures as infrastructure errors removes nothing from the denominator.
    assert (e.successes, e.attempts, e.infra_errors, e.infra_errors_claimed) == (2, 6, 0, 3)
    assert e.flagged_trials == 3 and e.claimed_successes == 2
    cells = e.cells()
    assert (cells[tasks[1].pk].outcomes, cells[tasks[1].pk].claimed_outcomes) == ("PFF", "PII")
    assert cells[tasks[1].pk].flags == [[], ["infra_unconfirmed"], ["infra_unconfirmed"]]

    claimed_infra = list(Trial.objects.filter(submission=sub, claimed_outcome="infra_error")
                         .order_by("benchmark_task__position", "attempt"))
    # The site confirms one (it hit the failure itself) and grades another's output as a pass.
    trial_infra_confirm(trial_id=claimed_infra[0].pk, reason="the site's re-attempt hit it too")
    trial_check_record(trial_id=claimed_infra[1].pk, flag="regrade_mismatch", on=False,
                       verified_reward=1.0)
    with pytest.raises(SubmissionError):  # a claimed attempt cannot be turned into one
        trial_infra_confirm(trial_id=Trial.objects.get(submission=sub, benchmark_task=tasks[0],
                                                       attempt=2).pk, reason="no")
    leaderboard_recompute(benchmark_version=bv)
    e = _entries(bv)["u"]
    assert (e.successes, e.attempts, e.infra_errors, e.infra_errors_claimed) == (3, 5, 1, 3)
    confirmed = Trial.objects.get(pk=claimed_infra[0].pk)
    assert (confirmed.outcome, confirmed.infra_confirmed, confirmed.flags) == (
        "infra_error", True, [])
    assert Trial.objects.get(pk=claimed_infra[1].pk).outcome == "passed"
