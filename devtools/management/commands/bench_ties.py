"""Time the tie grouping at leaderboard scale: ``manage.py bench_ties``.

Draws a leaderboard of N agents (default 1,000 and 10,000) with true success rates spread evenly
over 5%..60% on a benchmark shaped like HealthAgentBench (54 tasks in the paper's category
sizes, 3 attempts each, task difficulty spread as ``simulate_stats`` fits it to the reconstructed
paper data), ranks it as the rebuild does and times ``stats.tie_groups_vectorised`` (the site's
step-down from the leader) and ``stats.tie_groups_all_pairs_vectorised`` (the rule before), from the
same per-task dicts the rebuild passes. Prints the best of ``--repeat`` runs, the number of
groups and the mean width of a group in points of success rate. No database.
"""

from __future__ import annotations

import time

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand
from scipy.special import expit

from devtools import simulation
from leaderboard import stats

# simulate_stats' fit to the reconstructed paper data (seed 1), rounded: category sizes and
# difficulties (logit scale) and the spread of task difficulty.
SHAPE = simulation.Shape(
    (("xray-report-correction", 10, -0.98), ("pathology-tumor-region", 10, -1.68),
     ("ct-abnormality-classification", 10, -1.44), ("ehr-data-quality-audit", 8, -1.10),
     ("ehr-format-conversion", 1, 4.97), ("ehr-event-modeling", 6, 2.12),
     ("clinical-trial-matching", 9, 0.24)),
    task_sd=2.25, interaction_sd=0.0)


def board(n_agents: int, seed: int) -> tuple[list[dict[str, float]], list[float]]:
    """Per-task rates and pooled success rates of ``n_agents`` agents in rank order."""
    rng = np.random.default_rng(seed)
    grid = np.linspace(0.05, 0.60, 56)
    thetas = np.interp(np.linspace(0.05, 0.60, n_agents), grid,
                       [SHAPE.theta_for(r) for r in grid])
    delta = SHAPE.task_sd * rng.standard_normal(SHAPE.n_tasks)
    p = expit(thetas[:, None] + SHAPE.task_mu[None, :] + delta[None, :])
    successes = (rng.random((n_agents, SHAPE.n_tasks, SHAPE.attempts)) < p[..., None]).sum(-1)
    rates = successes.sum(axis=1) / (SHAPE.n_tasks * SHAPE.attempts)
    order = np.argsort(-rates, kind="stable")
    keys = [f"task-{t:02d}" for t in range(SHAPE.n_tasks)]
    per_task = [dict(zip(keys, (successes[i] / SHAPE.attempts).tolist(), strict=True))
                for i in order]
    return per_task, rates[order].tolist()


class Command(BaseCommand):
    help = ("Time the tie grouping (step-down from the leader, and the all-pairs rule before it) "
            "at 1,000 and 10,000 agents.")

    def add_arguments(self, parser):
        parser.add_argument("--agents", type=int, nargs="+", default=[1_000, 10_000])
        parser.add_argument("--repeat", type=int, default=3)
        parser.add_argument("--seed", type=int, default=20261203)

    def handle(self, *args, agents: list[int], repeat: int, seed: int, **options):
        alpha = settings.LEADERBOARD_TIE_ALPHA
        for n in agents:
            per_task, rates = board(n, seed)
            rules = {
                "step-down (site)": lambda p, r: stats.tie_groups_vectorised(p, alpha, rates=r),
                "all pairs (before)": lambda p, r: stats.tie_groups_all_pairs_vectorised(p, alpha),
            }
            timed = {}
            for name, rule in rules.items():
                best = float("inf")
                for _ in range(repeat):
                    started = time.perf_counter()
                    groups = rule(per_task, rates)
                    best = min(best, time.perf_counter() - started)
                timed[name] = best
                n_groups = max(groups)
                spread = (rates[0] - rates[-1]) * 100
                self.stdout.write(
                    f"{n:>6} agents, {name:<24} {best * 1000:8.1f} ms (best of {repeat}), "
                    f"{n_groups} groups, mean width {spread / n_groups:.1f} points")
            site, before = timed.values()
            self.stdout.write(f"{n:>6} agents: site / before time ratio {site / before:.2f}")
