"""The server's SVG of every chart (leaderboard/chart_svg.py) on the demo data: one mark per data
point with its hover text, escaped labels, the page's colours in both schemes, a narrow variant;
the chart pages carry it with no Plotly script, keep the cost axis switch as links, and offer the
export bar and each chart's SVG file."""

import re
import xml.etree.ElementTree as ET
from datetime import date
from pathlib import Path

import pytest
from django.test import RequestFactory

from leaderboard import chart_svg, charts, views
from leaderboard.services import leaderboard_recompute
from tests.factories import AgentFactory, published_submission

CSS = (Path(__file__).resolve().parents[2] / "static" / "css" / "site.css").read_text()
NS = {"s": "http://www.w3.org/2000/svg"}
CHART_PAGES = {"/": ["lb-chart"], "/categories/": ["cat-chart"],
               "/imaging-vs-text/": ["agent-chart", "family-chart"],
               "/harness-effect/": ["harness-chart", "version-chart"], "/cost/": ["cost-chart"]}
EVIL = '<img src=x onerror="alert(1)"> & </svg><script>alert(2)</script>'


def _figure(chart: str, query: str = ""):
    request = RequestFactory().get("/" + query)
    _page, build = views.CHART_FIGURES[chart]
    bv, filters = views._params(request)
    return build(request, bv, filters)


def _points(fig: dict) -> int:
    """Data points a figure plots, counted from the dict itself: values that are not None
    (a heatmap's cells, a bar's or marker's values); lines are not points."""
    n = 0
    for t in fig["data"]:
        if t["type"] == "heatmap":
            n += sum(z is not None for row in t["z"] for z in row)
        elif t["type"] == "bar" or "markers" in t.get("mode", ""):
            values = t["x"] if t.get("orientation") == "h" else t["y"]
            n += sum(v is not None for v in values)
    return n


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # noqa: S314 (our own output, parsed to prove it is well-formed)


@pytest.mark.parametrize("chart", sorted(views.CHART_FIGURES))
def test_each_data_point_is_one_mark_with_its_hover_text(chart, demo_bv):
    fig, title, reconstructed = _figure(chart)
    assert title and reconstructed is (chart != "family-chart")
    for narrow in (False, True):
        root = _parse(chart_svg.render(fig, chart_id=chart, label_id="c", narrow=narrow))
        marks = [e for e in root.iter() if "cs-mark" in (e.get("class") or "")]
        assert len(marks) == _points(fig) > 0, (chart, narrow)
        # Each mark's hover text is Plotly's (names and values), readable before any script.
        assert all(m.find("s:title", NS) is not None and m.find("s:title", NS).text
                   for m in marks)
        assert root.get("role") == "img" and root.get("aria-labelledby") == "c"


def test_the_hover_texts_are_plotlys(demo_bv):
    fig, *_ = _figure("cost-chart")
    svg = chart_svg.render(fig, chart_id="cost-chart")
    # The cost chart's hovertemplate, evaluated: name, reported cost in dollars, success, harness.
    assert re.search(r"<title>Codex \(GPT 5\.5\)\nreported cost/attempt \$\d+\.\d\d\n"
                     r"success \d+\.\d%\nCodex</title>", svg)
    fig, *_ = _figure("cat-chart")
    cell = fig["data"][0]["hovertext"][0][0].replace("<br>", "\n")
    assert f"<title>{cell}</title>" in chart_svg.render(fig, chart_id="cat-chart")


def test_axis_switch_draws_the_other_axis(demo_bv):
    for axis, (_field, label, *_rest) in charts.X_AXES.items():
        fig, title, _ = _figure("cost-chart", f"?x={axis}")
        svg = chart_svg.render(fig, chart_id="cost-chart")
        assert f">{label}</text>" in svg and title == charts.cost_title(axis)


def test_labels_and_hover_texts_are_escaped():
    fig = charts.imaging_text_bars([EVIL, "plain"], [0.5, 0.25], [0.75, None])
    for narrow in (False, True):
        svg = chart_svg.render(fig, chart_id='x"><script>', narrow=narrow, standalone=True,
                               heading=EVIL, footer=EVIL)
        root = _parse(svg)  # well-formed: nothing in a label closed an element
        assert "<script" not in svg and "<img" not in svg and 'onerror="' not in svg
        assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in svg
        texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
        assert any(t and t.startswith("<img src=x") for t in texts)
        # The one missing value is not drawn: 3 of the 4 bars.
        assert len([e for e in root.iter() if e.get("class") == "cs-mark"]) == 3


def test_text_and_lines_take_the_pages_colours_in_light_and_dark(demo_bv):
    fig, *_ = _figure("cost-chart")
    root = _parse(chart_svg.render(fig, chart_id="cost-chart"))
    texts = list(root.iter("{http://www.w3.org/2000/svg}text"))
    assert texts and all(t.get("class") in ("cs-text", "cs-muted") and not t.get("fill")
                         for t in texts)
    assert any(e.get("class") == "cs-grid" for e in root.iter())
    # site.css colours the classes with the variables that prefers-color-scheme swaps.
    for rule in (".chart-svg .cs-text { fill: var(--fg); }",
                 ".chart-svg .cs-grid { stroke: var(--line); }",
                 ".chart-svg .cs-err { stroke: var(--fg); }"):
        assert rule in CSS
    dark = CSS.split("@media (prefers-color-scheme: dark)")[1].split("}")[0]
    assert "--fg:" in dark and "--line:" in dark
    # A downloaded file has no page around it: it carries both schemes itself.
    alone = chart_svg.render(fig, chart_id="cost-chart", standalone=True)
    assert "@media (prefers-color-scheme: dark)" in alone and ".cs-text{fill:var(--fg)}" in alone


