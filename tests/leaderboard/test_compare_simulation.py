"""The compare page's paired test measured by simulation (manage.py simulate_stats --only
compare): a small seeded run of the real command, the committed table, and the methods page
that shows it."""

import csv
import re

import pytest
from django.core.management import call_command

from leaderboard import simulation_results as sr


def _rows(path):
    with open(path, encoding="utf-8", newline="") as fh:
        return {(r["metric"], r["scenario"], r["estimator"]): (float(r["value"]),
                                                               float(r["mc_se"]), int(r["n"]))
                for r in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cmp") / "compare_test.csv"
    call_command("simulate_stats", only="compare", compare_boards=300, seed=11,
                 compare_output=out, verbosity=0)
    return _rows(out)


def test_small_run_keeps_equal_agents_apart_at_most_five_percent(small_run):
    for scen, _rates, pair in sr.COMPARE_SCENARIOS:
        if pair is None:
            value, se, n = small_run[sr.COMPARE_FPR, scen, sr.COMPARE_SITE]
            assert n == 300 and value <= 0.05 + 3 * se, (scen, value, se)


def test_small_run_power_grows_with_the_gap_and_falls_with_more_pairs(small_run):
    power = {scen: small_run[sr.COMPARE_POWER, scen, sr.COMPARE_SITE][0]
             for scen, _r, pair in sr.COMPARE_SCENARIOS if pair is not None}
    gaps = [s for s in power if s.endswith("2 agents")]
    assert [power[s] for s in gaps] == sorted(power[s] for s in gaps)
    assert power[gaps[-1]] > 0.8 and power[gaps[0]] < 0.5
    assert power[sr.COMPARE_SCENARIOS[6][0]] < power[sr.COMPARE_SCENARIOS[4][0]]
    for scen in power:
        right = small_run[sr.COMPARE_POWER_RIGHT, scen, sr.COMPARE_SITE][0]
        assert right <= power[scen]


def test_the_committed_table_has_10000_boards_and_holds_five_percent():
    table = sr.committed_compare_table()
    assert table["boards"] == 10_000
    rows = _rows(sr.COMPARE_CSV_PATH)
    for f in table["fpr"]:
        _v, se, _n = rows[sr.COMPARE_FPR, f["scenario"], sr.COMPARE_SITE]
        assert f["site"] <= 0.05 + 3 * se, f
    assert 0.3 < table["power_10"] < 1 and table["power_10_among"] < table["power_10"]


def test_the_methods_page_shows_the_false_positives_and_the_power(client, db):
    body = client.get("/methods/").content.decode()
    table = sr.committed_compare_table()
    section = body[body.index('id="compare-test"'):]
    assert 'data-testid="compare-simulation-table"' in section
    text = re.sub(r"<[^>]+>", "", section)
    assert "Holm-corrected" in text and "paired sign-flip permutation test" in text
    from leaderboard.formatting import format_pct
    assert f"called separable {format_pct(table['fpr_max'])} of the time at most" in " ".join(
        text.split())
    assert f"separated {format_pct(table['power_10'], 0)} of the time when compared alone" in (
        " ".join(text.split()))
