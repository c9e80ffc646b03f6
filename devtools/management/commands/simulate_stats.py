"""Validate the leaderboard's statistics by simulation, and the re-run design.

Fits the benchmark's shape to the reconstructed paper data, draws ``--boards`` simulated
HealthAgentBench leaderboards (54 tasks in the paper's 7 category sizes, 3 correlated attempts
per task), scores them with the site's own estimators (``leaderboard.stats``), prints the table
and writes it as CSV (by default the committed ``leaderboard/data/simulation.csv`` that the
methods page shows).

Then runs the site's re-run design (``submissions.verification.design``, the
VERIFICATION_RERUN_* settings) and the designs it is compared with on ``--rerun-reps`` simulated
submissions per agent rate and scenario (honest; claims inflated by 5, 10, 15, 20 points, the fakes
on random failed trials or spread one per task), prints the detection / false-alarm /
inconclusive / cost table and writes it (by default the committed
``leaderboard/data/rerun_design.csv``). Then the compare page's paired test on
``--compare-boards`` benchmarks per scenario: equal agents called separable (2, 4 and 8 agents,
Holm over the pairs) and power against 5, 10 and 15 points (by default the committed
``leaderboard/data/compare_test.csv``). ``--only`` runs one part. Prints the wall time.
"""

from __future__ import annotations

import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from devtools import robustness, simulation
from leaderboard.demo.reconstruct import load_paper, reconstruct
from submissions.verification.design import Design


class Command(BaseCommand):
    help = ("Simulate HealthAgentBench-shaped leaderboards and measure the site's estimators; "
            "simulate submissions and measure the re-run design.")

    def add_arguments(self, parser):
        parser.add_argument("--boards", type=int, default=10_000)
        parser.add_argument("--seed", type=int, default=20261203)
        parser.add_argument("--output", type=Path, default=simulation.CSV_PATH,
                            help="CSV to write (default: the committed table)")
        parser.add_argument("--rerun-reps", type=int, default=2000,
                            help="simulated submissions per agent rate and scenario")
        parser.add_argument("--rerun-output", type=Path, default=simulation.RERUN_CSV_PATH,
                            help="re-run design CSV to write (default: the committed table)")
        parser.add_argument("--only", choices=("all", "stats", "robustness", "rerun",
                                                "compare"), default="all")
        parser.add_argument("--compare-boards", type=int, default=10_000,
                            help="benchmarks per scenario of the compare page's paired test")
        parser.add_argument("--compare-output", type=Path, default=simulation.COMPARE_CSV_PATH,
                            help="compare test CSV to write (default: the committed table)")
        parser.add_argument("--robust-boards", type=int, default=10_000,
                            help="boards per benchmark model (robustness)")
        parser.add_argument("--attempts-boards", type=int, default=2_000,
                            help="benchmarks per interaction sd, gap and attempts per task")

    def handle(self, *args, boards: int, seed: int, output: Path, rerun_reps: int,
               rerun_output: Path, only: str, robust_boards: int, attempts_boards: int,
               compare_boards: int, compare_output: Path, **options):
        if only in ("all", "stats"):
            kept = robustness.robust_rows(output)
            self.stats(boards, seed, output)
            robustness.append_rows(kept, output)
        if only in ("all", "robustness"):
            self.robustness(robust_boards, attempts_boards, seed, output)
        if only in ("all", "rerun"):
            self.rerun(rerun_reps, seed, rerun_output)
        if only in ("all", "compare"):
            self.compare(compare_boards, seed, compare_output)

    def compare(self, boards: int, seed: int, output: Path) -> None:
        """The compare page's paired test: equal agents called separable, and power."""
        started, cpu = time.perf_counter(), time.process_time()
        shape = simulation.fit_shape(reconstruct(load_paper()))
        rows = simulation.simulate_compare(shape, boards=boards, seed=seed,
                                           alpha=settings.LEADERBOARD_TIE_ALPHA)
        self.stdout.write(simulation.format_table(rows))
        simulation.write_csv(rows, output, boards=boards, seed=seed)
        self.stdout.write(f"wrote {output}: {boards} boards per scenario, wall time "
                          f"{time.perf_counter() - started:.1f} s, CPU time "
                          f"{time.process_time() - cpu:.1f} s")

    def robustness(self, boards: int, attempts_boards: int, seed: int, output: Path) -> None:
        """The interval and tie rule across plausible benchmarks, and power by
        attempts per task (devtools/robustness.py)."""
        started, cpu = time.perf_counter(), time.process_time()
        base = simulation.fit_shape(reconstruct(load_paper()))
        alpha = settings.LEADERBOARD_TIE_ALPHA
        rows = []
        for i, (label, shape) in enumerate(robustness.model_shapes(base).items()):
            rows += robustness.simulate_model(label, shape, boards=boards, seed=seed + i,
                                              alpha=alpha)
        rows += robustness.simulate_attempts(base, boards=attempts_boards, seed=seed,
                                             alpha=alpha)
        self.stdout.write(simulation.format_table(rows))
        robustness.merge_csv(rows, output, boards=boards, seed=seed)
        self.stdout.write(f"wrote {output}: {boards} boards per model, {attempts_boards} per "
                          f"attempts cell, wall time {time.perf_counter() - started:.1f} s, CPU "
                          f"time {time.process_time() - cpu:.1f} s")

    def stats(self, boards: int, seed: int, output: Path) -> None:
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

    def rerun(self, reps: int, seed: int, output: Path) -> None:
        started = time.perf_counter()
        site = Design.from_settings(settings)
        designs = simulation.rerun_designs(site)
        rows = simulation.simulate_rerun(designs, reps=reps, seed=seed)
        done = time.perf_counter()
        shape = simulation.RERUN_SHAPE
        self.stdout.write(
            f"re-run designs on {reps} simulated submissions per agent rate "
            f"({', '.join(f'{r:.0%}' for r in simulation.RERUN_RATES)}) and scenario: "
            f"{shape.n_tasks} tasks x {shape.attempts} attempts, task difficulty logit-normal "
            f"(sd {shape.task_sd:g}); a full run is {shape.n_tasks * shape.attempts} trials")
        self.stdout.write(f"site design: {simulation.describe_design(site)}")
        simulation.write_rerun_csv(rows, output, reps=reps, seed=seed, design=site)
        written = simulation.read_rerun_csv(output)
        self.stdout.write(simulation.format_rerun_table(simulation.rerun_table(written)))
        self.stdout.write(simulation.format_rerun_outcomes(written))
        self.stdout.write(f"wrote {output}")
        self.stdout.write(f"re-run simulation: wall time {done - started:.1f} s")
