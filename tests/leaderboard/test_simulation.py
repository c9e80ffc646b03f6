"""The simulation of the site's estimators (manage.py simulate_stats), the committed
table it writes, and the methods page that shows it."""

import csv
import math

import numpy as np
import pytest
from django.core.management import call_command
from scipy.stats import t as t_dist

from devtools import simulation
from leaderboard import simulation_results, stats
from leaderboard.formatting import format_pct

BAND = (0.93, 0.97)


def _rows(path):
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _value(rows, metric, estimator, scenario):
    (row,) = [r for r in rows if (r["metric"], r["estimator"], r["scenario"])
              == (metric, estimator, scenario)]
    return float(row["value"]), float(row["mc_se"])


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A small seeded run of the real command: 400 leaderboards."""
    out = tmp_path_factory.mktemp("sim") / "simulation.csv"
    call_command("simulate_stats", only="stats", boards=400, seed=7, output=out, verbosity=0)
    return _rows(out)


def test_small_run_covers_the_truth_within_the_band_with_the_site_interval(small_run):
    covered = [_value(small_run, "coverage", simulation.INTERVAL_SITE, f"true rate {r:.0%}")
               for r in simulation.TRUE_RATES]
    pooled = sum(v for v, _ in covered) / len(covered)
    assert BAND[0] <= pooled <= BAND[1], pooled
    for rate, (value, se) in zip(simulation.TRUE_RATES, covered, strict=True):
        # each rate on 400 boards: within the band up to three Monte Carlo standard errors
        assert BAND[0] - 3 * se <= value <= BAND[1] + 3 * se, (rate, value, se)
    assert {int(r["boards"]) for r in small_run} == {400}


def test_small_run_keeps_equal_agents_together_with_the_site_tie_rule(small_run):
    for size in simulation.EQUAL_SIZES:
        scen = f"{size} agents at {simulation.EQUAL_RATE:.0%}"
        now, se = _value(small_run, "equal agents split", simulation.TIE_SITE, scen)
        assert now <= 0.05 + 3 * se, (size, now)
    # on a ten-agent board like the paper's the step-down separates a 10-point gap more often
    # than the all-pairs rule, and splits two equal agents there less often
    board = simulation._power_scenario(0.10, 10)
    now, se_now = _value(small_run, "power: separated", simulation.TIE_SITE, board)
    before, se_before = _value(small_run, "power: separated", simulation.TIE_BEFORE, board)
    assert now > before + 2 * math.hypot(se_now, se_before), (now, before)
    split_now, _ = _value(small_run, "equal agents split", simulation.TIE_SITE,
                          simulation.BOARD_SPLIT_SCENARIO)
    split_before, _ = _value(small_run, "equal agents split", simulation.TIE_BEFORE,
                             simulation.BOARD_SPLIT_SCENARIO)
    assert split_now <= split_before


def test_small_run_power_grows_with_the_gap(small_run):
    power = [_value(small_run, "power: separated", simulation.TIE_SITE,
                    f"30% vs {30 + g}% ({g} points), 2 agents ranked")[0] for g in (2, 5, 10)]
    assert power[0] < power[1] < power[2]
    assert power[2] > 0.5


def test_pass_at_k_is_unbiased_when_every_attempt_is_scored(small_run):
    for r in small_run:
        if r["metric"].endswith("bias") and "lost" not in r["scenario"]:
            assert abs(float(r["value"])) <= 4 * float(r["mc_se"]) + 1e-9, r


def test_the_committed_table_has_10000_boards_and_the_site_estimators_within_the_band():
    rows = _rows(simulation_results.CSV_PATH)
    assert {int(r["boards"]) for r in rows} == {10_000}
    for rate in simulation.TRUE_RATES:
        now, _ = _value(rows, "coverage", simulation.INTERVAL_SITE, f"true rate {rate:.0%}")
        assert BAND[0] <= now <= BAND[1], (rate, now)
    for size in simulation.EQUAL_SIZES:
        now, _ = _value(rows, "equal agents split", simulation.TIE_SITE,
                        f"{size} agents at {simulation.EQUAL_RATE:.0%}")
        assert now <= 0.05, (size, now)
    board = simulation._power_scenario(0.10, 10)
    now, _ = _value(rows, "power: separated", simulation.TIE_SITE, board)
    before, _ = _value(rows, "power: separated", simulation.TIE_BEFORE, board)
    assert now > before, (now, before)


def test_fit_shape_recovers_the_spread_of_a_known_benchmark():
    """Data drawn from a known shape: the fit finds its task spread near the truth."""
    truth = simulation.Shape((("a", 20, -1.0), ("b", 20, 1.0)), task_sd=1.5, interaction_sd=0.5)
    rng = np.random.default_rng(3)
    mu, sd = truth.task_mu, truth.task_sd
    delta = sd * rng.standard_normal(truth.n_tasks)
    rows = []
    names = [f"{c}/{i}" for c, n, _ in truth.categories for i in range(n)]
    cats = [c for c, n, _ in truth.categories for _ in range(n)]
    for agent, theta in enumerate((-1.0, -0.5, 0.0, 0.5, 1.0, 1.5)):
        p = 1 / (1 + np.exp(
            -(theta + mu + delta + truth.interaction_sd * rng.standard_normal(truth.n_tasks))))
        for t, name in enumerate(names):
            for _ in range(3):
                rows.append(_Trial(str(agent), name, cats[t], bool(rng.random() < p[t])))
    fitted = simulation.fit_shape(rows, replications=100)
    assert math.isclose(fitted.total_sd, truth.total_sd, abs_tol=0.6)
    assert fitted.task_sd > fitted.interaction_sd
    assert [c for c, _, _ in fitted.categories] == ["a", "b"]
    assert fitted.categories[0][2] < fitted.categories[1][2]


class _Trial:
    def __init__(self, agent, task, category, success):
        self.agent, self.task, self.category, self.success = agent, task, category, success


def test_the_true_rate_is_solved_exactly():
    shape = simulation.Shape((("a", 10, -1.0), ("b", 5, 2.0)), task_sd=1.0, interaction_sd=0.5)
    for rate in (0.05, 0.3, 0.6):
        assert shape.expected(shape.theta_for(rate)) == pytest.approx(rate, abs=1e-9)


def test_methods_page_shows_the_committed_table(client, db):
    body = client.get("/methods/").content.decode()
    table = simulation_results.committed_table()
    assert 'data-testid="simulation-coverage"' in body
    assert 'data-testid="simulation-ties"' in body and 'data-testid="simulation-bias"' in body
    low, high = stats_pct(table["coverage_min"]), stats_pct(table["coverage_max"])
    assert (f"Our 95% intervals covered the truth in {low} to {high} of\n10,000 simulated "
            "leaderboards") in body
    for c in table["coverage"]:
        assert f"<td class=\"num\">{stats_pct(c['now'])}</td>" in body
        assert f"<td class=\"num\">{stats_pct(c['before'])}</td>" in body
    assert "Covered, before" in body and "Bonferroni" in body


def stats_pct(value):
    return format_pct(value)


def test_tie_critical_value_for_two_agents_is_the_plain_t_test():
    p = stats.paired_p_value([1, 1, 0, 1, 0, 1, 1, 0], [0, 0, 0, 1, 0, 0, 1, 0])
    a, b = [1, 1, 0, 1, 0, 1, 1, 0], [0, 0, 0, 1, 0, 0, 1, 0]
    d = [x - y for x, y in zip(a, b, strict=True)]
    mean = sum(d) / len(d)
    t = mean / math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1) / len(d))
    assert (abs(t) > stats.tie_critical_value(0.05, 2, len(d) - 1)) == (p < 0.05)
    # ten agents: Bonferroni over 45 pairs, a larger critical value
    assert stats.tie_critical_value(0.05, 10, 53) == pytest.approx(
        t_dist.isf(0.05 / 90, 53))


# --- the re-run design's table ---------------------------------------------------------------


@pytest.fixture(scope="module")
def rerun_run(tmp_path_factory):
    """A small seeded run of the real command's re-run part: 150 submissions per rate."""
    out = tmp_path_factory.mktemp("sim") / "rerun_design.csv"
    call_command("simulate_stats", only="rerun", rerun_reps=150, seed=7, rerun_output=out,
                 verbosity=0)
    return out


