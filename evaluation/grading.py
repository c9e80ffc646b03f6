"""Shared pieces of the graders: result type, the two exceptions, a defensive JSON loader and
shape checks.

This package is copied into Docker verifier containers whose Python is Debian bookworm's 3.11 with
Debian's numpy, so it uses the standard library plus numpy only, with Python 3.11 syntax, and never
imports Django.

Error policy (the same for every category):
- GradingInputError: the answer or the submission cannot be graded as given (unreadable, too big,
  invalid JSON, wrong shape, non-finite numbers, ids that do not exist). The message names the file
  and the problem. Callers map it to exit code 2 and, in a verifier, to reward 0.
- JudgeUnavailable: an infrastructure problem (the LLM judge timed out, returned an HTTP error or
  an unparsable reply). It is never turned into a failing grade; callers map it to exit code 3 and
  write no reward, so the trial shows up as an error to retry, not as a 0.
- Anything that could be graded returns GradeResult(passed, metrics).
"""

import json
import math
import os
import re
import stat
from dataclasses import dataclass, field

# Largest JSON file (answer or submission) the graders will read. Real submissions are tiny
# (a few hundred KB at most: 800k-row audits are expected to flag a small fraction).
MAX_JSON_BYTES = 20 * 1024 * 1024
# Integers with more digits than this are rejected (Python would otherwise build huge ints, and
# refuses above 4300 digits with an unhelpful message).
MAX_INT_DIGITS = 40
# Longest string value any grader accepts for an id, finding name, table name or trial id.
MAX_ID_CHARS = 512


@dataclass(frozen=True)
class GradeResult:
    """Outcome of grading one attempt. `metrics` is flat: str -> int/float (bools as 0/1)."""

    passed: bool
    metrics: dict = field(default_factory=dict)

    def as_dict(self):
        return {"passed": bool(self.passed), "metrics": dict(self.metrics)}


class GradingInputError(Exception):
    """The answer or submission is malformed or oversized; the message names the file and problem."""


class JudgeUnavailable(Exception):
    """The LLM judge could not give a verdict (timeout, HTTP error, unparsable reply)."""


class _Reject(Exception):
    """Raised from inside json hooks; converted to GradingInputError with the file name.
    `locate` = (kind, value) lets parse_json_text find the offending token's line and column."""

    def __init__(self, message, locate=None):
        super().__init__(message)
        self.locate = locate


def _no_constants(name):
    raise _Reject(f"{name} is not allowed (only finite numbers are valid)", ("word", name))


