"""Trial.infra_confirmed; a claimed infrastructure error the site has not confirmed becomes a
failure (or a pass where the site graded its output as one), flagged infra_unconfirmed.
The precomputed leaderboard rows follow at the next rebuild (publish or take-down)."""

from django.db import migrations, models


def _unconfirmed(apps, schema_editor):
    Trial = apps.get_model("submissions", "Trial")
    for trial in Trial.objects.filter(claimed_outcome="infra_error").iterator():
        passed = trial.verified_reward is not None and trial.verified_reward >= 1.0
        trial.outcome, trial.success = ("passed", True) if passed else ("failed", False)
        trial.flags = [f for f in (trial.flags or []) if f != "infra_unconfirmed"] + [
            "infra_unconfirmed"]
        trial.save(update_fields=["outcome", "success", "flags"])


class Migration(migrations.Migration):

    dependencies = [
        ("submissions", "0003_trial_claimed_and_site_outcome"),
    ]

    operations = [
        migrations.AddField(
            model_name="trial",
            name="infra_confirmed",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(_unconfirmed, migrations.RunPython.noop, elidable=False),
    ]
