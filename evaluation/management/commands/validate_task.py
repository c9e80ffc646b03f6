"""python manage.py validate_task tasks/<category>/<task_id> [more task dirs] [--all]

Structural checks (Harbor-loadable, metadata complete, the instruction names the output path,
no answers in the build context), then in Docker: builds the task image (network none), runs the
oracle (solution/ copied in, solve.sh run as the agent: must pass in a fresh verifier container),
the nop agent (nothing runs: must fail), and probes from inside an agent container that no hidden
file (by sha256 and by name) and no network is reachable. Prints a report; exits 1 on any failure.
"""

import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from evaluation import task_validation
from evaluation.task_sources import task_source_dirs


class Command(BaseCommand):
    help = "Validate task packages: structure, then oracle/nop/leak checks in Docker."

    def add_arguments(self, parser):
        parser.add_argument("task_dirs", nargs="*", type=Path)
        parser.add_argument("--all", action="store_true", help="every task of every TASK_SOURCES directory")
        parser.add_argument(
            "--structure-only",
            action="store_true",
            help="skip the Docker checks (no engine needed)",
        )
        parser.add_argument("--keep", type=Path, help="keep run outputs in this directory")

    def handle(self, *args, **opts):
        task_dirs = list(opts["task_dirs"])
        if opts["all"]:
            task_dirs += sorted(p.parent for source in task_source_dirs()
                                for p in source.glob("*/*/task.toml"))
        if not task_dirs:
            raise CommandError(
                "name at least one task directory (tasks/<category>/<task_id>) or --all"
            )
        failed = []
        for task_dir in task_dirs:
            if not self._validate(task_dir, opts):
                failed.append(str(task_dir))
        self.stdout.write("")
        if failed:
            raise CommandError(
                f"{len(failed)} of {len(task_dirs)} task(s) failed: {', '.join(failed)}"
            )
        self.stdout.write(self.style.SUCCESS(f"all {len(task_dirs)} task(s) valid"))

    def _validate(self, task_dir: Path, opts) -> bool:
        t0 = time.time()
        self.stdout.write(self.style.MIGRATE_HEADING(f"== {task_dir}"))
        checks = task_validation.structural_checks(task_dir, base_image=settings.TASK_BASE_IMAGE)
        for c in checks:
            self._line(c)
        structural_ok = all(c.ok for c in checks)
        if opts["structure_only"]:
            pass
        elif not structural_ok:
            self.stdout.write("SKIP  Docker checks (fix the structural failures first)")
        else:
            keep = opts.get("keep")
            checks += task_validation.docker_checks(
                task_dir,
                keep_dir=(keep / task_dir.parent.name / task_dir.name) if keep else None,
                log=lambda line: self._line_text(line),
            )
        ok = all(c.ok for c in checks)
        verdict = self.style.SUCCESS("VALID") if ok else self.style.ERROR("INVALID")
        self.stdout.write(
            f"{verdict}  {task_dir}: {sum(c.ok for c in checks)}/{len(checks)} checks passed "
            f"in {time.time() - t0:.1f} s"
        )
        return ok

    def _line(self, check):
        self._line_text(check.line())

    def _line_text(self, line: str):
        head, _, rest = line.partition("  ")
        style = self.style.SUCCESS if head == "PASS" else self.style.ERROR
        self.stdout.write(f"{style(head)}  {rest}")
