"""The restore drill (matrix row R21): a site with published, discrepant, withdrawn and
in-verification submissions is backed up while a REAL worker verifies in REAL containers, then
restored with `manage.py restore` into a fresh PostgreSQL database and media root; the restored
site serves the same bytes, and its own worker finishes the job that was in flight, once.

Needs PostgreSQL (the workers share the test database; the restore makes a database of its
own), Redis and Docker. Run:
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hab_backup \\
        .venv/bin/python -m pytest tests/evaluation/test_restore_drill.py
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection, transaction

from submissions.backup import backup_create
from submissions.models import JobStatus, Submission, TrialCheck, VerificationJob
from submissions.publishing import submission_publish
from submissions.services import submission_withdraw
from submissions.verification import verification_enqueue
from submissions.verification.sample import rerun_commit
from tests.evaluation import verification_support as vs

pytestmark = [pytest.mark.docker, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[2]
CT = "ct-abnormality-classification/synthetic_01"
PATH = "pathology-tumor-region/synthetic_01"
ETL = "ehr-format-conversion/synthetic_01"
FINAL = ("verified", "consistent", "discrepancy", "failed")

# What a reader of the site gets, read by a process of the site under test (its own
# DATABASE_URL): each path's status and bytes (anonymous, or as the maintainer where a path
# starts with "staff:"), and each submission's verdict, commitment and trials from its rows.
_CAPTURE = """
import base64, json, sys
import django
django.setup()
from django.contrib.auth import get_user_model
from django.test import Client
from submissions.models import Submission
paths, pks = json.loads(sys.argv[1]), json.loads(sys.argv[2])
anonymous, staff = Client(), Client()
staff.force_login(get_user_model().objects.get(username="drill-maint"))
pages = {}
for path in paths:
    client = staff if path.startswith("staff:") else anonymous
    r = client.get(path.removeprefix("staff:"))
    body = b"".join(r.streaming_content) if r.streaming else r.content
    pages[path] = [r.status_code, r.get("Content-Type"), base64.b64encode(body).decode()]
state = {}
for sub in Submission.objects.filter(pk__in=pks).order_by("pk"):
    state[sub.pk] = {
        "status": sub.status, "is_verified": sub.is_verified, "coverage": sub.coverage,
        "rerun_commitment": sub.rerun_commitment, "rerun_salt": sub.rerun_salt,
        "rerun_sample": sub.rerun_sample, "archive_sha256": sub.archive_sha256,
        "trials": [[t.benchmark_task.name, t.attempt, t.outcome, t.reward, t.verified_reward,
                    t.flags, t.verification_level]
                   for t in sub.trials.order_by("benchmark_task__name", "attempt")]}
