"""Monte Carlo check of the leaderboard's statistics: ``manage.py simulate_stats``.

A developer tool (devtools): it writes the tables under ``leaderboard/data/`` that the methods
page reads through ``leaderboard.simulation_results`` (their vocabulary lives there).

Draws benchmarks shaped like HealthAgentBench and scores simulated agents on them with the
site's own estimators (``leaderboard.stats``: the task-clustered Wilson interval, the tie
groups, pass@k and pass^k), then measures how those estimators behave against the truth the
simulation knows.

The benchmark model (fitted to the reconstructed paper data by ``fit_shape``): an agent with
ability ``theta`` passes an attempt at task ``t`` of category ``c`` with probability
``expit(theta + mu_c + delta_t + eps_at)``, where ``mu_c`` is the category's difficulty,
``delta_t ~ N(0, task_sd)`` the task's (shared by every agent on that benchmark) and
``eps_at ~ N(0, interaction_sd)`` the agent-task interaction; the three attempts at a task share
that probability, so they are correlated. The *true rate* of an agent is its expected success
rate over the population of tasks the benchmark samples from (the estimand of a task-clustered
interval); ``theta`` is solved for each target rate. Each simulated leaderboard draws a fresh
benchmark (54 tasks in the paper's category sizes) and fresh agents.

Pure numpy/scipy, no database, seeded: the same seed gives the same table.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy import optimize
from scipy.special import expit

from leaderboard import compare, stats
from leaderboard.formatting import format_pct as _pct  # the methods page's rounding
from leaderboard.simulation_results import (  # noqa: F401 - the committed tables' vocabulary
    ATTEMPTS,
    BOARD_SPLIT_SCENARIO,
    COMPARE_CSV_PATH,
    COMPARE_FPR,
    COMPARE_POWER,
    COMPARE_POWER_RIGHT,
    COMPARE_SCENARIOS,
    COMPARE_SITE,
    COMPARE_T,
    CSV_COLUMNS,
    CSV_PATH,
    EQUAL_RATE,
    GAP_BASE,
    HONEST,
    INTERVAL_BEFORE,
    INTERVAL_SITE,
    RERUN_CSV_PATH,
    RERUN_RATES,
    RERUN_SITE,
    RERUN_STATUS_CONSISTENT,
    RERUN_STATUS_INCONCLUSIVE,
    RERUN_TASKS,
    TIE_BEFORE,
    TIE_SITE,
    inflated_scenario,
    rerun_table,
)
from leaderboard.simulation_results import power_scenario as _power_scenario
from submissions.verification.design import TASK_SD, Design, inflate, inflate_spread
from submissions.verification.design import simulate as simulate_design

TRUE_RATES = (0.05, 0.10, 0.20, 0.30, 0.40, 0.50, 0.60)
GAPS = (0.02, 0.05, 0.10)
EQUAL_SIZES = (2, 5, 10)
# A ten-agent board like the paper's: the two agents studied plus eight at the paper's published
# success rates (its 32% and 28% agents left out: the pair at 30% and 30% + gap take their place).
PAPER_OTHERS = (0.42, 0.36, 0.35, 0.27, 0.22, 0.19, 0.17, 0.16)
INFRA_RATE = 0.05  # the share of attempts an upload may lose to infrastructure errors
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(61)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


@dataclass(frozen=True)
class Shape:
    """A benchmark's shape: categories (slug, number of tasks, difficulty mu_c) and the spread
    of task difficulty and agent-task interaction on the logit scale."""

    categories: tuple[tuple[str, int, float], ...]
    task_sd: float
    interaction_sd: float
    attempts: int = ATTEMPTS

    @property
    def n_tasks(self) -> int:
        return sum(n for _, n, _ in self.categories)

    @property
    def task_mu(self) -> np.ndarray:
        return np.concatenate([np.full(n, mu) for _, n, mu in self.categories])

    @property
    def total_sd(self) -> float:
        return float(np.hypot(self.task_sd, self.interaction_sd))

    def expected(self, theta: float, transform=lambda p: p) -> float:
        """Population mean over tasks of transform(p) for an agent of ability theta."""
        p = expit(theta + self.task_mu[:, None] + self.total_sd * _NODES[None, :])
        return float((transform(p) @ _WEIGHTS).mean())

    def theta_for(self, rate: float) -> float:
        return float(optimize.brentq(lambda th: self.expected(th) - rate, -30.0, 30.0))


# ---------------------------------------------------------------------------------------------
# Fitting the shape to the reconstructed data
# ---------------------------------------------------------------------------------------------


def _marginal(x: np.ndarray, sd: float) -> np.ndarray:
    return expit(x[..., None] + sd * _NODES) @ _WEIGHTS


def _fit_locations(counts: np.ndarray, sizes: np.ndarray, sd: float) -> tuple[np.ndarray, np.ndarray]:
    """Agent abilities and category difficulties reproducing each (agent, category) rate."""
    n_agents, n_cats = counts.shape
    attempts = sizes[None, :] * ATTEMPTS
    rates = counts / attempts

    def resid(v):
        theta, mu = np.concatenate([[0.0], v[: n_agents - 1]]), v[n_agents - 1:]
        return (np.sqrt(attempts) * (_marginal(theta[:, None] + mu[None, :], sd) - rates)).ravel()

    fit = optimize.least_squares(resid, np.zeros(n_agents - 1 + n_cats))
    return np.concatenate([[0.0], fit.x[: n_agents - 1]]), fit.x[n_agents - 1:]


def _summaries(y: np.ndarray, cat_index: np.ndarray) -> np.ndarray:
    """(share of agent-task cells solved in some but not all attempts, mean correlation between
    two agents' per-task rates within a category) of y[..., agent, task] success counts."""
    mixed = ((y > 0) & (y < ATTEMPTS)).mean(axis=(-2, -1))
    centred = y.astype(float).copy()
    for c in np.unique(cat_index):
        cols = cat_index == c
        centred[..., cols] -= centred[..., cols].mean(axis=-1, keepdims=True)
    norm = np.sqrt((centred**2).sum(axis=-1, keepdims=True))
    unit = np.divide(centred, norm, out=np.zeros_like(centred), where=norm > 0)
    gram = unit @ np.swapaxes(unit, -1, -2)
    n = y.shape[-2]
    corr = (gram.sum(axis=(-2, -1)) - np.trace(gram, axis1=-2, axis2=-1)) / (n * (n - 1))
    return np.stack([mixed, corr], axis=-1)


def fit_shape(rows: Iterable, *, seed: int = 1, replications: int = 200) -> Shape:
    """Fit a ``Shape`` to per-trial rows (``agent``, ``task``, ``category``, ``success``), e.g.
    the reconstructed paper data: category difficulties and agent abilities by least squares on
    the (agent, category) rates, then (task_sd, interaction_sd) on a grid so that simulated
    copies of the data set match its share of partly solved agent-task cells and the
    correlation of agents' per-task rates (how strongly tasks are easy or hard for everyone)."""
    rows = list(rows)
    agents = list(dict.fromkeys(r.agent for r in rows))
    tasks = list(dict.fromkeys(r.task for r in rows))
    cats = list(dict.fromkeys(r.category for r in rows))
    task_cat = {r.task: r.category for r in rows}
    cat_index = np.array([cats.index(task_cat[t]) for t in tasks])
    sizes = np.bincount(cat_index, minlength=len(cats))
    y = np.zeros((len(agents), len(tasks)), dtype=np.int64)
    a_of, t_of = {a: i for i, a in enumerate(agents)}, {t: j for j, t in enumerate(tasks)}
    for r in rows:
        y[a_of[r.agent], t_of[r.task]] += bool(r.success)
    counts = np.stack([y[:, cat_index == c].sum(axis=1) for c in range(len(cats))], axis=1)
    observed = _summaries(y, cat_index)
    rng = np.random.default_rng(seed)
    z_task = rng.standard_normal((replications, 1, len(tasks)))
    z_int = rng.standard_normal((replications, len(agents), len(tasks)))
    u = rng.random((replications, len(agents), len(tasks), ATTEMPTS))
    best = None
    for total in np.arange(0.5, 4.01, 0.25):
        theta, mu = _fit_locations(counts, sizes, total)
        loc = theta[:, None] + mu[cat_index][None, :]
        for share in np.arange(0.0, 1.001, 0.1):
            task_sd, int_sd = total * np.sqrt(share), total * np.sqrt(1 - share)
            p = expit(loc[None] + task_sd * z_task + int_sd * z_int)
            sim = (u < p[..., None]).sum(axis=-1)
            s = _summaries(sim, cat_index)
            dist = float((((s.mean(axis=0) - observed) / s.std(axis=0)) ** 2).sum())
            if best is None or dist < best[0]:
                best = (dist, task_sd, int_sd, mu)
    _, task_sd, int_sd, mu = best
    return Shape(tuple((c, int(n), float(m)) for c, n, m in zip(cats, sizes, mu, strict=True)),
                 float(task_sd), float(int_sd))


# ---------------------------------------------------------------------------------------------
# Simulated leaderboards
# ---------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """Running sums of one measured quantity."""

    n: int = 0
    total: float = 0.0
    total_sq: float = 0.0

    def add(self, values) -> None:
        v = np.asarray(values, dtype=float)
        self.n += v.size
        self.total += float(v.sum())
        self.total_sq += float((v * v).sum())

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else float("nan")

    @property
    def se(self) -> float:
        if self.n < 2:
            return float("nan")
        var = max(self.total_sq / self.n - self.mean**2, 0.0)
        return float(np.sqrt(var / (self.n - 1)))


@dataclass(frozen=True)
class Row:
    """One line of the table: what was measured, in which scenario, for which estimator."""

    metric: str
    scenario: str
    estimator: str
    value: float
    mc_se: float
    truth: float | None
    n: int


# The estimators compared: the interval before and after its review, the tie rule before and after.
# An interval is called with (per-task (successes, attempts), per-task category).
INTERVALS = {
    INTERVAL_BEFORE: lambda per_task, strata: stats.clustered_rate(per_task),
    INTERVAL_SITE: lambda per_task, strata: stats.clustered_rate(per_task, strata),
}
# A tie rule is called with (per-task rates in rank order, alpha, success rates in rank order).
TIE_RULES = {
    TIE_BEFORE: lambda rates, alpha, pooled: stats.tie_groups_all_pairs_vectorised(rates, alpha),
    TIE_SITE: lambda rates, alpha, pooled: stats.tie_groups_vectorised(rates, alpha,
                                                                      rates=pooled),
}
POWER_BOARDS = (2, 10)  # a pair alone, or the pair among PAPER_OTHERS


def _agents() -> list[tuple[str, float]]:
    """(role, true rate) of the agents drawn on every simulated benchmark."""
    agents = [("rate", r) for r in TRUE_RATES]
    agents += [("gap-base", GAP_BASE)] + [(f"gap{g}", GAP_BASE + g) for g in GAPS]
    agents += [("equal", EQUAL_RATE)] * max(EQUAL_SIZES)
    agents += [("paper", r) for r in PAPER_OTHERS]
    return agents


def simulate(shape: Shape, *, boards: int, seed: int, alpha: float = 0.05,
             chunk: int = 250, intervals: dict | None = None,
             tie_rules: dict | None = None) -> list[Row]:
    """Score ``boards`` simulated leaderboards with the site's estimators; the table's rows."""
    intervals = INTERVALS if intervals is None else intervals
    tie_rules = TIE_RULES if tie_rules is None else tie_rules
    rng = np.random.default_rng(seed)
    agents = _agents()
    theta = np.array([shape.theta_for(r) for _, r in agents])
    mu = shape.task_mu
    n_tasks, k = shape.n_tasks, shape.attempts
    cover = {(name, r): (Tally(), Tally(), Tally()) for name in intervals for r in TRUE_RATES}
    split = {(name, size): Tally() for name in tie_rules for size in EQUAL_SIZES}
    pair_split = {name: Tally() for name in tie_rules}
    board_split = {name: Tally() for name in tie_rules}
    power = {(name, g, m): (Tally(), Tally()) for name in tie_rules for g in GAPS
             for m in POWER_BOARDS}
    passes = {(kind, infra, r): Tally() for kind in ("pass@k", "pass^k")
              for infra in (0.0, INFRA_RATE) for r in TRUE_RATES}
    role_index: dict[str, list[int]] = {}
    for i, (role, _) in enumerate(agents):
        role_index.setdefault(role, []).append(i)
    rate_ix = role_index["rate"]
    strata = [c for c, n, _ in shape.categories for _ in range(n)]
    done = 0
    while done < boards:
        b = min(chunk, boards - done)
        done += b
        delta = shape.task_sd * rng.standard_normal((b, 1, n_tasks))
        eps = shape.interaction_sd * rng.standard_normal((b, len(agents), n_tasks))
        p = expit(theta[None, :, None] + mu[None, None, :] + delta + eps)
        y = (rng.random((b, len(agents), n_tasks, k)) < p[..., None])
        succ = y.sum(axis=-1)
        lost = rng.random((b, len(rate_ix), n_tasks, k)) < INFRA_RATE
        succ_lost = (y[:, rate_ix] & ~lost).sum(axis=-1)
        scored_lost = k - lost.sum(axis=-1)
        conditional = p.mean(axis=-1)  # each agent's expected rate on this benchmark
        succ_l, succ_lost_l, scored_lost_l = succ.tolist(), succ_lost.tolist(), scored_lost.tolist()
        for j in range(b):
            for slot, i in enumerate(rate_ix):
                per_task = [(s, k) for s in succ_l[j][i]]
                true = TRUE_RATES[slot]
                for name, fn in intervals.items():
                    est = fn(per_task, strata)
                    hit, width, cond = cover[(name, true)]
                    hit.add(est.ci_low <= true <= est.ci_high)
                    width.add(est.ci_high - est.ci_low)
                    cond.add(est.ci_low <= conditional[j, i] <= est.ci_high)
                passes[("pass@k", 0.0, true)].add(stats.pass_at_k(per_task))
                passes[("pass^k", 0.0, true)].add(stats.pass_hat_k(per_task))
                lost_task = list(zip(succ_lost_l[j][slot], scored_lost_l[j][slot], strict=True))
                passes[("pass@k", INFRA_RATE, true)].add(stats.pass_at_k(lost_task))
                passes[("pass^k", INFRA_RATE, true)].add(stats.pass_hat_k(lost_task))
            board = succ_l[j]
            base, others = role_index["gap-base"][0], role_index["paper"]
            for name, rule in tie_rules.items():
                for size in EQUAL_SIZES:
                    groups = _groups(rule, board, role_index["equal"][:size], k, alpha)
                    split[(name, size)].add(len(set(groups)) > 1)
                    if size == max(EQUAL_SIZES):
                        g = np.array(groups)
                        same = (g[:, None] == g[None, :]).sum() - size
                        pair_split[name].add(1 - same / (size * (size - 1)))
                groups = _groups(rule, board, [base, role_index["equal"][0], *others], k, alpha)
                board_split[name].add(groups[0] != groups[1])
                for g in GAPS:
                    better = role_index[f"gap{g}"][0]
                    for m in POWER_BOARDS:
                        members = [base, better] + (others if m > 2 else [])
                        groups, order = _groups(rule, board, members, k, alpha,
                                                with_order=True)
                        separated = groups[0] != groups[1]
                        sep, right = power[(name, g, m)]
                        sep.add(separated)
                        right.add(separated and order.index(better) < order.index(base))
    return _rows(shape, boards, cover, split, pair_split, board_split, power, passes)


def _groups(rule, board, members: list[int], k: int, alpha: float, with_order: bool = False):
    """Tie groups of ``members`` (agent indexes), the only agents on the leaderboard, ranked as
    the site ranks them, by pooled success rate (all attempts scored here; ties in their listed
    order)."""
    order = sorted(members, key=lambda i: -sum(board[i]))
    n_tasks = len(board[members[0]])
    groups = rule([{str(t): s / k for t, s in enumerate(board[i])} for i in order], alpha,
                  [sum(board[i]) / (k * n_tasks) for i in order])
    by_member = dict(zip(order, groups, strict=True))
    out = [by_member[i] for i in members]
    return (out, order) if with_order else out


def _rows(shape, boards, cover, split, pair_split, board_split, power, passes) -> list[Row]:
    rows: list[Row] = []
    for (name, r), (hit, width, cond) in cover.items():
        scen = f"true rate {r:.0%}"
        rows.append(Row("coverage", scen, name, hit.mean, hit.se, 0.95, hit.n))
        rows.append(Row("coverage of the benchmark's own rate", scen, name, cond.mean, cond.se,
                        0.95, cond.n))
        rows.append(Row("interval width", scen, name, width.mean, width.se, None, width.n))
    for (name, size), t in split.items():
        rows.append(Row("equal agents split", f"{size} agents at {EQUAL_RATE:.0%}", name,
                        t.mean, t.se, None, t.n))
    for name, t in pair_split.items():
        rows.append(Row("equal pairs in different groups",
                        f"{max(EQUAL_SIZES)} agents at {EQUAL_RATE:.0%}", name, t.mean, t.se,
                        None, t.n))
    for name, t in board_split.items():
        rows.append(Row("equal agents split", BOARD_SPLIT_SCENARIO, name, t.mean, t.se, None,
                        t.n))
    for (name, g, m), (sep, right) in power.items():
        scen = _power_scenario(g, m)
        rows.append(Row("power: separated", scen, name, sep.mean, sep.se, None, sep.n))
        rows.append(Row("power: separated, better agent first", scen, name, right.mean,
                        right.se, None, right.n))
    transforms = {"pass@k": lambda p: 1 - (1 - p) ** shape.attempts,
                  "pass^k": lambda p: p ** shape.attempts}
    for (kind, infra, r), t in passes.items():
        truth = shape.expected(shape.theta_for(r), transforms[kind])
        scen = f"true rate {r:.0%}" + (f", {infra:.0%} attempts lost" if infra else "")
        est = f"{kind.replace('k', str(shape.attempts))} share of tasks (site)"
        rows.append(Row(f"{kind} bias", scen, est, t.mean - truth, t.se, truth, t.n))
    return rows


# ---------------------------------------------------------------------------------------------
# The committed table (leaderboard/data/simulation.csv; leaderboard.simulation_results reads it)
# ---------------------------------------------------------------------------------------------


def write_csv(rows: list[Row], path: Path, *, boards: int, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(CSV_COLUMNS)
        for r in rows:
            out.writerow([r.metric, r.scenario, r.estimator, f"{r.value:.5f}", f"{r.mc_se:.5f}",
                          "" if r.truth is None else f"{r.truth:.5f}", r.n, boards, seed])


def format_table(rows: list[Row]) -> str:
    """The table as aligned plain text (what the command prints)."""
    lines = [f"{'metric':<42} {'scenario':<44} {'estimator':<52} {'value':>8} {'+/-':>7}"]
    for r in rows:
        lines.append(f"{r.metric:<42} {r.scenario:<44} {r.estimator:<52} "
                     f"{r.value:>8.4f} {r.mc_se:>7.4f}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The re-run design: detection, false alarms and cost on simulated
# submissions, with the design's own engine (submissions.verification.design)
# ---------------------------------------------------------------------------------------------

RERUN_SHAPE = Shape((("all", RERUN_TASKS, 0.0),), task_sd=TASK_SD, interaction_sd=0.0)
RERUN_INFLATIONS = (0.05, 0.10, 0.15, 0.20)
# How each of the run's status codes (submissions.verification.design.Run.status) is tallied.
_STATUS_METRICS = ((RERUN_STATUS_INCONCLUSIVE, 0), (RERUN_STATUS_CONSISTENT, 1))


def rerun_designs(site) -> dict:
    """The designs the table compares: the site's (from settings), McNemar with the same caps,
    and what more re-runs buy: one re-run of every task, two re-runs per task (sequential).
    Each ends its last look as the site's does (``accept_z``), so their inconclusive shares
    compare."""
    n_tasks = RERUN_SHAPE.n_tasks
    return {
        RERUN_SITE: site,
        "McNemar (each re-run against its own claim), same caps": replace(site,
                                                                          stratum="trial"),
        f"one re-run of every task ({n_tasks} trials, one look)": Design(
            first=n_tasks, step=n_tasks, max_trials=n_tasks, alpha=site.alpha,
            accept_z=site.accept_z),
        f"two re-runs per task, sequential (cap {2 * n_tasks} trials)": replace(
            site, first=n_tasks // 2, step=n_tasks // 6, max_trials=2 * n_tasks,
            reruns_per_task=2, max_cost_usd=None),
    }


def rerun_scenarios(inflations=RERUN_INFLATIONS) -> list[str]:
    """The table's scenarios in order: honest, then per inflation the fakes on random failed
    trials and the fakes spread one per task."""
    return [HONEST, *(s for points in inflations
                      for s in (inflated_scenario(points), inflated_scenario(points, spread=True)))]


def _claims(truth: np.ndarray, points: float, rng: np.random.Generator) -> dict:
    """The claims of each scenario at this inflation, from the same true outcomes: honest, or
    the fakes on random failed trials (``design.inflate``) and spread one per task, weakest
    tasks first (``design.inflate_spread``)."""
    if not points:
        return {HONEST: truth}
    return {inflated_scenario(points): inflate(truth, points, rng),
            inflated_scenario(points, spread=True): inflate_spread(truth, points)}


def simulate_rerun(designs: dict, *, reps: int, seed: int,
                   shape: Shape = RERUN_SHAPE, rates=RERUN_RATES,
                   inflations=RERUN_INFLATIONS) -> list[Row]:
    """Each design on ``reps`` simulated submissions per agent rate and scenario (honest, then
    each inflation with its fakes placed two ways): an agent of true rate r passes task t with
    probability expit(theta_r + mu + delta_t), delta_t ~ N(0, task_sd), a fresh benchmark per
    submission; its 3 attempts per task are its true outcomes; an inflating submitter claims
    ``points`` x (tasks x attempts) of its failed trials as passes, at random or spread one per
    task; the site's re-runs are fresh draws. Rows per design and scenario: the share flagged
    "inflated" (false alarms when honest, detection when inflated), the shares ending
    "inconclusive" and "consistent", the mean re-run trials and their share of a full run."""
    thetas = [shape.theta_for(r) for r in rates]
    tallies: dict[tuple[str, str], dict[str, Tally]] = {}
    for j, points in enumerate((0.0, *inflations)):
        for i, theta in enumerate(thetas):
            rng = np.random.default_rng([seed, j, i])  # the same submissions for every design
            p = expit(theta + shape.task_mu[None, :]
                      + shape.total_sd * rng.standard_normal((reps, shape.n_tasks)))
            truth = rng.random((reps, shape.n_tasks, shape.attempts)) < p[..., None]
            for scen, claimed in _claims(truth, points, rng).items():
                for name, design in designs.items():
                    # the same re-run draws for both placements: their difference is the fakes'
                    run = simulate_design(design, claimed, p,
                                          np.random.default_rng([seed, j, i, 1]))
                    got = tallies.setdefault((name, scen), defaultdict(Tally))
                    got["flagged"].add(run.status == 2)
                    for metric, code in _STATUS_METRICS:
                        got[metric].add(run.status == code)
                    got["trials"].add(run.trials)
    return _rerun_rows(tallies, designs, rerun_scenarios(inflations),
                       shape.n_tasks * shape.attempts)


def _rerun_rows(tallies: dict, designs: dict, scenarios: list[str], full_run: int) -> list[Row]:
    rows: list[Row] = []
    for name in designs:
        for scen in scenarios:
            got = tallies[name, scen]
            flagged, trials = got["flagged"], got["trials"]
            rows.append(Row("false alarms" if scen == HONEST else "detected", scen, name,
                            flagged.mean, flagged.se, None, flagged.n))
            rows += [Row(metric, scen, name, got[metric].mean, got[metric].se, None,
                         got[metric].n) for metric, _ in _STATUS_METRICS]
            rows.append(Row("re-run trials", scen, name, trials.mean, trials.se, None,
                            trials.n))
            rows.append(Row("share of a full run", scen, name, trials.mean / full_run,
                            trials.se / full_run, None, trials.n))
    return rows


def describe_design(design) -> str:
    """The design's parameters, as the table's notes print them."""
    cost = ("" if design.max_cost_usd is None
            else f", model-cost cap ${design.max_cost_usd:g}")
    return (f"first look after {design.first} tasks, {design.step} more per look, "
            f"{design.reruns_per_task} re-run per task, cap {design.max_trials} trials{cost}, "
            f"alpha {design.alpha:g} ({design.spending} spending), stop early as consistent "
            f"when z < {design.futility_z:g}, consistent at the last look only when "
            f"z < {design.accept_z:g}")


def write_rerun_csv(rows: list[Row], path: Path, *, reps: int, seed: int, design) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow((*CSV_COLUMNS, "site_design"))
        for r in rows:
            out.writerow([r.metric, r.scenario, r.estimator, f"{r.value:.5f}", f"{r.mc_se:.5f}",
                          "", r.n, reps, seed, describe_design(design)])


def format_rerun_table(table: dict) -> str:
    """The re-run table as aligned plain text (what the command prints, rounded as the methods
    page rounds): per design, its honest submissions (flagged, inconclusive, mean re-run
    trials), then per placement of the fakes the detection at each inflation and the most mean
    re-run trials of those scenarios."""
    heads = ["false alarms", "honest inconcl", *(f"+{p}" for p in table["points"]), "trials"]
    lines = [f"{'design / where the fakes are':<64} " + " ".join(f"{h:>14}" for h in heads)]
    blank = [""] * len(table["points"])
    for d in table["designs"]:
        cells = [_pct(d["false_alarms"]), _pct(d["inconclusive_honest"]), *blank,
                 f"{d['trials_honest']:.1f} ({_pct(d['share_honest'], 0)})"]
        lines.append(f"{d['design']:<64} " + " ".join(f"{c:>14}" for c in cells))
        for attack in d["attacks"]:
            cells = ["", "", *(_pct(v) for v in attack["detected"]),
                     f"{attack['trials_max']:.1f} ({_pct(attack['share_max'], 0)})"]
            lines.append(f"{'  fakes ' + attack['label']:<64} "
                         + " ".join(f"{c:>14}" for c in cells))
    return "\n".join(lines)


def read_rerun_csv(path: Path) -> list[dict]:
    """The rows of a written re-run table, as the methods page reads them (values rounded as
    written, so what the command prints is what the page shows)."""
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def format_rerun_outcomes(rows: list[dict]) -> str:
    """Every design and scenario of a written re-run table: the shares flagged inflated (+/-
    their Monte Carlo standard error), inconclusive and consistent, and the mean re-run trials
    (what the command prints)."""
    got = {(r["estimator"], r["scenario"], r["metric"]): r for r in rows}
    lines = [f"{'design':<56} {'scenario':<58} {'flagged':>8} {'+/-':>6} {'inconcl':>8} "
             f"{'consist':>8} {'trials':>7}"]
    for (name, scen, metric), r in got.items():
        if metric not in ("false alarms", "detected"):
            continue
        cells = [_pct(r["value"]), _pct(r["mc_se"]), *(_pct(got[name, scen, m]["value"]) for m in (
            RERUN_STATUS_INCONCLUSIVE, RERUN_STATUS_CONSISTENT))]
        trials = float(got[name, scen, "re-run trials"]["value"])
        lines.append(f"{name:<56} {scen:<58} {cells[0]:>8} {cells[1]:>6} {cells[2]:>8} "
                     f"{cells[3]:>8} {trials:>7.1f}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The compare page's paired test: false positives and power (leaderboard/data/compare_test.csv,
# read by leaderboard.simulation_results.committed_compare_table)
# ---------------------------------------------------------------------------------------------


def _paired_t_separable(shares: np.ndarray, i: int, j: int, alpha: float) -> bool:
    return stats.paired_p_value(shares[i].tolist(), shares[j].tolist()) < alpha


def simulate_compare(shape: Shape, *, boards: int, seed: int, alpha: float = 0.05) -> list[Row]:
    """The compare page's test (``leaderboard.compare.paired_tests``: the exact sign-flip test
    over tasks, Holm over the pairs) on ``boards`` simulated benchmarks per scenario, each a
    fresh draw of the benchmark's tasks and of the agents' attempts (the model of ``simulate``).
    Rows: the share of boards where equal agents are called separable (any pair, with Holm,
    for more than two), and where a true gap is separated (and the better agent put ahead);
    for two agents the tie groups' paired t-test beside it."""
    rng = np.random.default_rng(seed)
    mu, n_tasks, k = shape.task_mu, shape.n_tasks, shape.attempts
    tallies: dict[tuple[str, str, str], Tally] = defaultdict(Tally)
    for scen, rates, pair in COMPARE_SCENARIOS:
        theta = np.array([shape.theta_for(r) for r in rates])
        for _ in range(boards):
            delta = shape.task_sd * rng.standard_normal(n_tasks)
            eps = shape.interaction_sd * rng.standard_normal((len(rates), n_tasks))
            p = expit(theta[:, None] + mu[None, :] + delta[None, :] + eps)
            shares = (rng.random((len(rates), n_tasks, k)) < p[..., None]).sum(axis=-1) / k
            keys = [str(i) for i in range(len(rates))]
            tests = compare.paired_tests(
                {key: dict(enumerate(row.tolist())) for key, row in zip(keys, shares,
                                                                        strict=True)},
                alpha=alpha)
            if pair is None:  # every agent equal: any separable pair is a false positive
                tallies[COMPARE_FPR, scen, COMPARE_SITE].add(any(t.separable for t in tests))
                if len(rates) == 2:
                    tallies[COMPARE_FPR, scen, COMPARE_T].add(
                        _paired_t_separable(shares, 0, 1, alpha))
                continue
            lo, hi = pair
            (t,) = [t for t in tests if {t.better, t.worse} == {str(lo), str(hi)}]
            tallies[COMPARE_POWER, scen, COMPARE_SITE].add(t.separable)
            tallies[COMPARE_POWER_RIGHT, scen, COMPARE_SITE].add(
                t.separable and t.better == str(hi))
            if len(rates) == 2:
                tallies[COMPARE_POWER, scen, COMPARE_T].add(
                    _paired_t_separable(shares, lo, hi, alpha))
    return [Row(metric, scen, est, t.mean, t.se, None, t.n)
            for (metric, scen, est), t in tallies.items()]
