"""Per-trial views carry the grader version each trial's score was graded with (R11): the
trials CSV, the trials API and the trial (trajectory) page agree."""

import csv
import io
import json

import pytest

from submissions.models import SubmissionStatus, Trial
from submissions.services import submission_publish
from tests.factories import AgentFactory, published_submission

Q = "?benchmark=small@1.0"
pytestmark = pytest.mark.django_db


def test_grader_version_in_trials_csv_api_and_trial_page(client, small_benchmark, settings,
                                                         tmp_path, django_user_model):
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    settings.MEDIA_ROOT = str(tmp_path / "media")
    bv, tasks = small_benchmark
    sub = published_submission(AgentFactory(display_name="Graded (M1)", slug="graded"), tasks,
                               ["PP", "FF", "PF", "FF", "PP"], files_prefix="subs/graded/tree",
                               status=SubmissionStatus.VERIFIED, published_at=None)
    trial = Trial.objects.get(submission=sub, benchmark_task=tasks[0], attempt=1)
    default_storage.save("subs/graded/tree/t/agent/trajectory.json",
                         ContentFile(json.dumps({"schema_version": "ATIF-v1.7", "steps": []})))
    Trial.objects.filter(pk=trial.pk).update(verified_reward=1.0, grader_version="img@3",
                                             trajectory_path="t/agent/trajectory.json")
    submission_publish(submission=sub,
                       actor=django_user_model.objects.create_user("m", is_staff=True))

    response = client.get(f"/trials.csv{Q}")
    rows = {int(r["trial_id"]): r for r in csv.DictReader(io.StringIO(
        b"".join(response.streaming_content).decode()))}
    api = {r["trial_id"]: r for r in client.get(f"/api/v1/trials/{Q}&limit=5000").json()[
        "results"]}
    assert rows[trial.pk]["grader_version"] == api[trial.pk]["grader_version"] == "img@3"
    other = Trial.objects.get(submission=sub, benchmark_task=tasks[0], attempt=2)
    assert rows[other.pk]["grader_version"] == api[other.pk]["grader_version"] == ""
    assert (rows[trial.pk]["infra_confirmed"], api[trial.pk]["infra_confirmed"]) == ("false",
                                                                                      False)
    page = client.get(f"/submissions/{sub.pk}/trials/{trial.pk}/trajectory/").content.decode()
    assert 'data-testid="trial-grader-version">(graded with img@3)' in page
