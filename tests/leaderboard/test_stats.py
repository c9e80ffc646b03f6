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


def test_all_pairs_tie_rule_keeps_a_borderline_gap_together_on_a_larger_board():
    """The rule before the step-down from the leader (kept for the simulation's "before" column)."""
    tasks = [str(i) for i in range(12)]
    top = dict(zip(tasks, [1, 1, 1, 1, 1, 1, 2 / 3, 2 / 3, 1 / 3, 1 / 3, 0, 0], strict=True))
    low = dict(zip(tasks, [1, 2 / 3, 1, 1 / 3, 1, 2 / 3, 1 / 3, 2 / 3, 0, 1 / 3, 0, 0], strict=True))
    p = stats.paired_p_value([top[k] for k in tasks], [low[k] for k in tasks])
    assert 0.001 < p < 0.05
    assert stats.tie_groups_all_pairs([top, low], alpha=0.05) == [1, 2]
    assert stats.tie_groups_all_pairs([top, low], alpha=0.05, family=10) == [1, 1]
    assert stats.tie_groups_all_pairs_vectorised([top, low], 0.05, family=10) == [1, 1]
    # the step-down tests a set of two agents at alpha, however many are ranked below
    far = dict.fromkeys(tasks, 0.0)
    assert stats.tie_groups([top, low] + [far] * 8, alpha=0.05) == [1, 2] + [3] * 8
    assert stats.tie_groups_all_pairs([top, low] + [far] * 8, alpha=0.05) == [1, 1] + [2] * 8


def _by_task(values):
    return {f"t{i}": v for i, v in enumerate(values)}


def _both(board, rates=None):
    """The reference and the vectorised step-down agree; their groups."""
    groups = stats.tie_groups(board, 0.05, rates=rates)
    assert stats.tie_groups_vectorised(board, 0.05, block=2, rates=rates) == groups
    return groups


def test_step_down_separates_a_gap_the_all_pairs_rule_kept():
    # Six tasks. A solves everything; B is 1/3 lower on four tasks: diffs (1/3 x4, 0 x2), mean
    # 2/9, variance (4 (1/9)^2 + 2 (2/9)^2)/5 = 0.0296296, t = 0.22222 / sqrt(0.0296296/6) = 3.1623.
    # C solves nothing: constant difference 1 from A (certain), t(B - C) = 0.77778/0.070273 = 11.07.
    # Critical values (df 5): a set of 2 agents t(1 - 0.05/2) = 2.5706; of 3 agents (3 pairs)
    # t(1 - 0.05/6) = 3.5341. Step-down from the leader: {A, B} differ (3.16 > 2.57), B leads
    # group 2; {B, C} differ: [1, 2, 3]. All pairs (K = 3): 3.16 < 3.53, B joins A; C starts
    # group 2: [1, 1, 2].
    a, b, c = _by_task([1] * 6), _by_task([2 / 3, 2 / 3, 2 / 3, 1, 1, 2 / 3]), _by_task([0] * 6)
    assert _both([a, b, c]) == [1, 2, 3]
    assert stats.tie_groups_all_pairs([a, b, c], 0.05) == [1, 1, 2]


def test_the_level_follows_the_set_from_the_leader():
    # A all solved; B 1/3 lower on one task: diffs (0 x5, 1/3), mean 1/18, variance
    # (5 (1/18)^2 + (5/18)^2)/5 = 0.0185185, t = 0.05556/0.05556 = 1.0: tied. C is the B above of
    # the previous test (t = 3.1623 from A), ranked third: the set {A, B, C} has 3 pairs, critical
    # value 3.5341 > 3.16, so C stays in A's group; ranked right after A (a set of two, 2.5706)
    # it leads a group of its own.
    a, b = _by_task([1] * 6), _by_task([1, 1, 1, 1, 1, 2 / 3])
    c = _by_task([2 / 3, 2 / 3, 2 / 3, 1, 1, 2 / 3])
    assert _both([a, b, c]) == [1, 1, 1]
    assert _both([a, c]) == [1, 2]


def test_equal_success_rates_share_a_group_whatever_their_order():
    # Eight tasks. A all solved (rate 1). B' solves six and misses two (rate 0.75): diffs from A
    # (0 x6, 1 x2), mean 0.25, variance (6 (0.25)^2 + 2 (0.75)^2)/7 = 0.2142857, t = 1.5275.
    # B is 1/3 lower on six tasks (rate 0.75 too): diffs (1/3 x6, 0 x2), mean 0.25, variance
    # (6 (1/12)^2 + 2 (1/4)^2)/7 = 0.0238095, t = 4.5826. D solves nothing. Critical values
    # (df 7): 2 agents 2.3646, 3 agents 3.1276. Without the rates the order decides: A, B', B
    # keeps B' with A (1.53) and puts B (4.58 > 3.13) in a group apart from B' at the same rate.
    # With the rates B' and B are one run, tested as the set of three: B differs, so the run
    # leads group 2 in either order; D differs from the run's leader (t(B' - D) = 0.75/0.16366
    # = 4.58, t(B - D) = 0.75/0.05455 = 13.7, both > 2.3646): [1, 2, 2, 3].
    a, b_prime = _by_task([1] * 8), _by_task([1] * 6 + [0, 0])
    b, d = _by_task([2 / 3] * 6 + [1, 1]), _by_task([0] * 8)
    assert _both([a, b_prime, b, d]) == [1, 1, 2, 3]
    rates = [1.0, 0.75, 0.75, 0.0]
    assert _both([a, b_prime, b, d], rates=rates) == [1, 2, 2, 3]
    assert _both([a, b, b_prime, d], rates=rates) == [1, 2, 2, 3]
    assert stats.competition_ranks(rates) == [1, 2, 2, 4]
    # the leader's own run is always its group: A and a copy of it at the same rate
    assert _both([a, dict(a), b_prime], rates=[1.0, 1.0, 0.75]) == [1, 1, 1]


def test_agents_without_two_shared_tasks_cannot_differ_from_the_leader():
    # E shares one task with A: no test, it stays in the group it is ranked in.
    a, d = _by_task([1] * 6), _by_task([0] * 6)
    e = {"t0": 0.0}
    assert _both([a, e, d]) == [1, 1, 2]
    assert _both([a, d, e]) == [1, 2, 2]
    with pytest.raises(ValueError):
        stats.tie_groups([a, d], 0.05, rates=[1.0])
