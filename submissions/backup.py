"""Backup and restore of a whole site: the database, the media store and a manifest of digests.

A backup is one directory, `hab-backup-<UTC time>/`, written under a hidden `.partial` name and
renamed when complete (a half-written backup never looks like one):

* `database.pgdump` (PostgreSQL: `pg_dump --format=custom` of an exported snapshot) or
  `database.sqlite3` (SQLite's online backup API), taken while the site serves and workers verify;
* `media/`: the filesystem upload store (archives, stored trees: outputs, trajectories, evidence);
* `manifest.json`: sha256 and size of every file, the time, the app version, the migration state
  read in the dump's own snapshot, and the jobs that were in flight; `manifest.sha256` its digest.

Consistency: media is copied after the database snapshot. A file the snapshot refers to was
complete before the row that names it committed, and stored files are never rewritten past
intake (submissions.intake writes an archive once, a tree while the upload validates); uploads
still in intake are validated again after a restore, which rewrites their tree. Object storage
(USE_S3) is not copied: the provider's versioning or a mirror does it (docs/deploy.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import time
import tomllib
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.management import call_command
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone

from submissions.intake import intake_publish
from submissions.models import (
    ACTIVE_JOB_STATUSES,
    JobStatus,
    Submission,
    SubmissionEvent,
    SubmissionStatus,
    VerificationJob,
)
from submissions.verification.jobs import verification_publish

FORMAT = 1
MANIFEST = "manifest.json"
MANIFEST_DIGEST = "manifest.sha256"
DB_POSTGRES = "database.pgdump"
DB_SQLITE = "database.sqlite3"
MEDIA = "media"
PREFIX = "hab-backup-"
_CHUNK = 1 << 20
_PARTIAL_MAX_AGE_S = 24 * 3600


class BackupError(Exception):
    """A backup that cannot be written, or one that must not be restored (the message says why)."""


@dataclass(frozen=True)
class BackupResult:
    path: Path
    manifest: dict
    seconds: float
    bytes: int
    pruned: list[str]


# --- writing a backup ----------------------------------------------------------------------------


def backup_create(*, dest: Path, keep: int | None = None) -> BackupResult:
    """Write one complete backup under `dest` (never a partial one), then keep only the `keep`
    newest complete backups there. Safe while the site serves and workers verify."""
    started = time.monotonic()
    created = timezone.now().astimezone(UTC)
    final = Path(dest) / f"{PREFIX}{created:%Y%m%dT%H%M%S}{created.microsecond // 1000:03d}Z"
    work = final.with_name(f".{final.name}.partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        database = _dump_database(work)
        files, media = _copy_media(work / MEDIA)
        db_file = work / database["file"]
        files[database["file"]] = {"sha256": _sha256(db_file), "bytes": db_file.stat().st_size}
        archives = set(database.pop("archives"))
        # An archive the snapshot names but the copy lacks: deleted in between (refused then).
        media["missing"] = sorted(archives - {n.removeprefix(f"{MEDIA}/") for n in files}
                                  ) if media["copied"] else []
        manifest = {"format": FORMAT, "created_at": created.isoformat(), "app": _app_version(),
                    "database": database, "media": media, "files": dict(sorted(files.items()))}
        text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
        (work / MANIFEST).write_text(text)
        (work / MANIFEST_DIGEST).write_text(hashlib.sha256(text.encode()).hexdigest() + "\n")
        os.rename(work, final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    size = sum(f["bytes"] for f in manifest["files"].values())
    return BackupResult(path=final, manifest=manifest, seconds=time.monotonic() - started,
                        bytes=size, pruned=_prune(Path(dest), keep))


def _dump_database(work: Path) -> dict:
    if connection.vendor == "postgresql":
        return _dump_postgres(work)
    if connection.vendor == "sqlite":
        return _dump_sqlite(work)
    raise BackupError(f"no backup recipe for the {connection.vendor} database")


def _dump_postgres(work: Path) -> dict:
    """pg_dump of a snapshot exported by a repeatable-read transaction that stays open while it
    runs; the migration state and the in-flight jobs are read in that same snapshot."""
    import psycopg  # the PostgreSQL driver, present only where PostgreSQL is used

    tool = _pg_major("pg_dump")
    sd = connection.settings_dict
    with psycopg.connect(**_pg_conninfo(sd), autocommit=False) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        server = conn.info.server_version // 10000
        if tool < server:
            raise BackupError(f"pg_dump {tool} cannot dump a PostgreSQL {server} server: install "
                              f"the PostgreSQL {server} client (postgresql-client-{server})")
        with conn.cursor() as cur:
            cur.execute("SELECT pg_export_snapshot()")
            snapshot = cur.fetchone()[0]
            facts = _snapshot_facts(cur)
        out = work / DB_POSTGRES
        argv = ["pg_dump", "--format=custom", f"--snapshot={snapshot}", f"--file={out}"]
        # The connection goes in the environment (_pg_env), never on the command line.
        done = subprocess.run(argv, env=_pg_env(sd), capture_output=True, text=True,  # noqa: S603
                              check=False)
        if done.returncode != 0:
            raise BackupError(f"pg_dump failed: {done.stderr.strip()}")
    return {"vendor": "postgresql", "file": DB_POSTGRES, "server_major": server,
            "pg_dump_major": tool, **facts}


def _dump_sqlite(work: Path) -> dict:
    """SQLite's online backup API: one consistent copy while other connections write."""
    out = work / DB_SQLITE
    connection.ensure_connection()
    dst = sqlite3.connect(out)
    try:
        connection.connection.backup(dst)
        facts = _snapshot_facts(dst.cursor())
    finally:
        dst.close()
    return {"vendor": "sqlite", "file": DB_SQLITE, **facts}


