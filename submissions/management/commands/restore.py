"""manage.py restore BACKUP [--force] [--check]

Rebuild this site (its DATABASE_URL and MEDIA_ROOT) from a backup written by `manage.py backup`.
Refuses a backup whose files do not match the manifest's digests, and a database or media root
that is not empty unless --force. After the restore the schema is migrated to this code and the
verification jobs and uploads that were in flight are requeued. --check only verifies the digests.
"""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from submissions.backup import BackupError, backup_restore, backup_verify


class Command(BaseCommand):
    help = "Restore the database and the media store from a backup (digests checked first)."

    def add_arguments(self, parser):
        parser.add_argument("backup", type=Path, help="a hab-backup-<time> folder")
        parser.add_argument("--force", action="store_true",
                            help="replace a database and media root that are not empty")
        parser.add_argument("--check", action="store_true",
                            help="only verify the backup's digests; change nothing")

    def handle(self, *args, backup, force, check, **options):
        try:
            if check:
                manifest = backup_verify(path=backup)
                self.stdout.write(f"{backup}: {len(manifest['files'])} files match the manifest")
                return
            report = backup_restore(path=backup, force=force)
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        report["seconds"] = round(report["seconds"], 3)
        self.stdout.write(json.dumps(report, indent=2))
