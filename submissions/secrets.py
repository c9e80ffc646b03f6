"""Find credentials in an extracted upload and redact them in place.

    findings = scan_and_redact(root)   # [SecretFinding(file, line, kind), ...]

Every regular text file under ``root`` (trajectories, trial/job logs, agent logs, configs) is
read line by line and rewritten with ``[REDACTED:<kind>]`` over each secret. Findings say where
(tree-relative file, 1-based line) and what kind, never the secret. Binary files (a NUL byte in
the first 8 KiB) are skipped; files over ``max_file_bytes`` are not rewritten and are reported
with kind ``not_scanned_too_large`` (the caller should refuse them or keep them private).

JSON stays valid JSON: secrets sit inside JSON strings and the patterns never cross a quote or
split a backslash escape (a PEM key inside a JSON string is matched with its ``\\n`` escapes); if a
redacted JSON file nevertheless stopped parsing, it is redacted again structurally (every string
value and key), which cannot break it.

Kinds: ``private_key``, ``anthropic_api_key``, ``openai_api_key``, ``google_api_key``,
``aws_access_key_id``, ``aws_secret_access_key``, ``github_token``, ``bearer_token``.

(Importing this module as ``submissions.secrets`` does not shadow the standard library's
``secrets``: absolute imports elsewhere still get the stdlib module.)
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_FILES = 100_000
BINARY_SNIFF = 8192


@dataclass(frozen=True)
class SecretFinding:
    file: str  # tree-relative POSIX path
    line: int  # 1-based line where the secret starts
    kind: str

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "kind": self.kind}


_B = r"(?<![A-Za-z0-9_\-])"  # start boundary: not inside a longer token
_E = r"(?![A-Za-z0-9_\-])"
_PEM_LABEL = r"[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?"
# (kind, compiled pattern, group to replace: 0 = whole match)
PATTERNS: list[tuple[str, re.Pattern, int]] = [
    ("private_key", re.compile(
        # Anything but a quote between the markers: escaped newlines (\n, \\n) inside JSON
        # strings, real newlines inside an in-memory string, never across a JSON string end.
        r"-----BEGIN " + _PEM_LABEL + r"-----[^\"]*?-----END " + _PEM_LABEL + r"-----"), 0),
    ("anthropic_api_key", re.compile(_B + r"sk-ant-[A-Za-z0-9_\-]{20,}"), 0),
    ("openai_api_key", re.compile(
        _B + r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"), 0),
    ("google_api_key", re.compile(_B + r"AIza[0-9A-Za-z_\-]{35}" + _E), 0),
    ("aws_access_key_id", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"), 0),
    ("aws_secret_access_key", re.compile(
        r"(?i:aws_secret_access_key|aws_secret_key|secretaccesskey)[\"']?\s*[:=]\s*[\"']?"
        r"([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"), 1),
    ("github_token", re.compile(
        _B + r"(?:(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"), 0),
    ("bearer_token", re.compile(
        r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?\s*(?i:bearer)\s+([A-Za-z0-9._~+/\-]{8,}=*)"),
        1),
]
_PEM_BEGIN = re.compile(r"-----BEGIN " + _PEM_LABEL + r"-----")
_PEM_END = re.compile(r"-----END " + _PEM_LABEL + r"-----")


# Cheap pre-filter: a line without any of these cannot hold a secret of the kinds above.
_TRIGGER = re.compile(r"-----BEGIN|sk-|AIza|AKIA|ASIA|gh[pousr]_|github_pat_|"
                      r"(?i:secret|authorization|secretaccesskey)")


def redact_text(text: str) -> tuple[str, list[str]]:
    """Redact every single-line secret in ``text``; returns (new text, kinds found in order)."""
    kinds: list[str] = []
    if not _TRIGGER.search(text):
        return text, kinds
    for kind, pattern, group in PATTERNS:
        def repl(match: re.Match, kind=kind, group=group) -> str:
            kinds.append(kind)
            if group == 0:
                return f"[REDACTED:{kind}]"
            start, end = match.span(group)
            base = match.start()
            whole = match.group(0)
            return whole[: start - base] + f"[REDACTED:{kind}]" + whole[end - base:]

        text = pattern.sub(repl, text)
    return text, kinds


def _redact_line_stream(lines, out, rel_path: str, findings: list[SecretFinding]) -> bool:
    """Redact a file line by line (PEM blocks may span lines). Returns True if anything changed."""
    changed = False
    in_pem = False
    for number, raw in enumerate(lines, start=1):
        line = raw
        if in_pem:
            end = _PEM_END.search(line)
            if end is None:
                out.write("")  # the whole line is inside the key: drop it
                changed = True
                continue
            line = line[end.end():]
            in_pem = False
            changed = True
        new, kinds = redact_text(line)
        for kind in kinds:
            findings.append(SecretFinding(rel_path, number, kind))
        begin = _PEM_BEGIN.search(new)
        if begin is not None and _PEM_END.search(new, begin.end()) is None:
            # A multi-line PEM block starts here: keep the text before it.
            findings.append(SecretFinding(rel_path, number, "private_key"))
            newline = "\n" if new.endswith("\n") else ""
            new = new[: begin.start()] + "[REDACTED:private_key]" + newline
            in_pem = True
        if new != raw:
            changed = True
        out.write(new)
    return changed


def _redact_json_strings(value, state=None):
    """Redact every string of a JSON document, in document order; a PEM block split over
    several strings (BEGIN in one, END in a later one) is redacted in all of them."""
    state = {"in_pem": False} if state is None else state
    if isinstance(value, str):
        if state["in_pem"]:
            end = _PEM_END.search(value)
            if end is None:
                return "[REDACTED:private_key]"
            state["in_pem"] = False
            value = "[REDACTED:private_key]" + value[end.end():]
        value = redact_text(value)[0]
        begin = _PEM_BEGIN.search(value)
        if begin is not None and _PEM_END.search(value, begin.end()) is None:
            state["in_pem"] = True
            value = value[: begin.start()] + "[REDACTED:private_key]"
        return value
    if isinstance(value, list):
        return [_redact_json_strings(v, state) for v in value]
    if isinstance(value, dict):
        return {redact_text(k)[0]: _redact_json_strings(v, state) for k, v in value.items()}
    return value


def _is_json_text(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except (ValueError, RecursionError):
        return False


def scan_file(path: Path, rel_path: str, findings: list[SecretFinding], *,
              max_file_bytes: int = MAX_FILE_BYTES) -> None:
    try:
        st = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
        return
    if st.st_size > max_file_bytes:
        findings.append(SecretFinding(rel_path, 0, "not_scanned_too_large"))
        return
    with open(path, "rb") as fh:
        head = fh.read(BINARY_SNIFF)
    if b"\0" in head:
        return
    is_json = path.suffix.lower() == ".json"
    original_was_json = False
    if is_json:
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            original_was_json = _is_json_text(fh.read())
    before = len(findings)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".redact-")
    try:
        with open(path, encoding="utf-8", errors="surrogateescape", newline="") as src, \
                os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape",
                          newline="") as dst:
            changed = _redact_line_stream(src, dst, rel_path, findings)
        if not changed:
            os.unlink(tmp)
            return
        if original_was_json:
            with open(tmp, encoding="utf-8", errors="surrogateescape") as fh:
                redacted_ok = _is_json_text(fh.read())
            if not redacted_ok:
                with open(path, encoding="utf-8", errors="surrogateescape") as fh:
                    doc = json.load(fh)
                with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as fh:
                    json.dump(_redact_json_strings(doc), fh, indent=2, ensure_ascii=False)
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.replace(tmp, path)
    except BaseException:
        del findings[before:]
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def scan_and_redact(root: Path | str, *, max_file_bytes: int = MAX_FILE_BYTES
                    ) -> list[SecretFinding]:
    """Scan every text file under ``root``, redact in place, return the findings (sorted)."""
    root = Path(root)
    findings: list[SecretFinding] = []
    count = 0
    for base, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            count += 1
            if count > MAX_FILES:
                return sorted(findings, key=lambda f: (f.file, f.line, f.kind))
            path = Path(base) / name
            if name.startswith(".redact-"):
                continue
            scan_file(path, path.relative_to(root).as_posix(), findings,
                      max_file_bytes=max_file_bytes)
    return sorted(findings, key=lambda f: (f.file, f.line, f.kind))
