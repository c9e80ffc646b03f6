"""The statistics across plausible benchmarks (interaction sd 0, 0.5,
1.0; one much harder category), the attempts-per-task table, and the methods page rendering
every figure it quotes from the committed simulation table."""

import csv
import shutil

import pytest
from django.core.management import call_command

from devtools import robustness, simulation
from leaderboard import simulation_results, simulation_robustness
from leaderboard.formatting import format_pct

SR = simulation_robustness


def _rows(path):
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """The real command's robustness part on a copy of the committed table: 150 boards per
    model, 60 benchmarks per attempts cell."""
    out = tmp_path_factory.mktemp("sim") / "simulation.csv"
    shutil.copy(simulation_results.CSV_PATH, out)
    call_command("simulate_stats", only="robustness", robust_boards=150, attempts_boards=60,
                 seed=11, output=out, verbosity=0)
    return out


def test_small_run_keeps_the_base_table_and_adds_every_model(small_run):
    before = [r for r in _rows(simulation_results.CSV_PATH)
              if not r["metric"].startswith(SR.ROBUST_PREFIXES)]
    after = _rows(small_run)
    assert [r for r in after if not r["metric"].startswith(SR.ROBUST_PREFIXES)] == before
    table = SR.committed_robustness(small_run)
    assert len(table["models"]) == 6 and table["boards"] == 150
    assert {m for m in table["models"] if "harder" in m} == {
        SR.model_label(sd, True) for sd in SR.INTERACTION_SDS}
    # 150 boards x 7 rates per model: coverage stays near 95% (loose: Monte Carlo noise)
    assert 0.88 <= table["coverage"]["min"] <= table["coverage"]["max"] <= 0.995
    assert [len(a["cells"]) for a in table["attempts"]] == [3, 3, 3]


def test_interaction_lowers_power_in_the_small_run(small_run):
    """More agent-by-task noise, less power: the 15-point gap alone at sd 0 vs sd 1.0."""
    table = SR.committed_robustness(small_run)
    p15 = next(p for p in table["power"] if p["gap"] == 15 and p["ranked"] == 2)
    by = dict(zip(table["models"], p15["by_model"], strict=True))
    assert by[SR.model_label(0.0, False)] > by[SR.model_label(1.0, False)]


def test_model_shapes_by_hand():
    base = simulation.Shape((("a", 10, -1.0), ("b", 4, 0.5), ("c", 10, 0.0)), task_sd=1.5,
                            interaction_sd=0.0)
    shapes = robustness.model_shapes(base)
    assert list(shapes) == [SR.model_label(sd, h) for h in (False, True)
                            for sd in SR.INTERACTION_SDS]
    hard = shapes[SR.model_label(0.5, True)]
    # the largest category (the first of the two 10-task ones) 3 logits harder, the rest as fitted
    assert hard.categories == (("a", 10, -4.0), ("b", 4, 0.5), ("c", 10, 0.0))
    assert hard.interaction_sd == 0.5 and hard.task_sd == 1.5
    assert shapes[SR.model_label(1.0, False)].categories == base.categories


def _row(metric, scenario, estimator, value):
    return {"metric": metric, "scenario": scenario, "estimator": estimator, "value": str(value),
            "boards": "100", "seed": "5"}


