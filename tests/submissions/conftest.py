"""Personas and a stored submission. Django imports stay inside the fixtures so the
Django-free modules here (archive, Harbor validation) also run with `-p no:django`."""

import json

import pytest


def _users():
    from django.contrib.auth import get_user_model

    return get_user_model().objects


@pytest.fixture
def owner(db):
    return _users().create_user("owner", "owner@example.org", "pw-owner-123!")


@pytest.fixture
def stranger(db):
    return _users().create_user("stranger", "s@example.org", "pw-stranger-123!")


@pytest.fixture
def maintainer(db):
    return _users().create_user("maint", "m@example.org", "pw-maint-123!",
                                                is_staff=True)


@pytest.fixture
def owned_submission(owner, tmp_path, settings):
    """A queued upload owned by `owner`, with one trial and a stored trajectory."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage
    from django.utils import timezone

    from submissions.models import SubmissionStatus, Trial
    from tests.factories import BenchmarkTaskFactory, SubmissionFactory

    settings.MEDIA_ROOT = str(tmp_path / "media")
    sub = SubmissionFactory(owner=owner, status=SubmissionStatus.QUEUED, published_at=None,
                            queued_at=timezone.now(),
                            files_prefix="submissions/test/tree", trials_total=1)
    task = BenchmarkTaskFactory(category__benchmark_version=sub.benchmark_version)
    trajectory = {"schema_version": "ATIF-v1.7", "session_id": "s",
                  "agent": {"name": "oracle", "version": "1"},
                  "steps": [{"step_id": 1, "source": "agent",
                             "message": "<script>alert('x')</script>",
                             "tool_calls": [{"tool_call_id": "c1", "function_name": "Bash",
                                             "arguments": {"command": "echo hi"}}],
                             "observation": {"results": [{"source_call_id": "c1",
                                                          "content": "hi\n" * 2000}]}}]}
    default_storage.save("submissions/test/tree/job/t1/agent/trajectory.json",
                         ContentFile(json.dumps(trajectory).encode()))
    Trial.objects.create(submission=sub, benchmark_task=task, attempt=1, outcome="passed",
                         success=True, claimed_outcome="passed", claimed_success=True,
                         reward=1.0, trial_dir="job/t1",
                         trajectory_path="job/t1/agent/trajectory.json")
    return sub



@pytest.fixture
def tasks(db, settings, tmp_path) -> dict[str, str]:
    """The synthetic version registered (sync_tasks), storage and staging under tmp_path:
    task name -> content digest, as HarborJobBuilder takes them."""
    from django.core.management import call_command

    from evaluation.models import BenchmarkVersion

    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.SUBMISSION_STAGING_DIR = tmp_path / "staging"
    call_command("sync_tasks", verbosity=0)
    bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    return {t.name: t.content_digest for t in bv.tasks.all()}
