"""xray-report-correction: correct the FINDINGS of a chest X-ray report with injected errors.

Submission: {"findings": "<corrected FINDINGS section>"}
Answer:     {"reference_findings": "...", "injected_errors": [...]}
Passes when an LLM judge, asked 5 times with a CheXprompt-style rubric, finds zero clinically
significant errors at least 3 times (see judge.py).

Decisions:
- Each injected error is a string (the erroneous phrase as it appears in the report given to the
  agent) or an object with a string "phrase" (other keys, e.g. "type" or "original", are kept and
  shown to the judge as context).
- Findings longer than MAX_FINDINGS_CHARS are a GradingInputError (real FINDINGS sections are a
  few hundred characters). Empty or whitespace-only findings fail without asking the judge:
  no judge answer (and no setting) can make an empty report pass.
- Without a judge (`judge=None`) the grader raises JudgeUnavailable: it never guesses.
- Any judge problem is JudgeUnavailable, never a failure.
"""

from evaluation.grading import (
    GradeResult,
    GradingInputError,
    JudgeUnavailable,
    expect_list,
    expect_object,
    expect_str,
    load_object,
)
from . import PASS_VOTES, VOTES

# Bump with any change that can change a grade (tests/evaluation/test_grader_versions.py;
# maintainers then re-score published submissions: `manage.py rescore --category`).
# 2: the judge client's reply/vote split for the judgement cache (30d5328); grades unchanged.
# 3: reads its files through the graders' one loading step (evaluation/grading.py
#    load_object, issue 24) and the shared kit gained it; grades unchanged.
VERSION = 3

MAX_FINDINGS_CHARS = 20_000


def _injected(value, *, label):
    errors = []
    for index, item in enumerate(expect_list(value, label=label, where='"injected_errors"')):
        where = f"injected_errors[{index}]"
        if isinstance(item, str):
            expect_str(item, label=label, where=where, max_chars=MAX_FINDINGS_CHARS)
        else:
            expect_object(item, label=label, where=where, required=("phrase",))
            expect_str(item["phrase"], label=label, where=f"{where}.phrase", max_chars=MAX_FINDINGS_CHARS)
        errors.append(item)
    return errors


def decide(votes):
    zero = sum(1 for v in votes if v == 0)
    metrics = {
        "zero_error_votes": zero,
        "votes": len(votes),
        "max_significant_errors": max(votes) if votes else 0,
    }
    return GradeResult(passed=len(votes) == VOTES and zero >= PASS_VOTES, metrics=metrics)


def grade(answer_path, submission_path, judge=None, **options):
    answer_label, answer = load_object(
        answer_path, where="the answer", required=("reference_findings", "injected_errors"))
    reference = expect_str(
        answer["reference_findings"], label=answer_label, where='"reference_findings"',
        max_chars=MAX_FINDINGS_CHARS,
    )
    injected = _injected(answer["injected_errors"], label=answer_label)
    submission_label, submission = load_object(
        submission_path, where="the submission", required=("findings",))
    findings = expect_str(
        submission["findings"], label=submission_label, where='"findings"',
        max_chars=MAX_FINDINGS_CHARS, allow_empty=True,
    )
    if not findings.strip():
        return GradeResult(passed=False, metrics={"empty_report": True, "votes": 0,
                                                  "zero_error_votes": 0})
    if judge is None:
        raise JudgeUnavailable(
            "no LLM judge is configured for xray-report-correction "
            "(set XRAY_JUDGE_URL, or --judge-url on the command line)"
        )
    votes = judge.vote(reference, findings, injected, n=VOTES)
    if len(votes) != VOTES:
        raise JudgeUnavailable(f"the judge returned {len(votes)} votes instead of {VOTES}")
    return decide(votes)


__all__ = ["grade", "decide", "GradingInputError"]
