"""Plotly figure dicts built from selector output. Pure functions: no database, no request.

Templates embed a figure with ``json_script`` and static/leaderboard/js/charts.js draws it."""

from __future__ import annotations

from collections.abc import Sequence

_LAYOUT = {
    "margin": {"l": 60, "r": 20, "t": 40, "b": 60},
    "font": {"family": "system-ui, sans-serif", "size": 12},
    "plot_bgcolor": "#ffffff",
    "paper_bgcolor": "#ffffff",
}
_AXIS_PCT = {"tickformat": ".0%", "range": [0, 1], "gridcolor": "#e5e7eb"}


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v * 100:.1f}%"


def leaderboard_bar(entries: Sequence) -> dict:
    names = [e.agent.display_name for e in entries]
    return {
        "data": [{
            "type": "bar", "orientation": "h", "y": names,
            "x": [e.success_rate for e in entries],
            "error_x": {"type": "data", "symmetric": False,
                        "array": [e.ci_high - e.success_rate for e in entries],
                        "arrayminus": [e.success_rate - e.ci_low for e in entries]},
            "hovertext": [f"{e.agent.display_name}: {_pct(e.success_rate)} "
                          f"(95% CI {_pct(e.ci_low)}–{_pct(e.ci_high)})" for e in entries],
            "hoverinfo": "text", "marker": {"color": "#2563eb"},
        }],
        "layout": {**_LAYOUT, "title": {"text": "Success rate (95% task-clustered interval)"},
                   "xaxis": _AXIS_PCT, "yaxis": {"autorange": "reversed", "automargin": True},
                   "height": 120 + 28 * len(entries)},
    }


def category_heatmap(categories: Sequence, entries: Sequence) -> dict:
    z, text = [], []
    for e in entries:
        row, trow = [], []
        for c in categories:
            ce = e.category_results.get(c.slug)
            row.append(ce.success_rate if ce else None)
            trow.append(
                f"{e.agent.display_name} · {c.name}<br>{_pct(ce.success_rate)} "
                f"({ce.successes}/{ce.attempts}), 95% CI {_pct(ce.ci_low)}–{_pct(ce.ci_high)}"
                if ce else "no attempts")
        z.append(row)
        text.append(trow)
    return {
        "data": [{
            "type": "heatmap", "z": z, "x": [c.name for c in categories],
            "y": [e.agent.display_name for e in entries], "text": text, "hoverinfo": "text",
            "zmin": 0, "zmax": 1, "colorscale": "Blues",
            "colorbar": {"tickformat": ".0%", "title": {"text": "success"}},
            "texttemplate": "%{z:.0%}",
        }],
        "layout": {**_LAYOUT, "title": {"text": "Success rate by category"},
                   "yaxis": {"autorange": "reversed", "automargin": True},
                   "xaxis": {"automargin": True}, "height": 160 + 32 * len(entries)},
    }


def imaging_text_bars(labels: Sequence[str], imaging: Sequence, text: Sequence,
                      title: str) -> dict:
    return {
        "data": [
            {"type": "bar", "name": "Imaging (macro mean)", "x": list(labels),
             "y": list(imaging), "marker": {"color": "#7c3aed"}},
            {"type": "bar", "name": "Text (macro mean)", "x": list(labels), "y": list(text),
             "marker": {"color": "#059669"}},
        ],
        "layout": {**_LAYOUT, "title": {"text": title}, "barmode": "group",
                   "yaxis": _AXIS_PCT, "xaxis": {"automargin": True}},
    }


def comparison_lines(rows: Sequence, title: str, x_label) -> dict:
    """One line per comparison row: its entries' success rates, x labelled by x_label(entry)."""
    data = []
    for r in rows:
        data.append({
            "type": "scatter", "mode": "lines+markers", "name": r.label,
            "x": [x_label(e) for e in r.entries], "y": [e.success_rate for e in r.entries],
            "error_y": {"type": "data", "symmetric": False,
                        "array": [e.ci_high - e.success_rate for e in r.entries],
                        "arrayminus": [e.success_rate - e.ci_low for e in r.entries]},
            "hovertext": [f"{e.agent.display_name}: {_pct(e.success_rate)}" for e in r.entries],
            "hoverinfo": "text",
        })
    return {"data": data, "layout": {**_LAYOUT, "title": {"text": title}, "yaxis": _AXIS_PCT,
                                     "xaxis": {"type": "category", "automargin": True}}}


X_AXES = {
    "cost": ("cost_per_attempt_usd", "Mean cost per attempt (USD)"),
    "time": ("mean_duration_min", "Mean time per attempt (minutes)"),
    "tokens": ("mean_output_tokens", "Mean output tokens per attempt"),
}


def axis_value(entry, axis: str) -> float | None:
    if axis == "cost":
        return float(entry.cost_per_attempt_usd) if entry.cost_per_attempt_usd is not None else None
    if axis == "time":
        return entry.mean_duration_s / 60 if entry.mean_duration_s is not None else None
    return entry.mean_output_tokens


def pareto_frontier(points: Sequence[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """Points not dominated by another (lower-or-equal x and higher-or-equal y, one strictly)."""
    frontier: list[tuple[float, float, str]] = []
    best_y = float("-inf")
    for x, y, name in sorted(points, key=lambda p: (p[0], -p[1])):
        if y > best_y:
            frontier.append((x, y, name))
            best_y = y
    return frontier


def cost_scatter(entries: Sequence, axis: str) -> dict:
    _, label = X_AXES[axis]
    pts = [(axis_value(e, axis), e.success_rate, e.agent.display_name) for e in entries]
    pts = [p for p in pts if p[0] is not None]
    front = pareto_frontier(pts)
    return {
        "data": [
            {"type": "scatter", "mode": "markers+text", "name": "Agents",
             "x": [p[0] for p in pts], "y": [p[1] for p in pts], "text": [p[2] for p in pts],
             "textposition": "top center", "marker": {"size": 10, "color": "#2563eb"},
             "hovertemplate": "%{text}<br>%{x:.2f} · %{y:.1%}<extra></extra>"},
            {"type": "scatter", "mode": "lines", "name": "Pareto frontier",
             "x": [p[0] for p in front], "y": [p[1] for p in front],
             "line": {"shape": "hv", "color": "#dc2626", "dash": "dot"}, "hoverinfo": "skip"},
        ],
        "layout": {**_LAYOUT, "title": {"text": f"Success vs {label[0].lower()}{label[1:]}"},
                   "xaxis": {"title": {"text": label}, "gridcolor": "#e5e7eb", "rangemode": "tozero"},
                   "yaxis": {**_AXIS_PCT, "title": {"text": "Success rate"}}, "height": 520},
    }
