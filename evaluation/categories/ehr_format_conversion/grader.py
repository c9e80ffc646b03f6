"""ehr-format-conversion: customised MEDS ETL output must match the expected output exactly.

Submission: a directory of MEDS-shaped output files.
Answer:     the expected directory (same layout).
Passes when, for every expected file, the submission has a file at the same relative path with the
same rows (as a multiset: row order is ignored, duplicates matter), compared with types.

Decisions:
- Files are CSV (".csv", header row, UTF-8, an optional BOM is tolerated) or JSON Lines
  (".jsonl", one JSON object per line). Parquet is not read (standard library only).
  Hidden files (".name") in the answer are ignored; any other kind of expected file is an
  answer error.
- Extra files in the submission are ignored. A missing expected file fails (metric
  `files_missing`); it is not an input error.
- Columns are matched by name. Extra submission columns are ignored; a missing expected column
  makes that file mismatch.
- Typed comparison: each column's type comes from the expected values (all non-empty values
  numeric -> number; else all ISO-8601 datetimes -> datetime; else text). Both sides are parsed
  with that type, so "1" equals "1.0" in a numeric column, "2020-01-01T00:00:00" equals
  "2020-01-01 00:00:00", and a value that does not parse never equals a value that does.
  Empty CSV cells and JSON null are null. JSONL values are turned into text first (numbers as
  written, true/false, nested values as canonical JSON), so CSV and JSONL follow the same rules.
  Naive datetimes are taken as UTC.
- Caps: at most MAX_FILES expected files, MAX_FILE_BYTES per file and MAX_TOTAL_BYTES over all
  files read on each side; bigger inputs are a GradingInputError naming the file.
  Symbolic links and paths escaping the directory are refused.
"""

import csv
import io
import json
import math
import os
import re
import stat
from collections import Counter
from datetime import datetime, timezone

from evaluation.grading import GradeResult, GradingInputError, decode_utf8, parse_json_text, read_capped_bytes

# Bump with any change that can change a grade (tests/evaluation/test_grader_versions.py;
# maintainers then re-score published submissions: `manage.py rescore --category`).
# 2: the shared kit (evaluation/grading.py) gained the graders' loading step load_object
#    (issue 24); this file's code is unchanged, and so are its grades.
VERSION = 2

MAX_FILES = 256
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024
MAX_COLUMNS = 512
SUFFIXES = (".csv", ".jsonl")

_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_NAN = ("__nan__",)


# ---------------------------------------------------------------- reading


