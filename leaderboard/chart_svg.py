"""Server-drawn SVG of a figure dict from leaderboard.charts: the same marks, axes, labels and
colours Plotly draws from that dict, with no JavaScript. Pure functions: no database, no request.

Pages embed two drawings of each figure, a wide one and a narrow one (the figure's own ``narrow``
variant, as static/leaderboard/js/charts.js applies it below 600 px); site.css shows one by
width. Axis text, grid and error bars carry classes (``cs-*``) coloured by the page's variables,
so dark mode follows prefers-color-scheme; a downloaded file carries the same rules in its own
<style>. Every string from the data is escaped here: agent names are submitted text.

Each data point is one element of class ``cs-mark`` with a <title> holding Plotly's hover
text, so hovering (or a long press) shows the values before any script loads."""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from html import escape

WIDE_WIDTH = 960
NARROW_WIDTH = 340
# Plotly.js's defaults where a figure names none.
DEFAULT_HEIGHT = 450
COLORWAY = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf"]
BAR_GAP = 0.2
ERROR_CAP = 4

# The colours of a downloaded SVG (no page around it): site.css's variables, light and dark.
STANDALONE_STYLE = (
    "svg{--fg:#111827;--muted:#4b5563;--line:#e5e7eb;--bg:#ffffff;background:var(--bg)}"
    "@media (prefers-color-scheme: dark){svg{--fg:#e5e7eb;--muted:#a1a1aa;--line:#334155;"
    "--bg:#0f172a}}"
    ".cs-text{fill:var(--fg)}.cs-muted{fill:var(--muted)}.cs-grid{stroke:var(--line)}"
    ".cs-axis{stroke:var(--muted)}.cs-err{stroke:var(--fg)}"
    "text{font-family:system-ui,-apple-system,'Segoe UI',sans-serif}")


def _num(v) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if isinstance(v, float) else str(v)


def _attrs(**kw) -> str:
    return "".join(f' {k.rstrip("_").replace("_", "-")}="{escape(_num(v), quote=True)}"'
                   for k, v in kw.items() if v is not None)


def _text_width(s: str, size: float) -> float:
    """An estimate (no font metrics on the server): system-ui averages about 0.58 em."""
    return len(s) * size * 0.58


def _truncate(s: str, size: float, room: float) -> str:
    if _text_width(s, size) <= room:
        return s
    keep = max(1, int(room / (size * 0.58)) - 1)
    return s[:keep] + "…"


def hover_lines(s: str) -> str:
    """Plotly's hover markup as plain text: <br> becomes a new line; anything else is text."""
    return re.sub(r"<br\s*/?>", "\n", str(s))


_FIELD = re.compile(r"%\{(\w+)(?::([^}]*))?\}")


def d3_format(value, spec: str | None) -> str:
    """The d3-format specs charts.py uses: ".2f", ".1f", ",.0f", ".0%", ".1%"."""
    if value is None:
        return "–"
    if not spec or isinstance(value, str):
        return str(value)
    m = re.fullmatch(r"(,)?(?:\.(\d+))?([f%])?", spec)
    if not m:
        return str(value)
    comma, digits, kind = m.group(1), int(m.group(2) or 0), m.group(3) or "f"
    v = value * 100 if kind == "%" else value
    out = f"{v:,.{digits}f}" if comma else f"{v:.{digits}f}"
    return out + ("%" if kind == "%" else "")


def _hover(trace: dict, i: int, x, y, j: int | None = None) -> str:
    def pick(key):
        v = trace.get(key)
        if isinstance(v, list):
            v = v[i] if i < len(v) else None
            if j is not None and isinstance(v, list):
                v = v[j] if j < len(v) else None
        return v

    template = trace.get("hovertemplate")
    if template:
        extra = re.search(r"<extra>(.*?)</extra>", template)
        body = re.sub(r"<extra>.*?</extra>", "", template)
        fields = {"x": x, "y": y, "hovertext": pick("hovertext"), "text": pick("text")}
        body = _FIELD.sub(lambda m: d3_format(fields.get(m.group(1)), m.group(2)), body)
        if extra and extra.group(1):
            body += f"<br>{extra.group(1)}"
        return hover_lines(body)
    text = pick("hovertext")
    if text is None:
        name = trace.get("name")
        text = f"{name + ': ' if name else ''}{x}, {y}"
    return hover_lines(text)


