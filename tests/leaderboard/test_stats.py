"""Interval, tie and ranking computations against hand-computed values."""


import pytest

from leaderboard import stats
from leaderboard.charts import pareto_frontier


def test_wilson_interval_matches_hand_computation():
    # p = 0.5, n = 12, z = 1.96: centre 0.5, half = z/(1+z²/n)·sqrt(p(1-p)/n + z²/4n²)
    # = 1.95996/1.32011 · sqrt(0.0208333 + 0.0066691) = 1.48470 · 0.165839 = 0.246219
    low, high = stats.wilson_interval(0.5, 12)
    assert low == pytest.approx(0.253781, abs=1e-6)
    assert high == pytest.approx(0.746219, abs=1e-6)


def test_wilson_interval_at_zero_successes_is_not_degenerate():
    # p = 0, n = 10: upper = z²/n / (1 + z²/n) = 0.384146/1.384146 = 0.277532
    low, high = stats.wilson_interval(0.0, 10)
    assert low == 0.0
    assert high == pytest.approx(0.277532, abs=1e-6)


def test_clustered_rate_with_independent_looking_tasks_keeps_binomial_width():
    # Tasks (1/3, 2/3, 1/3, 2/3): p = 0.5, residuals ±0.5, V = 4/3·1/144 = 0.009259 < binomial
    # 0.25/12 = 0.020833 -> design effect clamped up to 1 -> Wilson on n = 12.
    est = stats.clustered_rate([(1, 3), (2, 3), (1, 3), (2, 3)])
    assert (est.successes, est.attempts, est.rate) == (6, 12, 0.5)
    assert est.design_effect == 1.0
    assert est.ci_low == pytest.approx(0.253781, abs=1e-6)


def test_clustered_rate_with_all_or_nothing_tasks_uses_one_effective_draw_per_task():
    # Tasks (3/3, 0/3, 3/3, 0/3): residuals ±1.5, V = 4/3·9/144 = 0.083333, binomial 0.020833,
    # design effect 4 -> clamped to 3 attempts per task -> n_eff = 4.
    # Wilson(0.5, 4): half = 1.95996/1.96037·sqrt(0.0625 + 0.0600231) = 0.349961
    est = stats.clustered_rate([(3, 3), (0, 3), (3, 3), (0, 3)])
    assert est.design_effect == 3.0
    assert est.ci_low == pytest.approx(0.150039, abs=1e-6)
    assert est.ci_high == pytest.approx(0.849961, abs=1e-6)


def test_clustered_rate_at_full_success_uses_conservative_design_effect():
    est = stats.clustered_rate([(3, 3)] * 4)
    assert est.rate == 1.0 and est.design_effect == 3.0
    # Wilson(1, 4): lower = 1/(1+z²/4) = 1/1.960369 = 0.510108
    assert est.ci_low == pytest.approx(0.510109, abs=1e-6)
    assert est.ci_high == 1.0


def test_clustered_rate_of_nothing():
    est = stats.clustered_rate([])
    assert (est.attempts, est.rate, est.ci_low, est.ci_high) == (0, 0.0, 0.0, 1.0)


def test_paired_p_value_matches_hand_computed_t_test():
    # diffs = (1, 1, 0, 1, 0, 1): mean 2/3, sd = sqrt(((1/3)²·4 + (2/3)²·2)/5) = sqrt(0.26667)
    # t = 0.66667 / (0.516398/sqrt 6) = 3.16228, df = 5 -> two-sided p = 0.025031 (t(0.975, 5) = 2.571, t(0.9875, 5) = 3.163)
    p = stats.paired_p_value([1, 1, 0, 1, 0, 1], [0, 0, 0, 0, 0, 0])
    assert p == pytest.approx(0.025031, abs=1e-5)


def test_paired_p_value_edge_cases():
    assert stats.paired_p_value([0.5, 0.5], [0.5, 0.5]) == 1.0
    assert stats.paired_p_value([1, 1, 1], [0, 0, 0]) == 0.0
    assert stats.paired_p_value([1], [0]) == 1.0
    with pytest.raises(ValueError):
        stats.paired_p_value([1, 0], [1])


