"""Through the upload API as a submitter meets them.

Point 5: the site's own agents (oracle, nop, replay) are never a submitter's harness. An upload
naming one is refused with a problem on the status API, and nothing of it is kept, unless it is
a labelled reference run: on a try-out version (the synthetic benchmark the Submit page's
try-out uses) or from a maintainer whose metadata says `reference: true`. A reference run is
never ranked (publishing it is refused), carries no model, and says "reference run" on the
status page, in the API and in the client's verdict line.

Point 6: Harbor's own submission rules broken together are listed in one refusal (each rule on
its own: tests/submissions/test_harbor_validation.py).
"""

from __future__ import annotations

import io
import shutil

import pytest
import yaml
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.test import Client

from evaluation.models import AIModel, BenchmarkVersion, Harness
from submissions.models import Submission, SubmissionStatus, Trial
from submissions.publishing import tryout_reference_publish
from submissions.services import (
    InvalidTransition,
    SubmissionError,
    submission_publish,
    submission_transition,
    submission_verdict_record,
    token_issue,
)
from devtools.harbor_fixtures import HarborJobBuilder, build_metadata, edit_json
from tests.submissions.intake_support import problem_codes, submission_id, targz, validated

SLUG = "healthagentbench-synthetic@1.0"
NO_MODEL = [{"model_name": "none", "model_provider": "none", "model_display_name": "no model",
             "model_org_display_name": "none"}]


