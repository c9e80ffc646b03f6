"""Each entry keeps a digest of what the rebuild wrote on it and its category rows, so a
rebuild rewrites only the rows whose numbers changed. Existing rows get "", which no
rebuild computes: the first rebuild after this migration rewrites each of them once."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('leaderboard', '0004_entry_standing'),
    ]

    operations = [
        migrations.AddField(
            model_name='leaderboardentry',
            name='digest',
            field=models.CharField(blank=True, default='', editable=False, max_length=32),
        ),
    ]
