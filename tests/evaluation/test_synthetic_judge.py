"""The synthetic judge of `make run` (evaluation/judge/synthetic.py): its rule, the server the
grader asks, `manage.py serve_synthetic_judge` (its command line: tests/evaluation/
test_xray_judge.py), and the deploy check that keeps it out of production."""

import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.core import checks
from django.core.management import CommandError, call_command

from evaluation.graders import ChatJudge, grade
from evaluation.judge.client import SYSTEM_PROMPT, build_user_prompt
from evaluation.judge.synthetic import SYNTHETIC_JUDGE_MODEL, SyntheticJudge, injected_errors_left

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "tasks" / "xray-report-correction" / "synthetic_01"


def _body(candidate, injected, reference="Heart size is normal."):
    return {"model": "any", "messages": [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": build_user_prompt(reference, candidate, injected)}]}


def test_the_rule_counts_the_injected_phrases_the_candidate_still_contains():
    injected = ["small left pleural effusion", {"phrase": "Large  PNEUMOTHORAX", "type": "x"}]
    assert injected_errors_left(_body("Heart size is normal.", injected)) == 0
    # Case-insensitive, on whitespace-normalised text; one error per phrase left.
    assert injected_errors_left(_body("A small  LEFT pleural\neffusion.", injected)) == 1
    assert injected_errors_left(_body("Small left pleural effusion. Large pneumothorax.",
                                      injected)) == 2
    # Text the prompt escapes (<, >, &) is compared as the agent wrote it.
    assert injected_errors_left(_body("<b>large pneumothorax</b> & more", injected)) == 1
    assert injected_errors_left(_body("anything", [])) == 0
    with pytest.raises(ValueError):
        injected_errors_left({"messages": [{"role": "user", "content": "grade this"}]})
    with pytest.raises(ValueError):
        injected_errors_left({"messages": []})


def _draft_findings():
    draft = (TASK / "environment" / "data" / "case_01" / "study_03" / "report_draft.txt")
    return re.search(r"FINDINGS:\n(.*?)\n\n", draft.read_text(), re.DOTALL).group(1)


@pytest.mark.parametrize("source, passed", [("oracle", True), ("draft", False)])
def test_the_synthetic_task_passes_the_oracle_and_fails_the_draft(tmp_path, source, passed):
    """The X-ray grader asking the synthetic judge over HTTP: the package's own solution passes
    (5 of 5 votes find no error); the uncorrected draft keeps all 3 injected errors."""
    submission = TASK / "solution" / "submission.json"
    if source == "draft":
        submission = tmp_path / "submission.json"
        submission.write_text(json.dumps({"findings": _draft_findings()}))
    with SyntheticJudge() as judge:
        result = grade("xray-report-correction", TASK / "tests" / "answer.json", submission,
                       judge=ChatJudge(judge.url, SYNTHETIC_JUDGE_MODEL, timeout_s=10,
                                       retries=0))
    assert result.passed is passed
    assert result.metrics["votes"] == 5
    assert result.metrics["zero_error_votes"] == (5 if passed else 0)
    assert result.metrics["max_significant_errors"] == (0 if passed else 3)


def test_the_command_refuses_production_and_yields_to_a_configured_judge(settings, capsys):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG=1"):
        call_command("serve_synthetic_judge", "--port", "0")
    settings.DEBUG = True
    settings.XRAY_JUDGE_URL = "https://judge.example.org/v1"
    call_command("serve_synthetic_judge", "--port", "0")  # returns: nothing served
    assert "not started: XRAY_JUDGE_URL is set" in capsys.readouterr().out


def test_check_deploy_fails_on_the_synthetic_judge(settings):
    def errors():
        return [m.id for m in checks.run_checks(tags=[checks.Tags.security],
                                                include_deployment_checks=True)
                if m.id == "evaluation.E001"]

    settings.XRAY_JUDGE_URL = "http://172.17.0.1:8765"
    settings.XRAY_JUDGE_MODEL = SYNTHETIC_JUDGE_MODEL
    settings.DEBUG = False
    assert errors() == ["evaluation.E001"]
    settings.DEBUG = True  # make run
    assert errors() == []
    settings.DEBUG = False
    settings.XRAY_JUDGE_MODEL = "gpt-5.4"
    assert errors() == []


def test_the_server_answers_only_the_judge_protocol():
    with SyntheticJudge() as judge:
        about = json.load(urllib.request.urlopen(judge.url + "/", timeout=10))  # noqa: S310
        assert about["synthetic_judge"]["model"] == SYNTHETIC_JUDGE_MODEL
        request = urllib.request.Request(judge.url + "/v1/chat/completions",
                                         data=b'{"messages": []}', method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)  # noqa: S310
        assert refused.value.code == 400
        request = urllib.request.Request(judge.url + "/v1/chat/completions",
                                         data=json.dumps(_body("fine", ["bad"])).encode(),
                                         method="POST")
        reply = json.load(urllib.request.urlopen(request, timeout=10))  # noqa: S310
    assert reply["model"] == SYNTHETIC_JUDGE_MODEL
    assert json.loads(reply["choices"][0]["message"]["content"]) == {
        "clinically_significant_errors": 0, "clinically_insignificant_errors": 0}
