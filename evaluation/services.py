"""Write-side services of the evaluation app."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction

from evaluation.task_specs import (
    BENCHMARK_NAME,
    BENCHMARK_VERSION,
    CATEGORIES,
    TaskPackage,
    check_task_package,
    discover_task_packages,
    load_task_package,
)
from leaderboard.models import BenchmarkTask, BenchmarkVersion, Category


@dataclass
class SyncReport:
    benchmark_version: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)  # digest changed, applied (allow_changes)
    unchanged: list[str] = field(default_factory=list)
    # Digest changed but not applied: a released version is an immutable task set.
    conflicts: list[str] = field(default_factory=list)
    invalid: dict[str, list[str]] = field(default_factory=dict)  # package path -> problems
    # Registered, but the package is gone or invalid now: marked not runnable, kept.
    missing: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.conflicts or self.invalid)

    def lines(self) -> list[str]:
        out = [f"benchmark version {self.benchmark_version}"]
        for label in ("created", "updated", "unchanged", "conflicts", "missing"):
            for name in getattr(self, label):
                out.append(f"  {label:<9} {name}")
        for path, problems in self.invalid.items():
            out += [f"  invalid   {path}"] + [f"            - {p}" for p in problems]
        return out


def _package_path(root: Path) -> str:
    try:
        return root.relative_to(Path(settings.BASE_DIR)).as_posix()
    except ValueError:
        return root.as_posix()


def _category_upsert(*, benchmark_version: BenchmarkVersion, package: TaskPackage) -> Category:
    meta, info = package.manifest.metadata, CATEGORIES[package.category]
    values = {
        "name": info.name,
        "group": meta.group,
        "modality": meta.modality,
        "data_source": meta.data_source,
        "access": meta.access,
        "success_criterion": meta.success_criterion,
        "position": list(CATEGORIES).index(package.category),
    }
    category = Category.objects.filter(
        benchmark_version=benchmark_version, slug=package.category
    ).first() or Category(benchmark_version=benchmark_version, slug=package.category)
    if category.pk is None or any(getattr(category, k) != v for k, v in values.items()):
        for key, value in values.items():
            setattr(category, key, value)
        category.full_clean()
        category.save()
    return category


def _version_digest(benchmark_version: BenchmarkVersion) -> str:
    """sha256 over the sorted ``name digest`` lines of the version's tasks."""
    rows = BenchmarkTask.objects.filter(benchmark_version=benchmark_version).order_by("name")
    lines = "".join(f"{name} {digest}\n" for name, digest in rows.values_list("name",
                                                                               "content_digest"))
    return hashlib.sha256(lines.encode()).hexdigest()


@transaction.atomic
def benchmark_tasks_sync(*, tasks_dir: Path, allow_changes: bool = False) -> SyncReport:
    """Register every valid package under ``tasks_dir`` in healthagentbench-synthetic@1.0.

    Idempotent: a second run with the same packages writes nothing. Keyed by (name, content
    digest): a package whose digest changed is a conflict (reported, not applied) unless
    ``allow_changes``; tasks whose package disappeared are marked not runnable, never deleted.
    """
    benchmark_version, _ = BenchmarkVersion.objects.get_or_create(
        name=BENCHMARK_NAME,
        version=BENCHMARK_VERSION,
        defaults={
            "title": "HealthAgentBench synthetic tasks",
            "description": "Runnable synthetic look-alikes of the paper's seven categories, "
            "one Harbor package per task under tasks/. Separate from the paper's catalogue.",
        },
    )
    report = SyncReport(benchmark_version=benchmark_version.slug)
    existing = {t.name: t for t in BenchmarkTask.objects.filter(benchmark_version=benchmark_version)}
    seen: set[str] = set()
    for position, root in enumerate(discover_task_packages(tasks_dir), start=1):
        problems = check_task_package(root)
        if problems:
            report.invalid[_package_path(root)] = problems
            continue
        package = load_task_package(root)
        seen.add(package.name)
        _task_upsert(benchmark_version=benchmark_version, package=package, position=position,
                     current=existing.get(package.name), allow_changes=allow_changes,
                     report=report)
    for name, benchmark_task in sorted(existing.items()):
        if name not in seen and benchmark_task.runnable_here:
            benchmark_task.runnable_here = False
            benchmark_task.save(update_fields=["runnable_here", "updated_at"])
            report.missing.append(name)
    digest = _version_digest(benchmark_version)
    if benchmark_version.content_digest != digest:
        benchmark_version.content_digest = digest
        benchmark_version.save(update_fields=["content_digest", "updated_at"])
    return report


def _task_upsert(*, benchmark_version, package, position, current, allow_changes, report) -> None:
    category = _category_upsert(benchmark_version=benchmark_version, package=package)
    values = {
        "category": category,
        "content_digest": package.content_digest,
        "runnable_here": True,
        "package_path": _package_path(package.root),
        "is_synthetic": package.manifest.metadata.synthetic,
        "position": position,
    }
    if current is None:
        benchmark_task = BenchmarkTask(benchmark_version=benchmark_version, name=package.name,
                                       **values)
        benchmark_task.full_clean()
        benchmark_task.save()
        report.created.append(package.name)
        return
    if current.content_digest != package.content_digest and not allow_changes:
        report.conflicts.append(
            f"{package.name}: registered {current.content_digest[:12]}, "
            f"package {package.content_digest[:12]}"
        )
        return
    if all(getattr(current, key) == value for key, value in values.items()):
        report.unchanged.append(package.name)
        return
    digest_changed = current.content_digest != package.content_digest
    for key, value in values.items():
        setattr(current, key, value)
    current.full_clean()
    current.save()
    (report.updated if digest_changed else report.unchanged).append(package.name)
