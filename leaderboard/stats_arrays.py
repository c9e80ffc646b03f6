"""leaderboard/stats.py's per-agent estimates for many agents at once, with numpy.

Each function takes (agents x tasks) arrays and returns, for every agent (row), exactly the
float ``stats`` returns for that agent's list: the same operations in the same order, sums
taken task by task across all agents at once (``_fsum`` repeats Python's ``sum`` of floats,
which compensates since 3.12). tests/leaderboard/test_stats_arrays.py checks equality (==,
not approx) on random data. Pure functions, no database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from leaderboard.stats import Z_95


@dataclass(frozen=True)
class RateEstimates:
    """stats.RateEstimate for each agent: one array per field."""

    successes: np.ndarray
    attempts: np.ndarray
    rate: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    design_effect: np.ndarray


class _FSum:
    """Python's built-in sum() of floats (Neumaier-compensated), one running sum per row,
    fed one column at a time; ``mask`` says which rows take the value."""

    def __init__(self, rows: int) -> None:
        self.total = np.zeros(rows)
        self.comp = np.zeros(rows)

    def add(self, x: np.ndarray, mask: np.ndarray) -> None:
        t = self.total + x
        comp = np.where(np.abs(self.total) >= np.abs(x), (self.total - t) + x,
                        (x - t) + self.total)
        self.comp = np.where(mask, self.comp + comp, self.comp)
        self.total = np.where(mask, t, self.total)

    def result(self) -> np.ndarray:
        fix = (self.comp != 0) & np.isfinite(self.comp)
        return np.where(fix, self.total + self.comp, self.total)


def _square(x: np.ndarray) -> np.ndarray:
    """x * x, as leaderboard/stats.py squares: one IEEE multiplication, the same bits on every
    CPU. (Squaring with pow() is not: numpy's power() takes an AVX-512 path on CPUs that have
    it, 1 ulp away from C's pow() that Python's ``x ** 2`` calls; the test comparing the two
    modules failed on such a machine.)"""
    return x * x


def _fsum(columns: Sequence[np.ndarray], masks: Sequence[np.ndarray], rows: int) -> np.ndarray:
    acc = _FSum(rows)
    for x, m in zip(columns, masks, strict=True):
        acc.add(x, m)
    return acc.result()


def wilson_intervals(rate: np.ndarray, n: np.ndarray, z: float = Z_95
                     ) -> tuple[np.ndarray, np.ndarray]:
    """stats.wilson_interval row by row (n > 0; rows with n <= 0 get (0, 1))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        z2 = z * z
        denom = 1 + z2 / n
        centre = (rate + z2 / (2 * n)) / denom
        half = z / denom * np.sqrt(rate * (1 - rate) / n + z2 / (4 * n * n))
        low, high = centre - half, centre + half
    # max(0.0, x) and min(1.0, x) as Python evaluates them (the first argument on a tie).
    low = np.where(low > 0.0, low, 0.0)
    high = np.where(high < 1.0, high, 1.0)
    positive = n > 0
    return np.where(positive, low, 0.0), np.where(positive, high, 1.0)


