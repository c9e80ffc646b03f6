"""The reconstructed board's figures either do not depend on the reconstruction's seed
(and are identical across seeds) or are shown as their range across reconstructions, on the
pages, in the CSVs and in the API."""

import csv
import io
from collections import Counter

import numpy as np
import pytest
from django.conf import settings

from leaderboard import reconstruction_spread
from leaderboard.services import leaderboard_recompute
from leaderboard.demo import spread
from leaderboard.demo.reconstruct import DEFAULT_SEED, load_paper, reconstruct, solve_successes

PAPER = load_paper()
ALPHA = settings.LEADERBOARD_TIE_ALPHA
OTHER_SEED = spread.spread_seeds()[1]
SEED_FREE = ("successes", "attempts", "success_rate", "category_successes", "category_rate",
             "imaging_pooled", "imaging_macro", "text_pooled", "text_macro")


@pytest.fixture(scope="module")
def two_draws():
    return spread.draw_figures(PAPER, DEFAULT_SEED, ALPHA), spread.draw_figures(
        PAPER, OTHER_SEED, ALPHA)


@pytest.mark.parametrize("figure", SEED_FREE)
def test_seed_free_figures_are_identical_across_seeds(figure, two_draws):
    a, b = two_draws
    assert a.seed_free[figure] == b.seed_free[figure]


def test_the_draw_itself_differs_between_seeds(two_draws):
    """Otherwise the test above proves nothing: the spread over tasks moved."""
    a, b = two_draws
    assert not np.array_equal(a.ci_low, b.ci_low)
    assert not np.array_equal(a.pass_at_k, b.pass_at_k)


def test_category_counts_are_the_integer_programs_for_every_seed():
    pinned = solve_successes(PAPER)
    for seed in (DEFAULT_SEED, OTHER_SEED):
        counts = Counter((r.agent, r.category) for r in reconstruct(PAPER, seed) if r.success)
        assert {k: v for k, v in pinned.items() if v} == dict(counts)


def _range(spreads, agent, figure, category=""):
    s = spreads[agent]
    return s.categories[category][figure] if category else s.ranges[figure]


@pytest.mark.parametrize("figure,attr", [("ci_low", "ci_low"), ("ci_high", "ci_high"),
                                         ("pass_at_3", "pass_at_k"),
                                         ("pass_hat_3", "pass_hat_k")])
def test_seeded_figures_of_both_seeds_lie_in_the_committed_ranges(figure, attr, two_draws):
    committed = reconstruction_spread.committed()
    for d in two_draws:
        for i, agent in enumerate(d.agents):
            lo, hi = _range(committed, agent, figure)
            assert lo - 1e-6 <= float(getattr(d, attr)[i]) <= hi + 1e-6, (agent, figure)


def test_category_intervals_of_both_seeds_lie_in_the_committed_ranges(two_draws):
    committed = reconstruction_spread.committed()
    slugs = [c["slug"] for c in PAPER["categories"]]
    for d in two_draws:
        for i, agent in enumerate(d.agents):
            for j, slug in enumerate(slugs):
                lo, hi = _range(committed, agent, "ci_low", slug)
                assert lo - 1e-6 <= d.category_ci_low[i, j] <= hi + 1e-6
                lo, hi = _range(committed, agent, "ci_high", slug)
                assert lo - 1e-6 <= d.category_ci_high[i, j] <= hi + 1e-6


def test_tie_groups_of_both_seeds_have_a_share(two_draws):
    committed = reconstruction_spread.committed()
    for d in two_draws:
        for agent, group in zip(d.agents, d.tie_group, strict=True):
            assert dict(committed[agent].group_shares).get(group, 0) > 0, (agent, group)


def test_committed_file_is_for_this_paper_and_complete():
    committed = reconstruction_spread.committed()
    assert reconstruction_spread.committed_digest() == spread.paper_digest(PAPER)
    assert set(committed) == {e["agent"] for e in PAPER["leaderboard"]}
    for s in committed.values():
        assert s.reconstructions == spread.DEFAULT_SPREAD_SEEDS >= 200
        assert sum(share for _, share in s.group_shares) == pytest.approx(1.0, abs=1e-5)
        assert set(s.categories) == {c["slug"] for c in PAPER["categories"]}


def test_seeds_are_distinct_and_include_the_demo_default():
    seeds = spread.spread_seeds()
    assert len(set(seeds)) == len(seeds) == 200 and seeds[0] == DEFAULT_SEED


