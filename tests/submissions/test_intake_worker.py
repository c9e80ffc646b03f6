"""Upload intake on a REAL Celery worker consuming the `intake` queue of a REAL Redis broker
(PostgreSQL shared with it): an upload is answered 202 `received` at once and the status API
follows it to `queued` or `refused`; an upload whose message was lost (broker down at receipt)
is published again by the intake reaper; a claim whose worker died is taken over. Needs
PostgreSQL (the worker shares the test database) and Redis."""

import io
import time
import uuid
from datetime import timedelta

import pytest
import yaml
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from submissions.models import DailyQuota, Submission, SubmissionStatus
from submissions.services import token_issue
from tests.evaluation import verification_support as vs
from devtools.harbor_fixtures import HarborJobBuilder, build_metadata
from tests.submissions.intake_support import targz

INTAKE_QUEUE = f"intake-test-{vs.SESSION}"
FINAL = ("queued", "refused")


@pytest.fixture(scope="module")
def intake_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """One worker on the intake queue for the module's tests (a cold start each was ~10 s)."""
    with django_db_blocker.unblock():
        vs.shared_database_url()  # skips on SQLite's in-memory database
    root = tmp_path_factory.mktemp("intake-worker")
    vs.redis_client().delete(INTAKE_QUEUE)
    worker = vs.Worker(media_root=root / "media", queue=INTAKE_QUEUE, judge=False, env={
        "INTAKE_QUEUE": INTAKE_QUEUE, "VERIFICATION_QUEUE": vs.INPROC_QUEUE,
        "SUBMISSION_STAGING_DIR": str(root / "worker-staging")}).start()
    worker.root = root
    try:
        yield worker
    finally:
        worker.stop()
        vs.redis_client().delete(INTAKE_QUEUE, vs.INPROC_QUEUE)


@pytest.fixture
def intake_site(transactional_db, settings, tmp_path, intake_worker):
    settings.MEDIA_ROOT = str(intake_worker.media_root)
    settings.SUBMISSION_STAGING_DIR = tmp_path / "staging"
    settings.INTAKE_QUEUE = INTAKE_QUEUE
    settings.VERIFICATION_QUEUE = vs.INPROC_QUEUE  # nobody verifies here
    call_command("sync_tasks", verbosity=0)
    broker = settings.CELERY_BROKER_URL
    vs.point_celery_at(vs.BROKER_URL)
    try:
        yield intake_worker
    finally:
        vs.point_celery_at(broker)


def _upload(token: str, archive: bytes) -> dict:
    f = io.BytesIO(archive)
    f.name = "run.tar.gz"
    meta = io.BytesIO(yaml.safe_dump(build_metadata()).encode())
    meta.name = "metadata.yaml"
    response = Client(HTTP_AUTHORIZATION=f"Token {token}",
                      HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex).post(
        "/api/v1/submissions/", {"archive": f, "metadata": meta})
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "received"
    return response.json()


def _follow(token: str, pk: int, worker, timeout: float = 120) -> dict:
    """Poll the status API as a submitter does, until validation is over."""
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    seen = []

    def done():
        doc = client.get(f"/api/v1/submissions/{pk}/").json()
        seen.append(doc["status"])
        return doc if doc["status"] in FINAL else None

    doc = vs.wait_for(done, timeout, f"submission {pk} to leave intake", worker=worker)
    assert set(seen) <= {"received", "validating", *FINAL}, seen
    return doc


def test_the_worker_queues_a_valid_upload_and_refuses_a_broken_one(intake_site, owner, tmp_path):
    from evaluation.models import BenchmarkVersion

    bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    tasks = {t.name: t.content_digest for t in bv.tasks.all()}
    token = token_issue(user=owner)[1]
    HarborJobBuilder(tasks, agent="codex", model="openai/gpt-5.5").build(tmp_path / "good")
    HarborJobBuilder(dict(list(tasks.items())[:3]), agent="codex", model="openai/gpt-5.5").build(
        tmp_path / "bad")
    good = _upload(token, targz(tmp_path / "good"))
    bad = _upload(token, targz(tmp_path / "bad"))
    doc = _follow(token, good["id"], intake_site)
    assert doc["status"] == "queued" and doc["progress"]["total"] == 21, doc
    assert doc["benchmark"] == bv.slug and doc["verification"]["job"]
    doc = _follow(token, bad["id"], intake_site)
    assert doc["status"] == "refused" and doc["problems"], doc
    assert "attempts_missing" in {p["code"] for p in doc["problems"]}
    refused = Submission.objects.get(pk=bad["id"])
    assert (refused.archive, refused.trials.count()) == ("", 0)
    assert DailyQuota.objects.get(user=owner).used == 1  # the refused one was given back
    # The worker removes its staging folder when it leaves the task, just after the verdict is
    # committed (which the poll above may see first): nothing is left behind once it has.
    vs.wait_for(lambda: not any((intake_site.root / "worker-staging").glob("staging-*")), 60,
                "the worker to remove its staging folders", worker=intake_site)


def test_an_upload_whose_message_was_lost_is_validated_after_the_reaper_runs(
        intake_site, owner, tmp_path, settings):
    """Broker down when the upload arrived: it is kept (`received`, never published); the
    intake reaper (on the beat) publishes it once the broker is back, and the worker takes it."""
    from evaluation.models import BenchmarkVersion
    from submissions.intake import intake_reap

    bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    HarborJobBuilder({t.name: t.content_digest for t in bv.tasks.all()}, agent="codex",
                     model="openai/gpt-5.5").build(tmp_path / "run")
    token = token_issue(user=owner)[1]
    vs.point_celery_at(vs.DEAD_BROKER_URL)
    try:
        body = _upload(token, targz(tmp_path / "run"))
    finally:
        vs.point_celery_at(vs.BROKER_URL)
    sub = Submission.objects.get(pk=body["id"])
    assert (sub.status, sub.intake_published_at) == (SubmissionStatus.RECEIVED, None)
    time.sleep(2)
    assert Submission.objects.get(pk=sub.pk).status == SubmissionStatus.RECEIVED  # not lost...
    report = intake_reap()
    assert report["published"] == [sub.pk]
    assert _follow(token, sub.pk, intake_site)["status"] == "queued"  # ...and not forgotten


def test_a_claim_whose_worker_died_is_taken_over(intake_site, owner, tmp_path, settings):
    """A worker killed mid-validation leaves the upload `validating` with its claim; past
    INTAKE_STALE_AFTER_S the reaper publishes it again and the next worker takes it over."""
    from evaluation.models import BenchmarkVersion
    from submissions.intake import intake_reap

    bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    HarborJobBuilder({t.name: t.content_digest for t in bv.tasks.all()}, agent="codex",
                     model="openai/gpt-5.5").build(tmp_path / "run")
    token = token_issue(user=owner)[1]
    vs.point_celery_at(vs.DEAD_BROKER_URL)  # the worker must not take it before the "crash"
    try:
        body = _upload(token, targz(tmp_path / "run"))
    finally:
        vs.point_celery_at(vs.BROKER_URL)
    stale = timezone.now() - timedelta(seconds=settings.INTAKE_STALE_AFTER_S + 60)
    Submission.objects.filter(pk=body["id"]).update(
        status=SubmissionStatus.VALIDATING, intake_started_at=stale, intake_attempts=1)
    report = intake_reap()
    assert report["stale"] == [body["id"]]
    assert _follow(token, body["id"], intake_site)["status"] == "queued"
    sub = Submission.objects.get(pk=body["id"])
    assert sub.intake_attempts == 2
    assert "taken over" in sub.events.filter(to_status="validating").last().note
