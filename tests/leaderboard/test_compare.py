"""Comparing chosen agents: the paired sign-flip test against values counted by hand, Holm's
correction, the words, and the compare page, its CSV and its API on a real database."""

import csv
import io
import itertools

import numpy as np
import pytest

from leaderboard import compare
from leaderboard.services import leaderboard_recompute
from tests.factories import AgentFactory, published_submission

# ---------------------------------------------------------------------------------------------
# The test, by hand
# ---------------------------------------------------------------------------------------------


def _brute(diffs):
    """P(|sum s d| >= |sum d|) over every sign vector, counted one by one."""
    observed = abs(sum(diffs))
    hits = [abs(sum(s * d for s, d in zip(signs, diffs, strict=True))) >= observed - 1e-12
            for signs in itertools.product((1, -1), repeat=len(diffs))]
    return sum(hits) / len(hits)


def test_four_tasks_by_hand():
    # Differences 1, 2/3, 1/3, 0 (thirds: 3, 2, 1, 0). The zero moves nothing; of the 8 sign
    # vectors of 3, 2, 1 only +++ and --- reach |6|: p = 2/8.
    got = compare.sign_flip_test([1, 2 / 3, 1 / 3, 0])
    assert got.p_value == pytest.approx(0.25, abs=1e-12) and got.method == compare.EXACT
    # 1, -1/3, 2/3, 1/3 (thirds 3, -1, 2, 1; sum 5): |S| >= 5 is 7 (all +) or 5 (one of the two
    # 1s flipped), each side: 2 x 3 of 16 = 0.375.
    got = compare.sign_flip_test([1, -1 / 3, 2 / 3, 1 / 3])
    assert got.p_value == pytest.approx(0.375, abs=1e-12)
    # Four tasks all won: only ++++ and ---- reach 4: 2/16.
    assert compare.sign_flip_test([1, 1, 1, 1]).p_value == pytest.approx(0.125, abs=1e-12)
    assert compare.sign_flip_test([0, 0, 0]).p_value == 1.0


def test_exact_convolution_equals_enumeration_on_random_thirds_and_halves():
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(1, 13))
        diffs = (rng.integers(-3, 4, n) / 3).tolist() + (rng.integers(-2, 3, 2) / 2).tolist()
        got = compare.sign_flip_test(diffs)
        assert got.method == compare.EXACT
        assert got.p_value == pytest.approx(_brute(diffs), abs=1e-12), diffs


