"""Verification levels: Trial.verification_level (filled from what earlier jobs checked),
Submission.coverage, and the status "checked" (every check agreed, not every pass replayed or
re-run). Submissions verified before this keep their status; their badge says what was checked
only after a re-verification fills their coverage."""

from django.conf import settings
from django.db import migrations, models


def _levels(apps, schema_editor):
    Trial = apps.get_model("submissions", "Trial")
    TrialCheck = apps.get_model("submissions", "TrialCheck")
    Trial.objects.filter(submission__is_reconstructed=True).update(
        verification_level="reconstructed")
    Trial.objects.filter(verified_reward__isnull=False).update(verification_level="re-graded")
    replayed = TrialCheck.objects.filter(kind="replay", status="match").values("trial_id")
    Trial.objects.filter(pk__in=replayed).update(verification_level="replayed")


class Migration(migrations.Migration):

    dependencies = [
        ('evaluation', '0001_initial'),
        ('submissions', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='submission',
            name='submission_status_valid',
        ),
        migrations.AddField(
            model_name='submission',
            name='coverage',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name='trial',
            name='verification_level',
            field=models.CharField(choices=[('claimed', 'Claimed (not checked)'), ('re-graded', 'Re-graded'), ('re-run', 'Re-run'), ('replayed', 'Replayed'), ('reconstructed', 'Reconstructed (paper aggregates)')], default='claimed', max_length=20),
        ),
        migrations.AlterField(
            model_name='submission',
            name='status',
            field=models.CharField(choices=[('received', 'Received'), ('validating', 'Validating'), ('rejected', 'Rejected'), ('queued', 'Queued'), ('verifying', 'Verifying'), ('verified', 'Verified'), ('checked', 'Checked (not every pass replayed or re-run)'), ('discrepancy', 'Discrepancy'), ('failed', 'Failed (infrastructure)'), ('published', 'Published'), ('withdrawn', 'Withdrawn')], default='received', max_length=20),
        ),
        migrations.AddConstraint(
            model_name='submission',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['received', 'validating', 'rejected', 'queued', 'verifying', 'verified', 'checked', 'discrepancy', 'failed', 'published', 'withdrawn'])), name='submission_status_valid'),
        ),
        migrations.RunPython(_levels, migrations.RunPython.noop, elidable=False),
    ]
