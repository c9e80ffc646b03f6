"""manage.py export_hub [--benchmark NAME@VERSION] --site-url URL --out DIR

Writes the leaderboard as a curated board of Harbor's hub: DIR/leaderboard.json (the
definition) and DIR/rows.json (rows-2.json, ... past 500 rows), ready for
``harbor hub leaderboard create --config DIR/leaderboard.json --rows DIR/rows.json``."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from leaderboard import hub, selectors


class Command(BaseCommand):
    help = "Export the leaderboard as a Harbor hub board (definition and rows)."

    def add_arguments(self, parser):
        parser.add_argument("--benchmark", default="",
                            help="name@version (default: the site's default version)")
        parser.add_argument("--site-url", required=True,
                            help="the site's public address, for the rows' links")
        parser.add_argument("--out", required=True, type=Path, help="directory to write")

    def handle(self, *args, benchmark, site_url, out, **options):
        try:
            bv = selectors.benchmark_version_get(slug=benchmark or None)
        except selectors.UnknownBenchmark as exc:
            raise CommandError(str(exc)) from None
        out.mkdir(parents=True, exist_ok=True)
        (out / "leaderboard.json").write_text(
            json.dumps(hub.definition(bv, site_url=site_url), indent=2) + "\n")
        all_rows = hub.rows(bv, site_url=site_url)
        names = []
        for i, chunk in enumerate(hub.row_files(all_rows), start=1):
            name = "rows.json" if i == 1 else f"rows-{i}.json"
            (out / name).write_text(json.dumps(chunk, indent=2) + "\n")
            names.append(name)
        shown = sum(r["status"] == "display" for r in all_rows)
        self.stdout.write(f"{bv.slug}: {len(all_rows)} rows ({shown} shown, "
                          f"{len(all_rows) - shown} hidden: not ranked by the site) in {out}")
        if names:
            self.stdout.write(f"harbor hub leaderboard create --config {out / 'leaderboard.json'} "
                              f"--rows {out / names[0]}")
