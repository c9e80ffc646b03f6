"""Plotly figure dicts built from selector output. Pure functions: no database, no request.

Templates embed a figure with ``json_script`` (templates/_partials/chart.html, which also holds
the chart's title and its text alternative) and static/leaderboard/js/charts.js draws it. Titles
are HTML, not Plotly titles, so Plotly's toolbar never covers them."""

from __future__ import annotations

from collections.abc import Sequence

from leaderboard import reconstruction_spread
from leaderboard.formatting import format_pct

# Sequential scale for success rates: 0% light, 100% dark (ColorBrewer Blues, light to dark).
# Plotly's named "Blues" runs dark to light, which made 100% look like a missing value.
SUCCESS_SCALE = [[0.0, "#f7fbff"], [0.25, "#c6dbef"], [0.5, "#6baed6"], [0.75, "#2171b5"],
                 [1.0, "#08306b"]]
# Qualitative colours (Okabe-Ito, distinguishable with colour-vision deficiencies) for harnesses.
HARNESS_COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]

_LAYOUT = {
    "margin": {"l": 60, "r": 20, "t": 30, "b": 60},
    "font": {"family": "system-ui, sans-serif", "size": 12},
    "plot_bgcolor": "#ffffff",
    "paper_bgcolor": "#ffffff",
}
_AXIS_PCT = {"tickformat": ".0%", "range": [0, 1], "gridcolor": "#e5e7eb"}


def _pct(v: float | None) -> str:
    return format_pct(v, 1)


def _interval(e) -> tuple[float, float, str]:
    """(low, high, hover text) of an entry's 95% interval; a reconstructed row's is the
    envelope across reconstructions (its lowest lower and highest upper bound)."""
    s = reconstruction_spread.for_entry(e)
    if s is None:
        return e.ci_low, e.ci_high, f"95% CI {_pct(e.ci_low)}–{_pct(e.ci_high)}"
    (lo, lo_max), (hi_min, hi) = s.ranges["ci_low"], s.ranges["ci_high"]
    return lo, hi, (f"95% CI bounds across {s.reconstructions} reconstructions: "
                    f"{_pct(lo)}–{_pct(lo_max)}, {_pct(hi_min)}–{_pct(hi)}")


def leaderboard_bar(entries: Sequence) -> dict:
    names = [e.agent.display_name for e in entries]
    ci = [_interval(e) for e in entries]
    return {
        "data": [{
            "type": "bar", "orientation": "h", "y": names,
            "x": [e.success_rate for e in entries],
            "error_x": {"type": "data", "symmetric": False,
                        "array": [c[1] - e.success_rate for e, c in zip(entries, ci, strict=True)],
                        "arrayminus": [e.success_rate - c[0]
                                       for e, c in zip(entries, ci, strict=True)]},
            "hovertext": [f"{e.agent.display_name}: {_pct(e.success_rate)} ({c[2]})"
                          for e, c in zip(entries, ci, strict=True)],
            "hoverinfo": "text", "marker": {"color": "#2563eb"},
        }],
        "layout": {**_LAYOUT,
                   "xaxis": _AXIS_PCT, "yaxis": {"autorange": "reversed", "automargin": True},
                   "height": 120 + 28 * len(entries)},
    }


def heatmap_cell_text(ce) -> str:
    """What a heatmap cell prints: the table's rounded percentage (same helper) and the counts,
    so that a one-task category (n/3) does not look as solid as a ten-task one (n/30)."""
    return f"{format_pct(ce.success_rate, 0)}<br>{ce.successes}/{ce.attempts}"


# The heatmap's column labels below 600 px (the table under the chart names each in full).
SHORT_CATEGORY = {
    "xray-report-correction": "X-ray", "pathology-tumor-region": "Path.",
    "ct-abnormality-classification": "CT", "ehr-data-quality-audit": "Audit",
    "ehr-format-conversion": "Conv.", "ehr-event-modeling": "Events",
    "clinical-trial-matching": "Trials",
}


def short_category(category) -> str:
    return SHORT_CATEGORY.get(category.slug) or category.name.split()[0]