def test_small_rerun_run_holds_the_false_alarm_rate_and_the_cost(rerun_run):
    from django.conf import settings

    table = simulation_results.committed_rerun_table(rerun_run)
    assert table["reps"] == 150 and table["submissions"] == 150 * len(simulation.RERUN_RATES)
    for d in table["designs"]:
        # honest agents: flagged at most alpha, up to three Monte Carlo standard errors
        n = table["submissions"]
        alpha = settings.VERIFICATION_RERUN_ALPHA
        assert d["false_alarms"] <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / n), d
        assert [a["label"] for a in d["attacks"]] == list(simulation_results.RERUN_ATTACKS.values())
        for a in d["attacks"]:
            assert a["detected"] == sorted(a["detected"]) or max(
                x - y for x, y in zip(a["detected"], a["detected"][1:], strict=False)) < 0.05, d
    site = table["site"]
    # a fifth of a full run with the fakes at random, up to simulation noise
    assert site["attacks"][0]["share_max"] <= 0.2 + 0.02
    assert table["points"] == [5, 10, 15, 20]


def test_every_submission_ends_flagged_inconclusive_or_consistent(rerun_run):
    """The three shares of each design and scenario partition its submissions (the CSV rounds
    each to five decimals)."""
    table = simulation_results.committed_rerun_table(rerun_run)
    for d in table["designs"]:
        honest = d["false_alarms"] + d["inconclusive_honest"] + d["consistent_honest"]
        assert honest == pytest.approx(1, abs=2e-5), d
        for a in d["attacks"]:
            for parts in zip(a["detected"], a["inconclusive"], a["consistent"], strict=True):
                assert sum(parts) == pytest.approx(1, abs=2e-5), (d["design"], a["label"])