def test_heatmap_cells_print_in_a_colour_readable_on_their_fill(demo_bv):
    fig, *_ = _figure("cat-chart")
    root = _parse(chart_svg.render(fig, chart_id="cat-chart"))
    cells = [e for e in root.iter() if e.get("class") == "cs-mark"]
    labels = [e for e in root.iter("{http://www.w3.org/2000/svg}text")
              if e.get("class") in ("cs-on-dark", "cs-on-light")]
    assert len(labels) == len(cells) == 70
    for cell, label in zip(cells, labels, strict=True):
        dark = chart_svg._is_dark(cell.get("fill"))
        assert label.get("fill") == ("#ffffff" if dark else "#111827")


def test_the_narrow_variant_is_the_figures_own(demo_bv):
    fig, *_ = _figure("cat-chart")
    wide = chart_svg.render(fig, chart_id="cat-chart")
    narrow = chart_svg.render(fig, chart_id="cat-chart", narrow=True)
    assert 'viewBox="0 0 960 ' in wide and 'viewBox="0 0 340 ' in narrow
    # Short column labels, the percentage alone in each cell, no colour bar (charts.py).
    assert ">X-ray</text>" in narrow and ">X-ray</text>" not in wide
    assert "cs-colourbar" in wide and "cs-colourbar" not in narrow
    assert re.search(r">\d+/\d+</tspan>", wide) and not re.search(r">\d+/\d+</tspan>", narrow)


def test_d3_formats_as_plotly_prints_them():
    assert chart_svg.d3_format(0.1234, ".1%") == "12.3%"
    assert chart_svg.d3_format(1234.5, ",.0f") == "1,234"  # half to even, as Python rounds
    assert chart_svg.d3_format(2.5, ".2f") == "2.50"
    assert chart_svg.d3_format(None, ".2f") == "–"


@pytest.mark.parametrize("path", sorted(CHART_PAGES))
def test_chart_pages_draw_the_svg_and_load_no_plotly(path, client, demo_bv):
    body = client.get(path).content.decode()
    assert not re.search(r"<script[^>]*src=\"[^\"]*plotly", body)
    for chart in CHART_PAGES[path]:
        figure = body.split(f'<div class="chart" data-chart="{chart}"')[1].split("</div>")[0]
        assert 'class="chart-svg chart-svg-wide"' in figure
        assert 'class="chart-svg chart-svg-narrow"' in figure
        assert f'href="/charts/{chart}.svg"' in body
    bar = body.split('data-testid="export-bar"')[1].split("</div>")[0]
    # Shown only when scripts run (site.js marks <html>): the clipboard needs them.
    assert 'class="export-md js-only" data-testid="copy-markdown"' in bar
    assert ".csv" in bar and 'data-testid="permalink" href="http://testserver' + path in bar


def test_the_cost_axis_switch_works_without_javascript(client, demo_bv):
    body = client.get("/cost/").content.decode()
    assert 'href="?x=time"' in body
    svg = client.get("/cost/?x=time").content.decode().split('data-chart="cost-chart"')[1]
    assert ">Reported mean time per attempt (minutes)</text>" in svg.split("</div>")[0]


def test_a_charts_svg_file_names_the_site_version_date_and_permalink(client, demo_bv):
    response = client.get("/charts/cost-chart.svg?x=time&verified=")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("image/svg+xml")
    assert 'attachment; filename="cost-chart-healthagentbench@1.0.svg"' in response[
        "Content-Disposition"]
    svg = response.content.decode()
    root = _parse(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert ">Success vs reported mean time per attempt (minutes), with the Pareto frontier<" in svg
    assert (f"HealthAgentBench leaderboard · healthagentbench@1.0 · {date.today():%Y-%m-%d} · "
            "http://testserver/cost/?x=time&amp;verified=") in svg
    assert "reconstructed rows" in svg
    assert client.get("/charts/no-such-chart.svg").status_code == 404


@pytest.mark.django_db
def test_a_submitted_agent_name_is_escaped_in_the_pages_svg(client, small_benchmark):
    bv, tasks = small_benchmark
    published_submission(AgentFactory(display_name=EVIL, slug="evil"), tasks,
                         ["PPP", "FFF", "PPF", "FTE", "PPP"])
    leaderboard_recompute(benchmark_version=bv)
    for path in ("/", "/categories/", "/imaging-vs-text/", "/cost/"):
        body = client.get(path + "?benchmark=small%401.0").content.decode()
        svgs = re.findall(r"<svg .*?</svg>", body, re.S)
        assert svgs, path
        for svg in svgs:
            _parse(svg)
            assert "<script" not in svg and "<img" not in svg, path
        assert any("&lt;img src=x" in svg for svg in svgs), path


@pytest.mark.parametrize(("path", "table", "table_id"), [("/task-matrix/", "task-matrix",
                                                           "task-matrix"),
                                                          ("/tasks/", "tasks", "task-catalogue")])
def test_table_pages_without_a_chart_have_the_export_bar_and_no_plotly(path, table, table_id,
                                                                      client, demo_bv):
    body = client.get(path + "?q=codex").content.decode()
    bar = body.split('data-testid="export-bar"')[1].split("</div>")[0]
    assert f'data-table-id="{table_id}"' in bar and f'id="{table_id}"' in body
    assert f'href="/{table}.csv?q=codex"' in bar
    assert f'data-testid="permalink" href="http://testserver{path}?q=codex"' in bar
    assert "/static/leaderboard/js/export.js" in body and "plotly" not in body
