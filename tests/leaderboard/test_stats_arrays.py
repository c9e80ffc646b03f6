"""leaderboard/stats_arrays.py gives, agent by agent, exactly (==) what leaderboard/stats.py
gives: the rebuild computes every entry with the former, the hand-checked tests were written
against the latter."""

import numpy as np
import pytest

from leaderboard import stats, stats_arrays


def _random_agents(seed: int, agents: int = 300):
    rng = np.random.default_rng(seed)
    tasks = int(rng.integers(1, 30))
    # Strata interleaved by column (tasks of a category need not be adjacent), one-task
    # strata included.
    strata = rng.integers(0, int(rng.integers(1, 6)), size=tasks).tolist()
    n = rng.integers(0, 4, size=(agents, tasks))
    n[rng.uniform(size=n.shape) < 0.15] = 0  # missing tasks / all attempts infra errors
    skill = rng.uniform(size=(agents, 1))
    y = rng.binomial(n, np.clip(skill + rng.normal(0, 0.3, size=n.shape), 0, 1))
    y[: agents // 10] = n[: agents // 10]  # some agents solve everything they attempt
    y[agents // 10: agents // 5] = 0  # and some nothing
    n[-3:] = 0  # and a few attempted nothing
    n[-6, 1:] = 0  # one task only
    return y, n, strata


@pytest.mark.parametrize("seed", range(12))
def test_clustered_rates_equal_clustered_rate_row_by_row(seed):
    y, n, strata = _random_agents(seed)
    for labels in (strata, None):
        got = stats_arrays.clustered_rates(y, n, labels)
        for i in range(len(y)):
            want = stats.clustered_rate([(int(a), int(b)) for a, b in zip(y[i], n[i], strict=True)],
                                        labels)
            assert (int(got.successes[i]), int(got.attempts[i])) == (want.successes, want.attempts)
            assert float(got.rate[i]) == want.rate, i
            assert float(got.design_effect[i]) == want.design_effect, i
            assert (float(got.ci_low[i]), float(got.ci_high[i])) == (want.ci_low, want.ci_high), i


@pytest.mark.parametrize("seed", range(4))
def test_pass_at_k_and_macro_means_equal_stats(seed):
    y, n, _ = _random_agents(seed)
    at, hat = stats_arrays.pass_at_k(y, n), stats_arrays.pass_hat_k(y, n)
    rng = np.random.default_rng(seed)
    values = [rng.uniform(size=len(y)) for _ in range(5)]
    masks = [rng.uniform(size=len(y)) < 0.7 for _ in range(5)]
    macro = stats_arrays.macro_means(values, masks, len(y))
    for i in range(len(y)):
        per = [(int(a), int(b)) for a, b in zip(y[i], n[i], strict=True)]
        assert float(at[i]) == stats.pass_at_k(per)
        assert float(hat[i]) == stats.pass_hat_k(per)
        want = stats.macro_mean([float(v[i]) for v, m in zip(values, masks, strict=True) if m[i]])
        assert (None if np.isnan(macro[i]) else float(macro[i])) == want