def clustered_rates(y: np.ndarray, n: np.ndarray, strata: Sequence | None = None
                    ) -> RateEstimates:
    """stats.clustered_rate for each row: ``y`` and ``n`` are (agents x tasks) successes and
    scored attempts, columns in the order the per-task lists would have them (a task an
    agent did not attempt has n = 0, exactly like one whose attempts were all infrastructure
    errors: both leave the estimate). ``strata`` labels each column (its category)."""
    y = np.asarray(y, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    rows, cols = n.shape
    valid = n > 0
    y = np.where(valid, y, 0)
    successes = y.sum(axis=1)
    attempts = n.sum(axis=1)
    n_clusters = valid.sum(axis=1)
    has = attempts > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(has, successes / attempts, 0.0)
        mean_cluster = attempts / n_clusters
        binomial_var = rate * (1 - rate) / attempts
        resid = y - rate[:, None] * n
        stratified = _stratified_sums(resid, valid, strata, rows, cols)
        clustered_var = stratified / attempts ** 2
        ratio = clustered_var / binomial_var
    ratio = np.where(1.0 > ratio, 1.0, ratio)  # max(ratio, 1.0)
    clamped = np.where(mean_cluster < ratio, mean_cluster, ratio)  # min(ratio, mean_cluster)
    deff = np.where((binomial_var == 0) | (n_clusters < 2), mean_cluster, clamped)
    with np.errstate(divide="ignore", invalid="ignore"):
        low, high = wilson_intervals(rate, attempts / deff)
    return RateEstimates(
        successes=successes, attempts=attempts, rate=rate,
        ci_low=np.where(has, low, 0.0), ci_high=np.where(has, high, 1.0),
        design_effect=np.where(has, deff, 1.0),
    )


def _stratified_sums(resid: np.ndarray, valid: np.ndarray, strata: Sequence | None,
                     rows: int, cols: int) -> np.ndarray:
    """stats._stratified_sum per row: strata in order of their first valid column, one-task
    strata collapsed into one stratum added last (when a row has more than one stratum)."""
    labels = [None] * cols if strata is None else list(strata)
    order: dict = {}
    for j, label in enumerate(labels):
        order.setdefault(label, []).append(j)
    groups = list(order.values())
    n_groups = len(groups)
    counts = np.zeros((rows, n_groups), dtype=np.int64)
    terms = np.zeros((rows, n_groups))
    single = np.zeros((rows, n_groups))  # the residual of a stratum's only valid task
    first = np.full((rows, n_groups), cols, dtype=np.int64)
    for h, columns in enumerate(groups):
        masks = [valid[:, j] for j in columns]
        t = np.sum(masks, axis=0)
        counts[:, h] = t
        for j in reversed(columns):
            first[:, h] = np.where(valid[:, j], j, first[:, h])
        total = _fsum([resid[:, j] for j in columns], masks, rows)
        single[:, h] = total
        with np.errstate(divide="ignore", invalid="ignore"):
            centre = total / t
            squares = _fsum([_square(resid[:, j] - centre) for j in columns], masks, rows)
            terms[:, h] = np.where(t >= 2, t / (t - 1) * squares, 0.0)
    present = counts > 0
    several = present.sum(axis=1) > 1
    is_single = (counts == 1) & several[:, None]
    # Strata in order of first appearance; absent ones (term 0.0) sort last.
    by_first = np.argsort(first, axis=1, kind="stable")
    total = np.zeros(rows)
    collapsed = _FSum(rows)
    for k in range(n_groups):
        h = by_first[:, k:k + 1]
        total = total + np.take_along_axis(terms, h, axis=1)[:, 0]
        collapsed.add(np.take_along_axis(single, h, axis=1)[:, 0],
                      np.take_along_axis(is_single, h, axis=1)[:, 0])
    t = is_single.sum(axis=1)
    centre_sum = collapsed.result()
    with np.errstate(divide="ignore", invalid="ignore"):
        centre = centre_sum / t
    squares = _FSum(rows)
    for k in range(n_groups):
        h = by_first[:, k:k + 1]
        e = np.take_along_axis(single, h, axis=1)[:, 0]
        squares.add(_square(e - centre), np.take_along_axis(is_single, h, axis=1)[:, 0])
    with np.errstate(divide="ignore", invalid="ignore"):
        last = np.where(t >= 2, t / (t - 1) * squares.result(), 0.0)
    return total + last


def pass_at_k(y: np.ndarray, n: np.ndarray) -> np.ndarray:
    """stats.pass_at_k per row."""
    scored = n > 0
    tasks = scored.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tasks > 0, (scored & (y > 0)).sum(axis=1) / tasks, 0.0)


def pass_hat_k(y: np.ndarray, n: np.ndarray) -> np.ndarray:
    """stats.pass_hat_k per row."""
    scored = n > 0
    tasks = scored.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tasks > 0, (scored & (y == n)).sum(axis=1) / tasks, 0.0)


def macro_means(values: Sequence[np.ndarray], masks: Sequence[np.ndarray], rows: int
                ) -> np.ndarray:
    """stats.macro_mean per row over the values its mask keeps (NaN where none: None)."""
    if not values:
        return np.full(rows, np.nan)
    count = np.sum(masks, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(count > 0, _fsum(values, masks, rows) / count, np.nan)