def _merge_narrow(fig: dict) -> dict:
    """The figure as drawn below 600 px: its ``narrow`` keys over its own (charts.js does the
    same), smaller margins and font."""
    fig = copy.deepcopy(fig)
    narrow = fig.pop("narrow", None) or {}
    for i, over in enumerate(narrow.get("data") or []):
        if i < len(fig["data"]):
            fig["data"][i].update(over)
    layout = fig["layout"]
    layout.update(narrow.get("layout") or {})
    layout["margin"] = {**layout.get("margin", {}), "l": 40, "r": 10,
                        **{k: v for k, v in ((narrow.get("layout") or {}).get("margin") or {})
                           .items()}}
    layout["font"] = {**layout.get("font", {}), "size": 10}
    return fig


def _nice_ticks(lo: float, hi: float, count: int) -> list[float]:
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks, v = [], first
    while v <= hi + step * 1e-9:
        ticks.append(round(v, 10))
        v += step
    return ticks


def _tick_label(v: float, axis: dict, step: float) -> str:
    fmt = axis.get("tickformat")
    if fmt:
        return d3_format(v, fmt)
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    digits = max(0, -math.floor(math.log10(step))) if step > 0 else 0
    digits += 1 if step * 10 ** digits % 1 else 0
    return f"{v:.{digits}f}"


@dataclass
class _Axis:
    """One axis: categorical (a band per label) or linear (nice ticks)."""
    spec: dict
    start: float  # pixel of the axis' low end (left, or bottom for y)
    end: float
    categories: list | None = None
    lo: float = 0.0
    hi: float = 1.0
    reversed: bool = False

    def band(self) -> float:
        return abs(self.end - self.start) / max(1, len(self.categories or []))

    def pos(self, v) -> float:
        if self.categories is not None:
            i = self.categories.index(v)
            if self.reversed:
                i = len(self.categories) - 1 - i
            return self.start + (self.end - self.start) * (i + 0.5) / len(self.categories)
        return self.start + (self.end - self.start) * (v - self.lo) / ((self.hi - self.lo) or 1)


def _is_category(values) -> bool:
    return any(isinstance(v, str) for v in values)


def _linear_range(values, axis: dict) -> tuple[float, float]:
    if axis.get("range"):
        return float(axis["range"][0]), float(axis["range"][1])
    vals = [v for v in values if v is not None]
    if not vals:
        return 0.0, 1.0
    lo, hi = min(vals), max(vals)
    if axis.get("rangemode") == "tozero":
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    pad = (hi - lo) * 0.05 or 1.0
    lo = lo if axis.get("rangemode") == "tozero" and lo == 0 else lo - pad
    return lo, hi + pad


def _errors(trace: dict, key: str, values: list) -> list[tuple[float, float] | None]:
    err = trace.get(key) or {}
    plus, minus = err.get("array") or [], err.get("arrayminus") or err.get("array") or []
    out = []
    for i, v in enumerate(values):
        if v is None or i >= len(plus) or plus[i] is None:
            out.append(None)
        else:
            out.append((v - (minus[i] or 0), v + plus[i]))
    return out


def _colour_at(scale: list, z: float) -> str:
    z = min(1.0, max(0.0, z))
    for (p0, c0), (p1, c1) in zip(scale, scale[1:], strict=False):
        if z <= p1:
            t = (z - p0) / ((p1 - p0) or 1)
            a = [int(c0[k:k + 2], 16) for k in (1, 3, 5)]
            b = [int(c1[k:k + 2], 16) for k in (1, 3, 5)]
            return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b, strict=True))
    return scale[-1][1]