print(json.dumps({"pages": pages, "state": state}, sort_keys=True))
"""


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, docker_engine):
    return vs.oracle_outputs(tmp_path_factory.mktemp("oracle-outputs"))


@pytest.fixture(autouse=True)
def _media_and_broker(settings, media_root):
    settings.MEDIA_ROOT = str(media_root)
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    settings.XRAY_JUDGE_URL = vs.judge_stub().url
    settings.XRAY_JUDGE_MODEL = vs.JUDGE_MODEL
    settings.VERIFICATION_HEARTBEAT_S = 1
    vs.point_celery_at(vs.BROKER_URL)


@pytest.fixture
def fresh_database():
    """An empty PostgreSQL database beside the test database, dropped afterwards."""
    import psycopg

    sd = connection.settings_dict
    name = f"hab_backup_drill_{uuid.uuid4().hex[:8]}"
    admin = {"dbname": "postgres", "user": sd.get("USER") or "postgres",
             "host": sd.get("HOST") or "127.0.0.1", "port": sd.get("PORT") or 5432,
             **({"password": sd["PASSWORD"]} if sd.get("PASSWORD") else {})}
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = vs.shared_database_url().rsplit("/", 1)[0] + f"/{name}"
    yield url
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _stored(bv, oracle, owner, harness: str, tasks: list[str], **kwargs) -> Submission:
    """A stored submission as intake leaves it: its archive in storage, its re-run committed."""
    sub = vs.make_submission(bv, outputs=oracle, harness=harness, tasks=tasks, **kwargs)
    data = f"the uploaded archive of {harness}".encode()
    name = default_storage.save(f"drill/{sub.pk}/archive", ContentFile(data))
    Submission.objects.filter(pk=sub.pk).update(
        archive=name, archive_sha256=hashlib.sha256(data).hexdigest(), archive_bytes=len(data),
        owner=owner)
    rerun_commit(submission_id=sub.pk)
    return Submission.objects.get(pk=sub.pk)


def _final(pk: int, worker, timeout: float = 300) -> Submission:
    def done():
        sub = Submission.objects.get(pk=pk)
        return sub if sub.status in FINAL else None

    return vs.wait_for(done, timeout, f"submission {pk} to be verified", worker=worker)


def _site_env(database_url: str, media: Path, queue: str) -> dict:
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1",
            "DATABASE_URL": database_url, "MEDIA_ROOT": str(media),
            "CELERY_BROKER_URL": vs.BROKER_URL, "VERIFICATION_QUEUE": queue,
            "INTAKE_QUEUE": queue, "PYTHONUNBUFFERED": "1"}


def _run(argv: list[str], env: dict, timeout: float = 600) -> str:
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True,  # noqa: S603
                          timeout=timeout, check=False)
    assert done.returncode == 0, f"{argv[:4]}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout


def _capture(env: dict, paths: list[str], pks: list[int]) -> dict:
    return json.loads(_run([sys.executable, "-c", _CAPTURE, json.dumps(paths), json.dumps(pks)],
                           env))


def _fill_site(settings, oracle, worker) -> dict[str, Submission]:
    """Published, discrepant and withdrawn submissions, each verified by the worker."""
    settings.VERIFICATION_CHECKS = ["regrade"]
    bv = vs.synthetic_version()
    maint = get_user_model().objects.create_user("drill-maint", "m@example.org", "pw-drill-1!",
                                                 is_staff=True)
    owner = get_user_model().objects.create_user("drill-owner", "o@example.org", "pw-drill-2!")
    right = json.loads((oracle[CT] / "workspace" / "submission.json").read_text())
    wrong = json.dumps({"labels": {k: "no" if v == "yes" else "yes"
                                   for k, v in right["labels"].items()}}).encode()
    with transaction.atomic():
        subs = {"published": _stored(bv, oracle, owner, "drill-published", [CT]),
                "discrepant": _stored(bv, oracle, owner, "drill-discrepant", [CT], replace={
                    (CT, 2): {"/workspace/submission.json": wrong}}),
                "withdrawn": _stored(bv, oracle, owner, "drill-withdrawn", [CT])}
        for sub in subs.values():
            verification_enqueue(submission=sub)
    subs = {k: _final(s.pk, worker) for k, s in subs.items()}
    assert subs["discrepant"].status == "discrepancy", worker.tail()
    assert subs["published"].status == subs["withdrawn"].status == "consistent", worker.tail()
    subs["published"] = submission_publish(submission=subs["published"], actor=maint)
    submission_publish(submission=subs["withdrawn"], actor=maint)
    subs["withdrawn"] = submission_withdraw(submission=Submission.objects.get(
        pk=subs["withdrawn"].pk), actor=maint, reason="taken down in the drill")
    return subs


def test_r21_restore_drill_a_site_backed_up_while_verifying_restores_byte_for_byte(
        settings, oracle, on_worker, media_root, tmp_path, fresh_database):
    """R21: backed up while a verification runs and restored into a fresh database and media
    root, the site serves the same leaderboard CSV, API responses and badges byte for byte, and
    each submission keeps its verdict and commitment; the job that was in flight is requeued
    once by the restore, finished once by the restored site's worker and never republished."""
    subs = _fill_site(settings, oracle, on_worker)
    with transaction.atomic():
        subs["in_flight"] = _stored(vs.synthetic_version(), oracle,
                                    get_user_model().objects.get(username="drill-owner"),
                                    "drill-in-flight", [CT, PATH, ETL])
        job = verification_enqueue(submission=subs["in_flight"])
    # Back up once the worker is part-way through the job (its first check row written).
    vs.wait_for(lambda: TrialCheck.objects.filter(job_id=job.pk).exists(), 300,
                "the in-flight job's first check", worker=on_worker)
    backup = backup_create(dest=tmp_path / "backups")
    running = VerificationJob.objects.get(pk=job.pk)
    assert running.status == JobStatus.RUNNING, "the job ended before the backup was taken"
    assert backup.manifest["database"]["jobs_in_flight"] == [job.pk]
    assert backup.manifest["media"]["missing"] == []

    bv = vs.synthetic_version()
    q = f"?benchmark={bv.slug}"
    pks = [s.pk for s in subs.values()]
    paths = [f"/leaderboard.csv{q}", f"/trials.csv{q}", f"/api/v1/leaderboard/{q}",
             f"/api/v1/trials/{q}", f"/api/v1/submissions/{subs['published'].pk}/",
             *[f"/badge/drill-{k}-none.svg{q}" for k in ("published", "discrepant", "withdrawn")],
             *[f"staff:/api/v1/submissions/{s.pk}/" for k, s in subs.items() if k != "in_flight"]]
    old_env = _site_env(vs.shared_database_url(), media_root, vs.INPROC_QUEUE)
    before = _capture(old_env, paths, pks)
    assert before["pages"][f"/badge/drill-published-none.svg{q}"][0] == 200
    assert before["pages"][f"/badge/drill-withdrawn-none.svg{q}"][0] == 404
    board = base64.b64decode(before["pages"][f"/leaderboard.csv{q}"][2]).decode()
    assert "drill-published" in board and "drill-withdrawn" not in board

    queue = f"{vs.QUEUE}-restored"
    restored_media = tmp_path / "restored-media"
    new_env = _site_env(fresh_database, restored_media, queue)
    started = time.monotonic()
    report = json.loads(_run([sys.executable, "manage.py", "restore", str(backup.path)], new_env))
    restore_wall_s = time.monotonic() - started
    assert report["requeued"] == report["jobs_published"] == [job.pk]
    assert vs.queue_length(queue) == 1  # one message for the restored site's broker queue
    after = _capture(new_env, paths, pks)
    for path in paths:
        assert after["pages"][path] == before["pages"][path], path
    done_before = {k: before["state"][str(s.pk)] for k, s in subs.items() if k != "in_flight"}
    assert {k: after["state"][str(s.pk)] for k, s in subs.items() if k != "in_flight"} == (
        done_before)
    assert after["state"][str(job.submission_id)]["status"] == "verifying"
    assert {(r, s["status"]) for r, s in done_before.items()} == {
        ("published", "published"), ("discrepant", "discrepancy"), ("withdrawn", "withdrawn")}
    # Every stored file, restored byte for byte (archives, outputs).
    for rel, f in backup.manifest["files"].items():
        if rel.startswith("media/"):
            data = (restored_media / rel.removeprefix("media/")).read_bytes()
            assert hashlib.sha256(data).hexdigest() == f["sha256"], rel

    # The restored site's own worker (its own run prefix: both sites share this Docker engine)
    # finishes the job; the old site's worker finishes its copy; the verdicts agree.
    restored_worker = vs.Worker(media_root=restored_media, queue=queue, env={
        "DATABASE_URL": fresh_database, "VERIFICATION_RUN_PREFIX": f"{vs.RUN_PREFIX}r"}).start()
    try:
        def restored_final():
            state = _capture(new_env, [], [job.submission_id])["state"][str(job.submission_id)]
            return state if state["status"] in FINAL else None

        restored_state = vs.wait_for(restored_final, 600, "the restored site's verdict",
                                     interval=3, worker=restored_worker)
        reaped = json.loads(_run([sys.executable, "manage.py", "reap_stuck_submissions"],
                                 new_env))
        log = restored_worker.tail(200_000)
    finally:
        restored_worker.stop()
    original = _final(job.submission_id, on_worker, timeout=600)
    original_state = _capture(old_env, [], [original.pk])["state"][str(original.pk)]
    assert restored_state == original_state
    assert restored_state["rerun_commitment"] == subs["in_flight"].rerun_commitment != ""
    assert reaped["requeued"] == reaped["published"] == reaped["enqueued"] == []
    # The restored site's queue carried the job once: one delivery, no retry, no copy.
    assert len(re.findall(r"Task evaluation\.verify_submission\[[^\]]+\] received", log)) == 1
    jobs = _capture_jobs(fresh_database, job.submission_id)
    assert jobs == [[job.pk, "done", running.attempt + 1, original_state["status"]]]
    assert vs.queue_length(queue) == 0

    figures = {"backup_bytes": backup.bytes, "backup_seconds": round(backup.seconds, 3),
               "backup_files": len(backup.manifest["files"]),
               "restore_seconds": round(report["seconds"], 3),
               "restore_command_wall_seconds": round(restore_wall_s, 3)}
    (REPO / "test-output").mkdir(exist_ok=True)
    (REPO / "test-output" / "restore-drill.json").write_text(json.dumps(figures, indent=2))
    print(f"\nrestore drill: {json.dumps(figures)}")


def _capture_jobs(database_url: str, submission_id: int) -> list:
    """The restored site's verification jobs of one submission, and its verdict transitions."""
    import psycopg

    with psycopg.connect(database_url) as conn:
        jobs = conn.execute(
            "SELECT id, status, attempt FROM submissions_verificationjob WHERE submission_id = %s"
            " ORDER BY id", [submission_id]).fetchall()
        verdicts = conn.execute(
            "SELECT to_status FROM submissions_submissionevent WHERE submission_id = %s AND "
            "from_status = 'verifying' AND to_status <> 'verifying'", [submission_id]).fetchall()
    assert len(verdicts) == 1, verdicts  # the verdict recorded once
    return [[*row, verdicts[0][0]] for row in jobs]

