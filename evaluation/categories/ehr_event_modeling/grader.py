"""ehr-event-modeling: risk scores for held-out patients, judged by AUROC against a baseline.

Submission: {"predictions": {"<patient_id>": score, ...}}
Answer:     {"labels": {"<patient_id>": 0 | 1, ...}, "baseline_auroc": b}
Passes when every held-out patient is scored and AUROC >= b.

Decisions:
- AUROC is the Mann-Whitney statistic U / (n_pos * n_neg): each (positive, negative) pair scores
  1 when the positive is ranked higher and 1/2 when tied. It is computed from numpy average ranks
  (exact: average ranks are half-integers) and compared with b as exact fractions; b is read as
  the decimal it was written as (0.8 means 4/5) and given 1e-12 of slack for a baseline that was
  rounded to a float (far below the 1/(n_pos*n_neg) resolution of any real AUROC).
- Scores are finite JSON numbers (not booleans), ranked as float64.
- A held-out patient without a score fails the attempt (metric `missing_predictions`); it is not
  an input error. AUROC over the scored patients is still reported when defined.
- A score for a patient who is not held out (e.g. the training patients, scored with the same
  model) is ignored and reported as `extra_predictions`. (It used to be a GradingInputError,
  which rejected a complete set of held-out scores for including more patients.)
- An answer whose labels are all one class is a GradingInputError (AUROC undefined).
"""

from fractions import Fraction

import numpy as np

from evaluation.grading import (
    GradeResult,
    GradingInputError,
    expect_int,
    expect_number,
    expect_object,
    load_object,
    short,
)

# Bump with any change that can change a grade (tests/evaluation/test_grader_versions.py;
# maintainers then re-score published submissions: `manage.py rescore --category`).
# 2: reads its files through the graders' one loading step (evaluation/grading.py
#    load_object, issue 24) and the shared kit gained it; grades unchanged.
VERSION = 2

BASELINE_SLACK = Fraction(1, 10**12)
MAX_PATIENTS = 5_000_000


def average_ranks(scores):
    """1-based ranks of `scores`; tied values share the average of their ranks."""
    values = np.asarray(scores, dtype=np.float64)
    unique, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    inverse = np.asarray(inverse).reshape(-1)
    ends = np.cumsum(counts)  # rank of the last member of each group
    starts = ends - counts + 1
    return ((starts + ends) / 2.0)[inverse]


def mann_whitney_u2(labels, scores):
    """(2*U, n_pos, n_neg) as integers, U the Mann-Whitney statistic of the positives."""
    labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    ranks = average_ranks(scores)
    n_pos = int(labels.sum())
    n_neg = int(labels.size - n_pos)
    twice_rank_sum = int(round(float((2.0 * ranks[labels == 1]).sum())))
    u2 = twice_rank_sum - n_pos * (n_pos + 1)
    return u2, n_pos, n_neg


def auroc_fraction(labels, scores):
    """Exact AUROC as a Fraction; ValueError when one class is absent."""
    u2, n_pos, n_neg = mann_whitney_u2(labels, scores)
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUROC is undefined with a single class")
    return Fraction(u2, 2 * n_pos * n_neg)


def auroc(labels, scores):
    return float(auroc_fraction(labels, scores))


def baseline_fraction(value):
    """The baseline as the decimal it was written as (repr of a float is its shortest decimal)."""
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def score(labels, predictions, baseline):
    scored = [pid for pid in labels if pid in predictions]
    missing = len(labels) - len(scored)
    metrics = {
        "baseline_auroc": float(baseline),
        "patients": len(labels),
        "scored_patients": len(scored),
        "missing_predictions": missing,
        "extra_predictions": sum(1 for pid in predictions if pid not in labels),
    }
    passed = False
    y = [labels[pid] for pid in scored]
    if scored and 0 < sum(y) < len(y):
        value = auroc_fraction(y, [predictions[pid] for pid in scored])
        metrics["auroc"] = float(value)
        metrics["auroc_minus_baseline"] = float(value - baseline_fraction(baseline))
        passed = missing == 0 and value >= baseline_fraction(baseline) - BASELINE_SLACK
    return GradeResult(passed=passed, metrics=metrics)


def grade(answer_path, submission_path, **options):
    answer_label, answer = load_object(
        answer_path, where="the answer", required=("labels", "baseline_auroc"))
    raw_labels = expect_object(answer["labels"], label=answer_label, where='"labels"')
    if len(raw_labels) > MAX_PATIENTS:
        raise GradingInputError(f"{answer_label}: more than {MAX_PATIENTS} patients")
    labels = {
        pid: expect_int(v, label=answer_label, where=f"the label of patient {short(pid)}", minimum=0, maximum=1)
        for pid, v in raw_labels.items()
    }
    positives = sum(labels.values())
    if positives == 0 or positives == len(labels):
        raise GradingInputError(
            f"{answer_label}: the labels must contain both classes (AUROC is undefined otherwise)"
        )
    baseline = expect_number(answer["baseline_auroc"], label=answer_label, where='"baseline_auroc"')
    if not 0 <= baseline <= 1:
        raise GradingInputError(f'{answer_label}: "baseline_auroc" must be between 0 and 1')

    submission_label, submission = load_object(
        submission_path, where="the submission", required=("predictions",))
    raw_predictions = expect_object(submission["predictions"], label=submission_label, where='"predictions"')
    predictions = {
        pid: float(expect_number(v, label=submission_label, where=f"the score of patient {short(pid)}"))
        for pid, v in raw_predictions.items()
    }
    try:
        return score(labels, predictions, baseline)
    except GradingInputError as exc:
        raise GradingInputError(f"{submission_label}: {exc}") from None
