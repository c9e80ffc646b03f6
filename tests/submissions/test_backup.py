"""manage.py backup and restore without Docker: what a backup holds, a backup whose digests do not
match refused, a non-empty site never overwritten without --force, the jobs in flight requeued
once after a restore, and make run's SQLite site round-tripped. The whole drill (a site verifying
in Docker, restored into a fresh database) is tests/evaluation/test_restore_drill.py."""

import hashlib
import json
import os
import socket
import subprocess
import sys
import uuid
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from submissions.backup import MANIFEST, backup_requeue_in_flight
from submissions.models import JobStatus, Submission, SubmissionEvent, VerificationJob
from tests.factories import SubmissionFactory

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.django_db(transaction=True)  # pg_dump reads committed rows only


def _backup(dest: Path, *args) -> dict:
    out = StringIO()
    call_command("backup", str(dest), *args, stdout=out)
    return json.loads(out.getvalue())


def test_a_backup_holds_the_dump_the_media_and_a_manifest_of_their_digests(
        owned_submission, tmp_path, settings):
    from django.db import connection

    done = _backup(tmp_path / "backups")
    path = Path(done["path"])
    assert path.name.startswith("hab-backup-") and path.parent == tmp_path / "backups"
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no partial folder left
    manifest = json.loads((path / MANIFEST).read_text())
    db_file = "database.pgdump" if connection.vendor == "postgresql" else "database.sqlite3"
    trajectory = "media/submissions/test/tree/job/t1/agent/trajectory.json"
    assert sorted(manifest["files"]) == [db_file, trajectory]
    for rel, f in manifest["files"].items():
        data = (path / rel).read_bytes()
        assert f == {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    source = Path(settings.MEDIA_ROOT) / trajectory.removeprefix("media/")
    assert (path / trajectory).read_bytes() == source.read_bytes()
    db = manifest["database"]
    assert db["submissions"] == {"queued": 1} and db["jobs_in_flight"] == []
    assert {"evaluation", "submissions", "leaderboard"} <= set(db["migrations"])
    assert manifest["app"]["name"] == "healthagentbench-leaderboard"
    assert done["bytes"] == sum(f["bytes"] for f in manifest["files"].values())
    # --keep 1: the newest complete backup stays, the older one goes, and so does the partial
    # folder of a backup killed two days ago.
    killed = tmp_path / "backups" / ".hab-backup-20261201T031700000Z.partial"
    killed.mkdir()
    os.utime(killed, (killed.stat().st_atime - 2 * 86400, killed.stat().st_mtime - 2 * 86400))
    newer = _backup(tmp_path / "backups", "--keep", "1")
    assert newer["pruned"] == [path.name]
    assert [p.name for p in (tmp_path / "backups").iterdir()] == [Path(newer["path"]).name]


def test_it_refuses_a_backup_whose_digests_do_not_match(owned_submission, tmp_path):
    path = Path(_backup(tmp_path / "backups")["path"])
    call_command("restore", str(path), "--check", stdout=StringIO())
    trajectory = path / "media/submissions/test/tree/job/t1/agent/trajectory.json"
    original = trajectory.read_bytes()

    def refused(*args) -> str:
        with pytest.raises(CommandError) as err:
            call_command("restore", str(path), *args, "--force", stdout=StringIO())
        return str(err.value)

    trajectory.write_bytes(original[:-1] + b"X")  # one byte flipped, same size
    message = refused()
    assert "does not match its manifest, not restored" in message
    assert "media/submissions/test/tree/job/t1/agent/trajectory.json: sha256 or size" in message
    trajectory.unlink()
    assert "trajectory.json: missing" in refused()
    trajectory.write_bytes(original)
    (path / "media" / "planted").write_bytes(b"x")
    assert "media/planted: not in the manifest" in refused()
    (path / "media" / "planted").unlink()
    manifest = path / MANIFEST
    listed = json.loads(manifest.read_text())
    listed["files"]["media/../../outside"] = {"sha256": "0" * 64, "bytes": 1}
    text = json.dumps(listed, indent=1, sort_keys=True) + "\n"
    manifest.write_text(text)
    (path / "manifest.sha256").write_text(hashlib.sha256(text.encode()).hexdigest() + "\n")
    assert "media/../../outside: not a path inside the backup" in refused()
    manifest.write_text(manifest.read_text().replace('"queued": 1', '"queued": 2'))
    assert "manifest.json does not match manifest.sha256" in refused()
    # Nothing was touched by the refusals.
    assert Submission.objects.get(pk=owned_submission.pk).status == "queued"


def test_it_never_overwrites_a_non_empty_database_without_force(owned_submission, tmp_path):
    from django.db import connection

    path = _backup(tmp_path / "backups")["path"]
    SubmissionFactory(status="queued", published_at=None)  # a row the backup does not hold
    with pytest.raises(CommandError) as err:
        call_command("restore", path, stdout=StringIO())
    name = connection.settings_dict["NAME"]
    assert f"the database {name} holds" in str(err.value)
    assert str(err.value).endswith("restore --force replaces them")
    assert "MEDIA_ROOT" in str(err.value)  # its media root holds the trajectory
    assert Submission.objects.count() == 2


def test_with_force_it_replaces_the_database_and_the_media_with_the_backups(
        owned_submission, tmp_path, settings):
    path = _backup(tmp_path / "backups")["path"]
    later = SubmissionFactory(status="queued", published_at=None)
    trajectory = Path(settings.MEDIA_ROOT) / "submissions/test/tree/job/t1/agent/trajectory.json"
    original = trajectory.read_bytes()
    trajectory.write_bytes(b"{}")
    out = StringIO()
    call_command("restore", path, "--force", stdout=out)
    assert json.loads(out.getvalue())["migrated"] == []
    assert list(Submission.objects.values_list("pk", flat=True)) == [owned_submission.pk]
    assert not Submission.objects.filter(pk=later.pk).exists()
    assert trajectory.read_bytes() == original


def test_it_refuses_a_backup_of_a_newer_release(owned_submission, tmp_path):
    path = Path(_backup(tmp_path / "backups")["path"])
    manifest = json.loads((path / MANIFEST).read_text())
    manifest["database"]["migrations"]["submissions"] = "9999_from_the_future"
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    (path / MANIFEST).write_text(text)
    (path / "manifest.sha256").write_text(hashlib.sha256(text.encode()).hexdigest() + "\n")
    with pytest.raises(CommandError) as err:
        call_command("restore", str(path), "--force", stdout=StringIO())
    assert "newer release (migrations unknown here: submissions 9999_from_the_future)" in str(
        err.value)
    assert Submission.objects.filter(pk=owned_submission.pk).exists()


def test_after_a_restore_the_jobs_in_flight_are_requeued_once_and_published_once(settings):
    """A running job (its worker was on the old host) goes back to pending with its attempt
    counted, every live job and upload in intake is published once to the new broker, and the
    reaper that runs next neither requeues nor publishes any of them again."""
    from submissions.verification import reap_stuck_submissions
    from submissions.verification.lease import claim_job
    from tests.evaluation import verification_support as vs

    queue = f"restore-requeue-{uuid.uuid4().hex[:8]}"
    settings.VERIFICATION_QUEUE = settings.INTAKE_QUEUE = queue
    vs.point_celery_at(vs.BROKER_URL)
    now = timezone.now()
    verifying = SubmissionFactory(status="verifying", published_at=None)
    running = VerificationJob.objects.create(
        submission=verifying, status=JobStatus.RUNNING, attempt=1, heartbeat_at=now,
        deadline_at=now + timedelta(hours=1), claimed_by="old-host:4242",
        enqueued_at=now)
    waiting = VerificationJob.objects.create(
        submission=SubmissionFactory(status="queued", published_at=None),
        status=JobStatus.PENDING, enqueued_at=now)
    validating = SubmissionFactory(status="validating", published_at=None, agent=None,
                                   benchmark_version=None, intake_started_at=now,
                                   intake_published_at=now)
    try:
        report = backup_requeue_in_flight(backup_name="hab-backup-x")
        assert report["requeued"] == [running.pk]
        assert report["jobs_published"] == report["jobs_pending"] == [running.pk, waiting.pk]
        assert report["intake_published"] == [validating.pk]
        assert vs.redis_client().llen(queue) == 3  # two jobs and one intake, once each
        running.refresh_from_db()
        assert (running.status, running.attempt) == (JobStatus.PENDING, 1)
        assert running.last_error.startswith("restored from hab-backup-x: the attempt of "
                                             "old-host:4242 was in flight")
        assert SubmissionEvent.objects.filter(
            submission=verifying, note__contains="verification job").count() == 1
        reaped = reap_stuck_submissions()
        assert reaped["requeued"] == reaped["published"] == reaped["enqueued"] == []
        assert vs.redis_client().llen(queue) == 3
        # The new host's worker takes it as the next attempt; a second delivery is a no-op.
        job, outcome = claim_job(running.pk, f"{socket.gethostname()}:1")
        assert outcome == "claimed" and job.attempt == 2
        assert claim_job(running.pk, f"{socket.gethostname()}:{os.getpid()}") == (None, "busy")
    finally:
        vs.redis_client().delete(queue)


_SQLITE_SITE = """
import django, json, sys
django.setup()
from django.core.management import call_command
from datetime import timedelta
from io import StringIO
if sys.argv[1] == "fill":
    call_command("migrate", verbosity=0)
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage
    from tests.factories import TrialFactory
    trial = TrialFactory(submission__archive="submissions/1/archive")
    default_storage.save("submissions/1/archive", ContentFile(b"archive bytes"))
    out = StringIO()
    call_command("backup", sys.argv[2], stdout=out)
    print(json.loads(out.getvalue())["path"])
else:
    out = StringIO()
    call_command("restore", sys.argv[2], stdout=out)
    print(json.dumps(json.loads(out.getvalue())["requeued"]))
out = StringIO()
call_command("dumpdata", "evaluation", "submissions", "auth", stdout=out)
print(out.getvalue())
"""


def test_make_runs_sqlite_site_round_trips_through_the_online_backup_api(tmp_path):
    def site(name: str, *args) -> tuple[str, str]:
        env = {**os.environ, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "config.settings",
               "DATABASE_URL": f"sqlite:///{tmp_path / name}.sqlite3",
               "MEDIA_ROOT": str(tmp_path / f"{name}-media")}
        done = subprocess.run([sys.executable, "-c", _SQLITE_SITE, *args], cwd=REPO,  # noqa: S603
                              env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        first, rest = done.stdout.split("\n", 1)
        return first, rest

    path, dumped = site("old", "fill", str(tmp_path / "backups"))
    manifest = json.loads((Path(path) / MANIFEST).read_text())
    assert manifest["database"]["vendor"] == "sqlite"
    assert sorted(manifest["files"]) == ["database.sqlite3", "media/submissions/1/archive"]
    requeued, restored = site("new", "restore", path)
    assert json.loads(requeued) == [] and restored == dumped
    assert (tmp_path / "new-media/submissions/1/archive").read_bytes() == b"archive bytes"
