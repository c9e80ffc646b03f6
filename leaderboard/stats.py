"""Statistics behind every number on the leaderboard. Pure functions, no database.

Methods (also written up on the site's Methods page):

* Success rate: successes / scored attempts, pooled over every attempt of every task.
  Infrastructure errors are not scored attempts; timeouts and agent errors are failures.
* 95% interval: attempts of one task are correlated (same task, same agent), so the interval
  uses a task-clustered (cluster-robust) variance of the pooled ratio,
      V = T/(T-1) * sum_t (y_t - p n_t)^2 / N^2,
  turned into a design effect deff = V / (p(1-p)/N), clamped to [1, N/T] (between independent
  attempts and fully correlated ones), and a Wilson score interval on the effective sample size
  N / deff. When p is 0 or 1 the variance is 0/0 and deff takes its conservative bound N/T.
* Ties: a two-sided paired t-test over tasks on the per-task success rates of two agents.
  Agents in rank order join the current tie group while they are not significantly different
  (p >= alpha) from that group's leader; otherwise they start a new group.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _scipy_stats

Z_95 = 1.959963984540054


@dataclass(frozen=True)
class RateEstimate:
    successes: int
    attempts: int
    rate: float
    ci_low: float
    ci_high: float
    design_effect: float


def wilson_interval(rate: float, n: float, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a proportion observed on an (effective) sample of size n."""
    if n <= 0:
        return 0.0, 1.0
    z2 = z * z
    denom = 1 + z2 / n
    centre = (rate + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(rate * (1 - rate) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def clustered_rate(per_task: Sequence[tuple[int, int]]) -> RateEstimate:
    """Pooled rate over (successes, attempts) per task, with a task-clustered Wilson interval."""
    clusters = [(y, n) for y, n in per_task if n > 0]
    successes = sum(y for y, _ in clusters)
    attempts = sum(n for _, n in clusters)
    if attempts == 0:
        return RateEstimate(0, 0, 0.0, 0.0, 1.0, 1.0)
    rate = successes / attempts
    n_clusters = len(clusters)
    mean_cluster = attempts / n_clusters
    binomial_var = rate * (1 - rate) / attempts
    if binomial_var == 0 or n_clusters < 2:
        deff = mean_cluster
    else:
        resid = sum((y - rate * n) ** 2 for y, n in clusters)
        clustered_var = n_clusters / (n_clusters - 1) * resid / attempts**2
        deff = min(max(clustered_var / binomial_var, 1.0), mean_cluster)
    low, high = wilson_interval(rate, attempts / deff)
    return RateEstimate(successes, attempts, rate, low, high, deff)


def paired_p_value(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided paired t-test p-value of per-task rates a vs b (same task order)."""
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    n = len(diffs)
    if n < 2:
        return 1.0
    mean = sum(diffs) / n
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1)
    if var == 0:
        # Identical differences on every task: no noise, so any non-zero gap is certain.
        return 1.0 if mean == 0 else 0.0
    t = mean / math.sqrt(var / n)
    return float(2 * _scipy_stats.t.sf(abs(t), df=n - 1))


def tie_groups(per_task_rates: Sequence[dict[str, float]], alpha: float) -> list[int]:
    """Tie-group number (1-based) of each agent, given agents in rank order.

    ``per_task_rates[i]`` maps task key -> agent i's success rate on it; the paired test uses
    the tasks both agents attempted.
    """
    groups: list[int] = []
    leader: dict[str, float] | None = None
    group = 0
    for rates in per_task_rates:
        if leader is None or _differs(leader, rates, alpha):
            group += 1
            leader = rates
        groups.append(group)
    return groups


def _differs(leader: dict[str, float], other: dict[str, float], alpha: float) -> bool:
    common = sorted(leader.keys() & other.keys())
    p = paired_p_value([leader[k] for k in common], [other[k] for k in common])
    return p < alpha


def competition_ranks(rates: Sequence[float]) -> list[int]:
    """Standard competition ranking ("1224") of rates sorted in descending order."""
    ranks: list[int] = []
    for i, r in enumerate(rates):
        ranks.append(ranks[-1] if i and math.isclose(r, rates[i - 1]) else i + 1)
    return ranks


def macro_mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def tie_groups_vectorised(
    per_task_rates: Sequence[dict[str, float]], alpha: float, block: int = 1024
) -> list[int]:
    """``tie_groups`` with numpy: the same leader rule, each leader tested against the agents
    after it a block at a time (stopping at the first that differs), so 10,000 agents take
    milliseconds instead of a Python loop per agent. Same results as ``tie_groups``
    (tests/leaderboard/test_stats_vectorised.py)."""
    n_agents = len(per_task_rates)
    if not n_agents:
        return []
    keys = sorted({k for rates in per_task_rates for k in rates})
    column = {k: j for j, k in enumerate(keys)}
    matrix = np.full((n_agents, len(keys)), np.nan)
    for i, rates in enumerate(per_task_rates):
        for k, v in rates.items():
            matrix[i, column[k]] = v
    groups = np.zeros(n_agents, dtype=np.int64)
    group, leader = 1, 0
    groups[0] = 1
    start = 1
    while start < n_agents:
        rest = matrix[start:start + block]
        differs = _differs_vectorised(matrix[leader], rest, alpha)
        hit = int(np.argmax(differs)) if differs.any() else -1
        if hit < 0:
            groups[start:start + len(rest)] = group
            start += len(rest)
            continue
        groups[start:start + hit] = group
        group += 1
        leader = start + hit
        groups[leader] = group
        start = leader + 1
    return groups.tolist()


def _differs_vectorised(leader: np.ndarray, others: np.ndarray, alpha: float) -> np.ndarray:
    """paired_p_value(leader, other) < alpha for each row of others, over shared tasks."""
    shared = ~np.isnan(others) & ~np.isnan(leader)[None, :]
    n = shared.sum(axis=1)
    diffs = np.where(shared, leader[None, :] - others, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = diffs.sum(axis=1) / n
        var = (np.where(shared, diffs - mean[:, None], 0.0) ** 2).sum(axis=1) / (n - 1)
        t = mean / np.sqrt(var / n)
        p = 2 * _scipy_stats.t.sf(np.abs(t), df=np.maximum(n - 1, 1))
    p = np.where(var == 0, np.where(mean == 0, 1.0, 0.0), p)
    p = np.where(n < 2, 1.0, p)
    return p < alpha