def _no_duplicate_keys(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise _Reject(f"duplicate key {_short(key)}", ("key", key))
        obj[key] = value
    return obj


def _parse_int(text):
    digits = text.lstrip("-")
    if len(digits) > MAX_INT_DIGITS:
        raise _Reject(f"integer with {len(digits)} digits is too large", ("word", text))
    return int(text)


def _parse_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise _Reject(f"number {_short(text)} is out of range (not finite)", ("word", text))
    return value


# Tokens outside strings, used only on the error path to report where a hook rejected something.
_LOCATE_TOKEN = re.compile(
    r'(?P<str>"[^"\\]*(?:\\.[^"\\]*)*")(?P<colon>\s*:)?'
    r"|(?P<word>-?Infinity|NaN|-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<open>[{\[])|(?P<close>[}\]])"
)
_LOCATE_MAX_CHARS = 8 * 1024 * 1024


def _locate(text, locate):
    """Character offset of the token a json hook rejected (first match in document order)."""
    if not locate or len(text) > _LOCATE_MAX_CHARS:
        return None
    kind, value = locate
    stack = []
    for match in _LOCATE_TOKEN.finditer(text):
        if kind == "word":
            if match.group("word") == value:
                return match.start()
            continue
        if match.group("str") is not None:
            if match.group("colon") and stack and stack[-1] is not None:
                try:
                    key = json.loads(match.group("str"))
                except ValueError:
                    continue
                if key == value and key in stack[-1]:
                    return match.start()
                stack[-1].add(key)
        elif match.group("open") is not None:
            stack.append(set() if match.group("open") == "{" else None)
        elif match.group("close") is not None and stack:
            stack.pop()
    return None


def _line_col(text, offset):
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _short(value, limit=60):
    text = value if isinstance(value, str) else repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return json.dumps(text) if isinstance(value, str) else text


def parse_json_text(text, *, label):
    """Parse JSON text strictly; raise GradingInputError naming `label` on any problem."""
    try:
        return json.loads(
            text,
            parse_constant=_no_constants,
            parse_int=_parse_int,
            parse_float=_parse_float,
            object_pairs_hook=_no_duplicate_keys,
        )
    except json.JSONDecodeError as exc:
        raise GradingInputError(
            f"{label}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except _Reject as exc:
        offset = _locate(text, exc.locate)
        where = "" if offset is None else " (line {}, column {})".format(*_line_col(text, offset))
        raise GradingInputError(f"{label}: invalid JSON: {exc}{where}") from None
    except RecursionError:
        raise GradingInputError(f"{label}: invalid JSON: nesting is too deep") from None
    except ValueError as exc:  # e.g. int conversion limits
        raise GradingInputError(f"{label}: invalid JSON: {exc}") from None


def read_capped_bytes(path, *, max_bytes, label=None):
    """Read a regular file of at most max_bytes; reject symlinks, directories and bigger files
    before reading them."""
    label = label or str(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise GradingInputError(f"{label}: file not found") from None
    except OSError as exc:
        raise GradingInputError(f"{label}: cannot read: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise GradingInputError(f"{label}: is a symbolic link (a regular file is required)")
    if stat.S_ISDIR(st.st_mode):
        raise GradingInputError(f"{label}: is a directory (a JSON file is required)")
    if not stat.S_ISREG(st.st_mode):
        raise GradingInputError(f"{label}: is not a regular file")
    if st.st_size > max_bytes:
        raise GradingInputError(
            f"{label}: file is too large ({st.st_size} bytes; the limit is {max_bytes} bytes)"
        )
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise GradingInputError(f"{label}: cannot open: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)  # the file may have grown since lstat
    if len(data) > max_bytes:
        raise GradingInputError(f"{label}: file is too large (limit {max_bytes} bytes)")
    return data


def decode_utf8(data, *, label, allow_bom=False):
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise GradingInputError(
            f"{label}: starts with a UTF-16/UTF-32 byte order mark (line 1, column 1); "
            "the file must be UTF-8"
        )
    if data.startswith(b"\xef\xbb\xbf"):
        if not allow_bom:
            raise GradingInputError(
                f"{label}: starts with a UTF-8 byte order mark (BOM) (line 1, column 1)"
            )
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        column = len(data[line_start : exc.start].decode("utf-8", "replace")) + 1
        raise GradingInputError(
            f"{label}: invalid UTF-8 at byte {exc.start} (line {line}, column {column})"
        ) from None


def load_json(path, *, label=None, max_bytes=MAX_JSON_BYTES):
    """Load one JSON document from `path` defensively (see module docstring)."""
    label = label or str(path)
    data = read_capped_bytes(path, max_bytes=max_bytes, label=label)
    text = decode_utf8(data, label=label)
    if not text.strip():
        raise GradingInputError(f"{label}: file is empty")
    return parse_json_text(text, label=label)


def load_object(path, *, where, required=()):
    """Read `path` as a JSON object holding the `required` keys; return (label, object).

    The one loading step of the graders: every error message names the file by `label`, and
    the grader keeps that label for the messages of its own checks, e.g.
        label, answer = load_object(answer_path, where="the answer", required=("grid",))
    """
    label = str(path)
    return label, expect_object(load_json(path, label=label), label=label, where=where,
                                required=required)


# ---------------------------------------------------------------- shape checks


def expect_object(value, *, label, where, required=()):
    if not isinstance(value, dict):
        raise GradingInputError(f"{label}: {where} must be a JSON object, got {_type(value)}")
    for key in required:
        if key not in value:
            raise GradingInputError(f"{label}: {where} is missing the key {_short(key)}")
    return value


def expect_list(value, *, label, where):
    if not isinstance(value, list):
        raise GradingInputError(f"{label}: {where} must be a JSON array, got {_type(value)}")
    return value


def expect_str(value, *, label, where, max_chars=MAX_ID_CHARS, allow_empty=False):
    if not isinstance(value, str):
        raise GradingInputError(f"{label}: {where} must be a string, got {_type(value)}")
    if not allow_empty and not value.strip():
        raise GradingInputError(f"{label}: {where} must be a non-empty string")
    if len(value) > max_chars:
        raise GradingInputError(
            f"{label}: {where} is too long ({len(value)} characters; limit {max_chars})"
        )
    return value


def expect_int(value, *, label, where, minimum=None, maximum=None):
    if isinstance(value, bool) or not isinstance(value, int):
        raise GradingInputError(f"{label}: {where} must be an integer, got {_type(value)}")
    if minimum is not None and value < minimum:
        raise GradingInputError(f"{label}: {where} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise GradingInputError(f"{label}: {where} must be <= {maximum}, got {value}")
    return value


def expect_number(value, *, label, where):
    """A finite JSON number (int or float, not bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GradingInputError(f"{label}: {where} must be a number, got {_type(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise GradingInputError(f"{label}: {where} must be a finite number")
    return value


def _type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def short(value, limit=60):
    """A short, quoted rendering of a value for error messages."""
    return _short(value, limit)


def ratio(numerator, denominator, empty=0.0):
    """numerator/denominator as float, `empty` when the denominator is 0."""
    return float(numerator) / denominator if denominator else float(empty)
