"""Rank and tie group move from the wide entry row into a narrow ``EntryStanding`` row: a
publish shifts about half the ranks, and rewriting the narrow rows costs a tenth of
rewriting the entries. The existing ranks and tie groups are copied over."""

import django.db.models.deletion
from django.db import migrations, models


def copy_standings(apps, schema_editor):
    entry = apps.get_model("leaderboard", "LeaderboardEntry")
    standing = apps.get_model("leaderboard", "EntryStanding")
    standing.objects.bulk_create(
        [standing(entry_id=pk, benchmark_version_id=bv, rank=rank, tie_group=group)
         for pk, bv, rank, group in entry.objects.values_list(
             "pk", "benchmark_version_id", "rank", "tie_group").iterator()],
        batch_size=1000)


class Migration(migrations.Migration):

    dependencies = [
        ('evaluation', '0002_judge_cache'),
        ('leaderboard', '0003_entry_cell_vectors'),
    ]

    operations = [
        migrations.CreateModel(
            name='EntryStanding',
            fields=[
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('entry', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='standing', serialize=False, to='leaderboard.leaderboardentry')),
                ('benchmark_version', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='evaluation.benchmarkversion')),
                ('rank', models.PositiveIntegerField()),
                ('tie_group', models.PositiveIntegerField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'indexes': [models.Index(fields=['benchmark_version', 'rank'], name='standing_version_rank')],
            },
        ),
        migrations.RunPython(copy_standings, migrations.RunPython.noop),
        migrations.AlterModelOptions(
            name='leaderboardentry',
            options={'base_manager_name': 'objects', 'ordering': ['benchmark_version', 'standing__rank', 'agent__display_name'], 'verbose_name_plural': 'leaderboard entries'},
        ),
        migrations.RemoveIndex(
            model_name='leaderboardentry',
            name='entry_version_rank',
        ),
        migrations.RemoveField(
            model_name='leaderboardentry',
            name='rank',
        ),
        migrations.RemoveField(
            model_name='leaderboardentry',
            name='tie_group',
        ),
    ]
