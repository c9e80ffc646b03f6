"""sync_tasks / benchmark_tasks_sync against the database (needs pytest-django; the rest of
tests/tasks runs without it, see conftest.py). Benchmark versions are data: each
tasks/benchmarks/<name>@<version>.toml lists its packages and their content digests, and a
registered version never changes."""

import io
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from task_package_paths import PACKAGES, SYNTHETIC, TASKS_DIR

from evaluation.management.commands.new_task import scaffold_package
from evaluation.services import benchmark_tasks_sync
from evaluation.task_specs import package_digest, read_benchmark_manifests
from evaluation.models import BenchmarkTask, BenchmarkVersion, Category

pytestmark = pytest.mark.django_db
SLUG = "healthagentbench-synthetic@1.0"


def test_the_manifest_lists_every_shipped_package_at_its_digest():
    (manifest,) = [m for m in read_benchmark_manifests(TASKS_DIR) if m.slug == SLUG]
    assert manifest.slug == SLUG and manifest.spec.attempts_per_task == 3
    assert manifest.spec.tasks == {f"{c}/synthetic_01": package_digest(p)
                                   for c, p in SYNTHETIC.items()}


def test_it_registers_every_package_once():
    first = benchmark_tasks_sync(tasks_dir=TASKS_DIR)
    assert first.ok and len(first.version(SLUG).created) == len(SYNTHETIC)
    bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    assert bv.attempts_per_task == 3 and bv.title == "HealthAgentBench synthetic tasks"
    tasks = BenchmarkTask.objects.filter(benchmark_version=bv)
    assert tasks.count() == 7 and all(t.runnable_here and t.is_synthetic for t in tasks)
    assert len(tasks.get(name="pathology-tumor-region/synthetic_01").content_digest) == 64
    assert Category.objects.filter(benchmark_version=bv).count() == 7
    assert tasks.get(name="ct-abnormality-classification/synthetic_01").package_path == (
        "tasks/ct-abnormality-classification/synthetic_01")
    digest = bv.content_digest

    second = benchmark_tasks_sync(tasks_dir=TASKS_DIR)
    assert second.version(SLUG).created == [] and len(second.version(SLUG).unchanged) == 7
    bv.refresh_from_db()
    assert bv.content_digest == digest
    assert BenchmarkTask.objects.filter(benchmark_version=bv).count() == 7


def _copy_tasks(tmp_path: Path) -> Path:
    dst = tmp_path / "tasks"
    shutil.copytree(TASKS_DIR, dst)
    return dst


def _sync_command(*args) -> tuple[str, Exception | None]:
    out = io.StringIO()
    try:
        call_command("sync_tasks", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), exc
    return out.getvalue(), None


def _task_names(slug: str) -> list[str]:
    name, version = slug.split("@")
    return sorted(BenchmarkTask.objects.filter(benchmark_version__name=name,
                                               benchmark_version__version=version)
                  .values_list("name", flat=True))


def test_a_new_package_never_grows_a_registered_version_it_needs_a_new_one(tmp_path):
    tasks = _copy_tasks(tmp_path)
    assert benchmark_tasks_sync(tasks_dir=tasks).ok
    root = scaffold_package(tasks, "clinical-trial-matching", "case_02", synthetic=False)
    for rel in ("instruction.md", "README.md", "solution/solve.sh"):
        (root / rel).write_text((root / rel).read_text().replace("TODO", "Written"))

    out, error = _sync_command("--tasks-dir", str(tasks))
    assert error is not None and "unreleased" in out and "clinical-trial-matching/case_02" in out
    assert "--new-version" in out  # tells the contributor what to do
    assert len(_task_names(SLUG)) == 7

    out, error = _sync_command("--tasks-dir", str(tasks), "--new-version", "1.1")
    assert error is None, out
    assert (tasks / "benchmarks" / "healthagentbench-synthetic@1.1.toml").is_file()
    assert len(_task_names("healthagentbench-synthetic@1.1")) == len(PACKAGES) + 1
    assert len(_task_names(SLUG)) == 7  # the released version is untouched
    # Taken versions are refused.
    out, error = _sync_command("--tasks-dir", str(tasks), "--new-version", "1.1")
    assert error is not None and "never changes" in str(error)


def test_a_changed_package_is_unreleased_and_its_old_version_not_runnable_here(tmp_path):
    tasks = _copy_tasks(tmp_path)
    benchmark_tasks_sync(tasks_dir=tasks)
    readme = tasks / "clinical-trial-matching" / "synthetic_01" / "README.md"
    readme.write_text(readme.read_text() + "\nedited\n")
    report = benchmark_tasks_sync(tasks_dir=tasks)
    assert not report.ok and report.unreleased[0].startswith(
        f"{tasks.resolve()}/clinical-trial-matching/synthetic_01")
    assert report.version(SLUG).missing == ["clinical-trial-matching/synthetic_01"]
    old = BenchmarkTask.objects.get(benchmark_version__version="1.0",
                                    name="clinical-trial-matching/synthetic_01")
    assert not old.runnable_here and old.content_digest != package_digest(readme.parent)

    call_command("sync_tasks", "--tasks-dir", str(tasks), "--new-version", "1.1",
                 stdout=io.StringIO())
    assert benchmark_tasks_sync(tasks_dir=tasks).ok
    new = BenchmarkTask.objects.get(benchmark_version__version="1.1",
                                    name="clinical-trial-matching/synthetic_01")
    assert new.runnable_here and new.content_digest == package_digest(readme.parent)


