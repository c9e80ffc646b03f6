"""manage.py rescore (--category SLUG | --submission ID [--submission ID ...])
                     [--reason TEXT] [--dry-run] [--wait [--timeout SECONDS]]

Re-score published submissions after a grader update (R11): one re-score job per submission on
the evaluation queue (a verification worker re-grades every trial's stored output in Docker
with the current graders); each submission's trials and leaderboard rows switch in one
transaction when its job finishes, and a changed score is kept in its history. `--category`
picks the published submissions with a trial of that category not yet scored by the category's
current grader version, so running it again after the jobs finished picks none. `--wait`
waits for the jobs and prints their outcome and wall time per trial.
"""

import time

from django.core.management.base import BaseCommand, CommandError

from submissions.models import FINAL_JOB_STATUSES, TrialCheck, VerificationJob
from submissions.services import SubmissionError, rescore_candidates, submission_rescore


class Command(BaseCommand):
    help = "Re-score published submissions with the current graders (R11)."

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--category", help="category slug whose grader changed")
        which.add_argument("--submission", type=int, action="append", dest="submissions",
                           metavar="ID", help="a published submission (repeatable)")
        parser.add_argument("--reason", default="", help="kept with the score history")
        parser.add_argument("--dry-run", action="store_true", help="list, queue nothing")
        parser.add_argument("--wait", action="store_true", help="wait for the jobs to finish")
        parser.add_argument("--timeout", type=float, default=3600.0)

    def handle(self, *args, category, submissions, reason, dry_run, wait, timeout, **options):
        try:
            todo = rescore_candidates(category=category, submission_ids=submissions)
        except SubmissionError as exc:
            raise CommandError(str(exc)) from exc
        if not todo:
            self.stdout.write("nothing to re-score: every published score is from the "
                              "current grader version")
            return
        jobs = []
        for sub in todo:
            if dry_run:
                self.stdout.write(f"would re-score submission {sub.pk} ({sub.agent})")
                continue
            job = submission_rescore(submission=sub, reason=reason or (
                f"grader update: {category}" if category else "re-score requested"))
            jobs.append(job.pk)
            self.stdout.write(f"submission {sub.pk}: re-score job {job.pk} queued")
        if wait and jobs:
            self._wait(jobs, timeout)

    def _wait(self, job_ids: list[int], timeout: float) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if not VerificationJob.objects.filter(pk__in=job_ids).exclude(
                    status__in=FINAL_JOB_STATUSES).exists():
                break
            time.sleep(1)
        else:
            raise CommandError(f"jobs not finished after {timeout:.0f} s: is a worker running?")
        for job in VerificationJob.objects.filter(pk__in=job_ids).order_by("pk"):
            trials = TrialCheck.objects.filter(job=job, trial__isnull=False).count()
            wall = ((job.finished_at - job.started_at).total_seconds()
                    if job.finished_at and job.started_at else 0.0)
            per = f"{wall / trials:.2f} s per trial" if trials else "no trial"
            headline = (job.summary or {}).get("headline") or job.last_error
            self.stdout.write(f"job {job.pk} ({job.status}): {headline}; {trials} trials in "
                              f"{wall:.1f} s ({per})")
