"""The committed results of the statistics simulation, as the methods page reads them.

``manage.py simulate_stats`` (``devtools/simulation.py``, a developer tool, not installed in
production) writes ``leaderboard/data/simulation.csv`` (issue 14: the interval, the tie rule,
pass@k) and ``leaderboard/data/rerun_design.csv`` (issue 22: the re-run design). This module is
the runtime half: the files' place and vocabulary (columns, estimator and scenario labels) and
their grouping for the methods page. No numpy or scipy; the generator imports it, never the
reverse.
"""

from __future__ import annotations

import csv
import functools
from collections.abc import Iterable
from pathlib import Path

from submissions.verification.design import TASK_SD

CSV_PATH = Path(__file__).with_name("data") / "simulation.csv"
RERUN_CSV_PATH = Path(__file__).with_name("data") / "rerun_design.csv"
CSV_COLUMNS = ("metric", "scenario", "estimator", "value", "mc_se", "truth", "n", "boards",
               "seed")

ATTEMPTS = 3
GAP_BASE = 0.30
EQUAL_RATE = 0.30
# The estimators compared: the interval before and after issue 14, the tie rule before and after.
INTERVAL_BEFORE = "task-clustered Wilson (before)"
INTERVAL_SITE = "task-clustered Wilson, stratified by category (site)"
TIE_BEFORE = "paired t vs leader, Bonferroni over all pairs (before)"
TIE_SITE = "step-down from the leader, Bonferroni within the set (site)"

# The re-run design's simulated submissions: one benchmark of RERUN_TASKS tasks (task spread
# TASK_SD), agents at RERUN_RATES.
RERUN_TASKS = 54
RERUN_RATES = (0.20, 0.25, 0.30, 0.35, 0.40, 0.45)
RERUN_SITE = "site design"
HONEST = "honest"


def power_scenario(gap: float, ranked: int) -> str:
    board = "2 agents ranked" if ranked == 2 else f"{ranked} agents ranked (8 at the paper's rates)"
    return f"{GAP_BASE:.0%} vs {GAP_BASE + gap:.0%} ({gap * 100:.0f} points), {board}"


BOARD_SPLIT_SCENARIO = (f"2 agents at {EQUAL_RATE:.0%}, 10 agents ranked "
                        "(8 at the paper's rates)")


@functools.lru_cache(maxsize=4)
def _read_csv(path: Path, mtime: float) -> tuple[dict, ...]:
    with open(path, encoding="utf-8", newline="") as fh:
        return tuple(csv.DictReader(fh))


def committed_table(path: Path | None = None) -> dict:
    """The committed simulation table, grouped for the methods page: coverage and width per
    true rate (before and now), tie splits and power (before and now), pass@k/pass^k bias.
    Empty when the file is missing."""
    path = CSV_PATH if path is None else path
    if not path.exists():
        return {}
    rows = _read_csv(path, path.stat().st_mtime)
    if not rows:
        return {}

    def pick(metric: str, estimator: str) -> dict[str, float]:
        return {r["scenario"]: float(r["value"]) for r in rows
                if r["metric"] == metric and r["estimator"] == estimator}

    def paired(metric: str, before: str, site: str) -> list[dict]:
        b, s = pick(metric, before), pick(metric, site)
        return [{"scenario": k, "before": b[k], "now": s[k]} for k in s if k in b]

    coverage = paired("coverage", INTERVAL_BEFORE, INTERVAL_SITE)
    width = {w["scenario"]: w for w in paired("interval width", INTERVAL_BEFORE, INTERVAL_SITE)}
    conditional = pick("coverage of the benchmark's own rate", INTERVAL_SITE)
    for c in coverage:
        c["width_before"] = width[c["scenario"]]["before"]
        c["width_now"] = width[c["scenario"]]["now"]
        c["conditional"] = conditional.get(c["scenario"])
    now = [c["now"] for c in coverage]
    biases = [{"metric": r["metric"], "scenario": r["scenario"], "bias": float(r["value"]),
               "truth": float(r["truth"])} for r in rows if r["metric"].endswith("bias")]
    return {
        "boards": int(rows[0]["boards"]),
        "seed": int(rows[0]["seed"]),
        "coverage": coverage,
        "coverage_min": min(now),
        "coverage_max": max(now),
        "splits": [dict(s, label="equal agents split into more than one group")
                   for s in paired("equal agents split", TIE_BEFORE, TIE_SITE)]
                  + [dict(s, label="share of equal pairs in different groups")
                     for s in paired("equal pairs in different groups", TIE_BEFORE, TIE_SITE)],
        "power": paired("power: separated", TIE_BEFORE, TIE_SITE),
        "power_gap10_alone": pick("power: separated", TIE_SITE).get(power_scenario(0.10, 2)),
        "power_gap10_board": pick("power: separated", TIE_SITE).get(power_scenario(0.10, 10)),
        "power_gap10_board_before": pick("power: separated", TIE_BEFORE).get(
            power_scenario(0.10, 10)),
        "board_split": pick("equal agents split", TIE_SITE).get(BOARD_SPLIT_SCENARIO),
        "board_split_before": pick("equal agents split", TIE_BEFORE).get(BOARD_SPLIT_SCENARIO),
        "bias": biases,
        "max_bias_complete": max(abs(b["bias"]) for b in biases if "lost" not in b["scenario"]),
        # issue 26: every figure the page's prose quotes comes from the table
        "coverage_before_max": max(c["before"] for c in coverage),
        "lost_pass_at_min": min(b["bias"] for b in biases
                                if "lost" in b["scenario"] and b["metric"] == "pass@k bias"),
        "lost_pass_hat_max": max(b["bias"] for b in biases
                                 if "lost" in b["scenario"] and b["metric"] == "pass^k bias"),
    }