def category_heatmap(categories: Sequence, entries: Sequence) -> dict:
    z, text, hover = [], [], []
    for e in entries:
        row, trow, hrow = [], [], []
        for c in categories:
            ce = e.category_results.get(c.slug)
            row.append(ce.success_rate if ce else None)
            trow.append(heatmap_cell_text(ce) if ce else "–")
            hrow.append(
                f"{e.agent.display_name} · {c.name}<br>{_pct(ce.success_rate)} "
                f"({ce.successes}/{ce.attempts}), 95% CI {_pct(ce.ci_low)}–{_pct(ce.ci_high)}"
                if ce else "no attempts")
        z.append(row)
        text.append(trow)
        hover.append(hrow)
    return {
        "data": [{
            "type": "heatmap", "z": z, "x": [c.name for c in categories],
            "y": [e.agent.display_name for e in entries], "text": text, "hovertext": hover,
            "hoverinfo": "text", "zmin": 0, "zmax": 1, "colorscale": SUCCESS_SCALE,
            "colorbar": {"tickformat": ".0%", "title": {"text": "success"}, "thickness": 12},
            # The text is preformatted by heatmap_cell_text: Plotly's own %{z:.0%} rounds
            # differently from the table.
            "texttemplate": "%{text}", "xgap": 1, "ygap": 1,
        }],
        "layout": {**_LAYOUT,
                   "yaxis": {"autorange": "reversed", "automargin": True},
                   "xaxis": {"automargin": True, "tickangle": -30},
                   "height": 200 + 40 * len(entries)},
        # Below 600 px (static/leaderboard/js/charts.js): short column labels, level, the
        # percentage alone in each cell and no colour bar, so every column keeps a readable
        # width at 390 px.
        "narrow": {
            "data": [{"x": [short_category(c) for c in categories],
                      "text": [[t.split("<br>")[0] for t in row] for row in text],
                      "showscale": False, "textfont": {"size": 9}}],
            "layout": {"xaxis": {"automargin": True, "tickangle": 0, "side": "top",
                                 "tickfont": {"size": 9}},
                       "margin": {"l": 0, "r": 0, "t": 30, "b": 10},
                       "height": 90 + 34 * len(entries)},
        },
    }


def imaging_text_bars(labels: Sequence[str], imaging: Sequence, text: Sequence) -> dict:
    return {
        "data": [
            {"type": "bar", "name": "Imaging (macro mean)", "x": list(labels),
             "y": list(imaging), "marker": {"color": "#7c3aed"}},
            {"type": "bar", "name": "Text (macro mean)", "x": list(labels), "y": list(text),
             "marker": {"color": "#059669"}},
        ],
        "layout": {**_LAYOUT, "barmode": "group", "legend": {"orientation": "h", "y": -0.3},
                   "yaxis": _AXIS_PCT, "xaxis": {"automargin": True}},
    }


def comparison_dots(rows: Sequence, x_label) -> dict:
    """One trace per comparison row: its entries' success rates as dots with 95% intervals, x
    labelled by x_label(entry). Dots, not lines: the x values (harnesses, model versions) are
    categories, and a line between them would suggest a trend."""
    data = []
    for r in rows:
        data.append({
            "type": "scatter", "mode": "markers", "name": r.label,
            "x": [x_label(e) for e in r.entries], "y": [e.success_rate for e in r.entries],
            "marker": {"size": 11},
            "error_y": {"type": "data", "symmetric": False,
                        "array": [_interval(e)[1] - e.success_rate for e in r.entries],
                        "arrayminus": [e.success_rate - _interval(e)[0] for e in r.entries]},
            "hovertext": [f"{e.agent.display_name}: {_pct(e.success_rate)}" for e in r.entries],
            "hoverinfo": "text",
        })
    return {"data": data, "layout": {**_LAYOUT, "yaxis": _AXIS_PCT,
                                     "legend": {"orientation": "h", "y": -0.3},
                                     "xaxis": {"type": "category", "automargin": True}}}


# x axis key -> (the leaderboard CSV/API field, axis title, hover label, hover number format).
# Cost, time and tokens are the submissions' own figures (Harbor's result.json), never measured
# by the site: every title and hover label says "reported".
X_AXES = {
    "cost": ("reported_cost_per_attempt_usd", "Reported mean cost per attempt (USD)",
             "reported cost/attempt $", ":.2f"),
    "time": ("reported_mean_duration_s", "Reported mean time per attempt (minutes)",
             "reported time/attempt (min) ", ":.1f"),
    "tokens": ("reported_mean_output_tokens", "Reported mean output tokens per attempt",
               "reported output tokens/attempt ", ":,.0f"),
}


