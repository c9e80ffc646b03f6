"""Comparing chosen agents task by task: the paired test, its multiplicity correction and its
words. Pure functions (numpy), no database; the compare page, its CSV and its API read them,
and ``devtools/simulation.py`` measures them.

* A pair of agents is compared on the tasks both have scored attempts on. Per task, each
  agent's success is its share of scored attempts passed (infrastructure errors are not
  scored), and the task's difference is A's share minus B's: pairing by task removes how hard
  each task is, which both agents share.
* The test is the paired sign-flip permutation test of the sum of those differences: under the
  null hypothesis that the two agents are exchangeable on every task, each task's difference is
  as likely to have either sign, so the p-value is the share of the 2^n sign assignments whose
  sum is at least as far from 0 as the observed one (two-sided). It needs no normality and is
  exact: when the differences are multiples of one small fraction (always, with a few attempts
  per task: 3 attempts give thirds, an infrastructure error halves) the 2^n sums are counted
  exactly by convolution over those integer multiples; otherwise, with at most
  ``ENUMERATE_MAX`` tasks that differ, every assignment is enumerated; otherwise a seeded Monte
  Carlo of ``MONTE_CARLO_DRAWS`` assignments estimates it (the method is named in the result).
* With more than two agents every pair is tested and the p-values are Holm-corrected over the
  pairs, so the chance that any pair of equal agents is called separable stays at most alpha.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from itertools import combinations

import numpy as np

# The largest count of differing tasks enumerated sign by sign (2^20 sums, 8 MB at a time).
ENUMERATE_MAX = 20
# The largest sum of the differences, in units of their common fraction, counted by
# convolution: 54 tasks of 3 attempts with an infrastructure error need at most 54 x 6.
EXACT_SCALE_MAX = 20_000
MONTE_CARLO_DRAWS = 100_000
MONTE_CARLO_SEED = 20261207
EXACT, ENUMERATED, MONTE_CARLO = "exact (convolution)", "exact (enumeration)", "Monte Carlo"
# Floating-point slack when comparing a permuted sum with the observed one.
_TOL = 1e-9


def task_share(outcomes: str) -> float | None:
    """The share of a cell's scored attempts passed (P over P/F/T/E; I and - are not scored),
    or None when none was scored."""
    scored = sum(c in "PFTE" for c in outcomes)
    return outcomes.count("P") / scored if scored else None


@dataclass(frozen=True)
class SignFlip:
    p_value: float
    method: str  # EXACT, ENUMERATED or MONTE_CARLO
    draws: int = 0  # Monte Carlo only
    seed: int | None = None


def _common_scale(values: Sequence[float], limit: int = 1000) -> int | None:
    """The least L with every value an integer multiple of 1/L (within float slack), or None
    when a value is not a fraction of denominator <= limit."""
    arr = np.asarray(values, dtype=float)
    for small in range(1, 65):  # the common case (attempts per task up to a few), vectorised
        scaled = arr * small
        if np.all(np.abs(scaled - np.rint(scaled)) <= _TOL * small):
            return small
    scale = 1
    for v in values:
        frac = Fraction(v).limit_denominator(limit)
        if abs(float(frac) - v) > _TOL:
            return None
        scale = math.lcm(scale, frac.denominator)
        if scale > limit:
            return None
    return scale


def _signed_sum_distribution(units: list[int]) -> np.ndarray:
    """P(sum of s_i u_i = k - sum u) for fair independent signs s_i, k = 0 .. 2 sum u: for
    each distinct value u held by c tasks, the signed sum is u (2 B - c) with B binomial
    (c, 1/2); the values' distributions are convolved."""
    dist = np.ones(1)
    for u in sorted(set(units)):
        c = units.count(u)
        piece = np.zeros(2 * u * c + 1)
        piece[::2 * u] = [math.comb(c, j) / 2.0**c for j in range(c + 1)]
        dist = np.convolve(dist, piece)
    return dist


