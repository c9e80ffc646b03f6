"""The graders' versions as the site sees them, and the digests that keep them honest (R11).

Each category's grader (`evaluation/categories/<category>/grader.py`) carries a `VERSION`, read by
`evaluation.graders.VERSIONS`. Every score the site records stores the version that produced it
(the verifier container reports it in /logs/verifier/grader.json). `grader_versions.json` commits
one source digest per (category, version): the grader, the shared kit `evaluation/grading.py`
and the command line `evaluation/graders/__main__.py` (and the judge with its prompt for judged
categories). tests/evaluation/test_grader_versions.py fails when a grader's digest changes while its version stays, so a change that can move a grade
cannot ship without a new version; `manage.py rescore --category` then re-scores what the old
version graded. No Django here: the module is plain data and hashing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from evaluation import graders
from evaluation.categories import CATEGORIES as _REGISTRY

EVALUATION_DIR = Path(graders.__file__).resolve().parents[1]
DIGESTS_FILE = Path(__file__).resolve().parent / "grader_versions.json"
# The command line and the shared kit every grader runs on.
SHARED = ("graders/__main__.py", "grading.py")
# The judge client and its prompt, each hashed under the path it had when the digests were
# committed (evaluation/graders/): they moved to evaluation/judge/ byte for byte, and a
# move that changes no byte must not change a grade's version. A new file gets its own path.
JUDGE = {"graders/judge.py": "judge/client.py",
         "graders/xray_judge_prompt.txt": "judge/xray_judge_prompt.txt"}


def source_files(category: str) -> list[Path]:
    """The files whose text decides `category`'s grades: its grader.py (first), its spec
    __init__.py when the grader imports from it, the shared kit, and the judge for judged
    categories."""
    folder = _REGISTRY[category].path
    grader = folder / "grader.py"
    files = [grader]
    if "from . import" in grader.read_text():
        files.append(folder / "__init__.py")
    files += [EVALUATION_DIR / name for name in SHARED]
    if category in graders.JUDGE_CATEGORIES:
        files += [EVALUATION_DIR / name for name in JUDGE.values()]
    return files


def _label(path: Path) -> str:
    rel = path.relative_to(EVALUATION_DIR).as_posix()
    return next((old for old, new in JUDGE.items() if new == rel), rel)


def source_digest(category: str) -> str:
    h = hashlib.sha256()
    for path in source_files(category):
        h.update(f"{_label(path)}\n".encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def committed_digests() -> dict[str, dict[str, str]]:
    """category -> {version (str): digest}, as committed in grader_versions.json."""
    return json.loads(DIGESTS_FILE.read_text())


def current_versions() -> dict[str, str]:
    """category -> the label scores graded by the repository's graders record."""
    return {category: graders.version_label(category) for category in graders.CATEGORIES}


def version_of(label: str) -> int | None:
    """The number in "<category>@<n>" (None for an empty or unnumbered label)."""
    _, _, number = (label or "").rpartition("@")
    return int(number) if number.isdigit() else None