def test_irrational_differences_are_enumerated_then_sampled_with_a_seed():
    diffs = [0.1 * np.sqrt(2) * (i + 1) * (-1) ** (i // 3) for i in range(12)]
    got = compare.sign_flip_test(diffs)
    assert got.method == compare.ENUMERATED
    assert got.p_value == pytest.approx(_brute(diffs), abs=1e-12)
    many = [np.sqrt(2) * (1 + (i % 5)) / 7 * (1 if i % 4 else -1) for i in range(30)]
    sampled = compare.sign_flip_test(many, draws=20_000, seed=5)
    assert sampled.method == compare.MONTE_CARLO and sampled.draws == 20_000
    assert sampled == compare.sign_flip_test(many, draws=20_000, seed=5)  # seeded
    # The same sums counted exactly (the values on a grid of 1/7 sqrt 2): within 3 MC se.
    exact = compare.sign_flip_test([round(x / np.sqrt(2) * 7) / 7 for x in many])
    se = np.sqrt(exact.p_value * (1 - exact.p_value) / 20_000)
    assert abs(sampled.p_value - exact.p_value) < 3 * se + 1e-4


def test_54_tasks_of_three_attempts_are_exact():
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 4, 54), rng.integers(0, 4, 54)
    got = compare.sign_flip_test(((a - b) / 3).tolist())
    assert got.method == compare.EXACT and 0 < got.p_value <= 1


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.04 times 3, 2, 1: 0.03, 0.04, 0.04 (made non-decreasing)
    assert compare.holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert compare.holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert compare.holm([0.2]) == [0.2]


def test_pairs_the_tasks_both_scored_orders_the_pair_and_words_it():
    shares = {"a": {1: 1.0, 2: 1.0, 3: 2 / 3, 4: None}, "b": {1: 0.0, 2: 1 / 3, 3: 2 / 3, 4: 1.0}}
    (t,) = compare.paired_tests({"b": shares["b"], "a": shares["a"]})
    assert (t.better, t.worse, t.tasks, t.wins, t.losses, t.ties) == ("a", "b", 3, 2, 0, 1)
    assert t.difference == pytest.approx((1 + 2 / 3) / 3)
    # differences 1, 2/3, 0 (thirds 3, 2): only ++ and -- reach |5| of the 4 sign vectors
    assert t.p_value == pytest.approx(0.5) and t.p_adjusted == t.p_value and not t.separable
    words = compare.sentence(t, {"a": "Alpha", "b": "Beta"})
    assert words == ("Alpha solves 55.6 points more than Beta, p = 0.50 (paired over the 3 "
                     "tasks): not separable (a statistical tie at the 5% level)")


def test_many_agents_are_holm_corrected_and_a_large_gap_is_separable():
    strong = {t: 1.0 for t in range(20)}
    weak = {t: 0.0 for t in range(20)}
    tests = compare.paired_tests({"s": strong, "w": weak, "w2": dict(weak)})
    by_pair = {(t.better, t.worse): t for t in tests}
    sw = by_pair["s", "w"]
    assert sw.p_value == pytest.approx(2 / 2**20)
    assert sw.p_adjusted == pytest.approx(3 * 2 / 2**20) and sw.separable and sw.pairs == 3
    assert "Holm-corrected over 3 pairs): separable" in compare.sentence(
        sw, {"s": "S", "w": "W", "w2": "W2"})
    assert "p < 0.001" in compare.sentence(sw, {"s": "S", "w": "W"})
    (same,) = [t for t in tests if {t.better, t.worse} == {"w", "w2"}]
    assert same.p_value == 1.0 and not same.separable
    assert compare.sentence(same, {"w": "W", "w2": "W2"}).startswith(
        "W and W2 solve the same share of tasks, p = 1.00")


def test_parse_agents_takes_both_forms_and_refuses_more_than_eight():
    assert compare.parse_agents(["x", "y"], "y,z, ,x") == ["x", "y", "z"]
    with pytest.raises(compare.CompareRefused):
        compare.parse_agents([f"a{i}" for i in range(9)])


def test_format_p():
    assert [compare.format_p(p) for p in (0.0312, 0.0049, 0.0004, 1.0)] == [
        "p = 0.03", "p = 0.005", "p < 0.001", "p = 1.00"]


# ---------------------------------------------------------------------------------------------
# The page, the CSV, the API
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def three(small_benchmark):
    """Alpha and Beta differ on 4 of 5 tasks (Alpha ahead); Gamma equals Beta."""
    bv, tasks = small_benchmark
    a = AgentFactory(display_name="Alpha (M1)", slug="alpha")
    b = AgentFactory(display_name="Beta <M2>", slug="beta")
    c = AgentFactory(display_name="Gamma (M3)", slug="gamma")
    published_submission(a, tasks, ["PPP", "PPF", "PPP", "FTE", "PPP"])
    published_submission(b, tasks, ["FFF", "PFF", "FFI", "FFF", "PFF"])
    published_submission(c, tasks, ["FFF", "PFF", "FFF", "FFF", "PFF"])
    leaderboard_recompute(benchmark_version=bv)
    return bv, tasks


Q = "benchmark=small@1.0"


@pytest.mark.django_db
def test_the_page_shows_figures_categories_tests_and_the_grid(client, three):
    body = client.get(f"/compare/?{Q}&a=beta&a=alpha").content.decode()
    # rank order whatever the order asked
    assert body.index("Alpha (M1)") < body.index("Beta &lt;M2&gt;")
    assert "Beta <M2>" not in body  # escaped
    # differences 1, 1/3, 1, 0, 2/3: mean 60 points; only ++++ and ---- of the four non-zero
    # ones reach |3|, p = 2/16
    assert ('Alpha (M1) solves 60.0 points more than Beta &lt;M2&gt;, p = 0.13 (paired over '
            'the 5 tasks): not separable') in body
    assert 'data-testid="compare-grid"' in body and 'data-testid="compare-categories"' in body
    # the four tasks they differ on first, marked; the one they tie on last
    grid = body[body.index('id="compare-grid"'):]
    assert grid.count('data-testid="differ-row"') == 4
    # largest gap first (1, 1, 2/3, 1/3), then the tie (FTE and FFF both 0)
    order = ["img/case_01", "txt-one/case_01", "txt-two/case_01", "img/case_02", "txt-one/case_02"]
    assert [grid.index(f">{t}<") for t in order] == sorted(grid.index(f">{t}<") for t in order)
    assert 'class="att infra"' in grid and "0/2" in grid and "2/3" in grid  # FFI, PPF
    assert f"/compare/?{Q}&amp;a=alpha&amp;a=beta" in body  # the permalink, in rank order
    assert f'href="/compare.csv?{Q}&amp;a=alpha&amp;a=beta"' in body


@pytest.mark.django_db
def test_three_agents_are_holm_corrected_on_the_page(client, three):
    body = client.get(f"/compare/?{Q}&agents=alpha,beta,gamma").content.decode()
    assert body.count('data-testid="paired-sentence"') == 3
    assert "Holm-corrected over 3 pairs" in body
    assert "Beta &lt;M2&gt; and Gamma (M3) solve the same share of tasks" in body


@pytest.mark.django_db
def test_the_page_without_agents_says_how_and_refuses_unknown_or_too_many(client, three):
    r = client.get(f"/compare/?{Q}")
    assert r.status_code == 200 and 'data-testid="compare-empty"' in r.content.decode()
    assert client.get(f"/compare/?{Q}&a=alpha&a=nobody").status_code == 404
    many = "&".join(f"a=x{i}" for i in range(9))
    r = client.get(f"/compare/?{Q}&{many}")
    assert r.status_code == 400 and 'data-testid="compare-refused"' in r.content.decode()


@pytest.mark.django_db
def test_the_leaderboard_ticks_rows_into_a_plain_get_form(client, three):
    body = client.get(f"/?{Q}").content.decode()
    assert '<form id="compare-form" method="get" action="/compare/"' in body
    assert body.count('form="compare-form"') == 3 + 1  # a box per row and the button
    assert 'name="a" value="alpha" form="compare-form"' in body
    assert 'aria-label="Compare Beta &lt;M2&gt;"' in body


@pytest.mark.django_db
def test_the_csv_is_the_grid(client, three):
    r = client.get(f"/compare.csv?{Q}&a=alpha&a=beta")
    assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert len(rows) == 10 and [r["agent_slug"] for r in rows[:2]] == ["alpha", "beta"]
    first = rows[0]
    assert (first["task"], first["outcomes"], first["successes"], first["scored_attempts"],
            first["agents_differ"]) == ("img/case_01", "PPP", "3", "3", "true")
    beta_t3 = next(r for r in rows if r["agent_slug"] == "beta" and r["task"] == "txt-one/case_01")
    assert (beta_t3["outcomes"], beta_t3["scored_attempts"], beta_t3["success_share"]) == (
        "FFI", "2", "0.0")
    one = client.get(f"/compare.csv?{Q}&a=alpha")
    assert one.status_code == 200 and len(b"".join(one.streaming_content).splitlines()) == 6


@pytest.mark.django_db
def test_the_api_answers_the_same_comparison(client, three):
    r = client.get(f"/api/v1/compare/?{Q}&a=alpha&a=beta&a=gamma")
    assert r.status_code == 200, r.content
    data = r.json()
    assert [a["agent_slug"] for a in data["agents"]] == ["alpha", "beta", "gamma"]
    assert {c["category"] for c in data["agents"][0]["categories"]} == {"img", "txt-one",
                                                                        "txt-two"}
    ab = next(p for p in data["pairs"] if (p["better"], p["worse"]) == ("alpha", "beta"))
    # 0.125 each for Alpha against Beta and Gamma (equal cells), 1 for Beta and Gamma: Holm
    # 3 x 0.125, then max(that, 2 x 0.125), then 1
    assert ab["p_value"] == pytest.approx(0.125) and ab["pairs"] == 3
    assert ab["p_holm"] == pytest.approx(0.375) and ab["separable"] is False
    assert ab["method"] == compare.EXACT and ab["sentence"].startswith("Alpha (M1) solves")
    assert len(data["grid"]) == 15
    same = client.get(f"/api/v1/compare/?{Q}&agents=gamma,alpha,beta").json()
    assert same["pairs"] == data["pairs"]
    one = client.get(f"/api/v1/compare/?{Q}&a=alpha").json()
    assert one["pairs"] == [] and len(one["grid"]) == 5
    assert client.get(f"/api/v1/compare/?{Q}&a=alpha&a=nobody").status_code == 404
    many = "&".join(f"a=x{i}" for i in range(9))
    assert client.get(f"/api/v1/compare/?{Q}&{many}").status_code == 400
    assert client.get(f"/api/v1/compare/?{Q}&a=al%20pha&a=beta").status_code == 400


@pytest.mark.django_db
def test_the_compare_operation_is_in_the_openapi_schema(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    op = schema["paths"]["/api/v1/compare/"]["get"]
    params = {p["name"]: p for p in op["parameters"]}
    assert params["a"]["schema"]["type"] == "array" and params["a"].get("explode", True)
    assert "Comparison" in schema["components"]["schemas"]


@pytest.mark.django_db
def test_hostile_names_are_neutralised_in_the_compare_csv(client, small_benchmark):
    bv, tasks = small_benchmark
    published_submission(AgentFactory(display_name='=HYPERLINK("http://evil","x")', slug="evil"),
                         tasks, ["PPP", "FFF", "PPF", "FFF", "PPP"])
    published_submission(AgentFactory(display_name="Plain", slug="plain"), tasks,
                         ["FFF"] * 5)
    leaderboard_recompute(benchmark_version=bv)
    text = b"".join(client.get(f"/compare.csv?{Q}&a=evil&a=plain").streaming_content).decode()
    assert "'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")" in text
    assert "\n=HYPERLINK" not in text and ",=HYPERLINK" not in text
