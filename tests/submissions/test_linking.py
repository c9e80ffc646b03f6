"""Re-uploads of the same runs are linked at intake (submissions/linking.py), within an account
and across accounts, and a linked upload is ordered by its chain's first archive; identical right
answers alone link nothing. Through the upload API and the intake service (house style HS32)."""

from __future__ import annotations

import io

import pytest
import yaml
from django.test import Client

from devtools.harbor_fixtures import HarborJobBuilder, build_metadata, edit_json
from submissions import linking
from submissions.models import Submission, SubmissionLink
from submissions.services import token_issue
from tests.submissions.intake_support import targz, validated

MODEL = "openai/gpt-5.5"


@pytest.fixture
def upload(django_capture_on_commit_callbacks, django_user_model):
    def post(root, user: str) -> Submission:
        owner, _ = django_user_model.objects.get_or_create(username=user)
        token = token_issue(user=owner, name=f"t{Submission.objects.count()}")[1]
        files = {"archive": _named(targz(root), "run.tar.gz"),
                 "metadata": _named(yaml.safe_dump(build_metadata()).encode(), "metadata.yaml")}
        response = Client(HTTP_AUTHORIZATION=f"Token {token}").post("/api/v1/submissions/",
                                                                    files)
        doc = validated(response, token=token, capture=django_capture_on_commit_callbacks)
        assert doc["status"] == "queued", doc["problems"]
        return Submission.objects.get(pk=doc["id"])
    return post


def _named(data: bytes, name: str):
    f = io.BytesIO(data)
    f.name = name
    return f


def _job(tasks, root, name="2026-12-02__09-18-40", **kw):
    return HarborJobBuilder(tasks, agent="codex", model=MODEL, job_name=name, **kw).build(root)


def test_a_reupload_by_one_byte_is_linked_across_accounts_and_keeps_the_order(tasks, tmp_path,
                                                                             upload):
    _job(tasks, tmp_path / "run")
    first = upload(tmp_path / "run", "alice")
    assert first.lineage_id is None and not SubmissionLink.objects.exists()
    assert first.trials.exclude(harbor_trial_id="").count() == 21
    assert first.trials.exclude(trajectory_sha256="").count() == 21
    (tmp_path / "run" / "notes.txt").write_text("a new byte\n")
    second = upload(tmp_path / "run", "mallory")
    link = SubmissionLink.objects.get(submission=second)
    assert link.linked_id == first.pk and not link.same_owner
    assert (link.shared_trial_ids, link.shared_trajectories, link.shared_outputs) == (21, 21, 21)
    assert second.lineage_id == first.pk and second.archive_sha256 != first.archive_sha256
    assert second.rerun_sample == first.rerun_sample and second.rerun_salt != first.rerun_salt
    third = upload(tmp_path / "run", "alice")  # the chain's root stays the first upload
    assert third.lineage_id == first.pk
    assert SubmissionLink.objects.get(submission=third, linked=first).same_owner
    summary = linking.lineage_summary(first)
    assert (summary["chain"], summary["rerolls"]) == ([first.pk, second.pk, third.pk], 2)
    assert {ln["submission"] for ln in summary["links"]} == {second.pk, third.pk}


def test_identical_right_answers_alone_link_nothing(tasks, tmp_path, upload):
    """Two honest agents that both solve every task write the same answers; their runs share no
    trial id and no trajectory, so they are not linked."""
    outputs = {t: b'{"answer": "the same right answer"}\n' for t in tasks}
    _job(tasks, tmp_path / "a", name="agent-a", outputs=outputs)
    _job(tasks, tmp_path / "b", name="agent-b", outputs=outputs)
    for trial in (tmp_path / "b").rglob("trajectory.json"):
        trial.write_text(trial.read_text().replace("Solve the task", "Please solve"))
    upload(tmp_path / "a", "alice")
    b = upload(tmp_path / "b", "bob")
    assert not SubmissionLink.objects.filter(submission=b).exists() and b.lineage_id is None


def test_copied_wrong_outputs_link_even_with_new_ids_and_trajectories(tasks, tmp_path, upload):
    """Most of the outputs identical, failing ones among them: the same runs, relabelled."""
    _job(tasks, tmp_path / "a", name="orig", rewards={t: [0.0, 0.0, 0.0] for t in tasks})
    job = _job(tasks, tmp_path / "b", name="relabelled",
               rewards={t: [0.0, 0.0, 0.0] for t in tasks})
    for trial in job.all_trials():
        trajectory = trial / "agent" / "trajectory.json"
        trajectory.write_text(trajectory.read_text().replace("Solve the task", "Do the task"))
        edit_json(trial / "result.json", lambda d: d.update(id=d["id"][::-1]))
    a = upload(tmp_path / "a", "alice")
    b = upload(tmp_path / "b", "bob")
    link = SubmissionLink.objects.get(submission=b)
    assert link.linked_id == a.pk and (link.shared_trial_ids, link.shared_trajectories) == (0, 0)
    assert link.shared_outputs == 21
