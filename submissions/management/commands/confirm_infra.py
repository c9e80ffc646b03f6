"""Confirm (or, with --revoke, take back) a trial's claimed infrastructure error as a maintainer.

    python manage.py confirm_infra <trial_id> --reason "the task image's registry was down"
    python manage.py confirm_infra <trial_id> --revoke --reason "..."

The same service as the Moderation page (submissions.services.infra_error_confirm /
infra_error_revoke): the reason is required, goes to the submission's audit log and is shown on
its page; a published submission's leaderboard rows change in the same transaction.
"""

from django.core.management.base import BaseCommand, CommandError

from submissions import services
from submissions.models import Trial


class Command(BaseCommand):
    help = "Confirm a claimed infrastructure error of a trial (or --revoke a confirmation)."

    def add_arguments(self, parser):
        parser.add_argument("trial_id", type=int)
        parser.add_argument("--reason", required=True, help="why (public, audited)")
        parser.add_argument("--revoke", action="store_true",
                            help="take a confirmation back: the trial counts as a failure again")

    def handle(self, *args, trial_id, reason, revoke, **options):
        trial = Trial.objects.select_related("benchmark_task").filter(pk=trial_id).first()
        if trial is None:
            raise CommandError(f"no trial {trial_id}")
        try:
            if revoke:
                trial = services.infra_error_revoke(trial=trial, actor=None, reason=reason)
            else:
                trial = services.infra_error_confirm(trial=trial, actor=None, reason=reason)
        except services.SubmissionError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"trial {trial.pk} ({trial.benchmark_task.name} attempt "
                          f"{trial.attempt}): infra_confirmed={trial.infra_confirmed} "
                          f"outcome={trial.outcome}")