def _snapshot_facts(cur) -> dict:
    """What the manifest says about the dumped data, read from the dump's own snapshot (raw SQL:
    the same statements on psycopg and sqlite3 cursors)."""
    cur.execute("SELECT app, name FROM django_migrations ORDER BY app, name")
    migrations: dict[str, list[str]] = {}
    for app, name in cur.fetchall():
        migrations.setdefault(app, []).append(name)
    sub, job = Submission._meta.db_table, VerificationJob._meta.db_table
    cur.execute(f"SELECT status, COUNT(*) FROM {sub} GROUP BY status ORDER BY status")  # noqa: S608
    statuses = dict(cur.fetchall())
    cur.execute(f"SELECT archive FROM {sub} WHERE archive <> '' AND status <> 'refused'")  # noqa: S608
    archives = [row[0] for row in cur.fetchall()]
    cur.execute(f"SELECT id FROM {job} WHERE status IN ('pending', 'running') ORDER BY id")  # noqa: S608
    in_flight = [row[0] for row in cur.fetchall()]
    return {"migrations": {app: names[-1] for app, names in migrations.items()},
            "migrations_applied": sum(len(n) for n in migrations.values()),
            "submissions": statuses, "jobs_in_flight": in_flight, "archives": archives}


def _copy_media(dest: Path) -> tuple[dict, dict]:
    """Copy MEDIA_ROOT file by file, hashing on the way. Object storage is not copied."""
    backend = settings.STORAGES["default"]["BACKEND"]
    if not backend.endswith("FileSystemStorage"):
        return {}, {"copied": False, "backend": backend,
                    "note": "object storage: back it up with the provider's versioning or a "
                            "mirror (docs/deploy.md)"}
    root = Path(settings.MEDIA_ROOT)
    files: dict[str, dict] = {}
    for src in sorted(_regular_files(root)):
        rel = src.relative_to(root).as_posix()
        try:
            digest, size = _copy_hashed(src, dest / rel)
        except FileNotFoundError:  # deleted after the snapshot (a refused upload's archive)
            continue
        files[f"{MEDIA}/{rel}"] = {"sha256": digest, "bytes": size}
    return files, {"copied": True, "backend": backend, "files": len(files)}


def _regular_files(root: Path):
    if not root.is_dir():
        return
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                yield path


def _copy_hashed(src: Path, dst: Path) -> tuple[str, int]:
    dst.parent.mkdir(parents=True, exist_ok=True)
    h, size = hashlib.sha256(), 0
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while chunk := fin.read(_CHUNK):
            h.update(chunk)
            fout.write(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _app_version() -> dict:
    project = tomllib.loads((Path(settings.BASE_DIR) / "pyproject.toml").read_text())["project"]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=settings.BASE_DIR,  # noqa: S607
                                capture_output=True, text=True, check=False).stdout.strip()
    except OSError:  # no git in a deployed image: the release version alone names the code
        commit = ""
    return {"name": project["name"], "version": project["version"], "commit": commit or None}


def _prune(dest: Path, keep: int | None) -> list[str]:
    """Remove all but the `keep` newest complete backups (names sort by time), and the partial
    folders of backups killed more than a day ago (a running backup's is younger)."""
    if not keep:
        return []
    for partial in dest.glob(f".{PREFIX}*.partial"):
        if time.time() - partial.stat().st_mtime > _PARTIAL_MAX_AGE_S:
            shutil.rmtree(partial, ignore_errors=True)
    complete = sorted(p for p in dest.glob(f"{PREFIX}*") if (p / MANIFEST).is_file())
    old = complete[:-keep]
    for path in old:
        shutil.rmtree(path)
    return [p.name for p in old]


