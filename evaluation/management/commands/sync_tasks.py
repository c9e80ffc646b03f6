"""manage.py sync_tasks [--tasks-dir DIR] [--new-version NAME@VERSION]

Registers the benchmark versions defined by the task sources (settings.TASK_SOURCES, directories
or git repositories pinned to a commit, or one --tasks-dir): each ``<source>/benchmarks/<name>@<version>.toml`` lists its task packages and
their content digests. Running it twice is harmless. A registered version never changes: a
package that was changed or added shows up as "unreleased" and a manifest that disagrees with
the catalogue as a conflict (exit status 1); --new-version writes the next version's manifest
from the packages as they are, then registers it.
"""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from evaluation.services import benchmark_tasks_sync, benchmark_version_release
from evaluation.task_sources import TaskSourceError, task_source_dirs


class Command(BaseCommand):
    help = "Register the benchmark versions of the task sources (idempotent, never changes one)."

    def add_arguments(self, parser):
        parser.add_argument("--tasks-dir", type=Path, action="append", dest="sources",
                            help="a task source (default: settings.TASK_SOURCES)")
        parser.add_argument("--new-version", metavar="NAME@VERSION",
                            help="first write a new version holding the packages as they are now")

    def handle(self, *args, sources, new_version, **options):
        try:
            sources = task_source_dirs(sources or settings.TASK_SOURCES)
        except TaskSourceError as exc:
            raise CommandError(str(exc)) from None
        if new_version:
            if len(sources) != 1:
                raise CommandError("--new-version needs exactly one task source (--tasks-dir)")
            try:
                path = benchmark_version_release(tasks_dir=sources[0], slug=new_version)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(f"wrote {path}; commit it with the packages")
        failed = False
        for source in sources:
            report = benchmark_tasks_sync(tasks_dir=source)
            self.stdout.write("\n".join(report.lines()))
            failed = failed or not report.ok
        if failed:
            raise CommandError("some packages or versions were not registered (see above)")