def _by_scenario(rows, design):
    return {(r.metric, r.scenario): r.value for r in rows if r.estimator == design}


def test_rerun_outcomes_by_hand_for_an_agent_that_never_passes():
    """An agent that never passes, one look at every task, accept_z 1.5: each fake spread one
    per task is a stratum with 1 claimed pass of 3 and a failing re-run, whose pass chance
    under honesty is 1/4. k such tasks: p-value (3/4)^k, z = (k/4) / sqrt(k 3/16) = sqrt(k/3).
    k = 5 (3 points of 162 trials): p 0.24, z 1.29, consistent; k = 8 (5 points): p 0.100,
    z 1.63, inconclusive; k = 16 (10 points): p 0.010, inflated. Honest: every stratum is
    certain (no pass anywhere), z = 0, consistent."""
    from submissions.verification.design import Design

    shape = simulation.Shape((("all", 54, 0.0),), task_sd=0.0, interaction_sd=0.0)
    one_look = Design(first=54, step=54, max_trials=54, alpha=0.05, accept_z=1.5)
    rows = simulation.simulate_rerun({"one look": one_look}, reps=50, seed=3, shape=shape,
                                     rates=(1e-12,), inflations=(0.03, 0.05, 0.10))
    got = _by_scenario(rows, "one look")
    honest = simulation.HONEST
    assert (got["false alarms", honest], got["inconclusive", honest],
            got["consistent", honest], got["re-run trials", honest]) == (0, 0, 1, 54)
    expected = {0.03: (0, 0, 1), 0.05: (0, 1, 0), 0.10: (1, 0, 0)}
    for points, (flagged, inconclusive, consistent) in expected.items():
        scen = simulation_results.inflated_scenario(points, spread=True)
        assert (got["detected", scen], got["inconclusive", scen], got["consistent", scen]) == (
            flagged, inconclusive, consistent), points
        assert got["share of a full run", scen] == pytest.approx(54 / 162)


def test_rerun_detection_matches_the_design_modules_own_power_estimate():
    """The table's detection at one agent rate against design.power_at, which draws its own
    benchmarks from the claimed rate: 54 tasks x 3 attempts claiming 73 passes (45%) hide a
    true rate of 30% under 15 points, with the fakes at random or spread one per task."""
    from django.conf import settings

    from submissions.verification.design import Design, Trial, power_at

    site = Design.from_settings(settings)
    reps = 4000
    rows = simulation.simulate_rerun({"site": site}, reps=reps, seed=5, rates=(0.30,),
                                     inflations=(0.15,))
    got = _by_scenario(rows, "site")
    candidates = [Trial(f"t{t}", a, t * 3 + a < 73) for t in range(54) for a in range(3)]
    for spread in (False, True):
        ours = got["detected", simulation_results.inflated_scenario(0.15, spread=spread)]
        theirs = power_at(candidates, site, 15, reps=reps, seed=9, spread=spread)
        se = math.sqrt(ours * (1 - ours) / reps + theirs * (1 - theirs) / reps)
        assert abs(ours - theirs) <= 3.5 * se, (spread, ours, theirs)


def _row(metric, scenario, design, value):
    return {"metric": metric, "scenario": scenario, "estimator": design, "value": str(value),
            "mc_se": "0", "n": "10"}


