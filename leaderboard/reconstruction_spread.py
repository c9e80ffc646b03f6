"""The reconstructed board's seed spread, as the pages, CSVs and API read it.

The paper's per-trial outcomes are a reconstruction: the successes of every (agent, category)
are pinned by the integer program, but how they spread over tasks is one seeded draw. The
figures that depend on that spread (tie groups, interval bounds, pass@3, pass^3, category
interval bounds) are shown for reconstructed rows as their envelope across
``DEFAULT_SPREAD_SEEDS`` independent reconstructions, read from the committed
``leaderboard/data/reconstruction_spread.csv``. ``manage.py reconstruction_spread`` (devtools)
writes it with ``leaderboard.demo.spread``; ``tests/leaderboard/test_reconstruction_spread.py``
checks it against the paper and a fresh computation. Read once per process (keyed by the file's
modification time): a page view costs a dict lookup, never a reconstruction.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass, field
from pathlib import Path

CSV_PATH = Path(__file__).with_name("data") / "reconstruction_spread.csv"
CSV_COLUMNS = ("agent", "category", "figure", "min", "max", "reconstructions", "paper_digest")
# The seeded figures, one row each per agent (category "" is the agent's overall row).
FIGURES = ("ci_low", "ci_high", "pass_at_3", "pass_hat_3")
CATEGORY_FIGURES = ("ci_low", "ci_high")
GROUP_PREFIX = "tie_group_share:"  # "tie_group_share:2": the share of draws placing it in 2

# The CSV / API columns the leaderboard rows carry (null on rows that are not reconstructed).
LEADERBOARD_COLUMNS = ("tie_group_shares", "ci_low_min", "ci_low_max", "ci_high_min",
                       "ci_high_max", "pass_at_3_min", "pass_at_3_max", "pass_hat_3_min",
                       "pass_hat_3_max", "reconstructions")
CATEGORY_COLUMNS = ("ci_low_min", "ci_low_max", "ci_high_min", "ci_high_max")


def share_text(share: float) -> str:
    """A share as a whole percent, or with one decimal where rounding would show 0% or 100%
    for a share that is neither: 0.815 -> "82%", 0.005 -> "0.5%", 0.995 -> "99.5%"."""
    whole = round(share * 100)
    if (whole in (0, 100)) and 0 < share < 1:
        return f"{share * 100:.1f}%"
    return f"{whole}%"


@dataclass
class AgentSpread:
    """One reconstructed agent's seeded figures across the reconstructions."""

    reconstructions: int
    group_shares: list[tuple[int, float]] = field(default_factory=list)  # (group, share) sorted
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)  # figure -> (min, max)
    categories: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)

    @property
    def groups_label(self) -> str:
        """"1 (82%), 2 (18%)", or "1" when every reconstruction agrees."""
        if len(self.group_shares) == 1:
            return str(self.group_shares[0][0])
        return ", ".join(f"{g} ({share_text(share)})" for g, share in self.group_shares)

    @property
    def groups_range(self) -> str:
        """"1–2" (the groups the reconstructions put it in), or "1"."""
        lo, hi = self.group_shares[0][0], self.group_shares[-1][0]
        return str(lo) if lo == hi else f"{lo}–{hi}"

    @property
    def modal_group(self) -> int:
        return max(self.group_shares, key=lambda gs: (gs[1], -gs[0]))[0]

    def shares_text(self) -> str:
        """The CSV/API form: "1:0.815;2:0.185"."""
        return ";".join(f"{g}:{share:.3f}" for g, share in self.group_shares)

    def columns(self) -> tuple:
        """The values of LEADERBOARD_COLUMNS."""
        r = self.ranges
        return (self.shares_text(), *r["ci_low"], *r["ci_high"], *r["pass_at_3"],
                *r["pass_hat_3"], self.reconstructions)

    def category_columns(self, slug: str) -> tuple:
        c = self.categories.get(slug)
        if c is None:
            return (None,) * len(CATEGORY_COLUMNS)
        return (*c["ci_low"], *c["ci_high"])


def write_csv(rows: list[tuple], path: Path = CSV_PATH) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        w.writerows(rows)


@functools.lru_cache(maxsize=4)
def _read(path: Path, mtime: float) -> dict[str, AgentSpread]:
    out: dict[str, AgentSpread] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        for r in csv.DictReader(fh):
            a = out.setdefault(r["agent"], AgentSpread(int(r["reconstructions"])))
            lo, hi = float(r["min"]), float(r["max"])
            if r["figure"].startswith(GROUP_PREFIX):
                a.group_shares.append((int(r["figure"][len(GROUP_PREFIX):]), lo))
            elif r["category"]:
                a.categories.setdefault(r["category"], {})[r["figure"]] = (lo, hi)
            else:
                a.ranges[r["figure"]] = (lo, hi)
    for a in out.values():
        a.group_shares.sort()
    return out


def committed(path: Path = CSV_PATH) -> dict[str, AgentSpread]:
    """Every reconstructed agent's spread by display name ({} without the file)."""
    if not path.exists():
        return {}
    return _read(path, path.stat().st_mtime)


def reconstructions(path: Path = CSV_PATH) -> int | None:
    spreads = committed(path)
    return next(iter(spreads.values())).reconstructions if spreads else None


def committed_digest(path: Path = CSV_PATH) -> str | None:
    if not path.exists():
        return None
    with open(path, encoding="utf-8", newline="") as fh:
        first = next(csv.DictReader(fh), None)
    return first["paper_digest"] if first else None


def for_entry(entry) -> AgentSpread | None:
    """The spread of a reconstructed leaderboard entry (None for every real submission)."""
    if not entry.reconstructed:
        return None
    return committed().get(entry.agent.display_name)


def annotate(entries) -> list:
    """Set ``spread`` on each entry (None where it is not reconstructed); returns the list."""
    entries = list(entries)
    for e in entries:
        e.spread = for_entry(e)
    return entries


def leaderboard_columns(entry) -> tuple:
    s = for_entry(entry)
    return s.columns() if s else (None,) * len(LEADERBOARD_COLUMNS)


def category_columns(entry, slug: str) -> tuple:
    s = for_entry(entry)
    return s.category_columns(slug) if s else (None,) * len(CATEGORY_COLUMNS)