def _expected_files(answer_dir):
    label = str(answer_dir)
    if not os.path.isdir(answer_dir):
        raise GradingInputError(f"{label}: the answer must be a directory")
    found = []
    for root, dirs, files in os.walk(answer_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            rel = os.path.relpath(os.path.join(root, name), answer_dir)
            if not name.endswith(SUFFIXES):
                raise GradingInputError(
                    f"{label}: expected file {rel} is neither .csv nor .jsonl"
                )
            found.append(rel)
            if len(found) > MAX_FILES:
                raise GradingInputError(f"{label}: more than {MAX_FILES} expected files")
    if not found:
        raise GradingInputError(f"{label}: the answer directory has no .csv or .jsonl files")
    return found


def _safe_join(base, rel, *, label):
    """base/rel, refusing symlinked components and anything resolving outside base."""
    path = os.path.join(base, rel)
    current = base
    for part in rel.split(os.sep):
        current = os.path.join(current, part)
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise GradingInputError(f"{label}: cannot read {rel}: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            raise GradingInputError(f"{label}: {rel} is or goes through a symbolic link")
    real_base = os.path.realpath(base)
    if os.path.commonpath([real_base, os.path.realpath(path)]) != real_base:
        raise GradingInputError(f"{label}: {rel} resolves outside the directory")
    return path


def _to_text(value):
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return value if isinstance(value, str) else repr(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def read_table(path, *, label):
    """(columns, rows) of a CSV or JSONL file; rows are dicts column -> text or None."""
    data = read_capped_bytes(path, max_bytes=MAX_FILE_BYTES, label=label)
    if path.endswith(".csv"):
        text = decode_utf8(data, label=label, allow_bom=True)
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        try:
            header = next(reader, None)
            if header is None:
                raise GradingInputError(f"{label}: empty CSV file (a header row is required)")
            columns = [c.strip() for c in header]
            _check_columns(columns, label=label)
            rows = []
            for record in reader:
                if not record:
                    continue  # blank line
                if len(record) != len(columns):
                    raise GradingInputError(
                        f"{label}: line {reader.line_num} has {len(record)} fields, "
                        f"the header has {len(columns)}"
                    )
                rows.append({c: (v if v != "" else None) for c, v in zip(columns, record)})
        except csv.Error as exc:
            raise GradingInputError(f"{label}: malformed CSV at line {reader.line_num}: {exc}") from None
        return columns, rows
    text = decode_utf8(data, label=label)
    columns, rows = [], []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        obj = parse_json_text(line, label=f"{label} line {number}")
        if not isinstance(obj, dict):
            raise GradingInputError(f"{label}: line {number} is not a JSON object")
        for key in obj:
            if key not in columns:
                columns.append(key)
        rows.append({k: _to_text(v) for k, v in obj.items()})
    _check_columns(columns, label=label)
    return columns, rows


def _check_columns(columns, *, label):
    if len(columns) > MAX_COLUMNS:
        raise GradingInputError(f"{label}: more than {MAX_COLUMNS} columns")
    if len(set(columns)) != len(columns):
        raise GradingInputError(f"{label}: duplicate column names in the header")


# ---------------------------------------------------------------- typed values


def _parse_number(text):
    text = text.strip()
    if text.lower() in ("nan", "+nan", "-nan"):
        return _NAN
    if text.lower() in ("inf", "+inf", "infinity", "+infinity"):
        return math.inf
    if text.lower() in ("-inf", "-infinity"):
        return -math.inf
    if not _NUMBER.fullmatch(text):
        raise ValueError(text)
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    value = float(text)
    if value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _parse_datetime(text):
    value = datetime.fromisoformat(text.strip())
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value


def _is_number(text):
    try:
        _parse_number(text)
        return True
    except (ValueError, OverflowError):
        return False


def _is_datetime(text):
    try:
        _parse_datetime(text)
        return True
    except (ValueError, OverflowError):
        return False


def column_types(columns, rows):
    """Column -> 'number' | 'datetime' | 'text', decided from the expected rows."""
    types = {}
    for column in columns:
        values = [row.get(column) for row in rows]
        values = [v for v in values if v is not None]
        if values and all(_is_number(v) for v in values):
            types[column] = "number"
        elif values and all(_is_datetime(v) for v in values):
            types[column] = "datetime"
        else:
            types[column] = "text"
    return types


def typed(value, kind):
    if value is None:
        return None
    try:
        if kind == "number":
            return ("n", _parse_number(value))
        if kind == "datetime":
            return ("d", _parse_datetime(value))
    except (ValueError, OverflowError):
        pass
    return ("s", value)


def row_multiset(rows, columns, types):
    return Counter(tuple(typed(row.get(c), types[c]) for c in columns) for row in rows)


# ---------------------------------------------------------------- grading


def compare_tables(expected_columns, expected_rows, got_columns, got_rows):
    """(missing_columns, rows_missing, rows_extra) for one file."""
    missing_columns = [c for c in expected_columns if c not in got_columns]
    types = column_types(expected_columns, expected_rows)
    want = row_multiset(expected_rows, expected_columns, types)
    have = row_multiset(got_rows, expected_columns, types)
    rows_missing = sum((want - have).values())
    rows_extra = sum((have - want).values())
    return missing_columns, rows_missing, rows_extra


def grade(answer_path, submission_path, **options):
    answer_dir, submission_dir = str(answer_path), str(submission_path)
    expected = _expected_files(answer_dir)
    if not os.path.isdir(submission_dir) or os.path.islink(submission_dir):
        raise GradingInputError(f"{submission_dir}: the submission must be a directory")
    totals = {"answer": 0, "submission": 0}
    metrics = {
        "files_expected": len(expected),
        "files_matched": 0,
        "files_missing": 0,
        "files_mismatched": 0,
        "rows_expected": 0,
        "rows_missing": 0,
        "rows_extra": 0,
        "columns_missing": 0,
    }
    for rel in expected:
        answer_file = _safe_join(answer_dir, rel, label=answer_dir)
        exp_columns, exp_rows = _read_counted(answer_file, f"{answer_dir}/{rel}", totals, "answer")
        metrics["rows_expected"] += len(exp_rows)
        submission_file = _safe_join(submission_dir, rel, label=submission_dir)
        if submission_file is None:
            metrics["files_missing"] += 1
            metrics["rows_missing"] += len(exp_rows)
            continue
        got_columns, got_rows = _read_counted(
            submission_file, f"{submission_dir}/{rel}", totals, "submission"
        )
        missing_columns, rows_missing, rows_extra = compare_tables(
            exp_columns, exp_rows, got_columns, got_rows
        )
        metrics["columns_missing"] += len(missing_columns)
        metrics["rows_missing"] += rows_missing
        metrics["rows_extra"] += rows_extra
        if missing_columns or rows_missing or rows_extra:
            metrics["files_mismatched"] += 1
        else:
            metrics["files_matched"] += 1
    passed = metrics["files_matched"] == metrics["files_expected"]
    return GradeResult(passed=passed, metrics=metrics)


def _read_counted(path, label, totals, side):
    try:
        size = os.lstat(path).st_size
    except OSError:
        size = 0
    totals[side] += size
    if totals[side] > MAX_TOTAL_BYTES:
        raise GradingInputError(
            f"{label}: the {side} files exceed {MAX_TOTAL_BYTES} bytes in total"
        )
    return read_table(path, label=label)
