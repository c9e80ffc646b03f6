"""The committed results of the statistics simulation, as the methods page reads them.

``manage.py simulate_stats`` (``devtools/simulation.py``, a developer tool, not installed in
production) writes ``leaderboard/data/simulation.csv`` (the interval, the tie rule,
pass@k) and ``leaderboard/data/rerun_design.csv`` (the re-run design). This module is
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
COMPARE_CSV_PATH = Path(__file__).with_name("data") / "compare_test.csv"
CSV_COLUMNS = ("metric", "scenario", "estimator", "value", "mc_se", "truth", "n", "boards",
               "seed")

ATTEMPTS = 3
GAP_BASE = 0.30
EQUAL_RATE = 0.30
# The estimators compared: the interval before and after its review, the tie rule before and after.
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
# The metrics besides the share flagged inflated: how the other submissions ended (Run.status).
RERUN_STATUS_INCONCLUSIVE = "inconclusive"
RERUN_STATUS_CONSISTENT = "consistent"
# Where an inflating submitter puts its fakes: on random failed trials (design.inflate), or one
# per task, weakest tasks first (design.inflate_spread), the placement the test sees least.
RERUN_ATTACKS = {False: "at random", True: "spread one per task"}
SPREAD_SUFFIX = ", fakes spread one per task"


def power_scenario(gap: float, ranked: int) -> str:
    board = "2 agents ranked" if ranked == 2 else f"{ranked} agents ranked (8 at the paper's rates)"
    return f"{GAP_BASE:.0%} vs {GAP_BASE + gap:.0%} ({gap * 100:.0f} points), {board}"


BOARD_SPLIT_SCENARIO = (f"2 agents at {EQUAL_RATE:.0%}, 10 agents ranked "
                        "(8 at the paper's rates)")


@functools.lru_cache(maxsize=4)
def read_csv(path: Path, mtime: float) -> tuple[dict, ...]:
    with open(path, encoding="utf-8", newline="") as fh:
        return tuple(csv.DictReader(fh))


def committed_table(path: Path | None = None) -> dict:
    """The committed simulation table, grouped for the methods page: coverage and width per
    true rate (before and now), tie splits and power (before and now), pass@k/pass^k bias.
    Empty when the file is missing."""
    path = CSV_PATH if path is None else path
    if not path.exists():
        return {}
    rows = read_csv(path, path.stat().st_mtime)
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
        # Every figure the page's prose quotes comes from the table
        "coverage_before_max": max(c["before"] for c in coverage),
        "lost_pass_at_min": min(b["bias"] for b in biases
                                if "lost" in b["scenario"] and b["metric"] == "pass@k bias"),
        "lost_pass_hat_max": max(b["bias"] for b in biases
                                 if "lost" in b["scenario"] and b["metric"] == "pass^k bias"),
    }


# ---------------------------------------------------------------------------------------------
# The compare page's paired test
# ---------------------------------------------------------------------------------------------

COMPARE_SITE = "sign-flip permutation test over tasks, Holm over the pairs (compare page)"
COMPARE_T = "paired t-test over tasks (the tie groups' test)"
COMPARE_FPR = "equal agents called separable"
COMPARE_POWER = "power: separated"
COMPARE_POWER_RIGHT = "power: separated, better agent ahead"
COMPARE_GAP_BASE = 0.30
# (scenario, true rates of the agents compared, the pair whose power is measured or None when
# every agent is equal)
COMPARE_SCENARIOS = (
    ("2 agents at 30%", (0.30, 0.30), None),
    ("4 agents at 30% (6 pairs)", (0.30,) * 4, None),
    ("8 agents at 30% (28 pairs)", (0.30,) * 8, None),
    ("30% vs 35% (5 points), 2 agents", (0.30, 0.35), (0, 1)),
    ("30% vs 40% (10 points), 2 agents", (0.30, 0.40), (0, 1)),
    ("30% vs 45% (15 points), 2 agents", (0.30, 0.45), (0, 1)),
    ("30% vs 40% (10 points) among 4 agents (the others 33%, 37%; 6 pairs)",
     (0.30, 0.40, 0.33, 0.37), (0, 1)),
)


def committed_compare_table(path: Path = COMPARE_CSV_PATH) -> dict:
    """The compare test's committed simulation for the methods page (empty when the file is
    missing): false positives and power per scenario, the site's test beside the paired
    t-test where both were run; the figures the prose quotes."""
    if not path.exists():
        return {}
    rows = read_csv(path, path.stat().st_mtime)
    if not rows:
        return {}
    got = {(r["metric"], r["scenario"], r["estimator"]): float(r["value"]) for r in rows}

    def line(metric: str, scen: str) -> dict:
        return {"scenario": scen, "site": got.get((metric, scen, COMPARE_SITE)),
                "t": got.get((metric, scen, COMPARE_T)),
                "right": got.get((COMPARE_POWER_RIGHT, scen, COMPARE_SITE))}

    fpr = [line(COMPARE_FPR, s) for s, _, pair in COMPARE_SCENARIOS if pair is None]
    power = [line(COMPARE_POWER, s) for s, _, pair in COMPARE_SCENARIOS if pair is not None]
    by_scen = {p["scenario"]: p for p in power}
    return {"boards": int(rows[0]["boards"]), "seed": int(rows[0]["seed"]), "fpr": fpr,
            "power": power, "fpr_max": max(f["site"] for f in fpr),
            "power_10": by_scen[COMPARE_SCENARIOS[4][0]]["site"],
            "power_10_t": by_scen[COMPARE_SCENARIOS[4][0]]["t"],
            "power_10_among": by_scen[COMPARE_SCENARIOS[6][0]]["site"],
            "fpr_2": fpr[0]["site"], "fpr_2_t": fpr[0]["t"],
            # whether every separated gap put the better agent ahead
            "always_right": all(p["right"] == p["site"] for p in power)}


# ---------------------------------------------------------------------------------------------
# The re-run design
# ---------------------------------------------------------------------------------------------

def inflated_scenario(points: float, *, spread: bool = False) -> str:
    return f"claims inflated by {points * 100:.0f} points{SPREAD_SUFFIX if spread else ''}"


def _as_dict(r) -> dict:
    return r if isinstance(r, dict) else {"metric": r.metric, "scenario": r.scenario,
                                          "estimator": r.estimator, "value": r.value,
                                          "mc_se": r.mc_se, "n": r.n}


def rerun_table(rows: Iterable) -> dict:
    """Rows (Row objects or CSV dicts) grouped per design: false alarms and the honest
    submissions ending inconclusive or consistent, mean re-run trials (honest, and the highest
    over the scenarios, as shares of a full run too), and per placement of the fakes
    (``attacks``: at random, then spread one per task when the rows have it) detection and the
    inflated submissions ending inconclusive or consistent per inflation. ``detected`` and
    ``detected_spread`` are the two placements' detection. A metric the rows lack is None."""
    rows = [_as_dict(r) for r in rows]
    if not rows:
        return {}
    index: dict[tuple[str, str, str], float] = {}
    for r in rows:
        key = (r["metric"], r["scenario"], r["estimator"])
        if key in index:
            raise ValueError(f"the re-run table repeats {key}")
        index[key] = float(r["value"])
    designs = list(dict.fromkeys(r["estimator"] for r in rows))
    points = [int(s.split(" by ")[1].split()[0]) for s in dict.fromkeys(
        r["scenario"] for r in rows
        if r["metric"] == "detected" and not r["scenario"].endswith(SPREAD_SUFFIX))]
    has_spread = any(r["scenario"].endswith(SPREAD_SUFFIX) for r in rows)
    out = [_rerun_design(index, d, points, has_spread) for d in designs]
    return {"points": points, "designs": out}


