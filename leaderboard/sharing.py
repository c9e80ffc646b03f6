"""What a team shows of its result elsewhere: an SVG badge for a README and a
citation (BibTeX and CFF), each the site's own finding for one agent on one benchmark version
(rate, 95% interval, verification level), never the submitter's claim. Pure functions of a
LeaderboardEntry; the views cache them with the version's aggregates."""

from __future__ import annotations

from xml.sax.saxutils import escape

from submissions.citation import (  # noqa: F401 - the agent page's citation, re-exported
    PAPER_EPRINT,
    PAPER_URL,
    bibtex,
    cff,
    citation_facts,
    level_of,
)


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
