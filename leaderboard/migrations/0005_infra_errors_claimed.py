"""LeaderboardEntry.infra_errors_claimed. Entries of submissions with claimed infrastructure
errors (whose site outcome submissions 0004 changed) lose their task vectors, so the next
rebuild (any publish or take-down) rebuilds every entry once from the trials."""

from django.db import migrations, models
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce


def _fill(apps, schema_editor):
    Entry = apps.get_model("leaderboard", "LeaderboardEntry")
    Trial = apps.get_model("submissions", "Trial")
    claimed = Coalesce(Subquery(
        Trial.objects.filter(submission_id=OuterRef("submission_id"),
                             claimed_outcome="infra_error")
        .values("submission_id").annotate(n=Count("pk")).values("n")[:1]), 0)
    Entry.objects.update(infra_errors_claimed=claimed)
    Entry.objects.filter(infra_errors_claimed__gt=0).update(task_rates={})


class Migration(migrations.Migration):

    dependencies = [
        ("leaderboard", "0004_claims_beside_site_outcomes"),
        ("submissions", "0004_trial_infra_confirmed"),
    ]

    operations = [
        migrations.AddField(
            model_name="leaderboardentry",
            name="infra_errors_claimed",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(_fill, migrations.RunPython.noop, elidable=False),
    ]