# --- the PostgreSQL client tools -----------------------------------------------------------------


def _pg_major(tool: str) -> int:
    try:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True,  # noqa: S603
                             check=True).stdout
    except FileNotFoundError as exc:
        raise BackupError(f"{tool} is not installed (Debian: apt-get install "
                          "postgresql-client)") from exc
    match = re.search(r"\b(\d+)(?:\.\d+)?", out)
    if match is None:
        raise BackupError(f"cannot read the version of {tool}: {out!r}")
    return int(match.group(1))


def _pg_conninfo(sd: dict) -> dict:
    info = {"dbname": sd["NAME"], "user": sd.get("USER") or None,
            "password": sd.get("PASSWORD") or None, "host": sd.get("HOST") or None,
            "port": sd.get("PORT") or None}
    return {k: v for k, v in info.items() if v}


def _pg_env(sd: dict) -> dict:
    # libpq's variables, so the password never appears on a command line (ps shows those).
    names = {"dbname": "PGDATABASE", "user": "PGUSER", "password": "PGPASSWORD",
             "host": "PGHOST", "port": "PGPORT"}
    return {**os.environ, **{names[k]: str(v) for k, v in _pg_conninfo(sd).items()}}


# --- checking and restoring ----------------------------------------------------------------------


def backup_verify(*, path: Path) -> dict:
    """The manifest of the backup at `path` once every file matches its digest and size (and no
    file is missing or extra); BackupError listing what differs otherwise. Reads every byte."""
    path = Path(path)
    try:
        text = (path / MANIFEST).read_text()
        recorded = (path / MANIFEST_DIGEST).read_text().strip()
    except FileNotFoundError as exc:
        raise BackupError(f"{path} is not a complete backup: {exc.filename} is missing") from exc
    if hashlib.sha256(text.encode()).hexdigest() != recorded:
        raise BackupError(f"{path}: {MANIFEST} does not match {MANIFEST_DIGEST}; not restored")
    manifest = json.loads(text)
    if manifest.get("format") != FORMAT:
        raise BackupError(f"{path}: backup format {manifest.get('format')} is not {FORMAT}")
    problems = []
    for rel, want in manifest["files"].items():
        f = path / rel
        if PurePosixPath(rel).is_absolute() or ".." in PurePosixPath(rel).parts:
            problems.append(f"{rel}: not a path inside the backup")  # restore writes there
        elif not f.is_file():
            problems.append(f"{rel}: missing")
        elif f.stat().st_size != want["bytes"] or _sha256(f) != want["sha256"]:
            problems.append(f"{rel}: sha256 or size differs from the manifest")
    listed = set(manifest["files"]) | {MANIFEST, MANIFEST_DIGEST}
    problems += [f"{rel}: not in the manifest" for rel in sorted(
        p.relative_to(path).as_posix() for p in _regular_files(path)) if rel not in listed]
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more"
                                              if len(problems) > 10 else "")
        raise BackupError(f"{path} does not match its manifest, not restored: {shown}")
    return manifest


def backup_restore(*, path: Path, force: bool = False) -> dict:
    """Rebuild this site (the configured database and MEDIA_ROOT) from the backup at `path`:
    digests checked first, a non-empty database or media root replaced only with `force`, the
    schema migrated to this code, then the jobs that were in flight requeued (once)."""
    started = time.monotonic()
    manifest = backup_verify(path=Path(path))
    db = manifest["database"]
    if db["vendor"] != connection.vendor:
        raise BackupError(f"the backup holds a {db['vendor']} database; this site uses "
                          f"{connection.vendor}")
    _refuse_newer_schema(db["migrations"])
    tables = connection.introspection.table_names()
    media_root = Path(settings.MEDIA_ROOT)
    media_files = manifest["media"]["copied"] and any(_regular_files(media_root))
    if (tables or media_files) and not force:
        held = [f"the database {connection.settings_dict['NAME']} holds {len(tables)} tables"
                ] if tables else []
        held += [f"MEDIA_ROOT {media_root} holds files"] if media_files else []
        raise BackupError(f"{' and '.join(held)}; restore --force replaces them")
    if db["vendor"] == "postgresql":
        _restore_postgres(Path(path) / db["file"], db, clean=bool(tables))
    else:
        _restore_sqlite(Path(path) / db["file"])
    if manifest["media"]["copied"]:
        _restore_media(Path(path), manifest, media_root)
    migrated = _migrate()
    report = backup_requeue_in_flight(backup_name=Path(path).name)
    return {"seconds": time.monotonic() - started, "migrated": migrated, **report,
            "media_restored": manifest["media"]["copied"], "created_at": manifest["created_at"]}


