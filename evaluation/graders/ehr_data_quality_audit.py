"""ehr-data-quality-audit: flag every erroneous row of an EHR extract.

Submission: {"flagged_rows": [{"table": "<table>", "row_id": <id>}, ...]}
Answer:     {"error_rows": [{"table": "<table>", "row_id": <id>}, ...], "tables": [...] (optional)}
Passes when recall == 1.0 and precision > 0.01.

Decisions:
- Rows are identified by (table, row_id). row_id may be an integer or a string and is compared
  by its text form, so 17 and "17" are the same row. Extra keys in an entry (e.g. "reason",
  "error_type") are allowed and ignored.
- Duplicate flagged rows count once (precision is over distinct rows).
- precision > 0.01 is decided in integers (100 * tp > flagged), so exactly 0.01 fails.
- Unknown tables are a GradingInputError. The known tables are the answer's optional "tables"
  list (all tables of the task, recommended) or, without it, the tables that appear in
  "error_rows".
- An answer with no error rows is a GradingInputError (recall would be undefined).
- An empty submission is gradable: recall 0, precision 0, fail.
"""

from .base import (
    GradeResult,
    GradingInputError,
    expect_list,
    expect_object,
    expect_str,
    load_json,
    ratio,
    short,
)

CATEGORY = "ehr-data-quality-audit"


def _row_key(entry, *, label, where):
    entry = expect_object(entry, label=label, where=where, required=("table", "row_id"))
    table = expect_str(entry["table"], label=label, where=f"{where}.table")
    row_id = entry["row_id"]
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
    known = set(tables) if tables is not None else {table for table, _ in gold}
    unknown = sorted({table for table, _ in flagged} - known)
    if unknown:
        raise GradingInputError(
            f"{label}: flagged rows of unknown table(s): {', '.join(short(t) for t in unknown[:5])}"
        )
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
    return GradeResult(passed=passed, metrics=metrics)


def grade(answer_path, submission_path, **options):
    answer_label, submission_label = str(answer_path), str(submission_path)
    answer = expect_object(
        load_json(answer_path, label=answer_label),
        label=answer_label,
        where="the answer",
        required=("error_rows",),
    )
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
    submission = expect_object(
        load_json(submission_path, label=submission_label),
        label=submission_label,
        where="the submission",
        required=("flagged_rows",),
    )
    flagged = _rows(submission["flagged_rows"], label=submission_label, key="flagged_rows")
    return score(gold, flagged, tables=tables, label=submission_label)
