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
* Ties: groups are read down the ranking, each led by its top agent L. Walking down, the agents
  from L to an agent b (s agents) stay together unless a two-sided paired t-test over tasks of
  L vs b rejects at alpha / (s(s-1)/2) (Bonferroni over the stretch's pairs, a bound on its
  studentized range: the multiple-range idea of Newman-Keuls / REGW on stretches starting at
  the leader); the first agent that differs leads the next group. A run of equal success rates
  is tested as one and always shares a group. Before: every test at alpha / (K(K-1)/2) for all
  K agents ranked (``tie_groups_all_pairs``).
* Both choices are checked by simulation (devtools/simulation.py, manage.py simulate_stats).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

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
        total += t / (t - 1) * sum((e - centre) * (e - centre) for e in resid)
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
    var = sum((d - mean) * (d - mean) for d in diffs) / (n - 1)
    if var == 0:
        # Identical differences on every task: no noise, so any non-zero gap is certain.
        return 1.0 if mean == 0 else 0.0
    t = mean / math.sqrt(var / n)
    return float(2 * _scipy_stats.t.sf(abs(t), df=n - 1))


@functools.lru_cache(maxsize=4096)
def tie_critical_value(alpha: float, family: int, df: int) -> float:
    """The |t| (paired t statistic over tasks, df = shared tasks - 1) above which a set of
    ``family`` agents is not homogeneous: the two-sided t quantile at alpha / m, where m =
    family (family - 1) / 2 is the number of pairs in the set (a Bonferroni bound on the
    studentized range of the set). For two agents it is the plain paired t-test at alpha."""
    if df < 1:
        return math.inf
    pairs = max(family * (family - 1) // 2, 1)
    return float(_scipy_stats.t.isf(alpha / (2 * pairs), df))


def tie_groups(
    per_task_rates: Sequence[dict[str, float]], alpha: float,
    rates: Sequence[float] | None = None,
) -> list[int]:
    """Tie-group number (1-based) of each agent, given agents in rank order (reference
    implementation; the rebuild uses ``tie_groups_vectorised``, which gives the same groups).

    Each group is led by its top agent L. Walking down the ranking, the agents from L down to an
    agent b (s = b - L + 1 agents) stay together unless the paired t-test of L against b, over
    the tasks both attempted, rejects at the Bonferroni level for the set's s(s-1)/2 pairs
    (``tie_critical_value(alpha, s, df)``, a bound on the studentized range of s agents: L and b
    are the extremes of the set the ranking selected). The first agent that differs leads the
    next group. ``rates`` (the success rates the ranking sorts by) makes each run of equal rates
    (``math.isclose``, as ``competition_ranks``) one unit, tested as the set down to its last
    member: when any member differs from L the whole run starts the next group (led by its first
    member in the table's order), so equal rates always share a group and the groups do not
    depend on the order of tied agents' tests. An agent sharing fewer than two tasks with L
    cannot differ from it.
    """
    n_agents = len(per_task_rates)
    run_end = _run_ends(rates, n_agents)
    groups = [0] * n_agents
    leader, group, start = 0, 1, 0
    while start < n_agents:
        end = run_end[start]
        size = end - leader + 1
        if start > leader and any(
                _differs(per_task_rates[leader], per_task_rates[b], alpha, size)
                for b in range(start, end + 1)):
            group, leader = group + 1, start
        for b in range(start, end + 1):
            groups[b] = group
        start = end + 1
    return groups


def _run_ends(rates: Sequence[float] | None, n_agents: int) -> list[int]:
    """Index of the last agent of each agent's run of equal rates (itself without ``rates``)."""
    if rates is None:
        return list(range(n_agents))
    if len(rates) != n_agents:
        raise ValueError("rates must give one success rate per agent")
    ends = list(range(n_agents))
    for i in range(n_agents - 2, -1, -1):
        if math.isclose(rates[i], rates[i + 1]):
            ends[i] = ends[i + 1]
    return ends


def _differs(leader: dict[str, float], other: dict[str, float], alpha: float,
             family: int) -> bool:
    """Whether the paired t-test of leader vs other rejects at ``tie_critical_value(alpha,
    family, df)``; never when they share fewer than two tasks (no test)."""
    common = sorted(leader.keys() & other.keys())
    diffs = [leader[k] - other[k] for k in common]
    n = len(diffs)
    if n < 2:
        return False
    mean = sum(diffs) / n
    var = sum((d - mean) * (d - mean) for d in diffs) / (n - 1)
    if var == 0:
        # Identical differences on every task: no noise, so any non-zero gap is certain.
        return mean != 0
    return abs(mean / math.sqrt(var / n)) > tie_critical_value(alpha, family, n - 1)


def tie_groups_all_pairs(
    per_task_rates: Sequence[dict[str, float]], alpha: float, family: int | None = None
) -> list[int]:
    """The rule the site used before: in rank order an agent joins the current group unless the
    paired t-test against the group's leader rejects at alpha / (K(K-1)/2), Bonferroni over every
    pair of the ``family`` (default: all) K agents ranked. Kept for the simulation's "before"
    column (``family=2`` is the unadjusted test)."""
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
    per_task_rates: Sequence[dict[str, float]] | np.ndarray, alpha: float, block: int = 1024,
    rates: Sequence[float] | None = None,
) -> list[int]:
    """``tie_groups`` with numpy: each leader is tested against the agents after it ``block``
    rows at a time (one matrix operation per block, stopping at the first run that differs), so
    10,000 agents take milliseconds. Same groups as ``tie_groups``
    (tests/leaderboard/test_stats_vectorised.py). ``per_task_rates`` may also be the agents x
    tasks matrix itself (NaN: not scored; columns in sorted task key order)."""
    n_agents = len(per_task_rates)
    if not n_agents:
        return []
    run_end = _run_ends_vectorised(rates, n_agents)
    matrix = (per_task_rates if isinstance(per_task_rates, np.ndarray)
              else _rate_matrix(per_task_rates))
    critical = _CriticalValues(alpha)
    groups = np.zeros(n_agents, dtype=np.int64)
    leader, group = 0, 1
    start = int(run_end[0]) + 1  # the leader's own run is in its group
    groups[:start] = 1
    while start < n_agents:
        stop = int(run_end[min(start + block, n_agents) - 1]) + 1  # whole runs only
        t, n = _paired_t(matrix[leader], matrix[start:stop])
        size = run_end[start:stop] - leader + 1
        differs = (n >= 2) & (t > critical(size, n - 1))
        # a run differs when any of its members does
        firsts = np.flatnonzero(np.r_[True, run_end[start:stop - 1] != run_end[start + 1:stop]])
        run_differs = np.maximum.reduceat(differs, firsts)
        if not run_differs.any():
            groups[start:stop] = group
            start = stop
            continue
        new_leader = start + int(firsts[int(np.argmax(run_differs))])
        groups[start:new_leader] = group
        group, leader = group + 1, new_leader
        start = int(run_end[leader]) + 1
        groups[leader:start] = group
    return groups.tolist()


