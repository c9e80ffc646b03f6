"""Task cells move into their entry: one row per entry instead of one per entry x
task, and the per-task rates as float64 bytes instead of JSON. Derived data: the next publish
or ``leaderboard_recompute`` rebuilds every entry once (entries without vectors trigger it)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('leaderboard', '0002_verification_levels'),
    ]

    operations = [
        migrations.DeleteModel(name='TaskCell'),
        migrations.RemoveField(model_name='leaderboardentry', name='task_rates'),
        migrations.AddField(
            model_name='leaderboardentry',
            name='task_rates',
            field=models.BinaryField(default=b''),
        ),
        migrations.AddField(
            model_name='leaderboardentry',
            name='cell_tasks',
            field=models.TextField(blank=True, default=''),
        ),
        migrations.AddField(
            model_name='leaderboardentry',
            name='cell_outcomes',
            field=models.TextField(blank=True, default=''),
        ),
        migrations.AddField(
            model_name='leaderboardentry',
            name='cell_claimed',
            field=models.TextField(blank=True, default=''),
        ),
        migrations.AddField(
            model_name='leaderboardentry',
            name='cell_flags',
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