@pytest.fixture
def synthetic(db, settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.SUBMISSION_STAGING_DIR = tmp_path / "staging"
    call_command("sync_tasks", verbosity=0)
    bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    return bv, {t.name: t.content_digest for t in bv.tasks.all()}


@pytest.fixture
def ranked(synthetic):
    """The same version, no longer marked as a try-out: it ranks submitted agents only."""
    bv, tasks = synthetic
    BenchmarkVersion.objects.filter(pk=bv.pk).update(allows_reference_runs=False)
    return bv, tasks


def _token(user) -> str:
    return token_issue(user=user)[1]


def _site_agent_run(tmp_path, tasks, agent="oracle", **kwargs) -> bytes:
    """`harbor run -a oracle|nop` as Harbor writes it: no model, no trajectory (agent/oracle.txt)."""
    root = tmp_path / f"upload-{agent}"
    job = HarborJobBuilder(tasks, agent=agent, model=None,
                           rewards={t: [0.0 if agent == "nop" else 1.0] * 3 for t in tasks},
                           **kwargs).build(root)
    for trial in job.all_trials():
        (trial / "agent" / "trajectory.json").unlink()
    return targz(root)


def _meta(harness="oracle", **extra) -> dict:
    return build_metadata(agent_display_name=f"{harness.title()} (reference)",
                          agent_org_display_name="Harbor",
                          agent_url="https://github.com/harbor-framework/harbor",
                          harness=harness, harness_version="1.0.0", models=NO_MODEL, **extra)


def _post(token, archive: bytes, meta: dict):
    files = {"archive": _named(archive, "run.tar.gz"),
             "metadata": _named(yaml.safe_dump(meta).encode(), "metadata.yaml")}
    return Client(HTTP_AUTHORIZATION=f"Token {token}").post("/api/v1/submissions/", files)


def _named(data: bytes, name: str):
    f = io.BytesIO(data)
    f.name = name
    return f


def _nothing_kept(pk: int) -> None:
    sub = Submission.objects.get(pk=pk)
    assert (sub.status, sub.agent, sub.benchmark_version, sub.archive) == (
        "refused", None, None, "")
    assert not Trial.objects.filter(submission=sub).exists()
    assert not default_storage.exists(f"submissions/{sub.created_at:%Y/%m/%d}/{sub.pk}-"
                                      f"{sub.archive_sha256[:12]}/archive")


# ------------------------------------------------------------------ point 5: refused


@pytest.mark.parametrize("agent", ["oracle", "nop"])
def test_a_site_agent_is_refused_on_a_ranked_version_and_nothing_is_kept(
        ranked, tmp_path, owner, agent, django_capture_on_commit_callbacks):
    _bv, tasks = ranked
    token = _token(owner)
    response = _post(token, _site_agent_run(tmp_path, tasks, agent), _meta(agent))
    doc = validated(response, token=token, capture=django_capture_on_commit_callbacks)
    assert doc["status"] == "refused"
    assert doc["problems"] == [{
        "code": "site_agent_harness", "path": "metadata:harness",
        "message": f"the harness '{agent}' is one of the site's own agents (nop, oracle, "
                   f"replay), which the site runs itself; it is never a submitter's harness, "
                   f"and {SLUG} ranks submitted agents only. Submit your own agent's run, or "
                   "try the path out on a try-out version (none on this site), where it is "
                   "accepted as a labelled reference run (never ranked); a maintainer may "
                   "register a reference run with `reference: true` in the metadata"}]
    assert doc["reference"] is False and doc["agent"] is None
    _nothing_kept(doc["id"])
    assert not Harness.objects.filter(slug=agent).exists()
    # The status page lists it for its owner.
    client = Client()
    client.force_login(owner)
    page = client.get(f"/submissions/{doc['id']}/").content.decode()
    assert "site_agent_harness" in page and "never a submitter&#x27;s harness" in page


def test_a_site_agent_is_refused_with_every_other_problem_at_once(
        ranked, tmp_path, owner, django_capture_on_commit_callbacks):
    """The refusal comes with the job's other problems (one response), and a site agent's name
    under another harness name, or a harness named `replay`, is caught too."""
    _bv, tasks = ranked
    token = _token(owner)
    archive = _site_agent_run(tmp_path, tasks, "oracle", overrides={"timeout_multiplier": 2.0})
    doc = validated(_post(token, archive, _meta("my-agent")), token=token,
                    capture=django_capture_on_commit_callbacks)
    assert {"site_agent_harness", "metadata_harness_mismatch", "timeout_multiplier"} <= \
        problem_codes(doc), doc["problems"]
    assert "'oracle' is one of the site's own agents" in next(
        p["message"] for p in doc["problems"] if p["code"] == "site_agent_harness")
    _nothing_kept(doc["id"])
    codex = tmp_path / "codex"
    HarborJobBuilder(tasks, agent="codex", model="openai/gpt-5.5").build(codex)
    doc = validated(_post(token, targz(codex), build_metadata(harness="replay")), token=token,
                    capture=django_capture_on_commit_callbacks)
    assert {"site_agent_harness", "metadata_harness_mismatch"} <= problem_codes(doc)
    assert any(p["message"].startswith("the harness 'replay' is one of the site's own agents")
               for p in doc["problems"]), doc["problems"]


def test_only_a_maintainer_may_register_a_reference_run(
        ranked, tmp_path, owner, maintainer, django_capture_on_commit_callbacks):
    bv, tasks = ranked
    archive = _site_agent_run(tmp_path, tasks, "oracle")

    def verdict(token, meta) -> dict:
        return validated(_post(token, archive, meta), token=token,
                         capture=django_capture_on_commit_callbacks)

    # A submitter's `reference: true` is no way around it.
    doc = verdict(_token(owner), _meta(reference=True))
    assert problem_codes(doc) == {"site_agent_harness"}
    codex = tmp_path / "codex"
    HarborJobBuilder(tasks, agent="codex", model="openai/gpt-5.5").build(codex)
    doc = validated(_post(_token(owner), targz(codex), build_metadata(reference=True)),
                    token=_token(owner), capture=django_capture_on_commit_callbacks)
    assert doc["problems"] == [{
        "code": "reference_not_allowed", "path": "metadata:reference",
        "message": f"`reference: true` is for maintainers: a reference run of {bv.slug} is "
                   "registered by a maintainer (on the try-out versions, none on this site, "
                   "anyone's reference run is accepted); remove it to submit this run for "
                   "ranking"}]
    # A maintainer without `reference: true` is refused like anyone (no silent exemption).
    staff = _token(maintainer)
    assert problem_codes(verdict(staff, _meta())) == {"site_agent_harness"}
    # A maintainer's `reference: true`: accepted as a labelled reference run.
    doc = verdict(staff, _meta(reference=True))
    assert doc["status"] == "queued", doc
    assert (doc["reference"], doc["kind"], doc["model"]) == (
        True, "reference run", "reference run, no model")
    sub = Submission.objects.get(pk=doc["id"])
    assert sub.is_reference and sub.agent.model.slug == "reference-run-no-model"
    assert sub.trials.count() == 21 and not sub.on_tryout_version

    # A ranked version's reference run is never published, by anyone, whatever its verdict.
    Submission.objects.filter(pk=sub.pk).update(status=SubmissionStatus.VERIFIED)
    sub.refresh_from_db()
    client = Client()
    client.force_login(maintainer)
    page = client.get(f"/submissions/{sub.pk}/").content.decode()
    assert "on a ranked version it cannot be published" in page
    assert 'data-testid="publish"' not in page and "reference-not-publishable" in page
    response = client.post(f"/submissions/{sub.pk}/publish/", follow=True)
    shown = response.content.decode().split('data-testid="message">')[1].split("</div>")[0]
    assert shown == (f"submission {sub.pk} is a reference run (oracle, no model) of a ranked "
                     "version: reference runs are never ranked, so it cannot be published")
    assert not tryout_reference_publish(submission=sub)
    with pytest.raises(InvalidTransition, match="only on a try-out version"):
        submission_transition(submission=sub, to_status=SubmissionStatus.PUBLISHED)
    with pytest.raises(IntegrityError), transaction.atomic():
        Submission.objects.filter(pk=sub.pk).update(status=SubmissionStatus.PUBLISHED)
    sub.refresh_from_db()
    assert sub.status == "verified" and sub.published_at is None


# ------------------------------------------------------------------ point 5: reference runs


def test_the_oracle_on_the_try_out_version_is_a_reference_run_published_unranked(
        synthetic, tmp_path, owner, maintainer, django_capture_on_commit_callbacks):
    bv, tasks = synthetic
    assert bv.allows_reference_runs  # sync_tasks marks the synthetic benchmark as a try-out
    token = _token(owner)
    doc = validated(_post(token, _site_agent_run(tmp_path, tasks, "oracle"), _meta()),
                    token=token, capture=django_capture_on_commit_callbacks)
    assert doc["status"] == "queued", doc
    assert (doc["reference"], doc["kind"], doc["model"]) == (
        True, "reference run", "reference run, no model")
    sub = Submission.objects.get(pk=doc["id"])
    assert sub.is_reference and sub.trials.count() == 21
    assert sub.agent.model.display_name == "reference run, no model"
    assert AIModel.objects.filter(slug="none").count() == 0  # the metadata's "none" is not kept
    assert "a reference run (never ranked, no model)" in sub.events.last().note

    assert sub.on_tryout_version

    # A discrepancy stays for a maintainer; a verdict of verified or consistent is published by
    # the site as verification records it (jobs._finish), unranked and labelled.
    Submission.objects.filter(pk=sub.pk).update(status=SubmissionStatus.DISCREPANCY)
    sub.refresh_from_db()
    assert not tryout_reference_publish(submission=sub)
    Submission.objects.filter(pk=sub.pk).update(status=SubmissionStatus.CONSISTENT)
    assert submission_verdict_record(submission_id=sub.pk)["verdict"] == "consistent"
    sub.refresh_from_db()
    assert tryout_reference_publish(submission=sub)
    sub.refresh_from_db()
    assert sub.status == "published" and sub.published_at is not None
    assert sub.events.last().actor is None
    assert sub.events.last().note == ("published by the site: a reference run on a try-out "
                                      "version, shown unranked")
    from leaderboard.models import LeaderboardEntry
    from leaderboard.selectors import leaderboard_window, unranked_rows

    entry = LeaderboardEntry.objects.get(submission=sub)
    assert (entry.verification_level, entry.ranked, entry.rank) == ("reference", False, None)
    assert entry.badge.startswith("reference run (not ranked): consistent, not verified")
    assert entry.unranked_reason == entry.badge
    assert [e.pk for e in unranked_rows(benchmark_version=bv)] == [entry.pk]
    assert leaderboard_window(benchmark_version=bv, ranked=True)[1] == 0
    page = Client().get(f"/?benchmark={bv.slug}").content.decode()
    listed = page.split('data-testid="unranked-table"')[1].split("</table>")[0]
    assert "reference run (not ranked)" in listed and ">reference</span>" in listed
    import csv as csvlib

    response = Client().get(f"/leaderboard.csv?benchmark={bv.slug}")
    rows = list(csvlib.DictReader(io.StringIO(b"".join(response).decode())))
    assert [(r["verification_level"], r["ranked"], r["rank"]) for r in rows] == [
        ("reference", "false", "")], rows
    # The owner's API says so too.
    doc = Client(HTTP_AUTHORIZATION=f"Token {token}").get(f"/api/v1/submissions/{sub.pk}/").json()
    assert (doc["status"], doc["reference"], doc["kind"]) == ("published", True, "reference run")


def test_the_clients_verdict_line_says_reference_run():
    from submissions.client import verdict_lines

    doc = {"id": 9, "benchmark": SLUG, "status": "verified", "url": "/submissions/9/",
           "reference": True, "verification": {"verdict": "verified", "summary": {
               "headline": "verified: 7/7 re-grades match"}}}
    assert verdict_lines("http://site/", doc) == [
        f"reference run 9 on {SLUG}: verified",
        "  verdict: reference run (never ranked, no model): verified: 7/7 re-grades match",
        "  status page: http://site/submissions/9/"]


# ------------------------------------------------------------------ point 6: one refusal


def test_harbors_submission_rules_broken_together_are_one_refusal(
        synthetic, tmp_path, owner, django_capture_on_commit_callbacks):
    """A timeout multiplier in a trial, a resource override in the job's lock.json, a passing
    trial without its trajectory, a missing attempt and task content that is not the version's
    (a trial's lock.json, the job's lock.json): every one on the status API, nothing kept."""
    _bv, tasks = synthetic
    names = sorted(tasks)
    root = tmp_path / "upload"
    job = HarborJobBuilder(tasks, agent="codex", model="openai/gpt-5.5").build(root)
    trial = lambda task, n: job.trial(task, n).relative_to(root).as_posix()  # noqa: E731
    edit_json(job.trial(names[0], 1) / "config.json",
              lambda d: d.update({"agent_timeout_multiplier": 2.0}))
    edit_json(job.job_dir / "lock.json",
              lambda d: d["trials"][5]["environment"].update({"override_cpus": 8}))
    (job.trial(names[1], 1) / "agent" / "trajectory.json").unlink()
    (job.trial(names[2], 3) / "agent" / "trajectory.json").unlink()
    shutil.rmtree(job.trial(names[3], 3))
    edit_json(job.trial(names[4], 2) / "lock.json",
              lambda d: d["task"].update({"digest": "sha256:" + "0" * 64}))

    def other_content(doc):
        for entry in doc["trials"]:
            if entry["task"]["path"] == f"tasks/{names[5]}":
                entry["task"]["digest"] = "sha256:" + "1" * 64
    edit_json(job.job_dir / "lock.json", other_content)
    token = _token(owner)
    doc = validated(_post(token, targz(root), build_metadata()), token=token,
                    capture=django_capture_on_commit_callbacks)
    lock = f"{job.job_dir.name}/lock.json"
    assert {(p["code"], p["path"]) for p in doc["problems"]} == {
        ("timeout_multiplier", trial(names[0], 1)),
        ("override", lock),
        ("trajectory_missing", f"{trial(names[1], 1)}/agent/trajectory.json"),
        ("trajectory_missing", f"{trial(names[2], 3)}/agent/trajectory.json"),
        ("attempts_missing", names[3]),
        ("job_trials_missing", f"{job.job_dir.name}/result.json"),
        ("task_digest_mismatch", trial(names[4], 2)),
        ("task_digest_mismatch", lock),
    }
    messages = {p["code"] + p["path"]: p["message"] for p in doc["problems"]}
    assert messages["attempts_missing" + names[3]] == (f"{names[3]}: 2 complete attempt(s), 3 "
                                                      "required")
    assert "environment.override_cpus is set (8) in 1 of its 21 trial locks" in messages[
        "override" + lock]
    assert f"locks {names[5]} at sha256:1111111111111111..." in messages[
        "task_digest_mismatch" + lock]
    _nothing_kept(doc["id"])
