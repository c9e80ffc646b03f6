"""What a team shows of its result elsewhere (issue 28, point 5): an SVG badge for a README and a
citation (BibTeX and CFF), each the site's own finding for one agent on one benchmark version
(rate, 95% interval, verification level), never the submitter's claim. Pure functions of a
LeaderboardEntry; the views cache them with the version's aggregates."""

from __future__ import annotations

import re
from xml.sax.saxutils import escape

PAPER_URL = "https://arxiv.org/abs/2606.31179"
PAPER_EPRINT = "2606.31179"

# Approximate advance widths (px) of 11 px Verdana, the badge font (as shields.io badges):
# narrow, wide and default characters; text is laid out from these, so a long name widens its
# badge rather than overflowing it.
_NARROW = set("fijlrtI.,:;|!'()[] ")
_WIDE = set("mwMW%@—–")
_CHAR_W = {"narrow": 3.9, "wide": 10.1, "default": 6.9}
_COLOURS = {"verified": "#2e7d32", "reproduced": "#1565c0", "re-graded": "#1565c0",
            "checked": "#1565c0", "reconstructed": "#6d4c41"}
_DEFAULT_COLOUR = "#616161"
LABEL = "HealthAgentBench"


def text_width(text: str) -> float:
    return sum(_CHAR_W["narrow"] if c in _NARROW else _CHAR_W["wide"] if c in _WIDE
               else _CHAR_W["default"] for c in text)


def level_of(entry) -> str:
    """The level a badge and a citation name: what the site checked (reconstructed rows are
    the paper's aggregates, which the site could not check)."""
    return "reconstructed" if entry.reconstructed else (entry.verification_level or "claimed")


def badge_message(entry) -> str:
    return (f"{entry.success_rate:.1%} [{entry.ci_low:.1%}–{entry.ci_high:.1%}] · "
            f"{level_of(entry)}")


def badge_svg(label: str, message: str, colour: str) -> str:
    """A flat two-part badge; every text is XML-escaped (attributes too)."""
    pad = 6
    left = round(text_width(label) + 2 * pad)
    right = round(text_width(message) + 2 * pad)
    width = left + right
    title = escape(f"{label}: {message}", {'"': "&quot;"})
    label_x, message_x = left / 2, left + right / 2
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" role="img" '
        f'aria-label="{title}"><title>{title}</title>'
        f'<clipPath id="r"><rect width="{width}" height="20" rx="3"/></clipPath>'
        f'<g clip-path="url(#r)"><rect width="{left}" height="20" fill="#333"/>'
        f'<rect x="{left}" width="{right}" height="20" fill="{colour}"/></g>'
        f'<g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,sans-serif" '
        f'font-size="11"><text x="{label_x:g}" y="14">{escape(label)}</text>'
        f'<text x="{message_x:g}" y="14">{escape(message)}</text></g></svg>'
    )


def entry_badge(entry, benchmark_slug: str) -> str:
    return badge_svg(f"{LABEL} {benchmark_slug}", badge_message(entry),
                     _COLOURS.get(level_of(entry), _DEFAULT_COLOUR))


def missing_badge(benchmark_slug: str) -> str:
    return badge_svg(f"{LABEL} {benchmark_slug}", "no published result", _DEFAULT_COLOUR)


def _bibtex_text(value: str) -> str:
    """Braces balanced and TeX's special characters escaped (a name is data, not markup)."""
    value = re.sub(r"[\x00-\x1f\x7f]", " ", value)
    out = []
    for c in value:
        if c in "\\":
            out.append(r"\textbackslash{}")
        elif c in "{}&%$#_":
            out.append("\\" + c)
        elif c == "~":
            out.append(r"\textasciitilde{}")
        elif c == "^":
            out.append(r"\textasciicircum{}")
        else:
            out.append(c)
    return "".join(out)


def citation_facts(entry, *, benchmark_slug: str, url: str) -> dict:
    sub = entry.submission
    return {
        "agent": entry.agent.display_name,
        "org": entry.agent.organisation or "",
        "benchmark": benchmark_slug,
        "rate": f"{entry.success_rate:.1%}",
        "interval": f"{entry.ci_low:.1%}–{entry.ci_high:.1%}",
        "level": level_of(entry),
        "submission": sub.pk if sub is not None else None,
        "date": (entry.submitted_on.isoformat() if entry.submitted_on else ""),
        "url": url,
        "key": re.sub(r"[^a-z0-9]+", "-", f"hab-{entry.agent.slug}-{benchmark_slug}".lower())
        .strip("-"),
    }


def bibtex(facts: dict) -> str:
    note = (f"{facts['rate']} success (95% interval {facts['interval']}) on "
            f"{facts['benchmark']}; verification level: {facts['level']}"
            + (f"; submission {facts['submission']}" if facts["submission"] else "")
            + f"; cites arXiv:{PAPER_EPRINT}")
    year = facts["date"][:4]
    fields = [("title", f"{facts['agent']} on HealthAgentBench {facts['benchmark']}"),
              ("author", f"{{{facts['org'] or facts['agent']}}}"),
              ("year", year), ("howpublished", f"\\url{{{facts['url']}}}"), ("note", note)]
    body = ",\n".join(
        f"  {name:<12} = {{{value if name in ('author', 'howpublished') else _bibtex_text(value)}}}"
        for name, value in fields if value)
    return f"@misc{{{facts['key']},\n{body}\n}}\n"


def _yaml_str(value) -> str:
    import json

    return json.dumps(str(value), ensure_ascii=False)


def cff(facts: dict) -> str:
    """Citation File Format 1.2.0: this result, referring to the benchmark's paper."""
    lines = [
        "cff-version: 1.2.0",
        f"message: {_yaml_str('If you use this result, cite it and the HealthAgentBench paper.')}",
        "type: dataset",
        f"title: {_yaml_str(facts['agent'] + ' on HealthAgentBench ' + facts['benchmark'])}",
        "authors:",
        f"  - name: {_yaml_str(facts['org'] or facts['agent'])}",
        f"url: {_yaml_str(facts['url'])}",
    ]
    if facts["date"]:
        lines.append(f"date-released: {_yaml_str(facts['date'])}")
    lines += [
        f"abstract: {_yaml_str(facts['rate'] + ' success (95% interval ' + facts['interval'] + ') on ' + facts['benchmark'] + '; verification level: ' + facts['level'] + (('; submission ' + str(facts['submission'])) if facts['submission'] else ''))}",
        "references:",
        "  - type: article",
        f"    title: {_yaml_str('HealthAgentBench')}",
        "    authors:",
        f"      - name: {_yaml_str('HealthAgentBench authors')}",
        "    identifiers:",
        "      - type: other",
        f"        value: {_yaml_str('arXiv:' + PAPER_EPRINT)}",
        f"    url: {_yaml_str(PAPER_URL)}",
    ]
    return "\n".join(lines) + "\n"