def test_editing_a_registered_versions_manifest_is_a_conflict(tmp_path):
    tasks = _copy_tasks(tmp_path)
    benchmark_tasks_sync(tasks_dir=tasks)
    manifest = tasks / "benchmarks" / f"{SLUG}.toml"
    text = manifest.read_text()
    manifest.write_text("\n".join(line for line in text.splitlines()
                                  if not line.startswith('"xray-report-correction/')) + "\n")
    report = benchmark_tasks_sync(tasks_dir=tasks)
    assert report.version(SLUG).conflicts == [
        f"xray-report-correction/synthetic_01: removed in {SLUG}.toml"]
    assert not report.ok and len(_task_names(SLUG)) == 7


def test_invalid_and_removed_packages(tmp_path):
    tasks = _copy_tasks(tmp_path)
    benchmark_tasks_sync(tasks_dir=tasks)
    shutil.rmtree(tasks / "ehr-event-modeling")
    (tasks / "ct-abnormality-classification" / "synthetic_01" / "instruction.md").write_text("x")
    report = benchmark_tasks_sync(tasks_dir=tasks)
    # Both a vanished and an invalid package stop being runnable here; neither row is deleted.
    assert report.version(SLUG).missing == ["ct-abnormality-classification/synthetic_01",
                                            "ehr-event-modeling/synthetic_01"]
    assert list(report.invalid) and not report.ok
    assert not BenchmarkTask.objects.get(benchmark_version__version="1.0",
                                         name="ehr-event-modeling/synthetic_01").runnable_here
    with pytest.raises(CommandError, match="not registered"):
        call_command("sync_tasks", "--tasks-dir", str(tasks), stdout=io.StringIO())


def test_a_version_is_registered_whole_or_not_at_all(tmp_path):
    # A web machine without a private source's packages registers nothing of that version.
    tasks = _copy_tasks(tmp_path)
    shutil.rmtree(tasks / "ehr-event-modeling")
    report = benchmark_tasks_sync(tasks_dir=tasks)
    assert report.version(SLUG).missing == ["ehr-event-modeling/synthetic_01"]
    assert not BenchmarkVersion.objects.filter(name="healthagentbench-synthetic").exists()


def test_a_private_task_source_defines_its_own_version_kept_apart(tmp_path, settings):
    """TASK_SOURCES: a second directory (e.g. licensed tasks on evaluation machines) with its own
    manifest registers its own benchmark version; the two never share tasks or categories."""
    from evaluation.task_specs import write_benchmark_manifest

    private = tmp_path / "private"
    src = TASKS_DIR / "clinical-trial-matching" / "synthetic_01"
    shutil.copytree(src, private / "clinical-trial-matching" / "synthetic_01")
    write_benchmark_manifest(private, name="private-bench", version="1.0",
                             tasks={"clinical-trial-matching/synthetic_01": package_digest(src)},
                             title="Private", attempts_per_task=5)
    settings.TASK_SOURCES = [TASKS_DIR, private]
    out = io.StringIO()
    call_command("sync_tasks", stdout=out)
    assert "benchmark version private-bench@1.0" in out.getvalue()
    private_bv = BenchmarkVersion.objects.get(name="private-bench", version="1.0")
    assert private_bv.attempts_per_task == 5
    assert _task_names("private-bench@1.0") == ["clinical-trial-matching/synthetic_01"]
    assert len(_task_names(SLUG)) == 7
    task = BenchmarkTask.objects.get(benchmark_version=private_bv)
    assert task.package_path == str((private / "clinical-trial-matching" / "synthetic_01").resolve())
    assert task.category.benchmark_version == private_bv


