"""The red-team suite: every way a dishonest submitter was found to steer "verified", mounted end
to end against the synthetic benchmark, each ending below "verified" or refused.

Each attack is uploaded through the API with a token, taken in by the intake service, and
verified by the verification service in this process (house style HS32) with real containers:
the re-grade in Docker and, where the attack needs one, the re-run of Harbor's terminus-2
through the real Harbor CLI against a scripted model (tests/evaluation/stub_model.py) that never
solves a task. The checks are the re-grade and the re-run: a cheater can make replays reproduce
(they prove consistency, not authorship), so the re-run must hold on its own here.

Before this suite's changes, the same attacks ended (docs/reliability.md, rows V1 to V8):
cost-shrunk sample verified on 2 re-runs; fabricated X-ray passes consistent with every failing
re-run "agreeing"; the swapped model list shown as verified; the custom class re-run as stock
terminus-2; the re-rolled archive given a fresh sample; the order ground under the public
secret; spread fakes verified; the version opt-out ranked as consistent like any other.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.test import Client

from devtools.harbor_fixtures import (
    HarborJobBuilder,
    build_metadata,
    edit_json,
)
from evaluation.models import BenchmarkVersion
from submissions.models import (
    CheckKind,
    JobStatus,
    Submission,
    SubmissionLink,
    Trial,
    TrialCheck,
    VerificationJob,
    coverage_badge,
)
from submissions.services import token_issue
from submissions.verification import verification_run
from submissions.verification.sample import sample_order
from tests.evaluation import verification_support as vs
from tests.evaluation.stub_model import StubModel, terminus_reply
from tests.submissions.intake_support import submission_id, targz

pytestmark = [pytest.mark.adversarial, pytest.mark.docker,
              pytest.mark.django_db(transaction=True)]

SLUG = "healthagentbench-synthetic@1.0"
MODEL = "openai/stub-fails"
SITE_KEY = "sk-site-only-red-team"
XRAY = "xray-report-correction/synthetic_01"


# ------------------------------------------------------------------------------ the site


@pytest.fixture(scope="module")
def stub():
    """terminus-2's model: it declares the task done at once, so every re-run fails."""
    done = terminus_reply([], complete=True)
    server = StubModel({"stub-fails": [done] * 4}).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, docker_engine):
    """Each task's right answer, as the oracle writes it: the cheater's fabricated output."""
    return vs.oracle_outputs(tmp_path_factory.mktemp("red-team-oracle"))


@pytest.fixture
def site(settings, tmp_path, docker_engine, harbor_ready, stub):
    from config.celery import app

    before = app.conf.broker_url
    vs.point_celery_at(vs.BROKER_URL)
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.SUBMISSION_STAGING_DIR = tmp_path / "staging"
    settings.VERIFICATION_QUEUE = vs.INPROC_QUEUE  # this test runs each job itself
    settings.INTAKE_QUEUE = vs.INPROC_QUEUE
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    settings.VERIFICATION_CHECKS = ["regrade", "rerun"]
    settings.VERIFICATION_HARBOR_AGENTS = {"terminus-2": ["2.0.0"]}
    settings.VERIFICATION_RERUN_MODEL_ENDPOINTS = {MODEL: {
        "base_url": stub.base_url, "key_env": "OPENAI_API_KEY", "key_secret": "STUB"}}
    settings.VERIFICATION_AGENT_SECRETS = {"STUB": SITE_KEY}
    settings.VERIFICATION_PARALLEL_TRIALS = 2
    settings.XRAY_JUDGE_URL = vs.judge_stub().url
    settings.XRAY_JUDGE_MODEL = vs.JUDGE_MODEL
    settings.VERIFICATION_SAMPLE_SECRET = "red-team-site-secret-" + "x" * 24
    call_command("sync_tasks", verbosity=0)
    bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    yield {t.name: t.content_digest for t in bv.tasks.all()}
    vs.redis_client().delete(vs.INPROC_QUEUE)
    vs.point_celery_at(before)


def _account(name: str) -> str:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(name, password="x")
    return token_issue(user=user)[1]


