"""Formatting filters for the leaderboard templates (no queries)."""

from django import template
from django.http import QueryDict
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from evaluation.judge.synthetic import is_synthetic, is_synthetic_trajectory_judge
from leaderboard import chart_svg, reconstruction_spread
from leaderboard.compare import format_p
from leaderboard.formatting import format_pct

register = template.Library()


@register.filter
def pct(value, digits: int = 1) -> str:
    """Same rounding as the charts (leaderboard.formatting)."""
    return format_pct(value, digits)


@register.filter
def usd(value) -> str:
    return "–" if value is None else f"${float(value):.2f}"


@register.filter
def minutes(seconds) -> str:
    return "–" if seconds is None else f"{float(seconds) / 60:.1f} min"


@register.filter
def ktokens(value) -> str:
    return "–" if value is None else f"{float(value) / 1000:.1f}k"


@register.filter
def level_definition(level) -> str:
    """The one-line definition of a verification level (submissions.models.LEVEL_DEFINITIONS)."""
    from submissions.models import LEVEL_DEFINITIONS

    return LEVEL_DEFINITIONS.get(level, "")


@register.filter
def synthetic_judge(model) -> bool:
    """The recorded judge model is `make run`'s synthetic judge (a rule, not an LLM)."""
    return is_synthetic(model)


@register.filter
def synthetic_trajectory_judge(model) -> bool:
    """The recorded trajectory judge is `make run`'s synthetic one (a rule, not an LLM)."""
    return is_synthetic_trajectory_judge(model)


@register.filter
def outcome_class(code: str) -> str:
    return {"P": "pass", "F": "fail", "T": "timeout", "E": "error", "I": "infra", "-": "missing"}.get(
        code, "missing")


@register.filter
def outcome_label(code: str) -> str:
    return {"P": "passed", "F": "failed", "T": "timeout", "E": "agent error",
            "I": "infrastructure error", "-": "missing"}.get(code, "missing")


@register.filter
def cell_attempts(cell) -> list[dict]:
    """A task cell's attempts: the site's code, the claimed code and the integrity flags."""
    claimed = cell.claimed_outcomes or cell.outcomes
    flags = list(cell.flags or [])
    out = []
    for i, code in enumerate(cell.outcomes):
        c = claimed[i] if i < len(claimed) else code
        f = flags[i] if i < len(flags) else []
        note = "; ".join(([f"claimed {outcome_label(c)}"] if c != code else []) + list(f))
        out.append({"n": i + 1, "code": code, "claimed": c, "flags": f,
                    "title": f"attempt {i + 1}: {outcome_label(code)}"
                             + (f" ({note})" if note else "")})
    return out


@register.simple_tag(takes_context=True)
def sort_url(context, key: str) -> str:
    """Query string that sorts by key (toggling the order when already sorted by it)."""
    request = context["request"]
    q: QueryDict = request.GET.copy()
    current, order = q.get("sort", "rank"), q.get("order", "asc")
    q["sort"] = key
    if current == key:
        q["order"] = "asc" if order == "desc" else "desc"
    else:
        q["order"] = "desc" if key == "success" else "asc"
    return "?" + q.urlencode()


@register.simple_tag(takes_context=True)
def sort_th(context, key: str, label: str, col: str = ""):
    """A sortable column header: a link that sorts by key, and on the sorted column aria-sort
    plus a visible arrow (screen readers get aria-sort, sighted readers the arrow). ``col``
    names a column the visitor can hide (class ``col-<col>``)."""
    current = context.get("sort", "rank")
    href = sort_url(context, key)
    cls = format_html(' class="col-{}"', col) if col else ""
    if current != key:
        return format_html('<th scope="col"{}><a href="{}">{}</a></th>', cls, href, label)
    descending = context.get("order") == "desc"
    return format_html(
        '<th scope="col"{} aria-sort="{}"><a href="{}">{} <span class="arrow" aria-hidden="true">{}'
        "</span></a></th>", cls, "descending" if descending else "ascending", href, label,
        "▼" if descending else "▲")


@register.simple_tag(takes_context=True)
def with_param(context, key: str, value: str) -> str:
    q: QueryDict = context["request"].GET.copy()
    q[key] = value
    return "?" + q.urlencode()


@register.filter
def intcomma_plain(value) -> str:
    """10000 -> "10,000"."""
    return f"{int(value):,}"


@register.filter
def signed_pts(value) -> str:
    """A difference of fractions in percentage points, signed: -0.0123 -> "−1.2 pts"."""
    pts = float(value) * 100
    return f"{'+' if pts > 0 else '−' if pts < 0 else '±'}{abs(pts):.1f} pts"


@register.filter
def p_value(value) -> str:
    """A p-value as the compare page prints it: 0.031 -> "0.03", 0.0004 -> "< 0.001"."""
    return format_p(float(value)).removeprefix("p = ").removeprefix("p ")


@register.filter
def points(value) -> str:
    """A width as a fraction, in percentage points: 0.1725 -> "17.3 pts"."""
    return f"{float(value) * 100:.1f} pts"


@register.filter
def seed_spread(entry):
    """A reconstructed entry's figures across reconstructions, else None. Read from
    the committed file once per process: no query, no reconstruction."""
    return reconstruction_spread.for_entry(entry)


@register.filter
def pct_range(bounds, digits: int = 1) -> str:
    """(0.225, 0.252) -> "22.5–25.2%"; one value when both ends round alike."""
    lo, hi = (format_pct(b, digits) for b in bounds)
    return lo if lo == hi else f"{lo.rstrip('%')}–{hi}"


@register.filter
def category_spread(spread, slug: str):
    """The (ci_low, ci_high) ranges of one category of a spread, or None."""
    return spread.categories.get(slug) if spread else None


@register.simple_tag
def reconstructions_count() -> int | None:
    """How many reconstructions the committed spread covers (None without the file)."""
    return reconstruction_spread.reconstructions()


@register.filter
def interval(entry) -> str:
    """"[lo, hi]" of an entry's 95% interval; a reconstructed row's bounds as their ranges
    across reconstructions."""
    s = reconstruction_spread.for_entry(entry)
    if s is None:
        return f"[{format_pct(entry.ci_low)}, {format_pct(entry.ci_high)}]"
    return f"[{pct_range(s.ranges['ci_low'])}, {pct_range(s.ranges['ci_high'])}]"


@register.filter
def tie_label(entry) -> str:
    """The entry's tie group; a reconstructed row's as its shares across reconstructions."""
    s = reconstruction_spread.for_entry(entry)
    return str(entry.tie_group) if s is None else s.groups_label


@register.filter
def share(value) -> str:
    """A share of reconstructions: "82%", or "0.5%" / "99.5%" where whole percents would
    say 0% or 100%."""
    return reconstruction_spread.share_text(value)


@register.simple_tag
def chart_svgs(fig, chart_id: str):
    """The figure drawn by the server, wide and narrow (site.css shows one by width), each
    labelled by the figure's caption."""
    label = f"{chart_id}-caption"
    svg = (chart_svg.render(fig, chart_id=chart_id, label_id=label)
           + chart_svg.render(fig, chart_id=chart_id, label_id=label, narrow=True))
    # chart_svg escapes every string it draws (agent names are submitted text).
    return mark_safe(svg)  # noqa: S308


@register.filter
def rank_change(changes: dict, agent_id) -> str:
    """"↑2" / "↓1" for the places an agent moved since the board a month before; "" if none."""
    moved = (changes or {}).get(agent_id)
    if not moved:
        return ""
    return f"↑{moved}" if moved > 0 else f"↓{-moved}"