def _git(*args, cwd):
    import os
    import subprocess

    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    return subprocess.run(["git", "-c", "commit.gpgsign=false", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=True).stdout.strip()


def test_a_git_task_source_pinned_to_a_commit(tmp_path, settings):
    """TASK_SOURCES entry `<git URL>@<commit>#<subdir>`: cloned once into TASK_SOURCES_CACHE at
    exactly that commit; a later commit in the repository does not move it; a commit that is not
    there is an error naming the source."""
    from evaluation.task_specs import write_benchmark_manifest
    from evaluation.task_sources import task_source_dirs

    repo = tmp_path / "hab-private.git-work"
    package = repo / "licensed" / "clinical-trial-matching" / "synthetic_01"
    shutil.copytree(TASKS_DIR / "clinical-trial-matching" / "synthetic_01", package)
    write_benchmark_manifest(repo / "licensed", name="git-bench", version="1.0",
                             tasks={"clinical-trial-matching/synthetic_01": package_digest(package)})
    _git("init", "-q", "-b", "main", cwd=repo)
    _git("add", "-A", cwd=repo)
    _git("commit", "-q", "-m", "v1", cwd=repo)
    pinned = _git("rev-parse", "HEAD", cwd=repo)
    (package / "README.md").write_text("changed after the pin\n")
    _git("commit", "-qam", "later", cwd=repo)

    entry = f"file://{repo}@{pinned}#licensed"
    settings.TASK_SOURCES_CACHE = tmp_path / "cache"
    settings.TASK_SOURCES = [str(TASKS_DIR), entry]
    out = io.StringIO()
    call_command("sync_tasks", stdout=out)
    assert "benchmark version git-bench@1.0" in out.getvalue(), out.getvalue()
    task = BenchmarkTask.objects.get(benchmark_version__name="git-bench")
    checkout = Path(task.package_path)
    assert checkout.is_relative_to(tmp_path / "cache")
    assert _git("rev-parse", "HEAD", cwd=checkout) == pinned
    assert "changed after the pin" not in (checkout / "README.md").read_text()
    # Reused, not cloned again.
    (first,) = [d for d in (tmp_path / "cache").iterdir() if not d.name.startswith(".")]
    marker = first / ".git" / "reused"
    marker.write_text("")
    assert task_source_dirs([entry]) == [first / "licensed"] and marker.exists()
    assert len(list((tmp_path / "cache").iterdir())) == 1

    settings.TASK_SOURCES = [f"file://{repo}@{'0' * 40}"]
    with pytest.raises(CommandError, match=f"task source file://{repo}@0{{40}}: git checkout failed"):
        call_command("sync_tasks", stdout=io.StringIO())
    assert len(list((tmp_path / "cache").iterdir())) == 1  # the failed clone left nothing


V2 = "healthagentbench-synthetic@2.0"


def test_v2_lists_the_papers_54_tasks_each_at_its_own_difficulty():
    """@2.0 has the paper's count per category, holds @1.0's seven packages at their @1.0
    digests, and every other package records the generator parameters that made it, which
    vary within its category."""
    import tomllib

    from evaluation.synthetic.suite import PAPER_COUNTS

    manifests = {m.slug: m.spec for m in read_benchmark_manifests(TASKS_DIR)}
    v1, v2 = manifests[SLUG], manifests[V2]
    assert len(v2.tasks) == 54 and sum(PAPER_COUNTS.values()) == 54
    counts: dict[str, int] = {}
    for name in v2.tasks:
        counts[name.split("/")[0]] = counts.get(name.split("/")[0], 0) + 1
    assert counts == {"xray-report-correction": 10, "pathology-tumor-region": 10,
                      "ct-abnormality-classification": 10, "ehr-data-quality-audit": 8,
                      "ehr-format-conversion": 1, "ehr-event-modeling": 6,
                      "clinical-trial-matching": 9}
    assert {n: d for n, d in v2.tasks.items() if n in v1.tasks} == v1.tasks
    assert v2.tasks == {n: package_digest(TASKS_DIR / n) for n in v2.tasks}
    assert not v2.allows_reference_runs and v1.allows_reference_runs
    seen: dict[str, list] = {}
    for name in sorted(set(v2.tasks) - set(v1.tasks)):
        meta = tomllib.loads((TASKS_DIR / name / "task.toml").read_text())["metadata"]
        assert meta["task_id"] == name.split("/")[1] and meta["difficulty"], name
        seen.setdefault(name.split("/")[0], []).append(meta["difficulty"])
    for category, tables in seen.items():  # (CT's one knob, n_labels, repeats across seeds)
        assert len({repr(sorted(t.items())) for t in tables}) > len(tables) // 2, category


def test_sync_registers_v2_beside_v1_which_stays_the_try_out():
    report = benchmark_tasks_sync(tasks_dir=TASKS_DIR)
    assert report.ok, report.lines()
    v1 = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    v2 = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="2.0")
    assert v2.tasks.count() == 54 and all(t.runnable_here for t in v2.tasks.all())
    assert Category.objects.filter(benchmark_version=v2).count() == 7
    assert v1.tasks.count() == 7 and v1.allows_reference_runs and not v2.allows_reference_runs
    shared = {t.name: t.content_digest for t in v1.tasks.all()}
    assert {t.name: t.content_digest for t in v2.tasks.filter(name__in=shared)} == shared
    # The Submit page's default and its try-out stay on @1.0.
    from submissions.harbor_intake import submittable_benchmark_versions

    assert [bv.slug for bv in submittable_benchmark_versions()] == [SLUG, V2]
