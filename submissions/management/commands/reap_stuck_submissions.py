"""manage.py reap_stuck_submissions [--batch N]

What the beat runs every minute (the `evaluation.reap_stuck_submissions` task): requeue verification jobs
whose worker stopped heartbeating (and remove their containers), fail those past the attempt
cap, enqueue `queued` submissions that have no live job, re-publish jobs the broker lost.
Prints the report as JSON. Safe to run by hand or from cron next to the beat (cache.add lock).
"""

import json

from django.core.management.base import BaseCommand

from submissions.verification import reap_stuck_submissions


class Command(BaseCommand):
    help = "Requeue stuck verification jobs and enqueue forgotten queued submissions."

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=None)

    def handle(self, *args, batch, **options):
        self.stdout.write(json.dumps(reap_stuck_submissions(batch=batch), indent=2))
