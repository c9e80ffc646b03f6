from django.db import migrations, models


class Migration(migrations.Migration):
    """BenchmarkVersion.allows_reference_runs: a try-out version, where an upload of one of the
    site's own agents (oracle, nop, replay) is accepted as a labelled reference run.
    sync_tasks sets it from the version's manifest (the synthetic benchmark's says
    true); every version registered before defaults to false until the next sync."""

    dependencies = [
        ('evaluation', '0002_judge_cache'),
    ]

    operations = [
        migrations.AddField(
            model_name='benchmarkversion',
            name='allows_reference_runs',
            field=models.BooleanField(default=False),
        ),
    ]
