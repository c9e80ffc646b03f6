"""manage.py sync_tasks [--tasks-dir DIR] [--allow-changes]

Registers the Harbor packages under tasks/ as benchmark version
healthagentbench-synthetic@1.0 (separate from the paper's catalogue). Running it twice is
harmless. Exits non-zero when a package is invalid or its content changed under a registered
name (pass --allow-changes while developing a package that has never been run).
"""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Register the task packages under tasks/ as healthagentbench-synthetic@1.0."

    def add_arguments(self, parser):
        parser.add_argument("--tasks-dir", type=Path, default=Path(settings.BASE_DIR) / "tasks")
        parser.add_argument("--allow-changes", action="store_true",
                            help="apply content changes to already registered tasks")

    def handle(self, *args, tasks_dir, allow_changes, **options):
        from evaluation.services import benchmark_tasks_sync

        if not Path(tasks_dir).is_dir():
            raise CommandError(f"{tasks_dir} is not a directory")
        report = benchmark_tasks_sync(tasks_dir=Path(tasks_dir), allow_changes=allow_changes)
        self.stdout.write("\n".join(report.lines()))
        if not report.ok:
            raise CommandError("some packages were not registered (see above)")