def sign_flip_test(diffs: Sequence[float], *, draws: int = MONTE_CARLO_DRAWS,
                   seed: int = MONTE_CARLO_SEED) -> SignFlip:
    """Two-sided paired sign-flip permutation p-value of the per-task differences ``diffs``:
    P(|sum s_i d_i| >= |sum d_i|) over independent fair signs s_i. Zero differences do not
    move the sum and are left out. Exact when feasible (see the module), else Monte Carlo
    with (1 + hits) / (1 + draws)."""
    d = np.asarray([x for x in diffs if abs(x) > _TOL], dtype=float)
    if d.size == 0:
        return SignFlip(1.0, EXACT)
    observed = abs(float(d.sum()))
    scale = _common_scale(np.abs(d).tolist())
    if scale is not None:
        units = np.rint(np.abs(d) * scale).astype(np.int64)
        total = int(units.sum())
        if total <= EXACT_SCALE_MAX:
            dist = _signed_sum_distribution(units.tolist())
            target = int(round(observed * scale))
            sums = np.arange(-total, total + 1)
            return SignFlip(min(1.0, float(dist[np.abs(sums) >= target].sum())), EXACT)
    if d.size <= ENUMERATE_MAX:
        signs = ((np.arange(2 ** d.size)[:, None] >> np.arange(d.size)) & 1) * 2 - 1
        sums = np.abs(signs @ d)
        return SignFlip(float(np.mean(sums >= observed - _TOL)), ENUMERATED)
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, draws, 10_000):
        n = min(10_000, draws - start)
        signs = rng.integers(0, 2, size=(n, d.size)) * 2 - 1
        hits += int((np.abs(signs @ d) >= observed - _TOL).sum())
    return SignFlip((1 + hits) / (1 + draws), MONTE_CARLO, draws=draws, seed=seed)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input's order: the i-th smallest times
    (m - i + 1), made non-decreasing, capped at 1."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


@dataclass(frozen=True)
class PairTest:
    """One pair's comparison, ``better`` first (the higher mean share on the paired tasks)."""

    better: str
    worse: str
    tasks: int  # tasks both scored
    difference: float  # mean per-task share, better minus worse (a fraction)
    wins: int  # tasks where better's share is higher
    losses: int
    ties: int
    p_value: float
    p_adjusted: float  # Holm over the pairs compared (= p_value for a single pair)
    pairs: int  # how many pairs the correction covers
    method: str
    separable: bool
    draws: int = 0
    seed: int | None = None

    @property
    def corrected(self) -> bool:
        return self.pairs > 1


def paired_tests(shares: Mapping[str, Mapping[int, float | None]], *,
                 alpha: float = 0.05) -> list[PairTest]:
    """Every pair of ``shares`` (agent key -> task -> success share, None when unscored), in
    the mapping's order (first with second, first with third, ...), tested and Holm-corrected
    over all the pairs."""
    keys = list(shares)
    raw = []
    for a, b in combinations(keys, 2):
        common = [t for t in shares[a] if shares[a][t] is not None
                  and shares[b].get(t) is not None]
        diffs = [shares[a][t] - shares[b][t] for t in common]
        mean = sum(diffs) / len(diffs) if diffs else 0.0
        if mean < 0:
            a, b, diffs, mean = b, a, [-x for x in diffs], -mean
        raw.append((a, b, len(common), mean, diffs, sign_flip_test(diffs)))
    adjusted = holm([r[5].p_value for r in raw])
    out = []
    for (a, b, n, mean, diffs, test), p_adj in zip(raw, adjusted, strict=True):
        out.append(PairTest(
            better=a, worse=b, tasks=n, difference=mean,
            wins=sum(x > _TOL for x in diffs), losses=sum(x < -_TOL for x in diffs),
            ties=sum(abs(x) <= _TOL for x in diffs), p_value=test.p_value, p_adjusted=p_adj,
            pairs=len(raw), method=test.method, separable=n >= 1 and p_adj < alpha,
            draws=test.draws, seed=test.seed))
    return out


def format_p(p: float) -> str:
    """p as the page prints it: two decimals, three below 0.01, "< 0.001" below that, rounded
    half-up as every figure of the site (leaderboard.formatting)."""
    if p < 0.001:
        return "p < 0.001"
    quantum = Decimal("0.001") if p < 0.01 else Decimal("0.01")
    return f"p = {Decimal(str(float(p))).quantize(quantum, rounding=ROUND_HALF_UP)}"


def sentence(test: PairTest, names: Mapping[str, str], *, alpha: float = 0.05) -> str:
    """The pair's finding in the site's words, e.g. "A solves 6.2 points more than B,
    p = 0.03 (paired over the 54 tasks, Holm-corrected over 3 pairs): separable"."""
    a, b = names[test.better], names[test.worse]
    if test.tasks == 0:
        return f"{a} and {b} share no scored task: not separable (nothing to compare)"
    pts = test.difference * 100
    gap = (f"{a} and {b} solve the same share of tasks" if round(pts, 1) == 0
           else f"{a} solves {pts:.1f} points more than {b}")
    how = f"paired over the {test.tasks} task{'s' if test.tasks != 1 else ''}"
    if test.corrected:
        how += f", Holm-corrected over {test.pairs} pairs"
    p = format_p(test.p_adjusted)
    verdict = ("separable" if test.separable
               else f"not separable (a statistical tie at the {alpha:.0%} level)")
    return f"{gap}, {p} ({how}): {verdict}"