def test_a_fresh_small_spread_matches_the_committed_envelope():
    """The committed file's code path: the first 4 seeds again, inside the 200-seed envelope,
    with the same tie-group counts' support."""
    s = spread.spread(PAPER, spread.spread_seeds(4), ALPHA)
    committed = reconstruction_spread.committed()
    rows = spread.csv_rows(s)
    for agent, category, figure, lo, hi, n, digest in rows:
        assert n == 4 and digest == reconstruction_spread.committed_digest()
        if figure.startswith(reconstruction_spread.GROUP_PREFIX):
            g = int(figure.split(":")[1])
            assert dict(committed[agent].group_shares).get(g, 0) > 0
            continue
        c_lo, c_hi = _range(committed, agent, figure, category)
        assert c_lo - 1e-6 <= lo <= hi <= c_hi + 1e-6


def _draw(agents, groups, ci_low, seed_free=None):
    z = np.asarray(ci_low, dtype=float)
    return spread.Draw(agents=agents, seed_free=seed_free or {"successes": (1, 2)},
                       ci_low=z, ci_high=z + 0.1, pass_at_k=z, pass_hat_k=z, tie_group=groups,
                       category_ci_low=z[:, None], category_ci_high=z[:, None])


def test_spread_counts_groups_and_envelopes_by_hand():
    """Three hand-made draws: group counts 2:1 and the min/max of each figure."""
    agents = ["A", "B"]
    s = spread.Spread(agents=agents, categories=["c"], seeds=[1, 2, 3], digest="d",
                      seed_free={"successes": (1, 2)}, group_counts=[Counter(), Counter()])
    for groups, low in (([1, 1], [0.30, 0.20]), ([1, 2], [0.25, 0.22]), ([1, 1], [0.35, 0.18])):
        s.add(_draw(agents, groups, low))
    assert s.group_counts[0] == Counter({1: 3})
    assert s.group_counts[1] == Counter({1: 2, 2: 1})
    assert s.patterns == Counter({"11": 2, "12": 1})
    assert s.low["ci_low"].tolist() == [0.25, 0.18]
    assert s.high["ci_low"].tolist() == [0.35, 0.22]
    rows = {(r[0], r[1], r[2]): r[3:5] for r in spread.csv_rows(s)}
    assert rows[("B", "", "tie_group_share:2")] == (0.333333, 0.333333)
    assert rows[("B", "", "tie_group_share:1")] == (0.666667, 0.666667)
    with pytest.raises(AssertionError):
        s.add(_draw(agents, [1, 1], [0.3, 0.2], seed_free={"successes": (1, 3)}))


def test_labels():
    assert [reconstruction_spread.share_text(x) for x in (0.815, 0.005, 0.995, 1.0, 0.0)] == [
        "82%", "0.5%", "99.5%", "100%", "0%"]
    assert reconstruction_spread.AgentSpread(200, [(1, 0.995), (2, 0.005)]).groups_label == (
        "1 (99.5%), 2 (0.5%)")
    a = reconstruction_spread.AgentSpread(200, [(1, 0.815), (2, 0.185)])
    assert a.groups_label == "1 (82%), 2 (18%)" and a.groups_range == "1–2"
    assert a.modal_group == 1 and a.shares_text() == "1:0.815;2:0.185"
    assert reconstruction_spread.AgentSpread(200, [(3, 1.0)]).groups_label == "3"


# --- what a user sees ------------------------------------------------------------------------

def _csv(client, path):
    response = client.get(path)
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()
                                           if response.streaming else response.content.decode())))


def test_leaderboard_page_shows_group_shares_and_envelopes(client, demo_bv):
    committed = reconstruction_spread.committed()
    html = client.get("/").content.decode()
    assert html.count('data-testid="tie-shares"') == 10
    assert html.count('data-testid="ci-envelope"') == 10
    codex = committed["Claude Code (Opus 4.8)"]
    cell = html.split(">Claude Code (Opus 4.8)<")[0].rsplit('data-testid="tie-shares"', 1)[1]
    for g, share in codex.group_shares:
        assert (f'tie-{g}">{g}</span>&nbsp;<span class="muted">'
                f'{reconstruction_spread.share_text(share)}</span>') in cell
    lo, hi = codex.ranges["ci_high"]
    assert f"{lo * 100:.1f}–{hi * 100:.1f}%" in html


