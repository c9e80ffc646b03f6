"""ehr-data-quality-audit: flag every erroneous row of an EHR extract.

Submission: {"flagged_rows": [{"table": "<table>", "row_id": <id>}, ...]}
Answer:     {"error_rows": [{"table": "<table>", "row_id": <id>}, ...], "tables": [...] (optional)}
Passes when recall == 1.0 and precision > 0.01.

Decisions:
- Rows are identified by (table, row_id). row_id may be an integer or a string and is compared
  by its text form, so 17 and "17" are the same row; an integral JSON number written as 17.0 is
  the number 17 (JSON does not tell them apart). Extra keys in an entry (e.g. "reason",
  "error_type") are allowed and ignored.
- Duplicate flagged rows count once (precision is over distinct rows).
- precision > 0.01 is decided in integers (100 * tp > flagged), so exactly 0.01 fails.
- A flagged row of a table without errors is a false positive, whatever the table: the answer's
  optional "tables" list (all tables of the task) is not needed to grade it. (It used to be a
  GradingInputError when the answer had no "tables", so a correct audit that also flagged a row of
  a clean table was rejected instead of graded.) Flagged rows outside the answer's "tables", when
  it has one, are reported as `flagged_unknown_tables`, and count as false positives too.
- An answer with no error rows is a GradingInputError (recall would be undefined).
- An empty submission is gradable: recall 0, precision 0, fail.
"""

from evaluation.grading import (
    GradeResult,
    GradingInputError,
    expect_list,
    expect_object,
    expect_str,
    load_object,
    ratio,
    short,
)

# Bump with any change that can change a grade (tests/evaluation/test_grader_versions.py;
# maintainers then re-score published submissions: `manage.py rescore --category`).
# 2: reads its files through the graders' one loading step (evaluation/grading.py
#    load_object, issue 24) and the shared kit gained it; grades unchanged.
VERSION = 2



def _row_key(entry, *, label, where):
    entry = expect_object(entry, label=label, where=where, required=("table", "row_id"))
    table = expect_str(entry["table"], label=label, where=f"{where}.table")
    row_id = entry["row_id"]
    if isinstance(row_id, float) and row_id.is_integer():
        row_id = int(row_id)  # 17.0 is the JSON number 17
    if isinstance(row_id, bool) or not isinstance(row_id, (int, str)):
        raise GradingInputError(f"{label}: {where}.row_id must be an integer or a string")
    if isinstance(row_id, str):
        row_id = expect_str(row_id, label=label, where=f"{where}.row_id").strip()
    return table, str(row_id)


def _rows(value, *, label, key):
    rows = set()
    for index, entry in enumerate(expect_list(value, label=label, where=f'"{key}"')):
        rows.add(_row_key(entry, label=label, where=f"{key}[{index}]"))
    return rows


def score(gold, flagged, *, tables=None, label="submission"):
    tp = len(gold & flagged)
    n_flagged = len(flagged)
    passed = tp == len(gold) and 100 * tp > n_flagged
    metrics = {
        "recall": ratio(tp, len(gold)),
        "precision": ratio(tp, n_flagged),
        "true_positives": tp,
        "false_positives": n_flagged - tp,
        "missed": len(gold) - tp,
        "error_rows": len(gold),
        "flagged_rows": n_flagged,
    }
    if tables is not None:
        metrics["flagged_unknown_tables"] = sum(1 for t, _ in flagged if t not in set(tables))
    return GradeResult(passed=passed, metrics=metrics)


def grade(answer_path, submission_path, **options):
    answer_label, answer = load_object(answer_path, where="the answer", required=("error_rows",))
    gold = _rows(answer["error_rows"], label=answer_label, key="error_rows")
    if not gold:
        raise GradingInputError(f"{answer_label}: the answer has no error rows (recall undefined)")
    tables = None
    if "tables" in answer:
        tables = [
            expect_str(t, label=answer_label, where=f"tables[{i}]")
            for i, t in enumerate(expect_list(answer["tables"], label=answer_label, where='"tables"'))
        ]
        stray = sorted({table for table, _ in gold} - set(tables))
        if stray:
            raise GradingInputError(
                f'{answer_label}: error rows of table(s) missing from "tables": '
                + ", ".join(short(t) for t in stray[:5])
            )
    submission_label, submission = load_object(
        submission_path, where="the submission", required=("flagged_rows",))
    flagged = _rows(submission["flagged_rows"], label=submission_label, key="flagged_rows")
    return score(gold, flagged, tables=tables, label=submission_label)
