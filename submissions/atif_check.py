"""An uploaded ATIF trajectory checked before anything is queued: the ``atif`` models plus the
version rules of ../shared/docs/harbor-formats.md section 3 (``ATIF-v1.0``..``v1.8``;
``session_id`` required before v1.7). Used by submissions.validation."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from evaluation.grading import GradingInputError, load_json

MAX_TRAJECTORY_BYTES = 25 * 1024 * 1024  # parsed whole: keep the peak memory bounded
ATIF_VERSION_RE = re.compile(r"^ATIF-v1\.(\d+)$")
ATIF_MAX_MINOR = 8


def validate_trajectory(path: Path, *, label: str) -> list[str]:
    """Problems of one ATIF trajectory file (empty = valid), checked with the ``atif`` models
    plus the version rules of section 3 (``ATIF-v1.0``..``v1.8``; ``session_id`` required
    before v1.7)."""
    from atif import Trajectory

    try:
        doc = load_json(path, label=label, max_bytes=MAX_TRAJECTORY_BYTES)
    except GradingInputError as exc:
        return [str(exc)]
    if not isinstance(doc, dict):
        return ["an ATIF trajectory must be a JSON object"]
    problems = []
    version = doc.get("schema_version")
    match = ATIF_VERSION_RE.match(version) if isinstance(version, str) else None
    if not match or int(match.group(1)) > ATIF_MAX_MINOR:
        problems.append(f"schema_version {str(version)[:40]!r} is not ATIF-v1.0 .. "
                        f"ATIF-v1.{ATIF_MAX_MINOR}")
    elif int(match.group(1)) < 7 and not doc.get("session_id"):
        problems.append(f"session_id is required by {version}")
    try:
        Trajectory.model_validate(doc)
    except ValidationError as exc:
        for err in exc.errors()[:5]:
            loc = ".".join(str(p) for p in err["loc"]) or "(root)"
            problems.append(f"{loc}: {err['msg']}")
    except RecursionError:
        problems.append("nesting is too deep")
    return problems
