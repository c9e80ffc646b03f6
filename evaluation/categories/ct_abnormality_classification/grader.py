"""ct-abnormality-classification: a yes/no label for every listed abnormality of a chest CT.

Submission: {"labels": {"<finding>": "yes" | "no", ...}}
Answer:     {"labels": {"<finding>": "yes" | "no", ...}}
Passes when every finding in the answer is labelled right (accuracy == 1.0).

Decisions:
- Labels are "yes"/"no", compared case-insensitively after trimming spaces ("Yes" == "yes");
  any other value (true/false, 1/0, "maybe") is a GradingInputError naming the finding.
- A finding of the answer that the submission does not label counts as wrong (the attempt fails,
  metric `missing`); it is not an input error.
- A label for a finding that is not in the answer (an abnormality the task did not list) is
  ignored and reported as `extra_findings`: every listed one must still be labelled right under
  its exact name. (It used to be a GradingInputError, which rejected an otherwise correct
  labelling for saying more than was asked.)
- An answer with no findings is a GradingInputError (accuracy would be undefined).
"""

from evaluation.grading import GradeResult, GradingInputError, expect_object, expect_str, load_json, short

# Bump with any change that can change a grade (tests/evaluation/test_grader_versions.py;
# maintainers then re-score published submissions: `manage.py rescore --category`).
# 2: the shared kit (evaluation/grading.py) gained the graders' loading step load_object
#    (issue 24); this file's code is unchanged, and so are its grades.
VERSION = 2

VALUES = ("yes", "no")
MAX_FINDINGS = 10_000


def _labels(document, *, label, where):
    doc = expect_object(document, label=label, where=where, required=("labels",))
    labels = expect_object(doc["labels"], label=label, where='"labels"')
    if len(labels) > MAX_FINDINGS:
        raise GradingInputError(f"{label}: more than {MAX_FINDINGS} findings")
    parsed = {}
    for finding, value in labels.items():
        expect_str(finding, label=label, where="a finding name")
        if not isinstance(value, str) or value.strip().lower() not in VALUES:
            raise GradingInputError(
                f'{label}: the label of finding {short(finding)} must be "yes" or "no", '
                f"got {short(value)}"
            )
        parsed[finding] = value.strip().lower()
    return parsed


def score(gold, predicted):
    correct = sum(1 for finding, value in gold.items() if predicted.get(finding) == value)
    missing = sum(1 for finding in gold if finding not in predicted)
    false_pos = sum(1 for f, v in gold.items() if v == "no" and predicted.get(f) == "yes")
    false_neg = sum(1 for f, v in gold.items() if v == "yes" and predicted.get(f) == "no")
    total = len(gold)
    metrics = {
        "accuracy": correct / total,
        "correct": correct,
        "total": total,
        "missing": missing,
        "false_positives": false_pos,
        "false_negatives": false_neg,
        "extra_findings": len(set(predicted) - set(gold)),
    }
    return GradeResult(passed=correct == total, metrics=metrics)


def grade(answer_path, submission_path, **options):
    answer_label, submission_label = str(answer_path), str(submission_path)
    gold = _labels(load_json(answer_path, label=answer_label), label=answer_label, where="the answer")
    if not gold:
        raise GradingInputError(f"{answer_label}: the answer lists no findings")
    predicted = _labels(
        load_json(submission_path, label=submission_label), label=submission_label, where="the submission"
    )
    try:
        return score(gold, predicted)
    except GradingInputError as exc:
        raise GradingInputError(f"{submission_label}: {exc}") from None
