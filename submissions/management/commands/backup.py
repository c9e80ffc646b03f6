"""manage.py backup DEST [--keep N]

Write one consistent backup of the site under DEST (`hab-backup-<UTC time>/`: the database dump,
the media store, a manifest of digests) while it serves and workers verify, then keep the N
newest. Prints the backup's path, size and time as JSON. docs/deploy.md#backup-and-restore.
"""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from submissions.backup import BackupError, backup_create


class Command(BaseCommand):
    help = "Back up the database and the media store, with a manifest of digests."

    def add_arguments(self, parser):
        parser.add_argument("dest", type=Path, help="folder that holds the backups")
        parser.add_argument("--keep", type=int, default=None,
                            help="keep only the N newest complete backups in DEST")

    def handle(self, *args, dest, keep, **options):
        if keep is not None and keep < 1:
            raise CommandError("--keep must be at least 1")
        try:
            result = backup_create(dest=dest, keep=keep)
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        media = result.manifest["media"]
        if not media["copied"]:
            self.stderr.write(f"media not copied: {media['note']}")
        elif media["missing"]:
            self.stderr.write(f"archives deleted after the snapshot: {media['missing']}")
        self.stdout.write(json.dumps({
            "path": str(result.path), "bytes": result.bytes,
            "seconds": round(result.seconds, 3), "files": len(result.manifest["files"]),
            "jobs_in_flight": result.manifest["database"]["jobs_in_flight"],
            "pruned": result.pruned}, indent=2))