def disagree(shares: Sequence[float | None]) -> bool:
    """Whether the agents' success shares on a task differ (unscored cells left out)."""
    scored = [s for s in shares if s is not None]
    return len(scored) > 1 and max(scored) - min(scored) > _TOL


def spread(shares: Sequence[float | None]) -> float:
    scored = [s for s in shares if s is not None]
    return max(scored) - min(scored) if len(scored) > 1 else 0.0


# ---------------------------------------------------------------------------------------------
# The comparison a page, its CSV and the API show
# ---------------------------------------------------------------------------------------------

MAX_AGENTS = 8
MIN_AGENTS = 2


class CompareRefused(ValueError):
    """The agents asked for cannot be compared (too many, or not on this version)."""


def parse_agents(picked: Sequence[str], listed: str = "") -> list[str]:
    """The agent slugs asked for: each ``a=`` value and the comma-separated ``agents=``, in
    that order, blanks and repeats dropped. More than MAX_AGENTS is refused."""
    slugs = [s.strip() for s in [*picked, *listed.split(",")] if s.strip()]
    slugs = list(dict.fromkeys(slugs))
    if len(slugs) > MAX_AGENTS:
        raise CompareRefused(f"compare at most {MAX_AGENTS} agents ({len(slugs)} asked for)")
    return slugs


@dataclass(frozen=True)
class GridCell:
    entry: object  # the LeaderboardEntry (its agent and submission)
    outcomes: str  # the site's codes in attempt order, "" when the agent has no trial there
    passes: int
    scored: int
    share: float | None

    @property
    def attempts(self) -> list[tuple[int, str]]:
        return list(enumerate(self.outcomes, start=1))


@dataclass(frozen=True)
class GridRow:
    task: object  # the BenchmarkTask
    cells: list[GridCell]  # aligned with Comparison.entries
    differ: bool
    spread: float


@dataclass(frozen=True)
class Comparison:
    entries: list  # LeaderboardEntry rows, rank order
    rows: list[GridRow]  # tasks where the agents differ first (largest spread first)
    tests: list[PairTest]
    names: dict[str, str]
    alpha: float

    @property
    def differing(self) -> int:
        return sum(r.differ for r in self.rows)

    @property
    def findings(self) -> list[dict]:
        """Each pair's test with its names and its sentence."""
        return [{"test": t, "better": self.names[t.better], "worse": self.names[t.worse],
                 "words": sentence(t, self.names, alpha=self.alpha)} for t in self.tests]


def comparison(entries: Sequence, tasks: Sequence, *, alpha: float) -> Comparison:
    """The grid and the pairwise tests of ``entries`` (each with ``cells()`` by task pk and
    ``agent.slug``) over ``tasks`` (in the benchmark's order). No query."""
    cells = [e.cells() for e in entries]
    rows = []
    for t in tasks:
        row = []
        for e, by_task in zip(entries, cells, strict=True):
            cell = by_task.get(t.pk)
            codes = cell.outcomes if cell is not None else ""
            row.append(GridCell(e, codes, codes.count("P"), sum(c in "PFTE" for c in codes),
                                task_share(codes)))
        shares = [c.share for c in row]
        rows.append(GridRow(t, row, disagree(shares), spread(shares)))
    order = {id(r): i for i, r in enumerate(rows)}
    rows.sort(key=lambda r: (not r.differ, -r.spread, order[id(r)]))
    shares = {e.agent.slug: {r.task.pk: r.cells[i].share for r in rows}
              for i, e in enumerate(entries)}
    names = {e.agent.slug: e.agent.display_name for e in entries}
    return Comparison(list(entries), rows, paired_tests(shares, alpha=alpha), names, alpha)


def category_table(entries: Sequence) -> list[tuple[object, list]]:
    """(category, each entry's CategoryEntry or None) for every category any entry has, in
    category order (each entry's ``category_rows`` are in that order)."""
    categories: dict[int, object] = {}
    for e in entries:
        for ce in e.category_rows:
            categories.setdefault(ce.category_id, ce.category)
    by_entry = [{ce.category_id: ce for ce in e.category_rows} for e in entries]
    ordered = sorted(categories.values(), key=lambda c: (c.position, c.slug))
    return [(c, [rows.get(c.pk) for rows in by_entry]) for c in ordered]
