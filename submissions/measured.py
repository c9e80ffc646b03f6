"""The site's own figures beside the submission's reported ones.

Cost, time and tokens of a trial are what the submission's Harbor run reported. Where the site
re-ran a trial itself (a re-run check of the same task and attempt), it knows its own: the time
the re-run's agent took and, for a Harbor re-run, the tokens Harbor recorded for it, priced with
the dated price table (submissions.pricing) like any computed cost. The status page and the
status API show both; a reported cost far below the re-run's (under
settings.VERIFICATION_REPORTED_COST_MIN_RATIO of it) or far above it (over
VERIFICATION_REPORTED_COST_MAX_RATIO times it) is flagged.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from submissions import pricing


def rerun_measured(*, model: str | None, agent_seconds: float | None,
                   trial_seconds: float | None = None, input_tokens: int | None = None,
                   cached_tokens: int | None = None,
                   output_tokens: int | None = None) -> dict:
    """What a re-run check records in its detail ("measured"): the agent's time (like the
    reported time, Harbor's agent execution; else the whole trial), the re-run's tokens, and
    their cost at the price table (None when a count or the model's price is missing)."""
    seconds = agent_seconds if agent_seconds is not None else trial_seconds
    cost = pricing.compute_cost(model, input_tokens, cached_tokens, output_tokens)
    return {"duration_s": seconds, "input_tokens": input_tokens, "cached_tokens": cached_tokens,
            "output_tokens": output_tokens, "cost_usd": cost,
            "price_table": pricing.PRICE_TABLE_DATE if cost is not None else None,
            "model": model or ""}


@dataclass(frozen=True)
class RerunFigures:
    """One trial's reported figures and the site's re-run of the same task and attempt."""

    check_id: int
    duration_s: float | None
    input_tokens: int | None
    cached_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    price_table: str | None
    reported_cost_usd: float | None
    min_ratio: float
    max_ratio: float = float("inf")

    @property
    def cost_ratio(self) -> float | None:
        """reported / re-run cost; None when either is unknown or the re-run cost nothing."""
        if self.reported_cost_usd is None or not self.cost_usd:
            return None
        return self.reported_cost_usd / self.cost_usd

    @property
    def cost_far_below(self) -> bool:
        """The reported cost (0 included) is under min_ratio of the re-run's."""
        ratio = self.cost_ratio
        return ratio is not None and ratio < self.min_ratio

    @property
    def cost_far_above(self) -> bool:
        """The reported cost is over max_ratio times the re-run's."""
        ratio = self.cost_ratio
        return ratio is not None and ratio > self.max_ratio

    def payload(self) -> dict:
        return {"check_id": self.check_id, "measured_duration_s": self.duration_s,
                "measured_input_tokens": self.input_tokens,
                "measured_cached_tokens": self.cached_tokens,
                "measured_output_tokens": self.output_tokens,
                "measured_cost_usd": self.cost_usd, "price_table": self.price_table,
                "reported_to_measured_cost": self.cost_ratio,
                "reported_cost_far_below_rerun": self.cost_far_below,
                "reported_cost_far_above_rerun": self.cost_far_above}


def figures_of(check, reported_cost_usd) -> RerunFigures:
    """A re-run check's measured figures (detail["measured"]; older Harbor re-runs recorded
    only their timing, agent_s / trial_s) against the trial's reported cost."""
    detail = check.detail or {}
    m = detail.get("measured") or {}
    seconds = m.get("duration_s")
    if seconds is None:
        seconds = detail.get("agent_s") if detail.get("agent_s") is not None else (
            detail.get("trial_s"))
    return RerunFigures(
        check_id=check.pk, duration_s=seconds, input_tokens=m.get("input_tokens"),
        cached_tokens=m.get("cached_tokens"), output_tokens=m.get("output_tokens"),
        cost_usd=m.get("cost_usd"), price_table=m.get("price_table"),
        reported_cost_usd=float(reported_cost_usd) if reported_cost_usd is not None else None,
        min_ratio=settings.VERIFICATION_REPORTED_COST_MIN_RATIO,
        max_ratio=settings.VERIFICATION_REPORTED_COST_MAX_RATIO)
