"""manage.py screen_trials [--submission ID ...]

Apply the reward-hacking screen's current rules (evaluation/screen_rules.toml) to the counted
passes of verified, checked, discrepant and published submissions (all of them, or the ones
named), from their stored trajectories and their last replay's activity. Run it after adding a
rule. A trial that newly trips a rule is flagged and counts as a failure; one that no longer
trips is unflagged; published submissions' aggregates are rebuilt. Prints a JSON report.
"""

import json

from django.core.management.base import BaseCommand

from submissions.models import Submission
from submissions.services import RESCREENABLE, submission_rescreen


class Command(BaseCommand):
    help = "Screen verified submissions' counted passes again with the current rules."

    def add_arguments(self, parser):
        parser.add_argument("--submission", type=int, action="append", default=None,
                            help="a submission id (repeatable); default: every verified one")

    def handle(self, *args, submission, **options):
        subs = Submission.objects.filter(status__in=RESCREENABLE, is_reconstructed=False)
        if submission:
            subs = subs.filter(pk__in=submission)
        report = {}
        for sub in subs.select_related("agent__harness").order_by("pk"):
            if sub.verification_jobs.exists():
                report[sub.pk] = submission_rescreen(submission=sub)
        self.stdout.write(json.dumps(report, indent=2))
