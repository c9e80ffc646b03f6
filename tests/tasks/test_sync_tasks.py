"""sync_tasks / benchmark_tasks_sync against the database (needs pytest-django; the rest of
tests/tasks runs without it, see conftest.py)."""

import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from task_package_paths import SYNTHETIC, TASKS_DIR

from evaluation.services import benchmark_tasks_sync
from leaderboard.models import BenchmarkTask, BenchmarkVersion, Category

pytestmark = pytest.mark.django_db


def test_it_registers_every_package_once():
    first = benchmark_tasks_sync(tasks_dir=TASKS_DIR)
    assert first.ok and len(first.created) == len(SYNTHETIC)
    bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    tasks = BenchmarkTask.objects.filter(benchmark_version=bv)
    assert tasks.count() == 7 and all(t.runnable_here and t.is_synthetic for t in tasks)
    assert len(tasks.get(name="pathology-tumor-region/synthetic_01").content_digest) == 64
    assert Category.objects.filter(benchmark_version=bv).count() == 7
    assert tasks.get(name="ct-abnormality-classification/synthetic_01").package_path == (
        "tasks/ct-abnormality-classification/synthetic_01")
    digest = bv.content_digest

    second = benchmark_tasks_sync(tasks_dir=TASKS_DIR)
    assert second.created == [] and len(second.unchanged) == 7
    bv.refresh_from_db()
    assert bv.content_digest == digest
    assert BenchmarkTask.objects.count() == 7


def _copy_tasks(tmp_path: Path) -> Path:
    dst = tmp_path / "tasks"
    shutil.copytree(TASKS_DIR, dst)
    return dst


def test_changed_content_is_a_conflict_unless_allowed(tmp_path):
    tasks = _copy_tasks(tmp_path)
    benchmark_tasks_sync(tasks_dir=tasks)
    readme = tasks / "clinical-trial-matching" / "synthetic_01" / "README.md"
    readme.write_text(readme.read_text() + "\nedited\n")
    report = benchmark_tasks_sync(tasks_dir=tasks)
    assert not report.ok and report.conflicts[0].startswith("clinical-trial-matching/")
    report = benchmark_tasks_sync(tasks_dir=tasks, allow_changes=True)
    assert report.ok and report.updated == ["clinical-trial-matching/synthetic_01"]


def test_invalid_and_removed_packages(tmp_path):
    tasks = _copy_tasks(tmp_path)
    benchmark_tasks_sync(tasks_dir=tasks)
    shutil.rmtree(tasks / "ehr-event-modeling")
    (tasks / "ct-abnormality-classification" / "synthetic_01" / "instruction.md").write_text("x")
    report = benchmark_tasks_sync(tasks_dir=tasks)
    # Both a vanished and an invalid package stop being runnable here; neither row is deleted.
    assert report.missing == ["ct-abnormality-classification/synthetic_01",
                              "ehr-event-modeling/synthetic_01"]
    assert list(report.invalid) and not report.ok
    assert not BenchmarkTask.objects.get(name="ehr-event-modeling/synthetic_01").runnable_here
    with pytest.raises(CommandError, match="not registered"):
        call_command("sync_tasks", "--tasks-dir", str(tasks))
