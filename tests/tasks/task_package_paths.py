"""Paths shared by the task-package tests (a uniquely named module: every test directory has a
conftest.py, so importing constants from "conftest" would be ambiguous)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from evaluation.task_specs import CATEGORIES, discover_task_packages, version_packages  # noqa: E402

TASKS_DIR = REPO / "tasks"
PACKAGES = discover_task_packages(TASKS_DIR)
# The try-out version's packages (one per category): what the normal suite runs in Docker. The
# rest of @2.0 runs in Docker in the tasks54 suite (tests/tasks/test_tasks54.py).
V1_PACKAGES = version_packages(TASKS_DIR, "healthagentbench-synthetic@1.0")
V2_PACKAGES = version_packages(TASKS_DIR, "healthagentbench-synthetic@2.0")
# The one synthetic package per category that the generators must reproduce byte for byte.
SYNTHETIC = {c: TASKS_DIR / c / "synthetic_01" for c in CATEGORIES}


def package_id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"
