"""What the agent changed in its workspace, as the trajectory viewer shows it: each declared
output the trial submitted, beside what the task gave the agent to start from.

The outputs are the ones verification grades (``materialize_outputs``: the same stored files,
found the same way). Where a task hands the agent a file to correct, the output is diffed
against it: the X-ray task's draft FINDINGS against the findings the agent wrote. Every other
output is new in the workspace and is shown whole (JSON pretty-printed), capped."""

from __future__ import annotations

import difflib
import io
import json
import re
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.files.storage import default_storage

from evaluation import runner
from submissions.models import Trial
from submissions.verification.checks.base import materialize_outputs

SHOW_CHARS = 20_000  # an output longer than this is cut on the page (the trial zip has it all)
MAX_TRAJECTORY_BYTES = 20 * 1024 * 1024  # what the viewer reads of a trajectory, too
ZIP_MAX_BYTES = 200 * 1024 * 1024  # a trial zip holds at most this much of the stored files
XRAY = "xray-report-correction"


@dataclass
class DiffLine:
    kind: str  # "+" added, "-" removed, " " kept
    text: str


@dataclass
class FileChange:
    path: str  # where the agent wrote it, in the container
    status: str  # "changed" (diffed against the task's input) or "added"
    before_label: str = ""
    lines: list[DiffLine] = field(default_factory=list)
    text: str = ""  # an added file's content
    cut: bool = False

    @property
    def counts(self) -> tuple[int, int]:
        return (sum(d.kind == "+" for d in self.lines), sum(d.kind == "-" for d in self.lines))


@dataclass
class WorkspaceChanges:
    files: list[FileChange]
    missing: list[str]


def _units(text: str) -> list[str]:
    """Lines, or sentences when the text is one paragraph: a corrected report is usually one
    line, and a sentence is what a reviewer compares."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) > 1:
        return lines
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def text_diff(before: str, after: str) -> list[DiffLine]:
    a, b = _units(before), _units(after)
    out: list[DiffLine] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out += [DiffLine(" ", s) for s in a[i1:i2]]
            continue
        out += [DiffLine("-", s) for s in a[i1:i2]]
        out += [DiffLine("+", s) for s in b[j1:j2]]
    return out


def _findings_section(report: str) -> str:
    match = re.search(r"FINDINGS:\s*(.*?)(?:\n\s*\n|\n[A-Z ]+:|\Z)", report, re.S)
    return match.group(1).strip() if match else ""


def _xray_change(task_dir: Path, written: str) -> FileChange | None:
    """The draft report's FINDINGS (the task's input) against the agent's findings."""
    drafts = sorted((task_dir / "environment" / "data").glob("case_*/study_*/report_draft.txt"))
    try:
        findings = json.loads(written).get("findings")
    except (ValueError, AttributeError):
        return None
    if not drafts or not isinstance(findings, str):
        return None
    rel = drafts[-1].relative_to(task_dir / "environment" / "data").as_posix()
    before = _findings_section(drafts[-1].read_text(errors="replace"))
    return FileChange(path="", status="changed",
                      before_label=f"FINDINGS of /workspace/data/{rel} (the task's draft)",
                      lines=text_diff(before, findings))


def _shown(raw: bytes) -> tuple[str, bool]:
    if b"\0" in raw[:8192]:
        return f"(binary, {len(raw):,} bytes: in the trial's zip)", False
    text = raw.decode("utf-8", errors="replace")
    try:
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        pass
    return text[:SHOW_CHARS], len(text) > SHOW_CHARS


def _task_dir(trial: Trial) -> Path | None:
    """The trial's task package on this host, or None (a private source kept elsewhere)."""
    package = trial.benchmark_task.package_path
    if not package:
        return None
    task_dir = Path(package) if package.startswith("/") else Path(settings.BASE_DIR) / package
    return task_dir if (task_dir / "task.toml").is_file() else None


def workspace_changes(trial: Trial) -> WorkspaceChanges | None:
    """The trial's declared outputs, each diffed or shown; None when the task package is not on
    this host (a private source) or declares no output."""
    task_dir = _task_dir(trial)
    if task_dir is None:
        return None
    declared = runner.declared_outputs(task_dir)
    if not declared:
        return None
    with tempfile.TemporaryDirectory(prefix="hab-view-") as tmp:
        found = materialize_outputs(trial, task_dir, Path(tmp))
        files = []
        for out in found["found"]:
            stored = Path(tmp) / out.strip("/")
            for path in sorted(stored.rglob("*")) if stored.is_dir() else [stored]:
                if not path.is_file():
                    continue
                where = "/" + path.relative_to(tmp).as_posix()
                raw = path.read_bytes()
                change = (_xray_change(task_dir, raw.decode("utf-8", errors="replace"))
                          if trial.benchmark_task.category.slug == XRAY else None)
                if change is None:
                    text, cut = _shown(raw)
                    change = FileChange(path=where, status="added", text=text, cut=cut)
                change.path = where
                files.append(change)
    return WorkspaceChanges(files=files, missing=list(found["missing"]))


def trial_record(trial: Trial) -> dict:
    """The site's record of the trial, for the trial's zip: what it found beside what the
    submission reported (the reported figures are labelled so)."""
    return {
        "submission": trial.submission_id, "trial": trial.pk,
        "task": trial.benchmark_task.name, "attempt": trial.attempt,
        "outcome (the site's)": trial.outcome,
        "claimed_outcome": trial.claimed_outcome,
        "reward (claimed)": trial.reward, "reward (the site's re-grade)": trial.verified_reward,
        "grader_version": trial.grader_version,
        "reported": {"cost_usd": trial.cost_usd, "duration_s": trial.duration_s,
                     "input_tokens": trial.input_tokens, "output_tokens": trial.output_tokens,
                     "cached_tokens": trial.cached_tokens},
    }


def _stored_files(prefix: str) -> Iterator[str]:
    """Every stored file under ``prefix`` (the storage's own listing: local or S3)."""
    try:
        dirs, files = default_storage.listdir(prefix)
    except (FileNotFoundError, NotADirectoryError, OSError):
        return
    for name in sorted(files):
        yield f"{prefix}/{name}"
    for name in sorted(dirs):
        yield from _stored_files(f"{prefix}/{name}")


def trial_zip(trial: Trial) -> bytes:
    """One trial as a download: its stored Harbor trial directory (trajectory, logs, verifier
    output, collected artifacts) as uploaded, and the site's record of the trial, capped at
    ZIP_MAX_BYTES of files (the record says what was left out)."""
    buf = io.BytesIO()
    record = trial_record(trial)
    left_out: list[str] = []
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        prefix = (trial.submission.files_prefix or "").rstrip("/")
        trial_dir = (trial.trial_dir or "").strip("/")
        budget = ZIP_MAX_BYTES
        names = list(_stored_files(f"{prefix}/{trial_dir}")) if trial_dir else []
        if not names and trial.trajectory_path:
            names = [f"{prefix}/{trial.trajectory_path}"]
        base = f"{prefix}/{trial_dir}/" if trial_dir else f"{prefix}/"
        for name in names:
            size = default_storage.size(name)
            if size > budget:
                left_out.append(name.removeprefix(base))
                continue
            budget -= size
            with default_storage.open(name, "rb") as fh:
                zf.writestr("trial/" + name.removeprefix(base), fh.read())
        record["files_left_out (over the download's size cap)"] = left_out
        zf.writestr("site-record.json", json.dumps(record, indent=2, default=str))
    return buf.getvalue()