# ---------------------------------------------------------------------------------------------
# The re-run design (issue 22, point 4)
# ---------------------------------------------------------------------------------------------

def inflated_scenario(points: float) -> str:
    return f"claims inflated by {points * 100:.0f} points"


def rerun_table(rows: Iterable) -> dict:
    """Rows (Row objects or CSV dicts) grouped per design: false alarms, detection per
    inflation, mean re-run trials (honest, and the highest over the scenarios), as shares of a
    full run too."""
    rows = [r if isinstance(r, dict) else {"metric": r.metric, "scenario": r.scenario,
                                           "estimator": r.estimator, "value": r.value,
                                           "mc_se": r.mc_se, "n": r.n} for r in rows]
    if not rows:
        return {}
    designs = list(dict.fromkeys(r["estimator"] for r in rows))
    points = [int(s.split(" by ")[1].split()[0]) for s in dict.fromkeys(
        r["scenario"] for r in rows if r["metric"] == "detected")]

    def value(metric, scenario, design):
        (row,) = [r for r in rows if (r["metric"], r["scenario"], r["estimator"])
                  == (metric, scenario, design)]
        return float(row["value"])

    out = []
    for d in designs:
        scens = [HONEST, *(inflated_scenario(p / 100) for p in points)]
        trials = [value("re-run trials", s, d) for s in scens]
        shares = [value("share of a full run", s, d) for s in scens]
        out.append({"design": d, "site": d == RERUN_SITE,
                    "false_alarms": value("false alarms", HONEST, d),
                    "detected": [value("detected", inflated_scenario(p / 100), d)
                                 for p in points],
                    "trials_honest": trials[0], "share_honest": shares[0],
                    "trials_max": max(trials), "share_max": max(shares)})
    return {"points": points, "designs": out}


def committed_rerun_table(path: Path = RERUN_CSV_PATH) -> dict:
    """The committed re-run design table for the methods page (empty when the file is missing):
    per design its false alarms, detection per inflation and mean cost; the site design's row,
    its parameters, the replications and the seed."""
    if not path.exists():
        return {}
    rows = _read_csv(path, path.stat().st_mtime)
    if not rows:
        return {}
    table = rerun_table(rows)
    for d in table["designs"]:
        d["detected_15"] = dict(zip(table["points"], d["detected"], strict=True)).get(15)
    site = next(d for d in table["designs"] if d["site"])
    at = dict(zip(table["points"], site["detected"], strict=True))
    reaching = [d for d in table["designs"] if (d["detected_15"] or 0) >= 0.8]
    return {**table, "site": site, "site_design": rows[0]["site_design"],
            "every_task": next((d for d in table["designs"]
                                if d["design"].startswith("one re-run of every task")), None),
            "reaching_80": min(reaching, key=lambda d: d["share_honest"]) if reaching else None,
            "reps": int(rows[0]["boards"]), "seed": int(rows[0]["seed"]),
            "submissions": int(rows[0]["n"]), "detected_15": at.get(15),
            "detected_20": at.get(20), "full_run": RERUN_TASKS * ATTEMPTS,
            "rates": f"{RERUN_RATES[0]:.0%} to {RERUN_RATES[-1]:.0%}",
            "task_sd": TASK_SD}
