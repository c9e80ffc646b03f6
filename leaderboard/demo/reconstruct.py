"""Deterministic reconstruction of the HealthAgentBench paper's 1,620 per-trial outcomes.

The paper (see ``paper.yaml`` next to this module) published only aggregates. This module builds
a SYNTHETIC per-trial data set that reproduces every published figure exactly:

1. an integer program (``scipy.optimize.milp``, HiGHS) chooses the number of successes of every
   (agent, category) pair: all published constraints are hard constraints, and among the feasible
   tables the one closest to a simple prior (agent's overall rate x category difficulty) wins;
2. successes are spread over tasks and attempts with a seeded ``numpy.random.default_rng``: every
   task has a latent difficulty shared by all agents, so successes cluster on easier tasks, and
   within a task they fall on random attempts;
3. outcomes of failures, durations, tokens, costs and per-category soft metrics are generated from
   the same generator and then scaled / repaired so that every published mean holds exactly.

Pure Python + numpy/scipy/yaml: no Django import. Same output for the same ``paper`` and ``seed``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import Bounds, LinearConstraint, milp

__all__ = ["TrialRow", "load_paper", "reconstruct", "solve_successes"]

PAPER_PATH = Path(__file__).with_name("paper.yaml")
DEFAULT_SEED = 20260602
OUTCOMES = ("passed", "failed", "timeout", "agent_error")


@dataclass(frozen=True)
class TrialRow:
    agent: str  # display name, e.g. "Codex (GPT 5.5)"
    task: str  # "<category-slug>/case_NN"
    category: str  # category slug
    attempt: int  # 1..attempts_per_task
    outcome: str  # passed | failed | timeout | agent_error
    success: bool
    reward: float
    cost_usd: Decimal  # 4 decimal places
    duration_s: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    soft_metrics: dict = field(default_factory=dict, hash=False, compare=True)


def load_paper(path: str | Path | None = None) -> dict:
    """Read the paper's published figures (plus the demo's extras) from ``paper.yaml``."""
    with open(path or PAPER_PATH, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


# --------------------------------------------------------------------------------------------
# Exact rounding helpers
# --------------------------------------------------------------------------------------------


def round_half_up(x: Fraction) -> int:
    return math.floor(Fraction(x) + Fraction(1, 2))


def pct_range(pct: int, denom: int) -> tuple[int, int]:
    """Integers k with round_half_up(100 * k / denom) == pct, as an inclusive range."""
    lo = math.ceil(Fraction((2 * pct - 1) * denom, 200))
    hi = math.ceil(Fraction((2 * pct + 1) * denom, 200)) - 1
    return lo, hi


# --------------------------------------------------------------------------------------------
# Step 1: successes per (agent, category) by MILP
# --------------------------------------------------------------------------------------------


class _Model:
    """Small helper to collect linear constraints over named integer variables."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.index: dict = {}
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.cost: list[float] = []
        self.rows: list[tuple[dict, float, float]] = []

    def var(self, key, lb: float, ub: float, cost: float = 0.0) -> int:
        self.index[key] = len(self.lb)
        self.lb.append(lb)
        self.ub.append(ub)
        self.cost.append(cost)
        return self.index[key]

    def tighten(self, key, lb: float | None = None, ub: float | None = None) -> None:
        i = self.index[key]
        if lb is not None:
            self.lb[i] = max(self.lb[i], lb)
        if ub is not None:
            self.ub[i] = min(self.ub[i], ub)

    def row(self, coefs: dict, lo: float, hi: float) -> None:
        self.rows.append(({self.index[k]: v for k, v in coefs.items()}, lo, hi))

    def solve(self) -> np.ndarray:
        n = len(self.lb)
        a = np.zeros((len(self.rows), n))
        lo = np.empty(len(self.rows))
        hi = np.empty(len(self.rows))
        for r, (coefs, rlo, rhi) in enumerate(self.rows):
            for j, v in coefs.items():
                a[r, j] = v
            lo[r], hi[r] = rlo, rhi
        res = milp(
            c=np.array(self.cost),
            integrality=np.ones(n),
            bounds=Bounds(np.array(self.lb), np.array(self.ub)),
            constraints=[LinearConstraint(a, lo, hi)],
            options={"mip_rel_gap": 0.0, "presolve": True, "time_limit": 60.0},
        )
        if res.status != 0 or res.x is None:
            raise RuntimeError(f"success MILP failed: {res.message}")
        return np.rint(res.x).astype(int)


