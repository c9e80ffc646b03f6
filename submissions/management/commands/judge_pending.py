"""manage.py judge_pending

Re-verify every submission whose X-ray trials are "awaiting judge" (graded while no judge was
configured), now that XRAY_JUDGE_URL is set, or whose passes await the trajectory judge, now
that TRAJECTORY_JUDGE_URL is set: each gets a new verification job, whose re-grade
asks the judge (cached judgements cost nothing). Submissions still queued or verifying are
left to that run; published ones never wait (publishing is refused while trials await the
judge). Prints the report as JSON; exits 1 when no judge is configured.
"""

import json

from django.core.management.base import BaseCommand, CommandError

from submissions.services import SubmissionError, judge_pending_requeue


class Command(BaseCommand):
    help = "Re-verify submissions whose trials await the X-ray or the trajectory judge."

    def handle(self, *args, **options):
        try:
            report = judge_pending_requeue()
        except SubmissionError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps(report, indent=2))