def _refuse_newer_schema(migrations: dict[str, str]) -> None:
    """A backup of a newer release holds tables this code does not know: restoring it here
    would leave a site that fails at its first query, so it is refused before anything changes."""
    known = MigrationLoader(None, ignore_no_migrations=True).disk_migrations
    apps = {app for app, _name in known}
    newer = [f"{app} {name}" for app, name in sorted(migrations.items())
             if app in apps and (app, name) not in known]
    if newer:
        raise BackupError("the backup was made by a newer release (migrations unknown here: "
                          f"{', '.join(newer)}); deploy that release, then restore")


def _restore_postgres(dump: Path, db: dict, *, clean: bool) -> None:
    tool = _pg_major("pg_restore")
    if tool < db["pg_dump_major"]:
        raise BackupError(f"pg_restore {tool} cannot read a dump of pg_dump "
                          f"{db['pg_dump_major']}: install that PostgreSQL client")
    connection.close()
    # Owners and grants are the old host's roles; the restoring role owns everything here.
    argv = ["pg_restore", "--no-owner", "--no-privileges", "--exit-on-error",
            "--single-transaction", *(["--clean", "--if-exists"] if clean else []),
            f"--dbname={connection.settings_dict['NAME']}", str(dump)]
    done = subprocess.run(argv, env=_pg_env(connection.settings_dict),  # noqa: S603
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BackupError(f"pg_restore failed (nothing restored): {done.stderr.strip()}")


def _restore_sqlite(copy: Path) -> None:
    """The backup API in reverse: the whole database file replaced in one step."""
    connection.ensure_connection()
    src = sqlite3.connect(copy)
    try:
        src.backup(connection.connection)
    finally:
        src.close()


def _restore_media(path: Path, manifest: dict, media_root: Path) -> None:
    for rel, want in manifest["files"].items():
        if not rel.startswith(f"{MEDIA}/"):
            continue
        target = media_root / rel.removeprefix(f"{MEDIA}/")
        digest, _size = _copy_hashed(path / rel, target)
        if digest != want["sha256"]:  # changed since backup_verify read it
            raise BackupError(f"{rel} changed while it was restored")


def _migrate() -> list[str]:
    """Bring the restored schema to this code's migrations (a backup of an older release)."""
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        call_command("migrate", interactive=False, verbosity=0)
    return [f"{m.app_label}.{m.name}" for m, _backwards in plan]


def backup_requeue_in_flight(*, backup_name: str) -> dict:
    """Requeue what was in flight when the backup was taken: running verification jobs go back
    to pending (their attempt counted; the next claim takes them, the attempt cap still holds),
    every pending job and every upload in intake is published again to this site's broker (it
    holds no message of the old one). One transaction; publishing after commit never raises
    (the reapers publish what the broker refused)."""
    now = timezone.now()
    with transaction.atomic():
        running = list(VerificationJob.objects.select_for_update()
                       .filter(status=JobStatus.RUNNING).order_by("pk"))
        for job in running:
            VerificationJob.objects.filter(pk=job.pk).update(
                status=JobStatus.PENDING, updated_at=now,
                last_error=f"restored from {backup_name}: the attempt of {job.claimed_by} was "
                           "in flight; requeued")
        statuses = dict(Submission.objects.filter(pk__in=[j.submission_id for j in running])
                        .values_list("pk", "status"))
        SubmissionEvent.objects.bulk_create([SubmissionEvent(
            submission_id=job.submission_id, from_status=statuses[job.submission_id],
            to_status=statuses[job.submission_id],
            note=f"restored from {backup_name}: verification job {job.pk} requeued")
            for job in running])
        pending = list(VerificationJob.objects.filter(status__in=ACTIVE_JOB_STATUSES)
                       .order_by("pk").values_list("pk", flat=True))
        VerificationJob.objects.filter(pk__in=pending).update(enqueued_at=None)
        intake = Submission.objects.filter(
            status__in=[SubmissionStatus.RECEIVED, SubmissionStatus.VALIDATING])
        intake_ids = list(intake.order_by("pk").values_list("pk", flat=True))
        # A cleared claim is stale at once: the intake worker takes it over and rewrites the tree.
        intake.update(intake_started_at=None, intake_published_at=None, updated_at=now)
    published = [pk for pk in pending if verification_publish(job_id=pk)]
    intake_published = [pk for pk in intake_ids if intake_publish(submission_id=pk)]
    return {"requeued": [job.pk for job in running], "jobs_published": published,
            "jobs_pending": pending, "intake": intake_ids, "intake_published": intake_published}

