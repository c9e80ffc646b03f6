"""Trial: the claim moves to claimed_outcome / claimed_success; outcome / success become the
site's (the claim corrected by the site's re-grade, submissions.models.site_outcome)."""

from django.db import migrations, models
from django.db.models import F, Q


def _split(apps, schema_editor):
    Trial = apps.get_model("submissions", "Trial")
    Trial.objects.update(claimed_outcome=F("outcome"), claimed_success=F("success"))
    # Re-graded trials already carry the site's grade: apply it (same rule as site_outcome).
    graded = Trial.objects.filter(verified_reward__isnull=False,
                                  claimed_outcome__in=["passed", "failed"])
    graded.filter(verified_reward__gte=1.0).update(outcome="passed", success=True)
    graded.filter(verified_reward__lt=1.0).update(outcome="failed", success=False)


def _merge(apps, schema_editor):
    Trial = apps.get_model("submissions", "Trial")
    Trial.objects.update(outcome=F("claimed_outcome"), success=F("claimed_success"))


class Migration(migrations.Migration):

    dependencies = [
        ("submissions", "0002_uploads"),
    ]

    operations = [
        migrations.AddField(
            model_name="trial",
            name="claimed_outcome",
            field=models.CharField(
                choices=[("passed", "Passed"), ("failed", "Failed"), ("timeout", "Timeout"),
                         ("agent_error", "Agent error"), ("infra_error", "Infrastructure error")],
                default="failed", max_length=20),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="trial",
            name="claimed_success",
            field=models.BooleanField(default=False),
            preserve_default=False,
        ),
        migrations.RunPython(_split, _merge, elidable=False),
        migrations.AddConstraint(
            model_name="trial",
            constraint=models.CheckConstraint(
                condition=Q(claimed_outcome__in=["passed", "failed", "timeout", "agent_error",
                                                 "infra_error"]),
                name="trial_claimed_outcome_valid"),
        ),
        migrations.AddConstraint(
            model_name="trial",
            constraint=models.CheckConstraint(
                condition=Q(claimed_success=True, claimed_outcome="passed")
                | (Q(claimed_success=False) & ~Q(claimed_outcome="passed")),
                name="trial_claimed_success_iff_passed"),
        ),
    ]