def _named(data: bytes, name: str):
    f = io.BytesIO(data)
    f.name = name
    return f


def _upload(root: Path, meta: dict, token: str) -> dict:
    """Upload ``root`` through the API and take it in; the owner's status document."""
    from submissions.intake import submission_intake

    response = Client(HTTP_AUTHORIZATION=f"Token {token}").post("/api/v1/submissions/", {
        "archive": _named(targz(root), "run.tar.gz"),
        "metadata": _named(yaml.safe_dump(meta).encode(), "metadata.yaml")})
    pk = submission_id(response)
    submission_intake(submission_id=pk)
    return Client(HTTP_AUTHORIZATION=f"Token {token}").get(f"/api/v1/submissions/{pk}/").json()


def _verify(pk: int) -> Submission:
    job = VerificationJob.objects.get(submission_id=pk, status=JobStatus.PENDING)
    assert verification_run(job_id=job.pk) == "done"
    return Submission.objects.get(pk=pk)


def _meta(**changes) -> dict:
    return build_metadata(**{
        "agent_display_name": "Red team (stub)", "agent_org_display_name": "Red team",
        "agent_url": "https://example.org/red-team", "harness": "terminus-2",
        "harness_version": "2.0.0", "benchmark": SLUG,
        "models": [{"model_name": MODEL, "model_provider": "openai",
                    "model_display_name": "Stub", "model_org_display_name": "Red team"}],
        **changes})


def _job(tasks: dict, root: Path, name: str, **kw):
    return HarborJobBuilder(tasks, agent="terminus-2", model=MODEL, job_name=name,
                            **kw).build(root)


def _rerun_rows(sub: Submission) -> list[TrialCheck]:
    return list(TrialCheck.objects.filter(job__submission=sub, kind=CheckKind.RERUN))


def _summary(sub: Submission) -> dict:
    return sub.verification_jobs.order_by("-created_at").first().summary


# ---------------------------------------------------------------------------- the attacks


def test_v1_cost_shrunk_sample(site, oracle, tmp_path):
    """Every pass fabricated; $34 reported on one trial and $0 on the rest, which used to cap
    the re-run at 100 / 34 = 2 trials. The site sizes the sample from its own estimate: all 7
    tasks are re-run, the reported costs are flagged both ways, and the failing re-runs
    against 21 passes of the site's grading are a discrepancy."""
    job = _job(site, tmp_path / "run", "cost",
               outputs={t: vs.oracle_output(oracle, t) for t in site})
    for i, trial in enumerate(job.all_trials()):
        edit_json(trial / "result.json",
                  lambda d, c=34.0 if i == 0 else 0.0: d["agent_result"].update(cost_usd=c))
    doc = _upload(tmp_path / "run", _meta(), _account("cost"))
    assert doc["status"] == "queued", doc.get("problems")
    sub = _verify(doc["id"])
    rerun = _summary(sub)["rerun"]
    assert len(_rerun_rows(sub)) == 7 and rerun["rerun_runs"] == 7, rerun
    assert rerun["cost"]["basis"].startswith("the site's default") or "median" in rerun[
        "cost"]["basis"]
    assert rerun["cost"]["trials_far_above"] == 1 and rerun["cost"]["trials_far_below"] == 20
    assert rerun["decision"] == "inflated" and rerun["significant"]
    assert sub.status == "discrepancy", coverage_badge(sub.coverage)


def test_v2_fabricated_xray_passes_without_a_claimed_grade(site, oracle, tmp_path):
    """The X-ray trials claim no grade (no judge on the submitter's side) and the other tasks
    claim failures, while every output is the right answer: the site's grading makes all 21
    passes. The re-runs are compared with those passes, not with the claims: a discrepancy,
    and no failing re-run raises a trial's level."""
    rewards = {t: ([None] * 3 if t == XRAY else [0.0] * 3) for t in site}
    _job(site, tmp_path / "run", "xray", outputs={t: vs.oracle_output(oracle, t) for t in site},
         rewards=rewards)
    doc = _upload(tmp_path / "run", _meta(), _account("xray"))
    assert doc["status"] == "queued", doc.get("problems")
    sub = _verify(doc["id"])
    assert sub.trials.filter(success=True).count() == 21
    assert sub.trials.filter(claimed_success=True).count() == 0
    rerun = _summary(sub)["rerun"]
    assert (rerun["site_success"], rerun["rerun_success"]) == (7, 0), rerun
    assert rerun["site_pass_rerun_fail"] == 7 and rerun["significant"]
    assert sub.status == "discrepancy"
    assert not sub.trials.filter(verification_level="re-run").exists()