def tie_groups_all_pairs_vectorised(
    per_task_rates: Sequence[dict[str, float]], alpha: float, block: int = 1024,
    family: int | None = None,
) -> list[int]:
    """``tie_groups_all_pairs`` with numpy (the simulation's "before" column at full speed)."""
    n_agents = len(per_task_rates)
    if not n_agents:
        return []
    family = n_agents if family is None else family
    matrix = _rate_matrix(per_task_rates)
    critical = _CriticalValues(alpha)
    groups = np.zeros(n_agents, dtype=np.int64)
    group, leader = 1, 0
    groups[0] = 1
    start = 1
    while start < n_agents:
        rest = matrix[start:start + block]
        t, n = _paired_t(matrix[leader], rest)
        differs = (n >= 2) & (t > critical(np.full(len(rest), family), n - 1))
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


def _run_ends_vectorised(rates: Sequence[float] | None, n_agents: int) -> np.ndarray:
    """``_run_ends`` with numpy (the same ``math.isclose`` test, rel_tol 1e-9)."""
    if rates is None:
        return np.arange(n_agents)
    if len(rates) != n_agents:
        raise ValueError("rates must give one success rate per agent")
    r = np.asarray(rates, dtype=float)
    close = np.abs(r[1:] - r[:-1]) <= 1e-9 * np.maximum(np.abs(r[1:]), np.abs(r[:-1]))
    ends = np.flatnonzero(np.r_[~close, True])
    return ends[np.searchsorted(ends, np.arange(n_agents))]