def test_rerun_table_groups_the_rows_by_hand():
    honest, spread = simulation.HONEST, simulation_results.inflated_scenario
    rows = [_row("false alarms", honest, "d", 0.04), _row("inconclusive", honest, "d", 0.02),
            _row("consistent", honest, "d", 0.94), _row("re-run trials", honest, "d", 20),
            _row("share of a full run", honest, "d", 0.125)]
    for p, det, trials in ((0.05, 0.1, 25), (0.10, 0.3, 30)):
        for on, shift in ((False, 0.0), (True, -0.05)):
            scen = spread(p, spread=on)
            rows += [_row("detected", scen, "d", det + shift),
                     _row("inconclusive", scen, "d", 0.1),
                     _row("consistent", scen, "d", 0.9 - det - shift),
                     _row("re-run trials", scen, "d", trials + 10 * on),
                     _row("share of a full run", scen, "d", (trials + 10 * on) / 160)]
    table = simulation_results.rerun_table(rows)
    assert table["points"] == [5, 10]
    (d,) = table["designs"]
    assert (d["false_alarms"], d["inconclusive_honest"], d["consistent_honest"]) == (
        0.04, 0.02, 0.94)
    assert d["detected"] == [0.1, 0.3] and d["detected_spread"] == pytest.approx([0.05, 0.25])
    rand, spr = d["attacks"]
    assert (rand["spread"], spr["spread"]) == (False, True)
    assert rand["consistent"] == pytest.approx([0.8, 0.6])
    assert (rand["trials_max"], spr["trials_max"], d["trials_max"]) == (30, 40, 40)
    assert d["share_max"] == 40 / 160 and d["trials_honest"] == 20
    # a table without the spread rows or the status rows still reads: one placement, None
    old = [r for r in rows if "spread" not in r["scenario"]
           and r["metric"] not in ("inconclusive", "consistent")]
    (d,) = simulation_results.rerun_table(old)["designs"]
    assert len(d["attacks"]) == 1 and d["detected_spread"] is None
    assert d["inconclusive_honest"] is None and d["detected"] == [0.1, 0.3]
    with pytest.raises(ValueError, match="repeats"):
        simulation_results.rerun_table([*rows, rows[0]])


def test_the_committed_rerun_table_is_the_current_site_design_and_meets_two_targets():
    """The committed table was made with the settings' defaults (a change of a default must
    regenerate it), holds false alarms at alpha and the cost at a fifth of a full run, and
    reaches 80% detection at 15 points only with a design that costs more (stated, not hidden).
    Spreading the fakes one per task hides them better from the site's test at every inflation,
    and costs more re-runs: the shortfall lingers between the stopping bounds for more looks."""
    from django.conf import settings

    from submissions.verification.design import Design

    table = simulation_results.committed_rerun_table()
    assert table["site_design"] == simulation.describe_design(Design.from_settings(settings))
    assert table["reps"] == 2000 and table["seed"] == 20261203  # the command's defaults
    site = table["site"]
    assert site["false_alarms"] <= settings.VERIFICATION_RERUN_ALPHA
    random, spread = site["attacks"]
    assert site["share_honest"] <= 0.2 and random["share_max"] <= 0.2
    assert random["share_max"] < spread["share_max"] == site["share_max"] <= 0.25
    assert site["detected"] == sorted(site["detected"])
    assert site["detected_spread"] == sorted(site["detected_spread"])
    assert all(s < r for s, r in zip(site["detected_spread"], site["detected"], strict=True))
    assert 0 < site["inconclusive_honest"] <= 0.05
    reaching = table["reaching_80"]
    assert reaching is not None and reaching["share_honest"] > 0.2
    mcnemar = next(d for d in table["designs"] if d["design"].startswith("McNemar"))
    assert site["detected_15"] > mcnemar["detected_15"]


def test_methods_page_shows_the_committed_rerun_table(client, db):
    body = client.get("/methods/").content.decode()
    table = simulation_results.committed_rerun_table()
    assert 'data-testid="rerun-design"' in body and 'id="rerun-design"' in body
    for d in table["designs"]:
        assert d["design"] in body
        assert f"<td class=\"num\" rowspan=\"2\">{stats_pct(d['false_alarms'])}</td>" in body
        for v in d["detected"]:
            assert f"<td class=\"num\">{stats_pct(v)}</td>" in body
        assert f"{d['trials_honest']:.1f} ({format_pct(d['share_honest'], 0)})" in body
    from django.utils.html import escape

    assert escape(table["site_design"]) in body
    assert f"inflation of 15 points {format_pct(table['detected_15'], 0)} of the time" in body


def test_methods_page_shows_the_site_designs_spread_row_from_the_committed_csv(client, db):
    """The site design's row for fakes spread one per task, read straight from the CSV: its
    detection at each inflation, and the honest submissions left inconclusive beside it."""
    rows = _rows(simulation_results.RERUN_CSV_PATH)
    site = simulation_results.RERUN_SITE
    spread = [_value(rows, "detected", site, f"claims inflated by {p} points, fakes spread one "
                     "per task")[0] for p in (5, 10, 15, 20)]
    inconclusive, _ = _value(rows, "inconclusive", site, "honest")
    body = client.get("/methods/").content.decode()
    table = body.split('data-testid="rerun-design"')[1].split("</table>")[0]
    first, second = table.split('<tr class="site" data-fakes="')[1:3]
    assert first.startswith("random") and second.startswith("spread")
    assert "fakes spread one per task" in second
    cells = [c.split("<")[0] for c in second.split('<td class="num">')[1:]]
    assert cells[:4] == [format_pct(v) for v in spread]
    assert f'<td class="num" rowspan="2">{format_pct(inconclusive)}</td>' in first
    assert f"with the fakes spread one\nper task, {format_pct(spread[2], 0)} and" in body