def test_robustness_table_ranges_and_attempts_by_hand():
    m0, m1 = SR.model_label(0.0, False), SR.model_label(1.0, True)
    rows = [_row(SR.ROBUST_COVERAGE, "true rate 5%", m0, 0.93),
            _row(SR.ROBUST_COVERAGE, "true rate 30%", m0, 0.951),
            _row(SR.ROBUST_COVERAGE, "true rate 5%", m1, 0.96),
            _row(SR.ROBUST_SPLIT, SR.ROBUST_SPLIT_SCENARIO, m0, 0.02),
            _row(SR.ROBUST_SPLIT, SR.ROBUST_SPLIT_SCENARIO, m1, 0.04),
            _row(SR.ROBUST_POWER, simulation_results.power_scenario(0.10, 2), m0, 0.72),
            _row(SR.ROBUST_POWER, simulation_results.power_scenario(0.10, 2), m1, 0.40),
            _row("coverage", "true rate 5%", "other", 0.5)]  # a base row: ignored
    # 10 points, sd 0: 0.5 at 3 attempts, 0.79 at 4, 0.81 at 5 -> 5 attempts
    curve = {1: 0.2, 2: 0.4, 3: 0.5, 4: 0.79, 5: 0.81}
    sd0 = SR.model_label(0.0, False)
    rows += [_row(SR.ATTEMPTS_METRIC, SR.attempts_scenario(0.10, k), sd0, curve.get(k, 0.9))
             for k in SR.ATTEMPTS_GRID]
    # 5 points, sd 1: never 80% -> None ("more than 50")
    sd1 = SR.model_label(1.0, False)
    rows += [_row(SR.ATTEMPTS_METRIC, SR.attempts_scenario(0.05, k), sd1, 0.3)
             for k in SR.ATTEMPTS_GRID]
    t = SR.robustness_table(rows)
    assert t["models"] == [m0, m1]
    assert t["coverage"] == {"min": 0.93, "max": 0.96}
    assert t["split"] == {"min": 0.02, "max": 0.04}
    assert (t["gap10_alone"]["min"], t["gap10_alone"]["max"]) == (0.40, 0.72)
    assert t["gap10_alone"]["by_model"] == [0.72, 0.40]
    ten = next(a for a in t["attempts"] if a["gap"] == 10)
    assert ten["cells"][0] == {"attempts": 5, "at_3": 0.5, "at_max": 0.9}
    five = next(a for a in t["attempts"] if a["gap"] == 5)
    assert five["cells"][2]["attempts"] is None and five["cells"][2]["at_max"] == 0.3


def test_the_committed_table_has_every_robustness_row():
    table = SR.committed_robustness()
    assert table["boards"] == 10_000 and len(table["models"]) == 6
    assert all(len(p["by_model"]) == 6 and None not in p["by_model"] for p in table["power"])
    # the published power figure is the top of the range: sd 0 is the fitted model
    sim = simulation_results.committed_table()
    assert table["gap10_alone"]["max"] >= table["gap10_alone"]["min"]
    assert table["gap10_alone"]["min"] < sim["power_gap10_alone"]


def _pct(v, digits=1):
    return format_pct(v, digits)


def test_methods_page_states_the_ranges_from_the_committed_table(client, db):
    body = client.get("/methods/").content.decode()
    t = SR.committed_robustness()
    ranges = body.split('data-testid="robustness-ranges">')[1].split("</p>")[0]
    assert f"{_pct(t['coverage']['min'])} to {_pct(t['coverage']['max'])}" in ranges
    assert f"{_pct(t['split']['min'])} to {_pct(t['split']['max'])}" in ranges
    assert (f"{_pct(t['gap10_alone']['min'], 0)} to {_pct(t['gap10_alone']['max'], 0)}"
            in ranges)
    assert 'data-testid="attempts-needed"' in body and 'data-testid="robustness-power"' in body
    assert "cannot settle it" in body


def test_changing_the_table_changes_the_page(client, db, tmp_path, monkeypatch):
    """Every figure in the prose is rendered from simulation.csv: rewrite a copy with other
    values and the page says the new ones."""
    rows = _rows(simulation_results.CSV_PATH)
    for r in rows:
        if r["metric"] == SR.ROBUST_COVERAGE:
            r["value"] = "0.81234"
        if r["metric"] == "power: separated" and r["estimator"] == simulation_results.TIE_SITE:
            r["value"] = "0.33333"
        if r["metric"] == "coverage" and r["estimator"] == simulation_results.INTERVAL_BEFORE:
            r["value"] = "0.99111"
    path = tmp_path / "simulation.csv"
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=simulation_results.CSV_COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    before = client.get("/methods/").content.decode()
    monkeypatch.setattr(simulation_results, "CSV_PATH", path)
    after = client.get("/methods/").content.decode()
    assert "81.2% to 81.2%" in after and "81.2% to 81.2%" not in before
    assert "is separated 33% of the" in after and "is separated 33% of the" not in before
    assert "up to 99.1% at some rates" in after and "up to 99.1%" not in before
