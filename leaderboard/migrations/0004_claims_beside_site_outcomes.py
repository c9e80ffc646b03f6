"""Claims beside the site's counts in the precomputed rows. Existing rows get their entry-level
counts here; their task cells get the claimed codes and flags at the next full rebuild (until
then a cell shows no claim, which the template treats as agreeing)."""

from django.db import migrations, models
from django.db.models import Count, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce


def _fill_counts(apps, schema_editor):
    Entry = apps.get_model("leaderboard", "LeaderboardEntry")
    Trial = apps.get_model("submissions", "Trial")

    def count(condition):
        return Coalesce(Subquery(
            Trial.objects.filter(submission_id=OuterRef("submission_id")).filter(condition)
            .values("submission_id").annotate(n=Count("pk")).values("n")[:1]), 0)

    Entry.objects.update(claimed_successes=count(Q(claimed_success=True)),
                         flagged_trials=count(~Q(flags=[])))


class Migration(migrations.Migration):

    dependencies = [
        ('leaderboard', '0003_aggregate_version_task_rates'),
        ('submissions', '0003_trial_claimed_and_site_outcome'),
    ]

    operations = [
        migrations.AddField(
            model_name='leaderboardentry',
            name='claimed_successes',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='leaderboardentry',
            name='flagged_trials',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='taskcell',
            name='claimed_outcomes',
            field=models.CharField(blank=True, default='', max_length=20),
        ),
        migrations.AddField(
            model_name='taskcell',
            name='flags',
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.RunPython(_fill_counts, migrations.RunPython.noop, elidable=False),
    ]
