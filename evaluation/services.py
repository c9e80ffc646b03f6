"""Write-side services of the evaluation app."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils.text import slugify

from evaluation.models import AIModel, Agent, BenchmarkTask, BenchmarkVersion, Category, Harness
from evaluation.categories import CATEGORIES
from evaluation.task_specs import (
    BENCHMARK_NAME,
    BenchmarkManifest,
    TaskPackage,
    TaskPackageError,
    check_task_package,
    discover_task_packages,
    load_task_package,
    read_benchmark_manifests,
    write_benchmark_manifest,
)

NEW_VERSION_HINT = (
    "A registered benchmark version never changes (its submitters were measured on exactly "
    "those tasks). Release the change as a new version: "
    "`.venv/bin/python manage.py sync_tasks --new-version <name>@<next version>` writes "
    "<source>/benchmarks/<name>@<next version>.toml with the packages as they are now."
)


@dataclass
class SyncReport:
    """What sync_tasks did to one benchmark version."""

    benchmark_version: str
    created: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    # The manifest and the registered task set disagree: nothing applied.
    conflicts: list[str] = field(default_factory=list)
    # Listed, but the package is absent or has other content here: not runnable on this machine.
    missing: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"benchmark version {self.benchmark_version}"]
        for label in ("created", "unchanged", "conflicts", "missing"):
            for name in getattr(self, label):
                out.append(f"  {label:<9} {name}")
        return out


@dataclass
class SourceSyncReport:
    """sync_tasks over one task source: every version its manifests define."""

    source: str
    versions: list[SyncReport] = field(default_factory=list)
    invalid: dict[str, list[str]] = field(default_factory=dict)  # package path -> problems
    # Valid packages (at their current content) that no version lists: changed or new.
    unreleased: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # unreadable manifests

    @property
    def ok(self) -> bool:
        return not (self.invalid or self.unreleased or self.problems
                    or any(v.conflicts for v in self.versions))

    def version(self, slug: str) -> SyncReport:
        return next(v for v in self.versions if v.benchmark_version == slug)

    def lines(self) -> list[str]:
        out = [f"task source {self.source}"]
        out += self.problems
        for version in self.versions:
            out += version.lines()
        for path, problems in self.invalid.items():
            out += [f"  invalid   {path}"] + [f"            - {p}" for p in problems]
        for line in self.unreleased:
            out.append(f"  unreleased {line}")
        if self.unreleased or any(v.conflicts for v in self.versions):
            out.append(NEW_VERSION_HINT)
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
        "position": info.position,
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


def _source_packages(tasks_dir: Path, report: SourceSyncReport) -> dict[str, TaskPackage]:
    packages = {}
    for root in discover_task_packages(tasks_dir):
        problems = check_task_package(root)
        if problems:
            report.invalid[_package_path(root)] = problems
            continue
        package = load_task_package(root)
        packages[package.name] = package
    return packages


@transaction.atomic
def benchmark_tasks_sync(*, tasks_dir: Path) -> SourceSyncReport:
    """Register the benchmark versions a task source defines (``<source>/benchmarks/*.toml``).

    Idempotent: a second run with the same packages and manifests writes nothing. A registered
    version never changes: if its manifest lists other tasks or digests than the catalogue
    holds, that is a conflict and nothing is applied. A listed package that is absent here, or
    has other content, makes that task not runnable here (never deleted). A valid package that
    no manifest lists at its current content is "unreleased": it needs a new version.
    """
    tasks_dir = Path(tasks_dir)
    report = SourceSyncReport(source=_package_path(tasks_dir.resolve()))
    packages = _source_packages(tasks_dir, report)
    try:
        manifests = read_benchmark_manifests(tasks_dir)
    except TaskPackageError as exc:
        report.problems.append(f"  error     {exc}")
        return report
    released = set()
    for manifest in manifests:
        released |= set(manifest.spec.tasks.items())
        report.versions.append(_version_sync(manifest, packages))
    for name, package in sorted(packages.items()):
        if (name, package.content_digest) not in released:
            report.unreleased.append(
                f"{_package_path(package.root)} (content {package.content_digest[:12]}) is in no "
                "benchmark version")
    return report


def _version_sync(manifest: BenchmarkManifest, packages: dict[str, TaskPackage]) -> SyncReport:
    spec = manifest.spec
    report = SyncReport(benchmark_version=manifest.slug)
    benchmark_version = BenchmarkVersion.objects.filter(name=spec.name,
                                                        version=spec.version).first()
    registered = dict(BenchmarkTask.objects.filter(benchmark_version=benchmark_version)
                      .values_list("name", "content_digest")) if benchmark_version else {}
    if registered and registered != spec.tasks:
        for name in sorted(set(registered) | set(spec.tasks)):
            old, new = registered.get(name), spec.tasks.get(name)
            if old != new:
                what = ("added" if old is None else "removed" if new is None
                        else f"changed {old[:12]} -> {new[:12]}")
                report.conflicts.append(f"{name}: {what} in {manifest.path.name}")
        return report
    here = {name: packages.get(name) for name in spec.tasks}
    matching = {name: p for name, p in here.items()
                if p is not None and p.content_digest == spec.tasks[name]}
    if not registered:
        if len(matching) < len(spec.tasks):
            # A version is registered whole, from its packages, or not at all.
            report.missing += sorted(set(spec.tasks) - set(matching))
            return report
        benchmark_version = benchmark_version or BenchmarkVersion(name=spec.name,
                                                                  version=spec.version)
        benchmark_version.title = spec.title
        benchmark_version.description = spec.description
        benchmark_version.attempts_per_task = spec.attempts_per_task
        benchmark_version.full_clean()
        benchmark_version.save()
    for position, name in enumerate(spec.tasks, start=1):
        package = matching.get(name)
        if package is None:
            report.missing.append(name)
            BenchmarkTask.objects.filter(benchmark_version=benchmark_version, name=name,
                                         runnable_here=True).update(runnable_here=False)
            continue
        _task_upsert(benchmark_version=benchmark_version, package=package, position=position,
                     report=report)
    digest = _version_digest(benchmark_version)
    changed = []
    if benchmark_version.content_digest != digest:
        benchmark_version.content_digest = digest
        changed.append("content_digest")
    # A site policy, not content: follows the manifest on every sync, registered or not.
    if benchmark_version.allows_reference_runs != spec.allows_reference_runs:
        benchmark_version.allows_reference_runs = spec.allows_reference_runs
        changed.append("allows_reference_runs")
    if changed:
        benchmark_version.save(update_fields=[*changed, "updated_at"])
    return report


def _task_upsert(*, benchmark_version, package, position, report) -> None:
    category = _category_upsert(benchmark_version=benchmark_version, package=package)
    values = {
        "category": category,
        "content_digest": package.content_digest,
        "runnable_here": True,
        "package_path": _package_path(package.root),
        "is_synthetic": package.manifest.metadata.synthetic,
        "position": position,
    }
    current = BenchmarkTask.objects.filter(benchmark_version=benchmark_version,
                                           name=package.name).first()
    if current is None:
        benchmark_task = BenchmarkTask(benchmark_version=benchmark_version, name=package.name,
                                       **values)
        benchmark_task.full_clean()
        benchmark_task.save()
        report.created.append(package.name)
        return
    if any(getattr(current, key) != value for key, value in values.items()):
        for key, value in values.items():
            setattr(current, key, value)
        current.full_clean()
        current.save()
    report.unchanged.append(package.name)


def benchmark_version_release(*, tasks_dir: Path, slug: str) -> Path:
    """Write the manifest of a new version holding every valid package of the source as it is.

    ``slug`` is ``name@version`` or just ``version`` (then the name of the source's other
    versions, or the repository's benchmark name). Raises ValueError on a bad or taken slug.
    """
    tasks_dir = Path(tasks_dir)
    name, sep, version = slug.rpartition("@")
    manifests = read_benchmark_manifests(tasks_dir)
    if not sep:
        names = sorted({m.spec.name for m in manifests})
        if len(names) > 1:
            raise ValueError(f"this source holds {', '.join(names)}: say which (name@version)")
        name = names[0] if names else BENCHMARK_NAME
    previous = [m for m in manifests if m.spec.name == name]
    report = SourceSyncReport(source=str(tasks_dir))
    packages = _source_packages(tasks_dir, report)
    if report.invalid:
        raise ValueError("fix the invalid packages first: " + ", ".join(report.invalid))
    if not packages:
        raise ValueError(f"no task packages under {tasks_dir}")
    base = previous[-1].spec if previous else None
    try:
        return write_benchmark_manifest(
            tasks_dir, name=name, version=version,
            tasks={n: p.content_digest for n, p in sorted(packages.items())},
            title=base.title if base else name,
            description=base.description if base else "",
            attempts_per_task=base.attempts_per_task if base else 3,
            allows_reference_runs=base.allows_reference_runs if base else False,
        )
    except FileExistsError as exc:
        raise ValueError(str(exc)) from None
    except Exception as exc:  # pydantic ValidationError: a bad name or version
        raise ValueError(f"{slug!r}: {exc}") from None


def agent_get_or_create(
    *,
    harness: Harness,
    model: AIModel,
    harness_version: str = "",
    agent_settings: dict | None = None,
    display_name: str | None = None,
) -> Agent:
    """Idempotent: one Agent per (harness, harness version, model, settings digest)."""
    agent_settings = agent_settings or {}
    digest = hashlib.sha256(json.dumps(agent_settings, sort_keys=True).encode()).hexdigest()
    name = display_name or f"{harness.display_name} ({model.display_name})"
    slug_source = f"{harness.slug}-{harness_version}-{model.slug}-{digest[:8]}"
    agent, _ = Agent.objects.get_or_create(
        harness=harness,
        harness_version=harness_version,
        model=model,
        settings_digest=digest,
        defaults={
            "settings": agent_settings,
            "display_name": name,
            "slug": _slugify(slug_source if harness_version or agent_settings else name),
        },
    )
    return agent


def _slugify(text: str) -> str:
    return slugify(text.replace(".", "-"))[:200]