def test_agent_and_matrix_pages_say_the_cells_are_one_draw(client, demo_bv):
    committed = reconstruction_spread.committed()
    page = client.get("/agents/codex-gpt-5-5/").content.decode()
    assert 'data-testid="one-draw"' in page and 'data-testid="pass-ranges"' in page
    s = committed["Codex (GPT 5.5)"]
    assert s.groups_label in page
    lo, hi = s.ranges["pass_at_3"]
    assert f"{lo * 100:.1f}–{hi * 100:.1f}%" in page
    matrix = client.get("/task-matrix/").content.decode()
    assert 'data-testid="one-draw"' in matrix and "one draw among many" in matrix
    assert matrix.count('data-testid="pass-range"') == 10
    for path in ("/tasks/", "/tasks/xray-report-correction/case_01/"):
        assert 'data-testid="one-draw"' in client.get(path).content.decode(), path


def test_harness_page_shows_shares_and_envelopes(client, demo_bv):
    html = client.get("/harness-effect/").content.decode()
    s = reconstruction_spread.committed()["Claude Code (Opus 4.8)"]
    lo, hi = s.ranges["ci_low"]
    assert s.groups_label in html and f"[{lo * 100:.1f}–{hi * 100:.1f}%," in html


def test_chart_error_bars_are_the_envelope(client, demo_bv):
    from leaderboard import charts, selectors

    entries = selectors.leaderboard_rows(benchmark_version=demo_bv)
    bar = charts.leaderboard_bar(entries)["data"][0]
    committed = reconstruction_spread.committed()
    for e, up, down in zip(entries, bar["error_x"]["array"], bar["error_x"]["arrayminus"],
                           strict=True):
        s = committed[e.agent.display_name]
        assert e.success_rate + up == pytest.approx(s.ranges["ci_high"][1])
        assert e.success_rate - down == pytest.approx(s.ranges["ci_low"][0])


def test_real_submissions_keep_their_own_figures(client, two_agents):
    """A submitted (not reconstructed) row has no ranges: empty CSV columns, null in the API,
    its own tie group on the page."""
    leaderboard_recompute(benchmark_version=two_agents[0])
    rows = _csv(client, "/leaderboard.csv?benchmark=small@1.0")
    assert rows and all(r[c] == "" for r in rows
                        for c in reconstruction_spread.LEADERBOARD_COLUMNS)
    api = client.get("/api/v1/leaderboard/?benchmark=small@1.0").json()["results"]
    assert all(r["tie_group_shares"] is None and r["ci_low_min"] is None for r in api)
    html = client.get("/?benchmark=small@1.0").content.decode()
    assert 'data-testid="tie-shares"' not in html


def test_leaderboard_csv_and_api_carry_the_ranges(client, demo_bv):
    committed = reconstruction_spread.committed()
    rows = _csv(client, "/leaderboard.csv")
    api = {r["agent"]: r for r in client.get("/api/v1/leaderboard/?limit=100").json()["results"]}
    assert len(rows) == 10
    for r in rows:
        s = committed[r["agent"]]
        assert r["tie_group_shares"] == s.shares_text() == api[r["agent"]]["tie_group_shares"]
        assert float(r["ci_low_min"]) <= float(r["ci_low"]) <= float(r["ci_low_max"])
        assert float(r["ci_high_min"]) <= float(r["ci_high"]) <= float(r["ci_high_max"])
        assert float(r["pass_at_3_min"]) <= float(r["pass_at_3"]) <= float(r["pass_at_3_max"])
        assert (float(r["pass_hat_3_min"]) <= float(r["pass_hat_3"])
                <= float(r["pass_hat_3_max"]))
        assert int(r["reconstructions"]) == 200
        assert str(int(r["tie_group"])) in dict(
            (str(g), sh) for g, sh in s.group_shares)
        assert api[r["agent"]]["ci_high_max"] == pytest.approx(float(r["ci_high_max"]))
    cats = _csv(client, "/categories.csv")
    assert len(cats) == 70
    for r in cats:
        assert float(r["ci_low_min"]) <= float(r["ci_low"]) <= float(r["ci_low_max"])


def test_downloads_page_documents_the_columns(client):
    html = client.get("/downloads/").content.decode()
    assert 'data-testid="spread-columns"' in html
    for column in (*reconstruction_spread.LEADERBOARD_COLUMNS,
                   *reconstruction_spread.CATEGORY_COLUMNS):
        assert f"<code>{column}</code>" in html


def test_methods_page_explains_what_the_reconstruction_pins(client, db):
    html = client.get("/methods/").content.decode()
    text = html.split('data-testid="seed-spread">')[1].split("</p>")[0]
    assert "200 independent reconstructions" in " ".join(text.split())
    assert "exact" in text and "seeded draw" in text