def test_tie_groups_follow_the_group_leader():
    tasks = [f"t{i}" for i in range(6)]
    a = dict.fromkeys(tasks, 1.0)                             # leader
    b = dict(zip(tasks, [1, 1, 1, 1, 1, 2 / 3], strict=True))  # 1/3 below on one task: tied
    c = dict.fromkeys(tasks, 0.0)                             # far below: new group
    d = dict(zip(tasks, [0, 0, 0, 0, 0, 1 / 3], strict=True))  # tied with c
    assert stats.tie_groups([a, b, c, d], alpha=0.05) == [1, 1, 2, 2]


def test_competition_ranks_share_equal_rates():
    assert stats.competition_ranks([0.5, 0.4, 0.4, 0.3]) == [1, 2, 2, 4]
    assert stats.competition_ranks([]) == []


def test_macro_mean():
    assert stats.macro_mean([0.2, 0.4]) == pytest.approx(0.3)
    assert stats.macro_mean([]) is None


def test_pareto_frontier_keeps_only_undominated_points():
    pts = [(1.0, 0.2, "cheap"), (2.0, 0.1, "dominated"), (3.0, 0.5, "best"), (3.0, 0.4, "tie-x"),
           (4.0, 0.5, "same-y-costlier")]
    assert [p[2] for p in pareto_frontier(pts)] == ["cheap", "best"]
    assert pareto_frontier([]) == []


def test_stratified_clustered_rate_by_hand():
    # Tasks 3/3, 3/3 (category a) and 0/3, 1/3 (category b): p = 7/12, e = y - 3p = 1.25, 1.25,
    # -1.75, -0.75. Unstratified: 4/3 * 6.75 / 144 over (7/12)(5/12)/12 = 3.09 -> clamped to 3.
    # Stratified: a's residuals are equal (sum of squares 0); b's are -1.75, -0.75 around -1.25,
    # 2/1 * (0.5^2 + 0.5^2) = 1. V = 1/144 = 0.00694, design effect 0.343 -> clamped to 1:
    # Wilson(7/12, n=12): centre 0.563125, half-width 0.243614 -> [0.319511, 0.806740].
    per_task = [(3, 3), (3, 3), (0, 3), (1, 3)]
    assert stats.clustered_rate(per_task).design_effect == 3.0
    est = stats.clustered_rate(per_task, ["a", "a", "b", "b"])
    assert est.design_effect == 1.0
    assert est.ci_low == pytest.approx(0.319511, abs=1e-6)
    assert est.ci_high == pytest.approx(0.806740, abs=1e-6)


def test_one_task_strata_are_pooled():
    per_task = [(3, 3), (0, 3), (1, 3), (2, 3)]
    assert stats.clustered_rate(per_task, ["a", "b", "c", "d"]) == stats.clustered_rate(per_task)
    # one stratum with every task: the plain task-clustered interval
    assert stats.clustered_rate(per_task, ["x"] * 4) == stats.clustered_rate(per_task)


def test_bonferroni_tie_rule_keeps_a_borderline_gap_together_on_a_larger_board():
    tasks = [str(i) for i in range(12)]
    top = dict(zip(tasks, [1, 1, 1, 1, 1, 1, 2 / 3, 2 / 3, 1 / 3, 1 / 3, 0, 0], strict=True))
    low = dict(zip(tasks, [1, 2 / 3, 1, 1 / 3, 1, 2 / 3, 1 / 3, 2 / 3, 0, 1 / 3, 0, 0], strict=True))
    p = stats.paired_p_value([top[k] for k in tasks], [low[k] for k in tasks])
    assert 0.001 < p < 0.05
    assert stats.tie_groups([top, low], alpha=0.05) == [1, 2]
    assert stats.tie_groups([top, low], alpha=0.05, family=10) == [1, 1]
    assert stats.tie_groups_vectorised([top, low], 0.05, family=10) == [1, 1]