def axis_value(entry, axis: str) -> float | None:
    if axis == "cost":
        return float(entry.cost_per_attempt_usd) if entry.cost_per_attempt_usd is not None else None
    if axis == "time":
        return entry.mean_duration_s / 60 if entry.mean_duration_s is not None else None
    return entry.mean_output_tokens


# What a row without the axis' figure is marked (a 0 or missing value: nothing reported).
NO_FIGURE = {"cost": "no reported cost", "time": "no reported time",
             "tokens": "no reported tokens"}


def has_figure(value: float | None) -> bool:
    """A reported cost (time, tokens) of 0 or none means nothing was reported, not that the
    agent was free: such a row is plotted (at 0) and listed, never on the Pareto frontier."""
    return value is not None and value > 0


def frontier_names(entries: Sequence, axis: str) -> set[str]:
    """Display names of the agents on the Pareto frontier of `axis` (rows with the figure)."""
    points = [(axis_value(e, axis), e.success_rate, e.agent.display_name) for e in entries]
    return {p[2] for p in pareto_frontier([p for p in points if has_figure(p[0])])}


def pareto_frontier(points: Sequence[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """Points not dominated by another (lower-or-equal x and higher-or-equal y, one strictly)."""
    frontier: list[tuple[float, float, str]] = []
    best_y = float("-inf")
    for x, y, name in sorted(points, key=lambda p: (p[0], -p[1])):
        if y > best_y:
            frontier.append((x, y, name))
            best_y = y
    return frontier


def cost_title(axis: str) -> str:
    label = X_AXES[axis][1]
    return f"Success vs {label[0].lower()}{label[1:]}, with the Pareto frontier"


def cost_scatter(entries: Sequence, axis: str) -> dict:
    """One trace per harness (coloured, in the legend); only frontier agents carry a label, the
    others are named on hover and in the table, so labels do not pile up. A row whose figure is
    0 is plotted at 0 and marked on hover (NO_FIGURE), never on the frontier; a missing one has
    no x to plot (the table lists it)."""
    _, label, hover_label, fmt = X_AXES[axis]
    pts = [(axis_value(e, axis), e.success_rate, e.agent.display_name, e.agent.harness.display_name)
           for e in entries]
    pts = [p for p in pts if p[0] is not None]
    front = pareto_frontier([p[:3] for p in pts if has_figure(p[0])])
    on_front = {p[2] for p in front}
    harnesses = list(dict.fromkeys(p[3] for p in pts))
    data = []
    for i, h in enumerate(harnesses):
        mine = [p for p in pts if p[3] == h]
        data.append({
            "type": "scatter", "mode": "markers+text", "name": h,
            "x": [p[0] for p in mine], "y": [p[1] for p in mine],
            "text": [p[2] if p[2] in on_front else "" for p in mine],
            "hovertext": [p[2] if has_figure(p[0]) else f"{p[2]} ({NO_FIGURE[axis]})"
                          for p in mine], "textposition": "middle right",
            "cliponaxis": False, "textfont": {"size": 11},
            "marker": {"size": 11, "color": HARNESS_COLOURS[i % len(HARNESS_COLOURS)],
                       "symbol": ["circle", "square", "diamond", "triangle-up", "cross"][i % 5]},
            "hovertemplate": ("%{hovertext}<br>" + hover_label + "%{x" + fmt + "}"
                              "<br>success %{y:.1%}<extra>" + h + "</extra>"),
        })
    data.append({
        "type": "scatter", "mode": "lines", "name": "Pareto frontier",
        "x": [p[0] for p in front], "y": [p[1] for p in front],
        "line": {"shape": "hv", "color": "#6b7280", "dash": "dot"}, "hoverinfo": "skip"})
    return {
        "data": data,
        "layout": {**_LAYOUT, "margin": {"l": 60, "r": 30, "t": 30, "b": 60},
                   "legend": {"orientation": "h", "y": -0.2},
                   "xaxis": {"title": {"text": label}, "gridcolor": "#e5e7eb",
                             "rangemode": "tozero"},
                   "yaxis": {**_AXIS_PCT, "title": {"text": "Success rate"}}, "height": 520},
    }