def _rate_matrix(per_task_rates: Sequence[dict[str, float]]) -> np.ndarray:
    """Agents x tasks (sorted task keys) of per-task rates, NaN where a task was not scored.
    When every agent has the same tasks (the usual leaderboard) the values are read in C
    (itemgetter, fromiter): 10,000 agents x 54 tasks in milliseconds; else a row at a time."""
    n_agents = len(per_task_rates)
    keys = sorted({k for rates in per_task_rates[:1] for k in rates})
    if len(keys) > 1 and all(len(r) == len(keys) for r in per_task_rates):
        try:
            values = chain.from_iterable(map(itemgetter(*keys), per_task_rates))
            return np.fromiter(values, dtype=float, count=n_agents * len(keys)).reshape(
                n_agents, len(keys))
        except KeyError:
            pass  # same number of tasks, not the same tasks
    keys = sorted({k for rates in per_task_rates for k in rates})
    column = {k: j for j, k in enumerate(keys)}
    matrix = np.full((n_agents, len(keys)), np.nan)
    for i, rates in enumerate(per_task_rates):
        if rates:
            matrix[i, [column[k] for k in rates]] = list(rates.values())
    return matrix


def _paired_t(leader: np.ndarray, others: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """|paired t| of leader vs each row of others over their shared tasks, and the number of
    shared tasks. A zero variance gives |t| = inf for a non-zero mean difference, else 0."""
    shared = ~np.isnan(others) & ~np.isnan(leader)[None, :]
    n = shared.sum(axis=1)
    diffs = np.where(shared, leader[None, :] - others, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = diffs.sum(axis=1) / n
        var = (np.where(shared, diffs - mean[:, None], 0.0) ** 2).sum(axis=1) / (n - 1)
        t = np.abs(mean / np.sqrt(var / n))
    t = np.where(var == 0, np.where(mean != 0, np.inf, 0.0), t)
    return np.where(n >= 2, t, 0.0), n


_CRITICAL_TABLES: dict[tuple[float, int], np.ndarray] = {}


class _CriticalValues:
    """tie_critical_value(alpha, size, df) for arrays of set sizes and dfs: per (alpha, df) one
    table over set sizes, computed in one vectorised call, grown by doubling and kept for the
    process (a rebuild and every publish after it reuse it)."""

    def __init__(self, alpha: float):
        self.alpha = alpha

    def __call__(self, size: np.ndarray, df: np.ndarray) -> np.ndarray:
        out = np.full(len(size), np.inf)
        for d in np.unique(df):
            if d < 1:
                continue
            rows = df == d
            table = self._table(int(d), int(size[rows].max()))
            out[rows] = table[size[rows]]
        return out

    def _table(self, df: int, largest: int) -> np.ndarray:
        table = _CRITICAL_TABLES.get((self.alpha, df))
        if table is None or len(table) <= largest:
            sizes = np.arange(max(largest + 1, 2 * len(table) if table is not None else 64))
            pairs = np.maximum(sizes * (sizes - 1) // 2, 1)
            table = _scipy_stats.t.isf(self.alpha / (2 * pairs), df)
            table.flags.writeable = False
            _CRITICAL_TABLES[(self.alpha, df)] = table
        return table
