"""`python manage.py grade` end to end, in subprocesses with DEBUG=1 (no database is touched).

Run: .venv/bin/python -m pytest tests/evaluation -q -p no:django
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

from tests.evaluation.judge_standin import JudgeStandIn  # noqa: E402

PYTHON = str(REPO / ".venv" / "bin" / "python")
if not os.path.exists(PYTHON):
    PYTHON = sys.executable


def manage_grade(*args, extra_env=None):
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "DEBUG": "1",
        # A database URL that cannot work: the command must never connect.
        "DATABASE_URL": "postgres://nobody:nothing@127.0.0.1:9/none",
        "CACHE_URL": os.environ.get("CACHE_URL", "locmemcache://"),
    }
    env.update(extra_env or {})
    return subprocess.run(
        [PYTHON, "manage.py", "grade", *map(str, args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def write(path, obj):
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


@pytest.fixture
def event_files(tmp_path):
    answer = write(
        tmp_path / "answer.json",
        {"labels": {"p1": 1, "p2": 1, "p3": 0, "p4": 0, "p5": 0}, "baseline_auroc": 0.75},
    )
    return answer, tmp_path / "submission.json"


def test_graded_attempt_prints_one_json_object_and_exits_0(event_files):
    answer, submission = event_files
    write(submission, {"predictions": {"p1": 0.8, "p2": 0.5, "p3": 0.5, "p4": 0.2, "p5": 0.1}})
    proc = manage_grade("ehr-event-modeling", "--answer", answer, "--submission", submission)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["passed"] is True
    assert out["metrics"]["auroc"] == pytest.approx(11 / 12)
    # a failing attempt is still a graded attempt: exit 0
    write(submission, {"predictions": {"p1": 0.1, "p2": 0.2, "p3": 0.5, "p4": 0.6, "p5": 0.7}})
    proc = manage_grade("ehr-event-modeling", "--answer", answer, "--submission", submission)
    assert proc.returncode == 0 and json.loads(proc.stdout)["passed"] is False


@pytest.mark.parametrize(
    "content, problem",
    [
        ('{"predictions": {"p1": 0.5,', "invalid JSON at line 1 column"),
        ('{"predictions": {"p1": NaN}}', "NaN is not allowed"),
        ('{"predictions": [1, 2]}', '"predictions" must be a JSON object'),
        ('{"predictions": {"p1": "high"}}', "the score of patient"),
        ('{"scores": {}}', 'missing the key "predictions"'),
    ],
)
def test_malformed_submission_exits_2_naming_the_problem(event_files, content, problem):
    answer, submission = event_files
    write(submission, content)
    proc = manage_grade("ehr-event-modeling", "--answer", answer, "--submission", submission)
    assert proc.returncode == 2, proc.stderr
    assert problem in proc.stderr and str(submission) in proc.stderr
    assert proc.stdout == ""


def test_scores_of_extra_patients_are_graded_not_rejected(event_files):
    """Grader review: a score for a patient outside the answer is ignored, not an error."""
    answer, submission = event_files
    write(submission, {"predictions": {"p1": 0.8, "p2": 0.5, "p3": 0.5, "p4": 0.2, "p5": 0.1,
                                       "zz": 0.3}})
    proc = manage_grade("ehr-event-modeling", "--answer", answer, "--submission", submission)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["metrics"]["auroc"] == pytest.approx(11 / 12)


def test_oversized_submission_exits_2(event_files):
    answer, submission = event_files
    with open(submission, "wb") as handle:
        handle.truncate(20 * 1024 * 1024 + 1)  # sparse file, refused before reading
    proc = manage_grade("ehr-event-modeling", "--answer", answer, "--submission", submission)
    assert proc.returncode == 2 and "file is too large" in proc.stderr


def test_directory_category_and_unknown_category(tmp_path):
    answer, submission = tmp_path / "expected", tmp_path / "out"
    answer.mkdir()
    submission.mkdir()
    (answer / "0.csv").write_text("subject_id,code\n1,A\n2,B\n")
    (submission / "0.csv").write_text("code,subject_id\nB,2.0\nA,1\n")
    proc = manage_grade("ehr-format-conversion", "--answer", answer, "--submission", submission)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["passed"] is True
    proc = manage_grade("no-such-category", "--answer", answer, "--submission", submission)
    assert proc.returncode != 0 and "invalid choice" in proc.stderr


def test_xray_uses_the_judge_from_settings(tmp_path):
    answer = write(
        tmp_path / "answer.json",
        {"reference_findings": "No pneumothorax.", "injected_errors": ["large pneumothorax"]},
    )
    submission = write(tmp_path / "submission.json", {"findings": "No pneumothorax."})
    with JudgeStandIn(replies=[0, 1, 0, 0, 1]) as standin:
        proc = manage_grade(
            "xray-report-correction", "--answer", answer, "--submission", submission,
            "--no-cache",  # the judge directly: no database (the cache: test_grade_cache.py)
            extra_env={
                "XRAY_JUDGE_URL": standin.url,
                "XRAY_JUDGE_MODEL": "settings-model",
                "XRAY_JUDGE_API_KEY": "sk-settings",
                "XRAY_JUDGE_TIMEOUT_S": "5",
            },
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "passed": True,
        "metrics": {"zero_error_votes": 3, "votes": 5, "max_significant_errors": 1},
    }
    assert {body["model"] for body in standin.requests} == {"settings-model"}
    assert {h.get("Authorization") for h in standin.headers} == {"Bearer sk-settings"}


def test_xray_judge_unavailable_exits_3(tmp_path):
    answer = write(
        tmp_path / "answer.json",
        {"reference_findings": "No pneumothorax.", "injected_errors": ["large pneumothorax"]},
    )
    submission = write(tmp_path / "submission.json", {"findings": "No pneumothorax."})
    with JudgeStandIn(replies=["http500"] * 10) as standin:
        proc = manage_grade(
            "xray-report-correction", "--answer", answer, "--submission", submission,
            "--no-cache", extra_env={"XRAY_JUDGE_URL": standin.url, "XRAY_JUDGE_TIMEOUT_S": "5"},
        )
    assert proc.returncode == 3
    assert "judge unavailable" in proc.stderr and "HTTP 500" in proc.stderr
    # With the cache (the default) and no database: an infrastructure error too, naming it.
    proc = manage_grade("xray-report-correction", "--answer", answer, "--submission",
                        submission, extra_env={"XRAY_JUDGE_URL": "http://127.0.0.1:9/v1"})
    assert proc.returncode == 3 and "judgement cache (database) is unavailable" in proc.stderr
    assert proc.stdout == ""
    # no judge configured at all: also 3 (after the input was validated)
    proc = manage_grade("xray-report-correction", "--answer", answer, "--submission", submission)
    assert proc.returncode == 3 and "XRAY_JUDGE_URL" in proc.stderr
