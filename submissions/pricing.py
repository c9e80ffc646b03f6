"""Dated model price table: the cost of a trial whose Harbor result has tokens but no cost.

Prices are USD per 1M tokens. Harbor's ``n_input_tokens`` INCLUDES the cached tokens
(``n_cache_tokens`` is a subset), so::

    cost = ((input - cached) * input_price + cached * cached_price + output * output_price) / 1e6

``basis`` says where each row comes from: "list" = the provider's public list price for that
model as of PRICE_TABLE_DATE; "assumed: ..." = no public price was available to this project for
that model on that date, so the row repeats the named reference model's list price. The site
shows the date and marks every computed cost as computed. Update the date with any change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PRICE_TABLE_DATE = "2026-12-01"


@dataclass(frozen=True)
class Price:
    input: float  # USD per 1M uncached input tokens
    cached: float  # USD per 1M cached input tokens (cache reads)
    output: float  # USD per 1M output tokens
    basis: str = "list"


_GPT5 = Price(1.25, 0.125, 10.0)
_GPT52 = Price(1.75, 0.175, 14.0)
_OPUS45 = Price(5.0, 0.50, 25.0)
_SONNET45 = Price(3.0, 0.30, 15.0)

# Keys are normalised model names (see normalize_model): no provider prefix, lower case,
# dots as dashes, no trailing date stamp.
PRICES: dict[str, Price] = {
    # --- the paper's models (leaderboard/demo/paper.yaml) ---
    "gpt-5-5": Price(1.75, 0.175, 14.0, "assumed: gpt-5.2 list price"),
    "gpt-5-4": Price(1.75, 0.175, 14.0, "assumed: gpt-5.2 list price"),
    "gpt-5-3": Price(1.75, 0.175, 14.0, "assumed: gpt-5.2 list price"),
    "gpt-5-4-mini": Price(0.25, 0.025, 2.0, "assumed: gpt-5-mini list price"),
    "claude-opus-4-8": Price(5.0, 0.50, 25.0, "assumed: claude-opus-4-5 list price"),
    "claude-opus-4-7": Price(5.0, 0.50, 25.0, "assumed: claude-opus-4-5 list price"),
    "claude-opus-4-6": Price(5.0, 0.50, 25.0, "assumed: claude-opus-4-5 list price"),
    "claude-sonnet-4-6": Price(3.0, 0.30, 15.0, "assumed: claude-sonnet-4-5 list price"),
    # --- common models ---
    "gpt-5": _GPT5,
    "gpt-5-1": _GPT5,
    "gpt-5-codex": _GPT5,
    "gpt-5-1-codex": _GPT5,
    "gpt-5-2": _GPT52,
    "gpt-5-mini": Price(0.25, 0.025, 2.0),
    "gpt-5-nano": Price(0.05, 0.005, 0.40),
    "gpt-4-1": Price(2.0, 0.50, 8.0),
    "gpt-4o": Price(2.50, 1.25, 10.0),
    "o3": Price(2.0, 0.50, 8.0),
    "o4-mini": Price(1.10, 0.275, 4.40),
    "claude-opus-4-5": _OPUS45,
    "claude-opus-4-1": Price(15.0, 1.50, 75.0),
    "claude-opus-4": Price(15.0, 1.50, 75.0),
    "claude-sonnet-4-5": _SONNET45,
    "claude-sonnet-4": _SONNET45,
    "claude-haiku-4-5": Price(1.0, 0.10, 5.0),
    "gemini-2-5-pro": Price(1.25, 0.31, 10.0),
    "gemini-2-5-flash": Price(0.30, 0.075, 2.50),
    "gemini-3-pro-preview": Price(2.0, 0.20, 12.0),
}

# Display-style spellings (paper.yaml, metadata) for the same models.
ALIASES: dict[str, str] = {
    "opus-4-8": "claude-opus-4-8", "opus-4-7": "claude-opus-4-7", "opus-4-6": "claude-opus-4-6",
    "sonnet-4-6": "claude-sonnet-4-6", "opus-4-5": "claude-opus-4-5",
    "sonnet-4-5": "claude-sonnet-4-5", "haiku-4-5": "claude-haiku-4-5",
    "gpt5-5": "gpt-5-5", "gpt5-4": "gpt-5-4", "gpt5-3": "gpt-5-3",
}

_DATE_SUFFIX = re.compile(r"-(20\d{6}|20\d\d-\d\d-\d\d|latest)$")


def normalize_model(name: str | None) -> str:
    """``"anthropic/claude-opus-4.8-20261001"`` -> ``"claude-opus-4-8"``."""
    if not name:
        return ""
    text = name.strip().lower()
    if "/" in text:
        text = text.rsplit("/", 1)[1]
    text = re.sub(r"[\s._]+", "-", text)
    text = _DATE_SUFFIX.sub("", text)
    return ALIASES.get(text, text)


def price_for(model_name: str | None) -> Price | None:
    return PRICES.get(normalize_model(model_name))


def compute_cost(model_name: str | None, input_tokens: int | None, cached_tokens: int | None,
                 output_tokens: int | None) -> float | None:
    """Cost in USD from Harbor's token counts; None when the model has no price or no input
    or output token count was recorded."""
    price = price_for(model_name)
    if price is None or (input_tokens is None and output_tokens is None):
        return None
    total_in = max(int(input_tokens or 0), 0)
    cached = min(max(int(cached_tokens or 0), 0), total_in)
    out = max(int(output_tokens or 0), 0)
    cost = ((total_in - cached) * price.input + cached * price.cached + out * price.output) / 1e6
    return round(cost, 6)


def price_table() -> dict:
    """The table as the site shows it."""
    return {"date": PRICE_TABLE_DATE, "unit": "USD per 1M tokens",
            "models": {k: {"input": p.input, "cached": p.cached, "output": p.output,
                           "basis": p.basis} for k, p in sorted(PRICES.items())}}
