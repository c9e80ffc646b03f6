"""Validate the leaderboard's statistics by simulation (issue 14).

Fits the benchmark's shape to the reconstructed paper data, draws ``--boards`` simulated
HealthAgentBench leaderboards (54 tasks in the paper's 7 category sizes, 3 correlated attempts
per task), scores them with the site's own estimators (``leaderboard.stats``), prints the table
and writes it as CSV (by default the committed ``leaderboard/data/simulation.csv`` that the
methods page shows). Prints the wall time.
"""

from __future__ import annotations

import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from leaderboard import simulation
from leaderboard.demo.reconstruct import load_paper, reconstruct


class Command(BaseCommand):
    help = "Simulate HealthAgentBench-shaped leaderboards and measure the site's estimators."

    def add_arguments(self, parser):
        parser.add_argument("--boards", type=int, default=10_000)
        parser.add_argument("--seed", type=int, default=20261203)
        parser.add_argument("--output", type=Path, default=simulation.CSV_PATH,
                            help="CSV to write (default: the committed table)")

    def handle(self, *args, boards: int, seed: int, output: Path, **options):
        started, cpu = time.perf_counter(), time.process_time()
        shape = simulation.fit_shape(reconstruct(load_paper()))
        fitted = time.perf_counter()
        cats = ", ".join(f"{slug} {n} (mu {mu:+.2f})" for slug, n, mu in shape.categories)
        self.stdout.write(f"shape fitted to the reconstructed data in {fitted - started:.1f} s: "
                          f"{cats}; task sd {shape.task_sd:.2f}, agent x task sd "
                          f"{shape.interaction_sd:.2f} (logit scale)")
        rows = simulation.simulate(shape, boards=boards, seed=seed,
                                   alpha=settings.LEADERBOARD_TIE_ALPHA)
        done = time.perf_counter()
        self.stdout.write(simulation.format_table(rows))
        simulation.write_csv(rows, output, boards=boards, seed=seed)
        self.stdout.write(f"wrote {output}")
        self.stdout.write(f"{boards} simulated leaderboards in {done - fitted:.1f} s "
                          f"(wall time {done - started:.1f} s with the fit, CPU time "
                          f"{time.process_time() - cpu:.1f} s: on a shared machine the wall time "
                          f"grows with the load)")
