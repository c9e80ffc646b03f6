"""Number formatting shared by the templates (the `pct` filter) and the charts, so that a chart
and the table under it always print the same figure (3/24 is 13% in both, never 12% in one).

Rounding is half-up on the decimal value, as readers and the paper round; Python's float
formatting rounds half-to-even on the binary value (12.5 -> "12"), d3's (Plotly's) rounds half-up:
neither may be used for a number a reader compares across the page."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

DASH = "–"


def format_pct(value, digits: int = 1) -> str:
    """A fraction in [0, 1] as a percentage with `digits` decimals, half-up; "–" for missing."""
    if value is None or value == "":
        return DASH
    quantum = Decimal(1).scaleb(-int(digits))
    # str() first: the shortest decimal that round-trips (0.125 -> "0.125"), not the binary value.
    pct = (Decimal(str(float(value))) * 100).quantize(quantum, rounding=ROUND_HALF_UP)
    return f"{pct}%"
