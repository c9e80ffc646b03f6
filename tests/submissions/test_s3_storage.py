"""Uploads in a real S3-compatible store (moto's server mode, its own process on a TCP port)
through django-storages, as the several-machine deployment stores them (USE_S3): the upload,
the intake and the verification's reads all go to the bucket, and nothing lands in MEDIA_ROOT.
A store that hangs mid-way through uploads (R16) costs a clear, retryable 503 and keeps nothing;
once it answers again the same upload is stored whole."""

from __future__ import annotations

import io
import time
import uuid

import pytest
import yaml
from django.core.management import call_command
from django.test import Client

from devtools.harbor_fixtures import HarborJobBuilder, build_metadata
from devtools.s3_server import S3Server
from submissions.models import DailyQuota, Submission
from submissions.services import token_issue
from tests.submissions.intake_support import run_intake, submission_id, targz

BUCKET = "hab-uploads"


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    server = S3Server(log=tmp_path_factory.mktemp("moto") / "moto.log").start()
    server.create_bucket(BUCKET)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_site(db, settings, tmp_path, s3_server):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.SUBMISSION_STAGING_DIR = tmp_path / "staging"
    settings.STORAGES = {**settings.STORAGES,
                         "default": s3_server.storage_setting(BUCKET, timeout_s=1.0)}
    call_command("sync_tasks", verbosity=0)
    from evaluation.models import BenchmarkVersion

    bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    return s3_server, {t.name: t.content_digest for t in bv.tasks.all()}


def _post(token: str, archive: bytes, key: str):
    f = io.BytesIO(archive)
    f.name = "run.tar.gz"
    meta = io.BytesIO(yaml.safe_dump(build_metadata()).encode())
    meta.name = "metadata.yaml"
    return Client(HTTP_AUTHORIZATION=f"Token {token}", HTTP_IDEMPOTENCY_KEY=key).post(
        "/api/v1/submissions/", {"archive": f, "metadata": meta})


def test_uploads_intake_and_verification_reads_go_to_the_s3_store(
        s3_site, owner, tmp_path, settings, django_capture_on_commit_callbacks):
    from submissions.verification.checks.base import _storage_copy, load_trajectory

    server, tasks = s3_site
    token = token_issue(user=owner)[1]
    HarborJobBuilder(tasks, agent="codex", model="openai/gpt-5.5").build(tmp_path / "job")
    pk = submission_id(_post(token, targz(tmp_path / "job"), uuid.uuid4().hex))
    sub = Submission.objects.get(pk=pk)
    assert server.keys(BUCKET, sub.archive) == [sub.archive]  # stored whole, in the bucket
    assert run_intake(pk, django_capture_on_commit_callbacks) == "queued"
    sub.refresh_from_db()
    stored = server.keys(BUCKET, sub.files_prefix.rstrip("/") + "/")
    assert len(stored) > 21, stored[:5]
    # The verification's reads: a trajectory and a whole trial folder, from the bucket.
    trial = sub.trials.exclude(trajectory_path="").first()
    assert trial is not None and load_trajectory(trial)["steps"]
    prefix = sub.files_prefix.rstrip("/")
    assert _storage_copy(f"{prefix}/{trial.trial_dir}", tmp_path / "copy", [1 << 30]) > 0
    # Nothing of it on this machine's disk: another host reads the same bucket.
    media = tmp_path / "media"
    assert not media.exists() or not any(p.is_file() for p in media.rglob("*"))


def test_a_hung_s3_store_answers_503_and_keeps_nothing_then_the_retry_is_stored_whole(
        s3_site, owner, tmp_path):
    """R16: the S3 store stops answering during uploads (SIGSTOP: its port accepts, nothing
    replies). Each upload gets 503 + Retry-After, no submission row, no quota used, no object;
    the same upload (same Idempotency-Key) sent again once the store answers is stored whole."""
    server, tasks = s3_site
    token = token_issue(user=owner)[1]
    HarborJobBuilder(tasks, agent="codex", model="openai/gpt-5.5").build(tmp_path / "job")
    archive = targz(tmp_path / "job")
    before = set(server.keys(BUCKET))
    key = uuid.uuid4().hex
    server.pause()
    try:
        started = time.monotonic()
        response = _post(token, archive, key)
        elapsed = time.monotonic() - started
    finally:
        server.resume()
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "30"
    assert response.json()["code"] == "storage_unavailable"
    assert elapsed < 30, elapsed  # bounded by S3_TIMEOUT_S and the retries, not botocore's 60 s
    assert Submission.objects.filter(owner=owner).count() == 0
    assert not DailyQuota.objects.filter(user=owner, used__gt=0).exists()
    assert set(server.keys(BUCKET)) == before
    pk = submission_id(_post(token, archive, key))
    sub = Submission.objects.get(pk=pk)
    body = server.client().get_object(Bucket=BUCKET, Key=sub.archive)["Body"].read()
    assert body == archive


def test_the_upload_form_says_the_store_is_unavailable_and_keeps_nothing(
        s3_site, owner, tmp_path, client):
    """R16 on the Submit page: the same refusal as the API's, shown on the form (503)."""
    server, tasks = s3_site
    HarborJobBuilder(tasks, agent="codex", model="openai/gpt-5.5").build(tmp_path / "job")
    archive = io.BytesIO(targz(tmp_path / "job"))
    archive.name = "run.tar.gz"
    client.force_login(owner)
    server.pause()
    try:
        response = client.post("/submit/", {"archive": archive})
    finally:
        server.resume()
    assert response.status_code == 503
    assert b"storage_unavailable" in response.content or b"unavailable" in response.content
    assert Submission.objects.filter(owner=owner).count() == 0
