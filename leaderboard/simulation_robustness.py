"""The statistics across plausible benchmarks, as the methods page reads them.

``manage.py simulate_stats --only robustness`` (``devtools/robustness.py``) adds to the committed
``leaderboard/data/simulation.csv`` rows measuring the site's interval and tie rule on a grid of
benchmark models (the fitted shape with an agent-by-task interaction of sd 0, 0.5 and 1.0, each
also with one category 3 logits harder) and the power of two agents alone for several attempts
per task. This module is the runtime half: the rows' vocabulary and their grouping into the
ranges and tables the methods page renders. No numpy; the generator imports it.
"""

from __future__ import annotations

from pathlib import Path

from leaderboard import simulation_results
from leaderboard.simulation_results import EQUAL_RATE, read_csv, power_scenario

__all__ = ["ATTEMPTS_GAPS", "ATTEMPTS_GRID", "INTERACTION_SDS", "committed_robustness",
           "model_label", "robustness_table"]

INTERACTION_SDS = (0.0, 0.5, 1.0)
HARD_SHIFT = 3.0  # logits: the "one much harder category" scenario
ROBUST_GAPS = (0.05, 0.10, 0.15)
ATTEMPTS_GAPS = (0.05, 0.10, 0.15)
ATTEMPTS_GRID = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50)
TARGET_POWER = 0.8
ROBUST_COVERAGE = "robustness: coverage"
ROBUST_SPLIT = "robustness: equal agents split"
ROBUST_POWER = "robustness: power: separated"
ATTEMPTS_METRIC = "attempts: power: separated"
ROBUST_PREFIXES = ("robustness:", "attempts:")
ROBUST_SPLIT_SCENARIO = f"10 agents at {EQUAL_RATE:.0%}"


def model_label(interaction_sd: float, harder: bool) -> str:
    hard = f", one category {HARD_SHIFT:g} logits harder" if harder else ""
    return f"agent-by-task interaction sd {interaction_sd:g}{hard}"


def attempts_scenario(gap: float, attempts: int) -> str:
    return f"{gap * 100:.0f} points, {attempts} attempts per task, 54 tasks, 2 agents ranked"


def _span(values: list[float]) -> dict:
    return {"min": min(values), "max": max(values)} if values else {}


def robustness_table(rows) -> dict:
    """The robustness rows grouped for the page: ranges across models of coverage, the split
    rate and power; power per model; attempts per task for 80% power per interaction sd."""
    rows = [r for r in rows if r["metric"].startswith(ROBUST_PREFIXES)]
    if not rows:
        return {}

    def values(metric: str, scenario: str | None = None) -> dict[str, float]:
        return {r["estimator"]: float(r["value"]) for r in rows
                if r["metric"] == metric and (scenario is None or r["scenario"] == scenario)}

    models = list(dict.fromkeys(r["estimator"] for r in rows if r["metric"] == ROBUST_COVERAGE))
    coverage = [float(r["value"]) for r in rows if r["metric"] == ROBUST_COVERAGE]
    power = []
    for gap in ROBUST_GAPS:
        for ranked in (2, 10):
            by_model = values(ROBUST_POWER, power_scenario(gap, ranked))
            power.append({"gap": round(gap * 100), "ranked": ranked,
                          "scenario": power_scenario(gap, ranked),
                          "by_model": [by_model.get(m) for m in models],
                          **_span(list(by_model.values()))})
    sd_models = [model_label(sd, False) for sd in INTERACTION_SDS]
    attempts = []
    for gap in ATTEMPTS_GAPS:
        cells = []
        for label in sd_models:
            curve = [(k, values(ATTEMPTS_METRIC, attempts_scenario(gap, k)).get(label))
                     for k in ATTEMPTS_GRID]
            reached = [k for k, p in curve if p is not None and p >= TARGET_POWER]
            cells.append({"attempts": min(reached) if reached else None,
                          "at_3": dict(curve).get(3), "at_max": curve[-1][1]})
        attempts.append({"gap": round(gap * 100), "cells": cells})

    def gap10(ranked: int) -> dict:
        return next(p for p in power if p["gap"] == 10 and p["ranked"] == ranked)

    first = rows[0]
    return {
        "models": models, "sd_models": sd_models, "interaction_sds": INTERACTION_SDS,
        "hard_shift": HARD_SHIFT, "boards": int(first["boards"]), "seed": int(first["seed"]),
        "coverage": _span(coverage), "split": _span(list(values(ROBUST_SPLIT).values())),
        "power": power, "gap10_alone": gap10(2), "gap10_board": gap10(10),
        "attempts": attempts, "max_attempts": ATTEMPTS_GRID[-1],
        "target_power": TARGET_POWER,
    }


def committed_robustness(path: Path | None = None) -> dict:
    """The committed robustness rows grouped for the methods page ({} when there are none)."""
    path = simulation_results.CSV_PATH if path is None else path
    if not path.exists():
        return {}
    return robustness_table(read_csv(path, path.stat().st_mtime))
