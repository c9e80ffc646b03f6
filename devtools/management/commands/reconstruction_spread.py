"""Reconstruct the paper's board with ``--seeds`` independent seeds and write the envelope of
every figure that depends on the draw.

Scores each reconstruction with the site's functions (``leaderboard.demo.spread``) and writes
``leaderboard/data/reconstruction_spread.csv`` (committed; the pages, CSVs and API read it through
``leaderboard/reconstruction_spread.py``). Prints each agent's tie-group shares and interval
envelopes, the group patterns, and the wall time. Fails if a figure the integer program pins
differs between two seeds.
"""

from __future__ import annotations

import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from leaderboard import reconstruction_spread
from leaderboard.demo import spread
from leaderboard.demo.reconstruct import load_paper


class Command(BaseCommand):
    help = ("Reconstruct the paper's board with many seeds and write the spread of the "
            "seed-dependent figures.")

    def add_arguments(self, parser):
        parser.add_argument("--seeds", type=int, default=spread.DEFAULT_SPREAD_SEEDS)
        parser.add_argument("--output", type=Path, default=reconstruction_spread.CSV_PATH,
                            help="CSV to write (default: the committed file)")

    def handle(self, *args, seeds: int, output: Path, **options):
        started = time.perf_counter()
        s = spread.spread(load_paper(), spread.spread_seeds(seeds),
                          settings.LEADERBOARD_TIE_ALPHA)
        reconstruction_spread.write_csv(spread.csv_rows(s), output)
        out = self.stdout.write
        out(f"{len(s.seeds)} reconstructions; tie group shares and 95% interval envelopes:")
        out(f"{'agent':28} {'groups':28} {'lower bound':>14} {'upper bound':>14} "
            f"{'pass@3':>12} {'pass^3':>12}")
        for i, agent in enumerate(s.agents):
            groups = ", ".join(f"{g} ({c / len(s.seeds):.1%})"
                               for g, c in sorted(s.group_counts[i].items()))
            cols = [f"{s.low[k][i] * 100:.1f}–{s.high[k][i] * 100:.1f}"
                    for k in ("ci_low", "ci_high", "pass_at_k", "pass_hat_k")]
            out(f"{agent:28} {groups:28} {cols[0]:>14} {cols[1]:>14} {cols[2]:>12} "
                f"{cols[3]:>12}")
        out(f"{len(s.patterns)} group patterns: " + ", ".join(
            f"{p} x{c}" for p, c in s.patterns.most_common()))
        out(f"wrote {output} in {time.perf_counter() - started:.1f} s")
