"""Statistics behind every number on the leaderboard. Pure functions, no database.

Methods (also written up on the site's Methods page):

* Success rate: successes / scored attempts, pooled over every attempt of every task.
  Infrastructure errors are not scored attempts; timeouts and agent errors are failures.
* 95% interval: attempts of one task are correlated (same task, same agent), so the interval
  uses a task-clustered (cluster-robust) variance of the pooled ratio, stratified by category
  when the categories are given (a benchmark's category sizes are fixed, so only the spread
  of tasks around their category's mean is sampling noise; one-task categories are pooled),
      V = sum_h T_h/(T_h-1) * sum_{t in h} (e_t - mean_h e)^2 / N^2,  e_t = y_t - p n_t,
  turned into a design effect deff = V / (p(1-p)/N), clamped to [1, N/T] (between independent
  attempts and fully correlated ones), and a Wilson score interval on the effective sample size
  N / deff. When p is 0 or 1 the variance is 0/0 and deff takes its conservative bound N/T.
  Without strata this is the plain task-clustered variance T/(T-1) * sum_t e_t^2 / N^2.
* Ties: a two-sided paired t-test over tasks on the per-task success rates of two agents, at
  a Bonferroni level over every pair of ranked agents (alpha / (K(K-1)/2) for K agents).
  Agents in rank order join the current tie group while they are not significantly different
  from that group's leader; otherwise they start a new group.
* Both choices are checked by simulation (leaderboard/simulation.py, manage.py simulate_stats).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Sequence
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


def clustered_rate(
    per_task: Sequence[tuple[int, int]], strata: Sequence[Hashable] | None = None
) -> RateEstimate:
    """Pooled rate over (successes, attempts) per task, with a task-clustered Wilson interval.

    ``strata`` (one label per task, e.g. its category) makes the cluster variance stratified:
    a benchmark has a fixed number of tasks in each category, so differences between category
    means are not sampling noise; only the spread of tasks around their category's mean is.
    Categories with a single task are pooled together (collapsed strata)."""
    labels = list(strata) if strata is not None else [None] * len(per_task)
    clusters = [(y, n, s) for (y, n), s in zip(per_task, labels, strict=True) if n > 0]
    successes = sum(y for y, _, _ in clusters)
    attempts = sum(n for _, n, _ in clusters)
    if attempts == 0:
        return RateEstimate(0, 0, 0.0, 0.0, 1.0, 1.0)
    rate = successes / attempts
    n_clusters = len(clusters)
    mean_cluster = attempts / n_clusters
    binomial_var = rate * (1 - rate) / attempts
    if binomial_var == 0 or n_clusters < 2:
        deff = mean_cluster
    else:
        clustered_var = _stratified_sum(clusters, rate) / attempts**2
        deff = min(max(clustered_var / binomial_var, 1.0), mean_cluster)
    low, high = wilson_interval(rate, attempts / deff)
    return RateEstimate(successes, attempts, rate, low, high, deff)


def _stratified_sum(clusters: list[tuple[int, int, Hashable]], rate: float) -> float:
    """sum over strata of T_h/(T_h-1) * sum_t (e_t - mean_h e)^2, e_t = y_t - rate n_t; with a
    single stratum this is T/(T-1) * sum_t (y_t - rate n_t)^2 (the residuals sum to 0)."""
    by_stratum: dict[Hashable, list[float]] = {}
    for y, n, s in clusters:
        by_stratum.setdefault(s, []).append(y - rate * n)
    if len(by_stratum) > 1:
        singles = [s for s, e in by_stratum.items() if len(e) == 1]
        if singles:
            by_stratum["\0collapsed"] = [by_stratum.pop(s)[0] for s in singles]
    total = 0.0
    for resid in by_stratum.values():
        t = len(resid)
        if t < 2:
            continue
        centre = sum(resid) / t
        total += t / (t - 1) * sum((e - centre) ** 2 for e in resid)
    return total


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


@functools.lru_cache(maxsize=4096)
def tie_critical_value(alpha: float, family: int, df: int) -> float:
    """The |t| (paired t statistic over tasks, df = shared tasks - 1) above which an agent
    differs from its group's leader: the two-sided t quantile at alpha / m, where m =
    family (family - 1) / 2 is the number of pairs among the ``family`` agents ranked
    (Bonferroni over every pair). Among agents of equal true ability the chance that any of
    them is split off is then at most alpha, however many are ranked; for two agents it is the
    plain paired t-test at alpha."""
    if df < 1:
        return math.inf
    pairs = max(family * (family - 1) // 2, 1)
    return float(_scipy_stats.t.isf(alpha / (2 * pairs), df))


def tie_groups(
    per_task_rates: Sequence[dict[str, float]], alpha: float, family: int | None = None
) -> list[int]:
    """Tie-group number (1-based) of each agent, given agents in rank order.

    ``per_task_rates[i]`` maps task key -> agent i's success rate on it; the paired test uses
    the tasks both agents attempted, at the critical value of ``tie_critical_value`` for
    ``family`` agents (default: every agent given). ``family=2`` is the unadjusted paired
    t-test the site used before issue 14.
    """
    family = len(per_task_rates) if family is None else family
    groups: list[int] = []
    leader: dict[str, float] | None = None
    group = 0
    for rates in per_task_rates:
        if leader is None or _differs(leader, rates, alpha, family):
            group += 1
            leader = rates
        groups.append(group)
    return groups


def _differs(leader: dict[str, float], other: dict[str, float], alpha: float,
             family: int) -> bool:
    common = sorted(leader.keys() & other.keys())
    diffs = [leader[k] - other[k] for k in common]
    n = len(diffs)
    if n < 2:
        return False
    mean = sum(diffs) / n
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1)
    if var == 0:
        # Identical differences on every task: no noise, so any non-zero gap is certain.
        return mean != 0
    return abs(mean / math.sqrt(var / n)) > tie_critical_value(alpha, family, n - 1)


def competition_ranks(rates: Sequence[float]) -> list[int]:
    """Standard competition ranking ("1224") of rates sorted in descending order."""
    ranks: list[int] = []
    for i, r in enumerate(rates):
        ranks.append(ranks[-1] if i and math.isclose(r, rates[i - 1]) else i + 1)
    return ranks


def pass_at_k(per_task: Sequence[tuple[int, int]]) -> float:
    """pass@k as the site reports it: the share of tasks (with a scored attempt) solved in at
    least one of their scored attempts; ``per_task`` is (successes, scored attempts) per task."""
    scored = [(y, n) for y, n in per_task if n]
    return sum(1 for y, _ in scored if y) / len(scored) if scored else 0.0


def pass_hat_k(per_task: Sequence[tuple[int, int]]) -> float:
    """pass^k: the share of tasks (with a scored attempt) solved in every scored attempt."""
    scored = [(y, n) for y, n in per_task if n]
    return sum(1 for y, n in scored if y == n) / len(scored) if scored else 0.0


def macro_mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def tie_groups_vectorised(
    per_task_rates: Sequence[dict[str, float]], alpha: float, block: int = 1024,
    family: int | None = None,
) -> list[int]:
    """``tie_groups`` with numpy: the same leader rule, each leader tested against the agents
    after it a block at a time (stopping at the first that differs), so 10,000 agents take
    milliseconds instead of a Python loop per agent. Same results as ``tie_groups``
    (tests/leaderboard/test_stats_vectorised.py)."""
    n_agents = len(per_task_rates)
    if not n_agents:
        return []
    family = n_agents if family is None else family
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
        differs = _differs_vectorised(matrix[leader], rest, alpha, family)
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


def _differs_vectorised(leader: np.ndarray, others: np.ndarray, alpha: float,
                        family: int) -> np.ndarray:
    """_differs(leader, other, alpha, family) for each row of others, over shared tasks."""
    shared = ~np.isnan(others) & ~np.isnan(leader)[None, :]
    n = shared.sum(axis=1)
    diffs = np.where(shared, leader[None, :] - others, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = diffs.sum(axis=1) / n
        var = (np.where(shared, diffs - mean[:, None], 0.0) ** 2).sum(axis=1) / (n - 1)
        t = np.abs(mean / np.sqrt(var / n))
    dfs, where = np.unique(n - 1, return_inverse=True)
    critical = np.array([tie_critical_value(alpha, family, int(d)) for d in dfs])[where]
    differs = t > critical
    differs = np.where(var == 0, mean != 0, differs)
    return np.where(n < 2, False, differs)