def _rerun_design(index: dict, design: str, points: list[int], has_spread: bool) -> dict:
    def get(metric, scenario):
        return index.get((metric, scenario, design))

    attacks = []
    for spread in (False, True)[: 1 + has_spread]:
        scens = [inflated_scenario(p / 100, spread=spread) for p in points]
        trials = [get("re-run trials", s) for s in scens]
        shares = [get("share of a full run", s) for s in scens]
        attacks.append({"label": RERUN_ATTACKS[spread], "spread": spread,
                        "detected": [get("detected", s) for s in scens],
                        "inconclusive": [get(RERUN_STATUS_INCONCLUSIVE, s) for s in scens],
                        "consistent": [get(RERUN_STATUS_CONSISTENT, s) for s in scens],
                        "trials_max": max(trials), "share_max": max(shares)})
    trials_honest, share_honest = get("re-run trials", HONEST), get("share of a full run", HONEST)
    return {"design": design, "site": design == RERUN_SITE,
            "false_alarms": get("false alarms", HONEST),
            "inconclusive_honest": get(RERUN_STATUS_INCONCLUSIVE, HONEST),
            "consistent_honest": get(RERUN_STATUS_CONSISTENT, HONEST),
            "detected": attacks[0]["detected"],
            "detected_spread": attacks[1]["detected"] if has_spread else None,
            "attacks": attacks,
            "trials_honest": trials_honest, "share_honest": share_honest,
            "trials_max": max([trials_honest, *(a["trials_max"] for a in attacks)]),
            "share_max": max([share_honest, *(a["share_max"] for a in attacks)])}


