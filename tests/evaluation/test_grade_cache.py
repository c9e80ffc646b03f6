"""`manage.py grade` asks the X-ray judge through the verifiers' judgement cache
(evaluation.judge.cache.CachedJudge, JudgeCacheEntry rows keyed like the judge gateway's): grading
the same output twice asks the stub judge server once (5 votes, then none), with the same
result; a different output is a different key."""

import json

import pytest
from django.core.management import call_command

from evaluation.judge.client import PROMPT_VERSION
from evaluation.models import JudgeCacheEntry
from evaluation.runner.judge.server import cache_key
from tests.evaluation.judge_standin import JudgeStandIn

pytestmark = pytest.mark.django_db


def _grade(capsys, answer, submission, *extra):
    call_command("grade", "xray-report-correction", "--answer", str(answer), "--submission",
                 str(submission), *extra)
    return json.loads(capsys.readouterr().out)


def test_two_grades_of_the_same_output_ask_the_judge_once(tmp_path, settings, capsys):
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps({"reference_findings": "No pneumothorax.",
                                  "injected_errors": ["large pneumothorax"]}))
    submission = tmp_path / "submission.json"
    submission.write_text(json.dumps({"findings": "No pneumothorax."}))
    with JudgeStandIn(replies=[0, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0]) as standin:
        settings.XRAY_JUDGE_URL = standin.url
        settings.XRAY_JUDGE_MODEL = "stub-judge"
        settings.XRAY_JUDGE_TIMEOUT_S = 5
        first = _grade(capsys, answer, submission)
        assert len(standin.requests) == 5
        second = _grade(capsys, answer, submission)
        assert len(standin.requests) == 5  # the second grade asked nothing
        assert first == second == {
            "passed": True,
            "metrics": {"zero_error_votes": 3, "votes": 5, "max_significant_errors": 1}}
        key = cache_key(PROMPT_VERSION, "stub-judge", "No pneumothorax.",
                        {"reference_findings": "No pneumothorax.",
                         "injected_errors": ["large pneumothorax"]})
        entry = JudgeCacheEntry.objects.get(key=key)  # the verifiers' key, the same row
        assert len(entry.replies) == 5 and entry.hits == 5 and entry.model == "stub-judge"
        # Another output is another judgement; --no-cache asks again and stores nothing.
        submission.write_text(json.dumps({"findings": "Large pneumothorax."}))
        assert _grade(capsys, answer, submission)["passed"] is False
        assert len(standin.requests) == 10 and JudgeCacheEntry.objects.count() == 2
        _grade(capsys, answer, submission, "--no-cache")
        assert len(standin.requests) == 15 and JudgeCacheEntry.objects.count() == 2