def test_v3_model_list_swapped_is_refused(site, tmp_path):
    """The trials ran one model; the metadata lists a weaker one first, to be shown."""
    _job(site, tmp_path / "run", "swap")
    weak = {"model_name": "openai/gpt-5-nano", "model_provider": "openai",
            "model_display_name": "GPT-5 nano", "model_org_display_name": "OpenAI"}
    meta = _meta()
    meta["models"] = [weak, *meta["models"]]
    doc = _upload(tmp_path / "run", meta, _account("swap"))
    assert doc["status"] == "refused"
    assert "metadata_model_mismatch" in {p["code"] for p in doc["problems"]}
    assert not Trial.objects.filter(submission_id=doc["id"]).exists()


def test_v4_custom_agent_class_named_as_a_stock_harness(site, oracle, tmp_path):
    """A subclass whose name() says terminus-2, loaded by import path: never re-run as the
    stock harness; the submission says why it cannot be verified, and whose reason it is."""
    custom = "red_team.agents:CheatingTerminus2"
    job = _job(site, tmp_path / "run", "custom",
               outputs={t: vs.oracle_output(oracle, t) for t in site})
    for trial in job.all_trials():
        for name, where in (("config.json", lambda d: d["agent"]),
                            ("result.json", lambda d: d["config"]["agent"]),
                            ("lock.json", lambda d: d["agent"])):
            edit_json(trial / name, lambda d, w=where: w(d).update(import_path=custom))
    doc = _upload(tmp_path / "run", _meta(), _account("custom"))
    assert doc["status"] == "queued", doc.get("problems")
    sub = _verify(doc["id"])
    assert _rerun_rows(sub)[0].status == "not_runnable"
    assert sub.status == "consistent"
    badge = coverage_badge(sub.coverage)
    assert f"not re-runnable because of the submission: custom agent class ({custom})" in badge


def test_v5_rerolled_archive_is_linked_and_its_evidence_pooled(site, oracle, tmp_path,
                                                               settings):
    """A discrepant upload re-rolled by one byte, from another account: linked by its trial
    ids and trajectories, given the same sample, the re-runs already made instead of fresh
    draws, and the discrepancy of the first."""
    settings.VERIFICATION_CHECKS = ["rerun"]  # the claims stand as the site's outcomes here
    _job(site, tmp_path / "run", "reroll", outputs={t: vs.oracle_output(oracle, t) for t in site})
    first = _upload(tmp_path / "run", _meta(), _account("roller"))
    assert first["status"] == "queued", first.get("problems")
    one = _verify(first["id"])
    assert one.status == "discrepancy"
    reruns = len(_rerun_rows(one))
    (tmp_path / "run" / "notes.txt").write_text("one more byte\n")
    second = _upload(tmp_path / "run", _meta(), _account("roller-too"))
    assert second["status"] == "queued"
    two = Submission.objects.get(pk=second["id"])
    link = SubmissionLink.objects.get(submission=two, linked=one)
    assert (link.shared_trial_ids, link.shared_trajectories, link.same_owner) == (21, 21, False)
    assert two.lineage_id == one.pk and two.archive_sha256 != one.archive_sha256
    assert two.rerun_sample == one.rerun_sample  # no new sample for new bytes
    two = _verify(two.pk)
    assert _rerun_rows(two) == [] and len(_rerun_rows(one)) == reruns  # no fresh draw
    rerun = _summary(two)["rerun"]
    assert rerun["pooled_from"] == [one.pk] and rerun["significant"]
    assert two.status == "discrepancy" and two.coverage["linked_discrepancies"] == [one.pk]