def _structure(paper: dict):
    cats = [
        {"slug": c["slug"], "group": c["group"], "tasks": int(c["tasks"])}
        for c in paper["categories"]
    ]
    attempts = int(paper["benchmark"]["attempts_per_task"])
    board = sorted(paper["leaderboard"], key=lambda e: e["rank"])
    extras = {e["agent"]: e for e in paper.get("agents", [])}
    agents = []
    for e in board:
        info = dict(extras.get(e["agent"], {}))
        info.update(e)
        info.setdefault("harness_family", e["harness"])
        agents.append(info)
    return cats, attempts, agents


def _prior_model(cats: list[dict], agents: list[dict], n_att: dict[str, int],
                 prior_cfg: dict) -> _Model:
    """The model's success variables, with an L1 z-score deviation from the prior (the
    agent's rate x the category's difficulty x its harness family's group factor) in the
    objective."""
    difficulty = prior_cfg.get("category_difficulty", {})
    hg_factor = prior_cfg.get("harness_group_factor", {})
    max_prior = float(prior_cfg.get("max_rate", 0.97))
    m = _Model()
    for k, a in enumerate(agents):
        rate = a["success_pct"] / 100.0
        for j, c in enumerate(cats):
            slug, n = c["slug"], n_att[c["slug"]]
            p = rate * float(difficulty.get(slug, 1.0))
            p *= float(hg_factor.get(a["harness_family"], {}).get(c["group"], 1.0))
            p = min(max_prior, max(0.01, p))
            sigma = math.sqrt(n * p * (1 - p)) + 0.5
            # tiny distinct tie-breaker keeps the optimum unique
            tie = 1e-6 * (1 + k * len(cats) + j)
            m.var(("s", a["agent"], slug), 0, n, tie)
            m.var(("u", a["agent"], slug), 0, n, 1.0 / sigma)
            m.row({("u", a["agent"], slug): 1, ("s", a["agent"], slug): -1}, -n * p, np.inf)
            m.row({("u", a["agent"], slug): 1, ("s", a["agent"], slug): 1}, n * p, np.inf)
    return m