def _is_dark(colour: str) -> bool:
    r, g, b = (int(colour[k:k + 2], 16) / 255 for k in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.5


def _symbol(kind: str, x: float, y: float, r: float) -> tuple[str, str]:
    """(element, attributes) of a Plotly marker symbol centred on (x, y)."""
    if kind == "square":
        return "rect", _attrs(x=x - r * 0.9, y=y - r * 0.9, width=r * 1.8, height=r * 1.8)
    if kind == "diamond":
        return "path", _attrs(d=f"M{_num(x)} {_num(y - r * 1.2)}l{_num(r * 1.2)} {_num(r * 1.2)}"
                                f"l{_num(-r * 1.2)} {_num(r * 1.2)}l{_num(-r * 1.2)} "
                                f"{_num(-r * 1.2)}z")
    if kind == "triangle-up":
        return "path", _attrs(d=f"M{_num(x)} {_num(y - r * 1.15)}L{_num(x + r * 1.1)} "
                                f"{_num(y + r * 0.8)}H{_num(x - r * 1.1)}z")
    if kind == "cross":
        w = r * 0.4
        return "path", _attrs(d=f"M{_num(x - w)} {_num(y - r)}h{_num(2 * w)}v{_num(r - w)}"
                                f"h{_num(r - w)}v{_num(2 * w)}h{_num(w - r)}v{_num(r - w)}"
                                f"h{_num(-2 * w)}v{_num(w - r)}h{_num(w - r)}v{_num(-2 * w)}"
                                f"h{_num(r - w)}z")
    return "circle", _attrs(cx=x, cy=y, r=r)


def _trace_colour(trace: dict, index: int) -> str:
    marker = trace.get("marker") or {}
    line = trace.get("line") or {}
    return marker.get("color") or line.get("color") or COLORWAY[index % len(COLORWAY)]


def _legend_items(fig: dict) -> list[tuple[str, dict, int]]:
    traces = [t for t in fig["data"] if t.get("type") != "heatmap"]
    if len(traces) < 2:
        return []
    return [(t.get("name") or f"trace {i}", t, i) for i, t in enumerate(fig["data"])
            if t.get("type") != "heatmap" and t.get("showlegend", True)]


def render(fig: dict, *, chart_id: str, label_id: str | None = None, narrow: bool = False,
           standalone: bool = False, heading: str = "", footer: str = "") -> str:
    """The figure as one <svg> element. ``label_id`` names the element that labels it (the
    figure's caption); a ``standalone`` file (a download) carries its own styles, ``heading``
    and ``footer`` (the site's name, the benchmark version and the date)."""
    fig = _merge_narrow(fig) if narrow else copy.deepcopy(fig)
    layout = fig.get("layout") or {}
    data = fig.get("data") or []
    width = NARROW_WIDTH if narrow else WIDE_WIDTH
    height = float(layout.get("height") or DEFAULT_HEIGHT)
    fs = float((layout.get("font") or {}).get("size") or 12)
    m = {"l": 80, "r": 80, "t": 100, "b": 80, **(layout.get("margin") or {})}
    top_extra = fs * 2 if standalone and heading else 0
    bottom_extra = fs * 1.8 if standalone and footer else 0
    xspec, yspec = layout.get("xaxis") or {}, layout.get("yaxis") or {}
    heat = next((t for t in data if t.get("type") == "heatmap"), None)

    xs = [v for t in data for v in (t.get("x") or [])]
    ys = [v for t in data for v in (t.get("y") or [])]
    x_cat = heat is not None or _is_category(xs) or xspec.get("type") == "category"
    y_cat = heat is not None or _is_category(ys)
    xcats = list(dict.fromkeys(xs)) if x_cat else None
    ycats = list(dict.fromkeys(ys)) if y_cat else None

    # Room for the category labels (Plotly's automargin), within limits that keep the plot.
    left = float(m["l"])
    if y_cat and ycats:
        left = min(max(left, max(_text_width(str(c), fs) for c in ycats) + 12),
                   width * (0.36 if narrow else 0.42))
    elif (yspec.get("title") or {}).get("text"):
        # The rotated title beside the tick labels ("100%"), not over them.
        left = max(left, fs * 2 + _text_width("100%", fs) + 8)
    legend = _legend_items(fig)
    legend_rows = _legend_layout(legend, fs, width) if legend else []
    legend_h = len(legend_rows) * (fs * 1.7) + (fs if legend_rows else 0)
    showscale = heat is not None and heat.get("showscale", True)
    right = float(m["r"]) + (70 if showscale else 0)
    if any("markers+text" in (t.get("mode") or "") for t in data) and not narrow:
        right = max(right, 30.0)
    if not x_cat:
        # Half the last tick label ("100%") overhangs the plot's right edge.
        right = max(right, _text_width("100%", fs) / 2 + 4)
    x_top = xspec.get("side") == "top"
    tick_angle = float(xspec.get("tickangle") or 0)
    xfs = float((xspec.get("tickfont") or {}).get("size") or fs)
    x_label_room = xfs * 1.6
    x_cat_trunc = 24
    if x_cat and xcats:
        band = (width - left - right) / len(xcats)
        longest = max(_text_width(str(c), xfs) for c in xcats)
        if longest > band - 4 and "tickangle" not in xspec:
            tick_angle = -45 if narrow else -30
        if tick_angle:
            longest = min(longest, _text_width("x" * x_cat_trunc, xfs))
            x_label_room = longest * abs(math.sin(math.radians(tick_angle))) + xfs * 1.6
            # The first rotated label reaches left of its column.
            reach = longest * math.cos(math.radians(tick_angle)) - band / 2
            left = max(left, min(reach, width * 0.3))
    title_room = fs * 2 if (xspec.get("title") or {}).get("text") else 0
    top = float(m["t"]) + top_extra + (x_label_room if x_top else 0)
    bottom = float(m["b"]) if not x_top else fs
    bottom = max(bottom, (0 if x_top else x_label_room) + title_room + fs * 0.5) + legend_h
    height = max(height, top + bottom + 40)
    total_h = height + bottom_extra
    plot_top, plot_bottom = top, height - bottom
    plot_left, plot_right = left, width - right

    xaxis = _Axis(xspec, plot_left, plot_right)
    yaxis = _Axis(yspec, plot_bottom, plot_top)
    if x_cat:
        xaxis.categories = xcats or []
    else:
        xvals = xs + [b for t in data for e in _errors(t, "error_x", t.get("x") or []) if e
                      for b in e]
        xaxis.lo, xaxis.hi = _linear_range(xvals, xspec)
    if y_cat:
        yaxis.categories = ycats or []
        # Reversed y (Plotly's autorange "reversed"): the first category at the top.
        yaxis.reversed = yspec.get("autorange") != "reversed"
    else:
        yvals = ys + [b for t in data for e in _errors(t, "error_y", t.get("y") or []) if e
                      for b in e]
        yaxis.lo, yaxis.hi = _linear_range(yvals, yspec)

    out: list[str] = []
    label = _attrs(role="img", aria_labelledby=label_id) if label_id else ""
    variant = "narrow" if narrow else "wide"
    out.append(f'<svg xmlns="http://www.w3.org/2000/svg" class="chart-svg chart-svg-{variant}"'
               f'{_attrs(viewBox=f"0 0 {width} {_num(total_h)}", width=width, height=total_h)}'
               f'{label}{_attrs(data_chart_svg=chart_id)} font-size="{_num(fs)}">')
    if standalone:
        out.append(f"<style>{STANDALONE_STYLE}</style>")
        out.append('<rect class="cs-bg" width="100%" height="100%" style="fill:var(--bg)"/>')
        if heading:
            out.append(f'<text class="cs-text" x="{_num(fs)}" y="{_num(fs * 1.5)}" '
                       f'font-weight="600">{escape(heading)}</text>')

    out.extend(_axes(xaxis, yaxis, fs, xfs, plot_top, plot_bottom, plot_left, plot_right,
                     x_top, tick_angle, x_cat_trunc))
    for i, t in enumerate(data):
        kind = t.get("type")
        if kind == "heatmap":
            out.extend(_heatmap(t, xaxis, yaxis, fs))
        elif kind == "bar":
            bars = [b for b in data if b.get("type") == "bar"]
            group = layout.get("barmode") == "group"
            out.extend(_bars(t, i, bars.index(t) if group else 0, len(bars) if group else 1,
                             xaxis, yaxis))
        elif kind == "scatter":
            out.extend(_scatter(t, i, xaxis, yaxis, fs))
    if legend_rows:
        out.extend(_legend(legend_rows, fs, height - legend_h + fs * 0.6, width))
    if showscale:
        out.extend(_colourbar(heat, chart_id, variant, fs, plot_right + 20, plot_top,
                              min(plot_bottom - plot_top, 240)))
    if standalone and footer:
        out.append(f'<text class="cs-muted" x="{_num(fs)}" y="{_num(total_h - fs * 0.6)}" '
                   f'font-size="{_num(fs * 0.9)}">{escape(footer)}</text>')
    out.append("</svg>")
    return "".join(out)


def _axes(xaxis, yaxis, fs, xfs, top, bottom, left, right, x_top, angle, trunc) -> list[str]:
    out = ['<g class="cs-axes">']
    count = 4 if right - left < 300 else 6
    if xaxis.categories is None:
        ticks = _nice_ticks(xaxis.lo, xaxis.hi, count)
        step = ticks[1] - ticks[0] if len(ticks) > 1 else 1
        for v in ticks:
            x = xaxis.pos(v)
            out.append(f'<line class="cs-grid"{_attrs(x1=x, x2=x, y1=top, y2=bottom)}/>')
            out.append(f'<text class="cs-text" text-anchor="middle"'
                       f'{_attrs(x=x, y=bottom + fs * 1.3)}>'
                       f'{escape(_tick_label(v, xaxis.spec, step))}</text>')
    else:
        room = xaxis.band() - 4
        for c in xaxis.categories:
            x = xaxis.pos(c)
            y = top - xfs * 0.6 if x_top else bottom + xfs * 1.3
            full = str(c)
            size = None if xfs == fs else xfs
            if angle:
                shown = full if len(full) <= trunc else full[:trunc - 1] + "…"
                at = f"translate({_num(x)} {_num(y - xfs * 0.4)}) rotate({_num(angle)})"
                out.append(f'<text class="cs-text" text-anchor="end"'
                           f'{_attrs(transform=at, font_size=size)}>'
                           f'<title>{escape(full)}</title>{escape(shown)}</text>')
            else:
                shown = _truncate(full, xfs, max(room, xfs * 2))
                out.append(f'<text class="cs-text" text-anchor="middle"'
                           f'{_attrs(x=x, y=y, font_size=size)}>'
                           f'<title>{escape(full)}</title>{escape(shown)}</text>')
    if yaxis.categories is None:
        ticks = _nice_ticks(yaxis.lo, yaxis.hi, count if bottom - top > 200 else 4)
        step = ticks[1] - ticks[0] if len(ticks) > 1 else 1
        for v in ticks:
            y = yaxis.pos(v)
            out.append(f'<line class="cs-grid"{_attrs(x1=left, x2=right, y1=y, y2=y)}/>')
            out.append(f'<text class="cs-text" text-anchor="end"'
                       f'{_attrs(x=left - 6, y=y + fs * 0.35)}>'
                       f'{escape(_tick_label(v, yaxis.spec, step))}</text>')
    else:
        for c in yaxis.categories:
            y = yaxis.pos(c)
            full = str(c)
            shown = _truncate(full, fs, left - 10)
            out.append(f'<text class="cs-text" text-anchor="end"'
                       f'{_attrs(x=left - 6, y=y + fs * 0.35)}>'
                       f'<title>{escape(full)}</title>{escape(shown)}</text>')
    xt = (xaxis.spec.get("title") or {}).get("text")
    if xt:
        out.append(f'<text class="cs-text" text-anchor="middle"'
                   f'{_attrs(x=(left + right) / 2, y=bottom + fs * 3)}>{escape(xt)}</text>')
    yt = (yaxis.spec.get("title") or {}).get("text")
    if yt:
        cy = (top + bottom) / 2
        out.append(f'<text class="cs-text" text-anchor="middle"'
                   f'{_attrs(transform=f"translate({_num(fs * 1.1)} {_num(cy)}) rotate(-90)")}>'
                   f'{escape(yt)}</text>')
    out.append("</g>")
    return out


def _mark(el: str, attrs: str, hover: str, extra: str = "") -> str:
    return f'<{el} class="cs-mark"{attrs}{extra}><title>{escape(hover)}</title></{el}>'


def _error_bar(x1, y1, x2, y2, horizontal: bool) -> str:
    c = ERROR_CAP
    if horizontal:
        d = (f"M{_num(x1)} {_num(y1)}H{_num(x2)}M{_num(x1)} {_num(y1 - c)}v{2 * c}"
             f"M{_num(x2)} {_num(y1 - c)}v{2 * c}")
    else:
        d = (f"M{_num(x1)} {_num(y1)}V{_num(y2)}M{_num(x1 - c)} {_num(y1)}h{2 * c}"
             f"M{_num(x1 - c)} {_num(y2)}h{2 * c}")
    return f'<path class="cs-err" fill="none"{_attrs(d=d)}/>'


def _bars(t: dict, index: int, slot: int, slots: int, xaxis, yaxis) -> list[str]:
    colour = _trace_colour(t, index)
    horizontal = t.get("orientation") == "h"
    cat_axis, val_axis = (yaxis, xaxis) if horizontal else (xaxis, yaxis)
    cats = t.get("y" if horizontal else "x") or []
    vals = t.get("x" if horizontal else "y") or []
    errs = _errors(t, "error_x" if horizontal else "error_y", vals)
    band = cat_axis.band() * (1 - BAR_GAP)
    each = band / slots
    out = [f'<g class="cs-trace"{_attrs(fill=colour)}>']
    zero = val_axis.pos(max(val_axis.lo, 0.0))
    for i, (c, v) in enumerate(zip(cats, vals, strict=False)):
        if v is None:
            continue
        centre = cat_axis.pos(c)
        # Pixel offset of this trace's slot within the band (grouped bars side by side).
        offset = -band / 2 + slot * each
        if horizontal:
            offset = -offset - each
        end = val_axis.pos(v)
        hover = _hover(t, i, c if not horizontal else v, v if not horizontal else c)
        if horizontal:
            attrs = _attrs(x=min(zero, end), y=centre + offset, width=abs(end - zero), height=each)
        else:
            attrs = _attrs(x=centre + offset, y=min(zero, end), width=each, height=abs(end - zero))
        out.append(_mark("rect", attrs, hover))
        if errs[i]:
            lo, hi = (val_axis.pos(b) for b in errs[i])
            mid = centre + offset + each / 2
            out.append(_error_bar(lo, mid, hi, mid, True) if horizontal
                       else _error_bar(mid, lo, mid, hi, False))
    out.append("</g>")
    return out


def _heatmap(t: dict, xaxis, yaxis, fs) -> list[str]:
    scale = t.get("colorscale") or [[0, "#ffffff"], [1, "#000000"]]
    zmin, zmax = t.get("zmin", 0), t.get("zmax", 1)
    size = float((t.get("textfont") or {}).get("size") or fs)
    w, h = xaxis.band(), yaxis.band()
    gx, gy = float(t.get("xgap") or 0), float(t.get("ygap") or 0)
    out = ['<g class="cs-trace">']
    for r, (row, label) in enumerate(zip(t.get("z") or [], t.get("y") or [], strict=False)):
        for c, (z, col) in enumerate(zip(row, t.get("x") or [], strict=False)):
            cx, cy = xaxis.pos(col), yaxis.pos(label)
            text = ((t.get("text") or [[]])[r] or [None])[c] if t.get("text") else None
            if z is not None:
                colour = _colour_at(scale, (z - zmin) / ((zmax - zmin) or 1))
                out.append(_mark("rect", _attrs(x=cx - w / 2 + gx / 2, y=cy - h / 2 + gy / 2,
                                                width=w - gx, height=h - gy, fill=colour),
                                 _hover(t, r, col, label, j=c)))
                cls = "cs-on-dark" if _is_dark(colour) else "cs-on-light"
                fill = "#ffffff" if _is_dark(colour) else "#111827"
            else:
                cls, fill = "cs-muted", None
            if text:
                lines = re.split(r"<br\s*/?>", str(text))
                y0 = cy - (len(lines) - 1) * size * 0.6 + size * 0.35
                spans = "".join(f'<tspan{_attrs(x=cx, y=y0 + k * size * 1.2)}>{escape(s)}</tspan>'
                                for k, s in enumerate(lines))
                out.append(f'<text class="{cls}" text-anchor="middle" aria-hidden="true"'
                           f'{_attrs(fill=fill, font_size=size)}>{spans}</text>')
    out.append("</g>")
    return out


def _scatter(t: dict, index: int, xaxis, yaxis, fs) -> list[str]:
    colour = _trace_colour(t, index)
    xs, ys = t.get("x") or [], t.get("y") or []
    mode = t.get("mode") or "markers"
    out = [f'<g class="cs-trace"{_attrs(fill=colour)}>']
    pts = [(xaxis.pos(x), yaxis.pos(y)) for x, y in zip(xs, ys, strict=False)
           if x is not None and y is not None]
    if "lines" in mode and len(pts) > 1:
        line = t.get("line") or {}
        d = f"M{_num(pts[0][0])} {_num(pts[0][1])}"
        for _start, (x1, y1) in zip(pts, pts[1:], strict=False):
            d += (f"H{_num(x1)}V{_num(y1)}" if line.get("shape") == "hv"
                  else f"L{_num(x1)} {_num(y1)}")
        dash = "3 3" if line.get("dash") == "dot" else None
        out.append(f'<path class="cs-line" fill="none"'
                   f'{_attrs(d=d, stroke=colour, stroke_width=2, stroke_dasharray=dash)}/>')
    if "markers" in mode:
        marker = t.get("marker") or {}
        r = float(marker.get("size") or 6) / 2
        symbols = marker.get("symbol") or "circle"
        errs = _errors(t, "error_y", ys)
        texts = t.get("text") or []
        size = float((t.get("textfont") or {}).get("size") or fs)
        for i, (x, y) in enumerate(zip(xs, ys, strict=False)):
            if x is None or y is None:
                continue
            px, py = xaxis.pos(x), yaxis.pos(y)
            if errs[i]:
                lo, hi = (yaxis.pos(b) for b in errs[i])
                out.append(_error_bar(px, lo, px, hi, False))
            sym = symbols[i % len(symbols)] if isinstance(symbols, list) else symbols
            el, attrs = _symbol(sym, px, py, r)
            out.append(_mark(el, attrs, _hover(t, i, x, y)))
            label = texts[i] if isinstance(texts, list) and i < len(texts) else None
            if label and "text" in mode:
                out.append(f'<text class="cs-text" aria-hidden="true"'
                           f'{_attrs(x=px + r + 3, y=py + size * 0.35, font_size=size)}>'
                           f'{escape(str(label))}</text>')
    out.append("</g>")
    return out


def _legend_layout(items, fs, width) -> list[list[tuple[str, dict, int, float]]]:
    rows: list[list] = [[]]
    x = fs
    for name, t, i in items:
        w = 28 + _text_width(name, fs) + fs
        if x + w > width - fs and rows[-1]:
            rows.append([])
            x = fs
        rows[-1].append((name, t, i, x))
        x += w
    return rows


def _legend(rows, fs, y0, width) -> list[str]:
    out = ['<g class="cs-legend">']
    for k, row in enumerate(rows):
        y = y0 + k * fs * 1.7 + fs * 0.5
        for name, t, i, x in row:
            colour = _trace_colour(t, i)
            if t.get("type") == "bar":
                out.append(f'<rect{_attrs(x=x, y=y - 5, width=18, height=10, fill=colour)}/>')
            elif "markers" in (t.get("mode") or ""):
                sym = (t.get("marker") or {}).get("symbol") or "circle"
                el, attrs = _symbol(sym if isinstance(sym, str) else sym[0], x + 9, y, 5)
                out.append(f'<{el}{attrs}{_attrs(fill=colour)}/>')
            else:
                dash = "3 3" if (t.get("line") or {}).get("dash") == "dot" else None
                d = f"M{_num(x)} {_num(y)}h18"
                out.append(f'<path fill="none"'
                           f'{_attrs(d=d, stroke=colour, stroke_width=2, stroke_dasharray=dash)}/>')
            out.append(f'<text class="cs-text"{_attrs(x=x + 24, y=y + fs * 0.35)}>'
                       f'{escape(name)}</text>')
    out.append("</g>")
    return out


def _colourbar(t, chart_id, variant, fs, x, y, h) -> list[str]:
    gid = re.sub(r"[^A-Za-z0-9_-]", "", f"{chart_id}-{variant}-scale")
    scale = t.get("colorscale") or []
    stops = "".join(f'<stop{_attrs(offset=f"{_num((1 - p) * 100)}%", stop_color=c)}/>'
                    for p, c in reversed(scale))
    title = ((t.get("colorbar") or {}).get("title") or {}).get("text") or ""
    fmt = (t.get("colorbar") or {}).get("tickformat")
    out = [f'<g class="cs-colourbar"><defs><linearGradient id="{gid}" x1="0" y1="0" x2="0" '
           f'y2="1">{stops}</linearGradient></defs>',
           f'<rect{_attrs(x=x, y=y, width=12, height=h, fill=f"url(#{gid})")}/>']
    for v in (0, 0.5, 1):
        out.append(f'<text class="cs-text"{_attrs(x=x + 16, y=y + h * (1 - v) + fs * 0.35)}>'
                   f'{escape(d3_format(v, fmt) if fmt else _num(v))}</text>')
    if title:
        out.append(f'<text class="cs-text"{_attrs(x=x, y=y - fs * 0.6)}>{escape(title)}</text>')
    out.append("</g>")
    return out
