"""The vectorised tie grouping (what the rebuild uses) gives the hand-checked tie_groups' result
on random leaderboards: ties, gaps, tasks missing for some agents, identical agents."""

import random

import pytest

from leaderboard import stats


def _leaderboard(seed: int, n_agents: int, n_tasks: int = 12) -> list[dict[str, float]]:
    rng = random.Random(seed)
    agents = []
    for _ in range(n_agents):
        skill = rng.random()
        rates = {}
        for t in range(n_tasks):
            if rng.random() < 0.1:
                continue  # not attempted (all attempts infrastructure errors)
            rates[str(t)] = sum(rng.random() < skill for _ in range(3)) / 3
        agents.append(rates)
    if n_agents > 3:
        agents[2] = dict(agents[1])  # an identical pair: variance 0, mean 0
    # rank order, as the rebuild passes them
    agents.sort(key=lambda r: -sum(r.values()) / max(len(r), 1))
    return agents


@pytest.mark.parametrize("seed", range(40))
def test_vectorised_tie_groups_equal_the_reference(seed):
    rates = _leaderboard(seed, n_agents=1 + seed * 3)
    pooled = [sum(r.values()) / max(len(r), 1) for r in rates]
    for alpha in (0.05, 0.2):
        assert stats.tie_groups_vectorised(rates, alpha, block=7) == stats.tie_groups(rates, alpha)
        assert stats.tie_groups_vectorised(rates, alpha, block=7, rates=pooled) == \
            stats.tie_groups(rates, alpha, rates=pooled)
        assert stats.tie_groups_all_pairs_vectorised(rates, alpha, block=7) == \
            stats.tie_groups_all_pairs(rates, alpha)


def test_edge_cases():
    assert stats.tie_groups_vectorised([], 0.05) == []
    assert stats.tie_groups_vectorised([{"a": 1.0}], 0.05) == [1]
    # one shared task only: no test, the agent stays in the group it follows
    assert stats.tie_groups_vectorised([{"a": 1.0, "b": 1.0}, {"a": 0.0}], 0.05) == [1, 1]
    # constant, non-zero differences: certain
    assert stats.tie_groups_vectorised([{"a": 1.0, "b": 1.0}, {"a": 0.0, "b": 0.0}],
                                       0.05) == [1, 2]
