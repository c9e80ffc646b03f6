"""The statistics across plausible benchmarks: ``simulate_stats --only robustness``.

The committed simulation (``devtools/simulation.py``) draws boards from the shape fitted to the
reconstructed paper data, whose agent-by-task interaction fits to 0: the reconstruction gives
every agent one shared difficulty per task, so it cannot show an interaction, and the paper's
per-category aggregates cannot identify one either (an interaction moves which tasks an agent
solves, never its per-category totals). Power measured there is optimistic. Here the same
estimators are scored on a grid of plausible benchmarks: the fitted task spread and category
difficulties with an agent-by-task interaction of sd 0, 0.5 and 1.0 (logit scale), each also
with one category made 3 logits harder. Measured per model: the interval's coverage (true rates
5% to 60%), how often ten equal agents are split, and how often 5-, 10- and 15-point gaps are
separated (two agents alone, and among eight others at the paper's rates). A second table
gives, per interaction sd, the power of two agents alone on a 54-task benchmark for several
attempts per task, so the page can say how many attempts an 80%-power comparison needs.

The rows go into ``leaderboard/data/simulation.csv`` beside the base table (metrics prefixed
``robustness:`` and ``attempts:``; the model in the estimator column), and the methods page
renders every figure it quotes from them (``leaderboard.simulation_results``).
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy.special import expit

from devtools.simulation import PAPER_OTHERS, TRUE_RATES, Row, Shape, Tally
from leaderboard import stats, stats_arrays
from leaderboard.simulation_results import CSV_COLUMNS, EQUAL_RATE, GAP_BASE, power_scenario
from leaderboard.simulation_robustness import (
    ATTEMPTS_GAPS,
    ATTEMPTS_GRID,
    ATTEMPTS_METRIC,
    HARD_SHIFT,
    INTERACTION_SDS,
    ROBUST_COVERAGE,
    ROBUST_GAPS,
    ROBUST_POWER,
    ROBUST_PREFIXES,
    ROBUST_SPLIT,
    ROBUST_SPLIT_SCENARIO,
    attempts_scenario,
    model_label,
)

EQUAL_AGENTS = 10


def model_shapes(base: Shape) -> dict[str, Shape]:
    """The plausible benchmarks: the fitted shape with each interaction sd, and the same with
    its largest category ``HARD_SHIFT`` logits harder."""
    largest = max(range(len(base.categories)), key=lambda i: base.categories[i][1])
    hard = tuple((slug, n, mu - HARD_SHIFT if i == largest else mu)
                 for i, (slug, n, mu) in enumerate(base.categories))
    out = {}
    for harder in (False, True):
        for sd in INTERACTION_SDS:
            out[model_label(sd, harder)] = replace(
                base, categories=hard if harder else base.categories, interaction_sd=sd)
    return out


def _groups(succ_board: np.ndarray, members: list[int], k: int, alpha: float) -> list[int]:
    """The site's tie groups of ``members`` ranked alone (by successes, ties in listed order),
    returned in ``members`` order."""
    order = sorted(members, key=lambda i: -int(succ_board[i].sum()))
    n_tasks = succ_board.shape[1]
    groups = stats.tie_groups_vectorised(
        succ_board[order] / k, alpha,
        rates=[float(succ_board[i].sum()) / (k * n_tasks) for i in order])
    by = dict(zip(order, groups, strict=True))
    return [by[i] for i in members]


def _agents() -> list[tuple[str, float]]:
    agents = [("rate", r) for r in TRUE_RATES] + [("equal", EQUAL_RATE)] * EQUAL_AGENTS
    agents += [("gap-base", GAP_BASE)] + [(f"gap{g}", GAP_BASE + g) for g in ROBUST_GAPS]
    return agents + [("paper", r) for r in PAPER_OTHERS]


def _draw(shape: Shape, theta: np.ndarray, b: int, rng) -> np.ndarray:
    """Successes (boards x agents x tasks) of ``b`` fresh benchmarks."""
    delta = shape.task_sd * rng.standard_normal((b, 1, shape.n_tasks))
    eps = shape.interaction_sd * rng.standard_normal((b, len(theta), shape.n_tasks))
    p = expit(theta[None, :, None] + shape.task_mu[None, None, :] + delta + eps)
    return rng.binomial(shape.attempts, p)


def simulate_model(label: str, shape: Shape, *, boards: int, seed: int, alpha: float,
                   chunk: int = 500) -> list[Row]:
    """Coverage, equal-agent splits and power on ``boards`` boards of one model."""
    rng = np.random.default_rng(seed)
    agents = _agents()
    theta = np.array([shape.theta_for(r) for _, r in agents])
    role: dict[str, list[int]] = {}
    for i, (name, _) in enumerate(agents):
        role.setdefault(name, []).append(i)
    strata = [c for c, n, _ in shape.categories for _ in range(n)]
    k = shape.attempts
    cover = {r: Tally() for r in TRUE_RATES}
    split = Tally()
    power = {(g, m): Tally() for g in ROBUST_GAPS for m in (2, 10)}
    done = 0
    while done < boards:
        b = min(chunk, boards - done)
        done += b
        succ = _draw(shape, theta, b, rng)
        y = succ[:, role["rate"], :].reshape(-1, shape.n_tasks)
        est = stats_arrays.clustered_rates(y, np.full_like(y, k), strata)
        truth = np.tile(np.array(TRUE_RATES), b)
        hit = ((est.ci_low <= truth) & (truth <= est.ci_high)).reshape(b, len(TRUE_RATES))
        for slot, r in enumerate(TRUE_RATES):
            cover[r].add(hit[:, slot])
        base, others = role["gap-base"][0], role["paper"]
        for j in range(b):
            board = succ[j]
            split.add(len(set(_groups(board, role["equal"], k, alpha))) > 1)
            for g in ROBUST_GAPS:
                better = role[f"gap{g}"][0]
                for m in (2, 10):
                    members = [base, better] + (others if m > 2 else [])
                    groups = _groups(board, members, k, alpha)
                    power[(g, m)].add(groups[0] != groups[1])
    rows = [Row(ROBUST_COVERAGE, f"true rate {r:.0%}", label, t.mean, t.se, 0.95, t.n)
            for r, t in cover.items()]
    rows.append(Row(ROBUST_SPLIT, ROBUST_SPLIT_SCENARIO, label, split.mean, split.se, None,
                    split.n))
    rows += [Row(ROBUST_POWER, power_scenario(g, m), label, t.mean, t.se, None, t.n)
             for (g, m), t in power.items()]
    return rows


def simulate_attempts(base: Shape, *, boards: int, seed: int, alpha: float) -> list[Row]:
    """Power to separate two agents alone (30% vs 30% + gap) on the fitted 54-task shape, for
    each interaction sd, gap and number of attempts per task in ``ATTEMPTS_GRID``. The same
    benchmarks (task and interaction draws) serve every number of attempts."""
    rows = []
    for s_i, sd in enumerate(INTERACTION_SDS):
        shape = replace(base, interaction_sd=sd)
        for g_i, gap in enumerate(ATTEMPTS_GAPS):
            theta = np.array([shape.theta_for(GAP_BASE), shape.theta_for(GAP_BASE + gap)])
            rng = np.random.default_rng([seed, s_i, g_i])
            delta = shape.task_sd * rng.standard_normal((boards, 1, shape.n_tasks))
            eps = sd * rng.standard_normal((boards, 2, shape.n_tasks))
            p = expit(theta[None, :, None] + shape.task_mu[None, None, :] + delta + eps)
            for k in ATTEMPTS_GRID:
                succ = rng.binomial(k, p)
                sep = Tally()
                for j in range(boards):
                    groups = _groups(succ[j], [0, 1], k, alpha)
                    sep.add(groups[0] != groups[1])
                rows.append(Row(ATTEMPTS_METRIC, attempts_scenario(gap, k),
                                model_label(sd, False), sep.mean, sep.se, None, sep.n))
    return rows


def merge_csv(rows: list[Row], path: Path, *, boards: int, seed: int) -> None:
    """Replace the robustness and attempts rows of the committed table, keeping its base rows
    (and their order) as they are."""
    kept = []
    if path.exists():
        with open(path, encoding="utf-8", newline="") as fh:
            kept = [r for r in csv.DictReader(fh) if not r["metric"].startswith(ROBUST_PREFIXES)]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(CSV_COLUMNS)
        for r in kept:
            out.writerow([r[c] for c in CSV_COLUMNS])
        for r in rows:
            out.writerow([r.metric, r.scenario, r.estimator, f"{r.value:.5f}", f"{r.mc_se:.5f}",
                          "" if r.truth is None else f"{r.truth:.5f}", r.n, boards, seed])


def robust_rows(path: Path) -> list[dict]:
    """The committed robustness and attempts rows (a base-table rerun keeps them)."""
    if not path.exists():
        return []
    with open(path, encoding="utf-8", newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["metric"].startswith(ROBUST_PREFIXES)]


def append_rows(kept: list[dict], path: Path) -> None:
    with open(path, "a", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh, lineterminator="\n")
        for r in kept:
            out.writerow([r[c] for c in CSV_COLUMNS])
