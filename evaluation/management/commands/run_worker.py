"""manage.py run_worker [--queues web,intake,evaluation] [--concurrency N] [--beat] [--name N]

Starts `celery -A config worker` (replacing this process), `--nice N` lower in priority. Intake workers consume the `intake`
queue (uploads validated off the web request; no Docker needed). Evaluation workers consume the
`evaluation` queue with --concurrency sized to the machine (default: its CPU count, since each
job's containers are CPU-bound); one process of the deployment also runs the beat (--beat, or
`celery -A config beat`) for the reaper. With make run's SQLite broker (or the filesystem
broker) its folder is created first.
"""

import os
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run a Celery worker for the web and evaluation queues."

    def add_arguments(self, parser):
        parser.add_argument("--queues", default=f"{settings.CELERY_TASK_DEFAULT_QUEUE},"
                                                 f"{settings.INTAKE_QUEUE},"
                                                 f"{settings.VERIFICATION_QUEUE}")
        parser.add_argument("--name", default="", help="node name (several workers on a host)")
        parser.add_argument("--concurrency", type=int, default=os.cpu_count() or 1)
        parser.add_argument("--beat", action="store_true", help="embed the beat (one per site)")
        parser.add_argument("--loglevel", default="INFO")
        parser.add_argument("--nice", type=int, default=0,
                            help="raise the worker's niceness by this much (intake workers on a "
                                 "web machine: readers win the CPU, R14)")

    def handle(self, *args, queues, concurrency, beat, loglevel, name, nice, **options):
        opts = settings.CELERY_BROKER_TRANSPORT_OPTIONS
        if settings.CELERY_BROKER_URL.startswith("filesystem"):
            for key in ("data_folder_in", "data_folder_out", "processed_folder"):
                Path(opts[key]).mkdir(parents=True, exist_ok=True)
        elif settings.CELERY_BROKER_URL.startswith("sqla+sqlite"):
            settings.BROKER_SQLITE_FILE.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", queues,
                "--concurrency", str(concurrency), "--loglevel", loglevel]
        if name:
            argv += ["-n", f"{name}@%h"]
        if beat:
            schedule = Path(settings.BASE_DIR) / "var" / "celerybeat-schedule"
            schedule.parent.mkdir(parents=True, exist_ok=True)
            argv += ["--beat", "--schedule", str(schedule)]
        if nice:
            os.nice(nice)  # inherited by the exec'd worker and its pool processes
        self.stdout.write(" ".join(argv[1:]))
        self.stdout.flush()
        os.execv(sys.executable, argv)  # noqa: S606 - replaces this process with the worker