def test_v6_ground_order_under_the_default_secret(site, tmp_path):
    """The public default secret let a submitter grind archive bytes until the order kept
    inflated tasks out of the first look. A production site now refuses to start with it, and
    an order ground under it says nothing about the order the site's own secret gives."""
    from django.conf import settings

    env = {**os.environ, "DEBUG": "0", "SECRET_KEY": "k" * 64,
           "DATABASE_URL": "sqlite:///" + str(tmp_path / "db.sqlite3"),
           "CELERY_BROKER_URL": "redis://127.0.0.1:6379/15", "ALLOWED_HOSTS": "example.org",
           "VERIFICATION_SAMPLE_SECRET": settings.VERIFICATION_SAMPLE_SECRET_DEFAULT}
    done = subprocess.run([sys.executable, "manage.py", "check"],  # noqa: S603
                          cwd=vs.REPO, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode != 0 and "VERIFICATION_SAMPLE_SECRET" in done.stderr, done.stderr
    trials = [(t, a) for t in site for a in (1, 2, 3)]
    wanted = set(list(site)[:3])  # the tasks a cheater wants out of the first look
    ground = next(d for d in (f"{i:064x}" for i in range(400)) if not wanted & {
        t for t, _a in sample_order(secret=settings.VERIFICATION_SAMPLE_SECRET_DEFAULT,
                                    archive_sha256=d, trials=trials)[:3]})
    real = sample_order(secret=settings.VERIFICATION_SAMPLE_SECRET, archive_sha256=ground,
                        trials=trials)
    assert real != sample_order(secret=settings.VERIFICATION_SAMPLE_SECRET_DEFAULT,
                                archive_sha256=ground, trials=trials)


def test_v7_fakes_spread_one_per_task(site, oracle, tmp_path):
    """One fabricated pass on every task (attempt 1), honest failures elsewhere: each task's
    claims move by one pass only, which a test stratified by task barely sees. On this
    benchmark no design reaches the power floor, so it can never be verified, and its failing
    re-runs leave the last look short of "consistent"."""
    outputs = {t: vs.oracle_output(oracle, t) for t in site}
    job = _job(site, tmp_path / "run", "spread", outputs=outputs,
               rewards={t: [1.0, 0.0, 0.0] for t in site})
    for task in site:  # attempts 2 and 3 keep their honest, wrong output
        for attempt in (2, 3):
            for f in (job.trial(task, attempt) / "artifacts").rglob("*"):
                if f.is_file() and f.name != "manifest.json":
                    f.write_bytes(b"{}\n")
    doc = _upload(tmp_path / "run", _meta(), _account("spread"))
    assert doc["status"] == "queued", doc.get("problems")
    sub = _verify(doc["id"])
    assert sub.trials.filter(success=True).count() == 7
    rerun = _summary(sub)["rerun"]
    assert rerun["rerun_success"] == 0 and not rerun["plan"]["powered"]
    assert sub.status != "verified"
    why = " ".join(sub.coverage["not_verified_because"])
    assert "re-run underpowered" in why and ("inconclusive" in why or sub.status == "discrepancy")


def test_v8_opt_out_by_version_string(site, oracle, tmp_path):
    """A harness version the site does not run exactly: not re-run, never verified, and the
    badge says the reason is the submission's, not the site's."""
    builder = HarborJobBuilder(site, agent="terminus-2", model=MODEL, job_name="version",
                               outputs={t: vs.oracle_output(oracle, t) for t in site})
    builder.version = "2.0.1"
    builder.build(tmp_path / "run")
    doc = _upload(tmp_path / "run", _meta(harness_version="2.0.1"), _account("version"))
    assert doc["status"] == "queued", doc.get("problems")
    sub = _verify(doc["id"])
    assert sub.status == "consistent"
    assert sub.coverage["not_verified_because"][0].startswith(
        "not re-runnable because of the submission: ")
    assert "2.0.1" in sub.coverage["not_verified_because"][0]
    assert "because of the submission" in coverage_badge(sub.coverage)
