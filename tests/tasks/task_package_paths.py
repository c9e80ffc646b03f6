"""Paths shared by the task-package tests (a uniquely named module: every test directory has a
conftest.py, so importing constants from "conftest" would be ambiguous)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from evaluation.task_specs import CATEGORIES, discover_task_packages  # noqa: E402

TASKS_DIR = REPO / "tasks"
PACKAGES = discover_task_packages(TASKS_DIR)
# The one synthetic package per category that the generators must reproduce byte for byte.
SYNTHETIC = {c: TASKS_DIR / c / "synthetic_01" for c in CATEGORIES}


def package_id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"
