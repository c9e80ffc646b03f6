"""Recompute the leaderboard from the trials: the full rebuild.

Publishing and taking down keep the leaderboard current incrementally; this is the repair and
the check: every entry, category entry, task cell, rank, tie group and family aggregate of a
benchmark version is computed again from its published trials in one transaction, and the rows
whose numbers differ from the stored ones are rewritten (``--rewrite``: every row).
"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from evaluation.models import BenchmarkVersion
from leaderboard.models import LeaderboardEntry
from leaderboard.services import leaderboard_recompute


class Command(BaseCommand):
    help = ("Recompute every leaderboard row of the named benchmark versions (name@version; "
            "default: all) from their published trials, in one transaction each, and rewrite "
            "the rows that differ (--rewrite: all).")

    def add_arguments(self, parser):
        parser.add_argument("benchmarks", nargs="*", metavar="name@version")
        parser.add_argument("--rewrite", action="store_true",
                            help="rewrite every row, also those whose digest is current (after "
                                 "an edit of the database by hand)")

    def handle(self, *args, **opts):
        versions = list(BenchmarkVersion.objects.order_by("name", "version"))
        if opts["benchmarks"]:
            by_slug = {bv.slug: bv for bv in versions}
            unknown = [s for s in opts["benchmarks"] if s not in by_slug]
            if unknown:
                raise CommandError(f"unknown benchmark version {', '.join(unknown)} "
                                   f"(known: {', '.join(by_slug) or 'none'})")
            versions = [by_slug[s] for s in opts["benchmarks"]]
        for bv in versions:
            since = timezone.now()
            started = time.perf_counter()
            n = leaderboard_recompute(benchmark_version=bv, rewrite=opts["rewrite"])
            seconds = time.perf_counter() - started
            written = LeaderboardEntry.objects.filter(benchmark_version=bv,
                                                      created_at__gte=since).count()
            self.stdout.write(f"{bv.slug}: {n} entries, {written} rewritten, "
                              f"{n - written} already current ({seconds:.2f} s)")