def solve_successes(paper: dict) -> dict[tuple[str, str], int]:
    """Successes per (agent display name, category slug) satisfying every published figure."""
    cats, attempts, agents = _structure(paper)
    rec = paper.get("reconstruction", {})
    n_att = {c["slug"]: attempts * c["tasks"] for c in cats}
    group_of = {c["slug"]: c["group"] for c in cats}
    trials = attempts * sum(c["tasks"] for c in cats)
    names = [a["agent"] for a in agents]
    family = {a["agent"]: a["harness_family"] for a in agents}
    m = _prior_model(cats, agents, n_att, rec.get("prior", {}))

    # Leaderboard percentages, and strictly decreasing totals in rank order.
    for a in agents:
        lo, hi = pct_range(int(a["success_pct"]), trials)
        m.row({("s", a["agent"], c["slug"]): 1 for c in cats}, lo, hi)
    for a, b in zip(agents, agents[1:], strict=False):
        coefs = {("s", a["agent"], c["slug"]): 1 for c in cats}
        coefs.update({("s", b["agent"], c["slug"]): -1 for c in cats})
        m.row(coefs, 1, np.inf)

    def group_weights(group: str) -> tuple[dict[str, int], int]:
        slugs = [c["slug"] for c in cats if c["group"] == group]
        lcm = math.lcm(*(n_att[s] for s in slugs))
        return {s: lcm // n_att[s] for s in slugs}, lcm * len(slugs)

    explicit_pct: dict[str, set[str]] = {}
    for con in rec.get("success_constraints", []):
        if con["kind"] == "category_pct" and con["agent"] != "*":
            explicit_pct.setdefault(con["category"], set()).add(con["agent"])

    for con in rec.get("success_constraints", []):
        kind = con["kind"]
        if kind == "family_macro":
            w, denom = group_weights(con["group"])
            members = [x for x in names if family[x] in con["harness_families"]]
            lo, hi = pct_range(int(con["pct"]), denom * len(members))
            m.row({("s", x, s): wt for x in members for s, wt in w.items()}, lo, hi)
        elif kind == "group_max_rate":
            rate = Fraction(str(con["max_rate"]))
            for x in names:
                for s in n_att:
                    if group_of[s] == con["group"]:
                        m.tighten(("s", x, s), ub=math.floor(rate * n_att[s]))
        elif kind == "agent_macro_about":
            w, denom = group_weights(con["group"])
            v, tol = Fraction(str(con["value"])), Fraction(str(con["tolerance"]))
            lo, hi = math.ceil((v - tol) * denom), math.floor((v + tol) * denom)
            m.row({("s", con["agent"], s): wt for s, wt in w.items()}, lo, hi)
        elif kind == "category_pct":
            s = con["category"]
            lo, hi = pct_range(int(con["pct"]), n_att[s])
            targets = (
                [con["agent"]]
                if con["agent"] != "*"
                else [x for x in names if x not in explicit_pct.get(s, set())]
            )
            for x in targets:
                m.tighten(("s", x, s), lb=lo, ub=hi)
        elif kind == "category_best":
            s, best = con["category"], con["agent"]
            for x in names:
                if x != best and x not in con.get("exclude", []):
                    m.row({("s", best, s): 1, ("s", x, s): -1}, 1, np.inf)
        elif kind == "category_max_rate":
            s = con["category"]
            bound = Fraction(str(con["max_rate"])) * n_att[s]
            ub = math.ceil(bound) - 1 if con.get("strict") else math.floor(bound)
            for x in con.get("agents", names):
                m.tighten(("s", x, s), ub=ub)
        elif kind == "category_max_pct":
            s = con["category"]
            ub = pct_range(int(con["below_pct"]), n_att[s])[0] - 1
            for x in con.get("agents", names):
                m.tighten(("s", x, s), ub=ub)
        elif kind == "count_agents":
            s, n = con["category"], n_att[con["category"]]
            if "rate_above" in con:
                lo, hi = math.floor(Fraction(str(con["rate_above"])) * n) + 1, n
            else:
                p_lo, p_hi = con["pct_between"]
                lo, hi = pct_range(int(p_lo), n)[0], pct_range(int(p_hi), n)[1]
            members = [x for x in names if x not in con.get("exclude", [])]
            for x in members:
                m.var(("z", x, s, lo, hi), 0, 1)
                # z = 1  =>  lo <= s <= hi
                m.row({("s", x, s): 1, ("z", x, s, lo, hi): -lo}, 0, np.inf)
                m.row({("s", x, s): 1, ("z", x, s, lo, hi): n - hi}, -np.inf, n)
            m.row({("z", x, s, lo, hi): 1 for x in members}, int(con["min_agents"]), np.inf)
        else:
            raise ValueError(f"unknown success constraint kind {kind!r}")

    x = m.solve()
    return {(a, c): int(x[m.index[("s", a, c)]]) for a in names for c in n_att}


# --------------------------------------------------------------------------------------------
# Step 2..3: trials
# --------------------------------------------------------------------------------------------


def _largest_remainder(weights: np.ndarray, total: int, minimum: int = 0) -> np.ndarray:
    """Integers >= minimum, proportional to weights, summing exactly to total (deterministic)."""
    n = len(weights)
    free = total - minimum * n
    if free < 0:
        raise ValueError("total too small for the minimum")
    share = np.asarray(weights, dtype=float) / float(np.sum(weights)) * free
    base = np.floor(share).astype(np.int64)
    rest = free - int(base.sum())
    order = np.argsort(-(share - base), kind="stable")
    base[order[:rest]] += 1
    return base + minimum


def _scale_capped(raw: np.ndarray, total: int, lo: int, hi: int) -> np.ndarray:
    """Integers in [lo, hi], roughly proportional to raw, summing exactly to total."""
    raw = np.asarray(raw, dtype=float)
    fixed = np.zeros(len(raw), dtype=bool)
    vals = raw.copy()
    for _ in range(50):
        free_total = total - vals[fixed].sum()
        scale = free_total / raw[~fixed].sum()
        vals[~fixed] = raw[~fixed] * scale
        over = (~fixed) & ((vals > hi) | (vals < lo))
        if not over.any():
            break
        vals[over] = np.clip(vals[over], lo, hi)
        fixed |= over
    ints = np.clip(np.floor(vals), lo, hi).astype(np.int64)
    rest = total - int(ints.sum())
    frac = vals - np.floor(vals)
    order = np.argsort(-frac, kind="stable")
    i = 0
    while rest != 0 and i < 10 * len(ints):
        j = order[i % len(ints)]
        if rest > 0 and ints[j] < hi:
            ints[j] += 1
            rest -= 1
        elif rest < 0 and ints[j] > lo:
            ints[j] -= 1
            rest += 1
        i += 1
    if rest != 0:
        raise RuntimeError("cannot scale durations to the target mean")
    return ints


# Relative wall-clock need per category, the timeout base rate, input tokens per output token
# per harness and relative USD per token (uncached input, cached input, output) per provider.
_CAT_TIME = {
    "xray-report-correction": 0.7,
    "pathology-tumor-region": 1.4,
    "ct-abnormality-classification": 1.2,
    "ehr-data-quality-audit": 1.0,
    "ehr-format-conversion": 1.1,
    "ehr-event-modeling": 1.6,
    "clinical-trial-matching": 0.9,
}
_TIMEOUT_BASE = {"ehr-event-modeling": 0.22}
_INPUT_RATIO = {"codex": 35.0, "claude-code": 28.0, "copilot-cli": 32.0}
_PRICE = {"OpenAI": (1.25, 0.125, 10.0), "Anthropic": (5.0, 0.5, 25.0)}


def _latent_tasks(cats: list[dict], rng) -> dict[str, list[dict]]:
    """Task-level latent properties shared by all agents (fixed draw order), by category."""
    by_cat: dict[str, list[dict]] = {}
    for c in cats:
        diff = rng.normal(0.0, 1.0, size=c["tasks"])
        for t in range(c["tasks"]):
            by_cat.setdefault(c["slug"], []).append({
                "category": c["slug"],
                "group": c["group"],
                "name": f"{c['slug']}/case_{t + 1:02d}",
                "difficulty": float(diff[t]),
                # clinical-trial-matching: eligible trials of the patient
                "eligible": int(rng.integers(5, 15)),
                # ehr-event-modeling: baseline AUROC in units of 1e-4
                "baseline": int(rng.integers(6800, 8500)),
                # base wall-clock need of the task (relative)
                "work": float(rng.lognormal(0.0, 0.25)),
            })
    return by_cat


def _outcomes(a: dict, cats: list[dict], by_cat: dict, successes: dict, attempts: int,
              rng) -> list[dict]:
    """One agent's trials with their outcomes: exactly the integer program's successes per
    category, on easier tasks first, noise spreading the passes over attempts."""
    name = a["agent"]
    dur_target = float(a.get("demo_mean_duration_min", 12)) * 60.0
    agent_rows: list[dict] = []
    for c in cats:
        slug = c["slug"]
        ts = by_cat[slug]
        n = len(ts) * attempts
        s = successes[(name, slug)]
        noise = rng.gumbel(0.0, 0.6, size=n)
        key = np.array(
            [-ts[i // attempts]["difficulty"] + noise[i] for i in range(n)], dtype=float
        )
        order = np.argsort(-key, kind="stable")
        passed = np.zeros(n, dtype=bool)
        passed[order[:s]] = True
        u_out = rng.random(size=n)
        p_timeout = _TIMEOUT_BASE.get(slug, 0.04) * min(2.0, dur_target / 900.0)
        p_error = 0.035
        for i in range(n):
            t = ts[i // attempts]
            if passed[i]:
                outcome = "passed"
            elif slug == "ehr-format-conversion" and s == 0:
                outcome = "failed"  # deterministic bug: always misses one demographic field
            elif u_out[i] < p_timeout:
                outcome = "timeout"
            elif u_out[i] < p_timeout + p_error:
                outcome = "agent_error"
            else:
                outcome = "failed"
            agent_rows.append({"agent": name, "task": t["name"], "category": slug,
                               "attempt": i % attempts + 1, "outcome": outcome, "_task": t})
    return agent_rows


def _usage(a: dict, agent_rows: list[dict], rng, limit: int, overrun_range) -> None:
    """Durations, tokens and cost of one agent's trials, at the paper's exact means."""
    dur_target = float(a.get("demo_mean_duration_min", 12)) * 60.0
    over_lo, over_hi = overrun_range
    # Durations: timeouts at the limit + overrun; others scaled to the agent's target mean.
    k = len(agent_rows)
    noise = rng.lognormal(0.0, 0.45, size=k)
    overrun = rng.integers(int(over_lo), int(over_hi) + 1, size=k)
    raw = np.empty(k)
    is_to = np.array([r["outcome"] == "timeout" for r in agent_rows])
    for i, r in enumerate(agent_rows):
        raw[i] = _CAT_TIME[r["category"]] * r["_task"]["work"] * noise[i]
        if r["outcome"] == "agent_error":
            raw[i] *= 0.3
        elif r["outcome"] == "passed":
            raw[i] *= 0.9
    total = round(dur_target * k)
    dur = np.zeros(k, dtype=np.int64)
    dur[is_to] = limit + overrun[is_to]
    dur[~is_to] = _scale_capped(raw[~is_to], total - int(dur[is_to].sum()), 45, limit - 60)

    # Tokens: output roughly proportional to time; exact target mean.
    out_target = int(a.get("demo_mean_output_tokens", 20000)) * k
    out_w = dur * rng.lognormal(0.0, 0.3, size=k)
    out_tok = _largest_remainder(out_w, out_target, minimum=200)
    ratio = _INPUT_RATIO.get(a["harness"], 30.0) * rng.lognormal(0.0, 0.2, size=k)
    in_tok = np.floor(out_tok * ratio).astype(np.int64)
    cached = np.floor(in_tok * rng.uniform(0.5, 0.92, size=k)).astype(np.int64)

    # Cost: priced tokens, scaled to the exact published mean cost per attempt (4 dp).
    p_in, p_cache, p_out = _PRICE.get(a.get("model_provider", "OpenAI"), _PRICE["OpenAI"])
    cost_w = (in_tok - cached) * p_in + cached * p_cache + out_tok * p_out
    units_total = int(Decimal(str(a["cost_usd_per_attempt"])) * k * 10000)
    cost_units = _largest_remainder(cost_w.astype(float), units_total, minimum=1)

    for i, r in enumerate(agent_rows):
        r["duration_s"] = int(dur[i])
        r["output_tokens"] = int(out_tok[i])
        r["input_tokens"] = int(in_tok[i])
        r["cached_tokens"] = int(cached[i])
        r["cost_usd"] = Decimal(int(cost_units[i])).scaleb(-4)


def reconstruct(paper: dict, seed: int = DEFAULT_SEED) -> list[TrialRow]:
    """Synthetic per-trial rows (agents in rank order, then category, task, attempt)."""
    cats, attempts, agents = _structure(paper)
    rec = paper.get("reconstruction", {})
    successes = solve_successes(paper)
    rng = np.random.default_rng(seed)

    limit = int(rec.get("time_limit_s", 3600))
    overrun_range = rec.get("timeout_overrun_s", [5, 90])
    soft_cfg = rec.get("soft_metrics", {})
    ct_labels = int(soft_cfg.get("ct-abnormality-classification", {}).get("labels_per_case", 18))

    by_cat = _latent_tasks(cats, rng)
    rows: list[dict] = []
    for a in agents:
        agent_rows = _outcomes(a, cats, by_cat, successes, attempts, rng)
        _usage(a, agent_rows, rng, limit, overrun_range)
        rows.extend(agent_rows)

    n_tm = attempts * next(c["tasks"] for c in cats if c["slug"] == "clinical-trial-matching")
    rate_tm = {
        a["agent"]: successes[(a["agent"], "clinical-trial-matching")] / n_tm for a in agents
    }
    _soft_metrics(rows, rate_tm, rng, soft_cfg, ct_labels)
    return [
        TrialRow(agent=r["agent"], task=r["task"], category=r["category"],
                 attempt=r["attempt"], outcome=r["outcome"], success=r["outcome"] == "passed",
                 reward=1.0 if r["outcome"] == "passed" else 0.0, cost_usd=r["cost_usd"],
                 duration_s=r["duration_s"], input_tokens=r["input_tokens"],
                 cached_tokens=r["cached_tokens"], output_tokens=r["output_tokens"],
                 soft_metrics=r["soft_metrics"])
        for r in rows
    ]


def _soft_metrics(rows, rate_tm, rng, soft_cfg, ct_labels) -> None:
    """Per-category soft metrics consistent with each category's success criterion.

    Timeouts and agent errors get the metrics of the partial submission they leave behind (drawn
    like any other failure).
    """
    ct_rows = []
    tm_rows: dict[str, list[dict]] = {}
    for r in rows:
        ok = r["outcome"] == "passed"
        t = r["_task"]
        slug = r["category"]
        u = [float(v) for v in rng.random(4)]  # plain floats in the soft metrics
        if slug == "clinical-trial-matching":
            m = t["eligible"]
            if ok:
                found = m
            else:
                target = 0.5 + 0.35 * rate_tm.get(r["agent"], 0.3)
                found = int(rng.binomial(m - 1, min(0.99, target * m / (m - 1))))
            r["_found"], r["_eligible"] = found, m
            r["soft_metrics"] = {"recall_at_50": round(found / m, 4) if not ok else 1.0}
            tm_rows.setdefault(r["agent"], []).append(r)
        elif slug == "pathology-tumor-region":
            f1 = 0.9 + round(0.09 * u[0], 3) if ok else round(0.15 + 0.749 * u[0] ** 0.7, 3)
            r["soft_metrics"] = {"tile_f1": round(min(f1, 0.99) if ok else min(f1, 0.899), 3)}
        elif slug == "ct-abnormality-classification":
            if ok:
                fn = fp = 0
            else:
                errors = 1 + int(rng.poisson(1.2))
                fn = int(rng.binomial(errors, 0.5))
                fp = errors - fn
            r["_fn"], r["_fp"] = fn, fp
            ct_rows.append(r)
        elif slug == "ehr-data-quality-audit":
            if ok:
                rec_, prec = 1.0, round(0.02 + 0.55 * u[0], 4)
            elif u[1] < 0.12:  # flagged (almost) everything: full recall, useless precision
                rec_, prec = 1.0, round(0.001 + 0.008 * u[0], 4)
            else:
                rec_, prec = round(0.3 + 0.69 * u[0], 4), round(0.05 + 0.6 * u[2], 4)
            r["soft_metrics"] = {"recall": rec_, "precision": prec}
        elif slug == "ehr-event-modeling":
            b = t["baseline"]
            delta = int(10 + u[0] * 600) if ok else -int(10 + u[0] * 900)
            x = min(b + delta, 9900) if ok else b + delta
            r["soft_metrics"] = {"auroc": x / 10000, "baseline_auroc": b / 10000}
        elif slug == "xray-report-correction":
            v = 3 + int(u[0] * 3) if ok else int(u[0] * 3)
            r["soft_metrics"] = {"judge_zero_error_votes": min(v, 5)}
        elif slug == "ehr-format-conversion":
            if ok:
                r["soft_metrics"] = {"missing_fields": 0, "rows_matched_fraction": 1.0}
            else:
                r["soft_metrics"] = {
                    "missing_fields": 1,
                    "rows_matched_fraction": round(0.9 + 0.09 * u[0], 4),
                }
        else:
            r["soft_metrics"] = {}

    _trial_matching_band(tm_rows, soft_cfg.get("clinical-trial-matching", {}))
    _ct_balance(ct_rows, ct_labels)


def _trial_matching_band(tm_rows: dict[str, list[dict]], cfg: dict) -> None:
    """Clinical-trial matching: the top systems' mean recall@50 inside the published band,
    by moving failed trials' found counts one at a time."""
    lo_band, hi_band = cfg.get("mean_range", [0.85, 0.93])
    lo_t, hi_t = lo_band + 0.01, hi_band - 0.01
    for agent in cfg.get("agents", []):
        rs = tm_rows.get(agent, [])
        fails = [r for r in rs if r["outcome"] != "passed"]

        def mean(rs=rs):
            return sum(r["soft_metrics"]["recall_at_50"] for r in rs) / len(rs)

        for _ in range(1000):
            cur = mean()
            if lo_t <= cur <= hi_t or not fails:
                break
            if cur < lo_t:
                cand = [r for r in fails if r["_found"] + 1 < r["_eligible"]]
                r = min(cand, key=lambda r: r["_found"] / r["_eligible"])
                r["_found"] += 1
            else:
                cand = [r for r in fails if r["_found"] > 0]
                r = max(cand, key=lambda r: r["_found"] / r["_eligible"])
                r["_found"] -= 1
            r["soft_metrics"] = {"recall_at_50": round(r["_found"] / r["_eligible"], 4)}


def _ct_balance(ct_rows: list[dict], ct_labels: int) -> None:
    """CT: missed abnormalities and false positives about equally often over all failures."""
    tot_fn = sum(r["_fn"] for r in ct_rows)
    tot_fp = sum(r["_fp"] for r in ct_rows)
    i = 0
    while abs(tot_fn - tot_fp) > 1 and i < 100 * len(ct_rows):
        r = ct_rows[i % len(ct_rows)]
        if tot_fn > tot_fp and r["_fn"] > 0:
            r["_fn"], r["_fp"] = r["_fn"] - 1, r["_fp"] + 1
            tot_fn, tot_fp = tot_fn - 1, tot_fp + 1
        elif tot_fp > tot_fn and r["_fp"] > 0:
            r["_fn"], r["_fp"] = r["_fn"] + 1, r["_fp"] - 1
            tot_fn, tot_fp = tot_fn + 1, tot_fp - 1
        i += 1
    for r in ct_rows:
        err = r["_fn"] + r["_fp"]
        r["soft_metrics"] = {
            "accuracy": round((ct_labels - err) / ct_labels, 4),
            "false_negatives": r["_fn"],
            "false_positives": r["_fp"],
        }