def committed_rerun_table(path: Path = RERUN_CSV_PATH) -> dict:
    """The committed re-run design table for the methods page (empty when the file is missing):
    per design its false alarms, honest submissions ending inconclusive, detection per inflation
    for each placement of the fakes and mean cost; the site design's row and the figures the
    page's prose quotes from it, its parameters, the replications and the seed."""
    if not path.exists():
        return {}
    rows = read_csv(path, path.stat().st_mtime)
    if not rows:
        return {}
    table = rerun_table(rows)
    for d in table["designs"]:
        d["detected_15"] = dict(zip(table["points"], d["detected"], strict=True)).get(15)
    site = next(d for d in table["designs"] if d["site"])
    reaching = [d for d in table["designs"] if (d["detected_15"] or 0) >= 0.8]
    return {**table, "site": site, "site_design": rows[0]["site_design"],
            **_site_figures(site, table["points"]),
            "every_task": next((d for d in table["designs"]
                                if d["design"].startswith("one re-run of every task")), None),
            "reaching_80": min(reaching, key=lambda d: d["share_honest"]) if reaching else None,
            "reps": int(rows[0]["boards"]), "seed": int(rows[0]["seed"]),
            "submissions": int(rows[0]["n"]), "full_run": RERUN_TASKS * ATTEMPTS,
            "rates": f"{RERUN_RATES[0]:.0%} to {RERUN_RATES[-1]:.0%}",
            "task_sd": TASK_SD}


def _site_figures(site: dict, points: list[int]) -> dict:
    """The site design's figures at 15 and 20 points the prose quotes, for each placement of
    the fakes (the spread ones None when the table has no spread rows)."""
    def at(attack: dict | None, key: str, p: int):
        return dict(zip(points, attack[key], strict=True)).get(p) if attack else None

    rand = site["attacks"][0]
    spread = site["attacks"][1] if len(site["attacks"]) > 1 else None
    return {"detected_15": at(rand, "detected", 15), "detected_20": at(rand, "detected", 20),
            "spread_15": at(spread, "detected", 15), "spread_20": at(spread, "detected", 20),
            "consistent_15": at(rand, "consistent", 15),
            "consistent_spread_15": at(spread, "consistent", 15)}
