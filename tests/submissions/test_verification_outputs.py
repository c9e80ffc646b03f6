"""Which stored files verification grades: the same place the intake found.

The release matrix found that Harbor 0.1.x and 0.13 collect /workspace/output at
artifacts/output (the base name; the manifest says so), where 0.2x mirror the whole path
(artifacts/workspace/output). The intake read the manifest; verification looked only at the
mirrored path, so it graded nothing and every pass of those releases became a failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from submissions.verification.checks.base import materialize_outputs
from tests.factories import SubmissionFactory, TrialFactory

pytestmark = pytest.mark.django_db

REPO = Path(__file__).resolve().parents[2]
ETL = REPO / "tasks" / "ehr-format-conversion" / "synthetic_01"  # declares /workspace/output/
CT = REPO / "tasks" / "ct-abnormality-classification" / "synthetic_01"  # /workspace/submission.json


def _store(media: Path, rel: str, text: str) -> None:
    path = media / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize(("task", "stored", "manifest_dest", "graded"), [
    # Harbor 0.1.x and 0.13: the base name, named by the manifest
    (ETL, "artifacts/output/data.csv", "artifacts/output", "workspace/output/data.csv"),
    (CT, "artifacts/submission.json", "artifacts/submission.json", "workspace/submission.json"),
    # Harbor 0.2x: the mirrored path
    (ETL, "artifacts/workspace/output/data.csv", "artifacts/workspace/output",
     "workspace/output/data.csv"),
])
def test_the_stored_output_is_found_where_the_manifest_says(settings, tmp_path, task, stored,
                                                           manifest_dest, graded):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    sub = SubmissionFactory(files_prefix="submissions/7/files")
    trial_dir = "ehr/synthetic_01__abc"
    base = tmp_path / "media" / "submissions/7/files" / trial_dir
    source = "/workspace/output" if task == ETL else "/workspace/submission.json"
    _store(base, stored, "the answer\n")
    _store(base, "artifacts/manifest.json", json.dumps([
        {"source": "/logs/artifacts", "destination": "artifacts", "type": "directory",
         "status": "empty"},
        {"source": source, "destination": manifest_dest, "type": "directory", "status": "ok"}]))
    trial = TrialFactory(submission=sub, trial_dir=trial_dir,
                         artifact_paths=[f"{trial_dir}/{manifest_dest}"])
    found = materialize_outputs(trial, task, tmp_path / "out")
    assert found["missing"] == [] and len(found["found"]) == 1
    assert (tmp_path / "out" / graded).read_text() == "the answer\n"


def test_without_a_manifest_the_mirrored_path_is_read(settings, tmp_path):
    """A trial with no manifest (a hand-made or older tree): the mirrored path is read, and a
    missing output stays missing (graded as such)."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    sub = SubmissionFactory(files_prefix="submissions/8/files")
    trial = TrialFactory(submission=sub, trial_dir="t1", artifact_paths=[])
    _store(tmp_path / "media" / "submissions/8/files/t1", "artifacts/workspace/submission.json",
           "{}")
    assert materialize_outputs(trial, CT, tmp_path / "a")["found"] == ["/workspace/submission.json"]
    assert materialize_outputs(trial, ETL, tmp_path / "b")["missing"] == ["/workspace/output"]
