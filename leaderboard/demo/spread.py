"""How the reconstructed board's figures move with the reconstruction's seed.

The integer program (``reconstruct.solve_successes``) pins every agent's successes in every
category: the pooled, per-category and imaging/text rates are the same for every seed. How those
successes spread over the tasks of a category is a seeded draw, and that spread drives the
task-clustered intervals, the paired tie test, pass@3 and pass^3 and the per-task cells.

``spread(paper, seeds, alpha)`` reconstructs once per seed, scores each draw with the site's own
functions (``stats_arrays.clustered_rates``, ``stats.tie_groups_vectorised``, pass@k) and returns
the seed-free figures (raising if any differs between seeds) beside the envelope of the seeded
ones: each agent's tie-group counts, the range of each interval bound, of pass@3 and pass^3, and
of each category interval's bounds. ``devtools``' ``reconstruction_spread`` command writes it to
``leaderboard/data/reconstruction_spread.csv``; the pages read that file
(``leaderboard/reconstruction_spread.py``), never this module.

Pure numpy: no Django import.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from leaderboard import stats, stats_arrays
from leaderboard.demo.reconstruct import DEFAULT_SEED, reconstruct

__all__ = ["DEFAULT_SPREAD_SEEDS", "Draw", "Spread", "csv_rows", "draw_figures", "paper_digest",
           "spread", "spread_seeds"]

DEFAULT_SPREAD_SEEDS = 200
SPREAD_ENTROPY = 20261205  # the other seeds are SeedSequence(SPREAD_ENTROPY)'s first words


def spread_seeds(count: int = DEFAULT_SPREAD_SEEDS) -> list[int]:
    """``count`` independent seeds: the demo's default seed (so the board ``load_demo`` shows
    by default is one of the draws) and ``count - 1`` 32-bit words of a SeedSequence."""
    rest = np.random.SeedSequence(SPREAD_ENTROPY).generate_state(max(count - 1, 0))
    return [DEFAULT_SEED, *(int(s) for s in rest)][:count]


def paper_digest(paper: dict) -> str:
    """A digest of the published aggregates the spread was computed from (the file is stale
    when ``paper.yaml`` changes)."""
    return hashlib.sha256(repr(paper).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Draw:
    """One reconstruction's figures, agents in the paper's rank order."""

    agents: list[str]
    seed_free: dict[str, tuple]  # figure name -> one value per agent (or per agent x category)
    ci_low: np.ndarray
    ci_high: np.ndarray
    pass_at_k: np.ndarray
    pass_hat_k: np.ndarray
    tie_group: list[int]
    category_ci_low: np.ndarray  # agents x categories
    category_ci_high: np.ndarray


def _matrices(paper: dict, seed: int) -> tuple[list[str], list[str], list[str], np.ndarray,
                                                np.ndarray]:
    """(agents, tasks, each task's category, successes and attempts as agents x tasks)."""
    rows = reconstruct(paper, seed)
    agents = [e["agent"] for e in paper["leaderboard"]]
    tasks, category = [], {}
    for r in rows:
        if r.task not in category:
            category[r.task] = r.category
            tasks.append(r.task)
    a_ix = {a: i for i, a in enumerate(agents)}
    t_ix = {t: j for j, t in enumerate(tasks)}
    y = np.zeros((len(agents), len(tasks)), dtype=np.int64)
    n = np.zeros_like(y)
    for r in rows:
        i, j = a_ix[r.agent], t_ix[r.task]
        n[i, j] += 1
        y[i, j] += int(r.success)
    return agents, tasks, [category[t] for t in tasks], y, n


def draw_figures(paper: dict, seed: int, alpha: float) -> Draw:
    """Every figure of one reconstruction, computed as the site's rebuild computes it."""
    agents, _tasks, strata, y, n = _matrices(paper, seed)
    overall = stats_arrays.clustered_rates(y, n, strata)
    groups = {c["slug"]: c["group"] for c in paper["categories"]}
    slugs = [c["slug"] for c in paper["categories"]]
    cat_est = []
    for slug in slugs:
        cols = [j for j, s in enumerate(strata) if s == slug]
        cat_est.append(stats_arrays.clustered_rates(y[:, cols], n[:, cols]))
    seed_free: dict[str, tuple] = {
        "successes": tuple(overall.successes.tolist()),
        "attempts": tuple(overall.attempts.tolist()),
        "success_rate": tuple(overall.rate.tolist()),
        "category_successes": tuple(tuple(e.successes[i] for e in cat_est)
                                    for i in range(len(agents))),
        "category_rate": tuple(tuple(e.rate[i] for e in cat_est) for i in range(len(agents))),
    }
    for group in ("imaging", "text"):
        members = [e for e, s in zip(cat_est, slugs, strict=True) if groups[s] == group]
        s = sum(e.successes for e in members)
        t = sum(e.attempts for e in members)
        seed_free[f"{group}_pooled"] = tuple((s / t).tolist())
        seed_free[f"{group}_macro"] = tuple(stats_arrays.macro_means(
            [e.rate for e in members], [e.attempts > 0 for e in members], len(agents)).tolist())
    # The site's rank order: success rate, then successes (equal rates form one run that the
    # tie test keeps together whatever the later tie-breaks say).
    order = sorted(range(len(agents)), key=lambda i: (-overall.rate[i], -overall.successes[i], i))
    with np.errstate(divide="ignore", invalid="ignore"):
        task_rates = np.where(n > 0, y / np.where(n > 0, n, 1), np.nan)
    ranked = stats.tie_groups_vectorised(task_rates[order], alpha,
                                         rates=[float(overall.rate[i]) for i in order])
    tie_group = [0] * len(agents)
    for i, g in zip(order, ranked, strict=True):
        tie_group[i] = g
    return Draw(
        agents=agents, seed_free=seed_free, ci_low=overall.ci_low, ci_high=overall.ci_high,
        pass_at_k=stats_arrays.pass_at_k(y, n), pass_hat_k=stats_arrays.pass_hat_k(y, n),
        tie_group=tie_group,
        category_ci_low=np.column_stack([e.ci_low for e in cat_est]),
        category_ci_high=np.column_stack([e.ci_high for e in cat_est]))


@dataclass
class Spread:
    """The envelope of the seeded figures over ``seeds``, and the seed-free ones."""

    agents: list[str]
    categories: list[str]
    seeds: list[int]
    digest: str
    seed_free: dict[str, tuple]
    group_counts: list[Counter] = field(default_factory=list)
    patterns: Counter = field(default_factory=Counter)
    low: dict[str, np.ndarray] = field(default_factory=dict)  # figure -> per-agent minimum
    high: dict[str, np.ndarray] = field(default_factory=dict)  # figure -> per-agent maximum

    def add(self, d: Draw) -> None:
        if d.seed_free != self.seed_free:
            raise AssertionError("a figure the integer program pins moved with the seed")
        for i, g in enumerate(d.tie_group):
            self.group_counts[i][g] += 1
        self.patterns["".join(str(g) for g in d.tie_group)] += 1
        for name, values in (("ci_low", d.ci_low), ("ci_high", d.ci_high),
                             ("pass_at_k", d.pass_at_k), ("pass_hat_k", d.pass_hat_k),
                             ("category_ci_low", d.category_ci_low),
                             ("category_ci_high", d.category_ci_high)):
            self.low[name] = np.minimum(self.low.get(name, values), values)
            self.high[name] = np.maximum(self.high.get(name, values), values)


def spread(paper: dict, seeds: list[int], alpha: float) -> Spread:
    """Reconstruct once per seed and collect the envelope (about 0.1 s a seed)."""
    first = draw_figures(paper, seeds[0], alpha)
    out = Spread(agents=first.agents, categories=[c["slug"] for c in paper["categories"]],
                 seeds=list(seeds), digest=paper_digest(paper), seed_free=first.seed_free,
                 group_counts=[Counter() for _ in first.agents])
    out.add(first)
    for seed in seeds[1:]:
        out.add(draw_figures(paper, seed, alpha))
    return out


def csv_rows(s: Spread) -> list[tuple]:
    """The rows of ``leaderboard/data/reconstruction_spread.csv`` (reconstruction_spread's
    CSV_COLUMNS): per agent its tie-group shares, the range of each seeded figure, and the
    range of each category interval's bounds. Rates rounded to 6 places as in every CSV."""
    n = len(s.seeds)
    rows: list[tuple] = []
    names = (("ci_low", "ci_low"), ("ci_high", "ci_high"), ("pass_at_k", "pass_at_3"),
             ("pass_hat_k", "pass_hat_3"))
    for i, agent in enumerate(s.agents):
        for g, count in sorted(s.group_counts[i].items()):
            share = round(count / n, 6)
            rows.append((agent, "", f"tie_group_share:{g}", share, share, n, s.digest))
        for key, figure in names:
            rows.append((agent, "", figure, round(float(s.low[key][i]), 6),
                         round(float(s.high[key][i]), 6), n, s.digest))
        for j, slug in enumerate(s.categories):
            for figure in ("ci_low", "ci_high"):
                key = f"category_{figure}"
                rows.append((agent, slug, figure, round(float(s.low[key][i, j]), 6),
                             round(float(s.high[key][i, j]), 6), n, s.digest))
    return rows
