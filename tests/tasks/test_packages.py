"""Every package under tasks/ passes the structural checks; the checks catch what they claim."""

import os
import shutil
import tomllib

import pytest
from task_package_paths import PACKAGES, SYNTHETIC, TASKS_DIR, package_id

from evaluation.management.commands.new_task import render_test_sh, scaffold_package
from evaluation.task_specs import (
    BASE_IMAGE,
    CATEGORIES,
    check_task_package,
    load_task_package,
    package_digest,
)


@pytest.mark.parametrize("package", PACKAGES, ids=package_id)
def test_it_finds_no_structural_problems(package):
    assert check_task_package(package) == []


@pytest.mark.parametrize("package", PACKAGES, ids=package_id)
def test_scripts_are_executable_and_packages_are_small(package):
    for rel in ("tests/test.sh", "solution/solve.sh"):
        assert os.access(package / rel, os.X_OK), rel
    assert load_task_package(package).size_bytes < 1024 * 1024


@pytest.mark.parametrize("package", PACKAGES, ids=package_id)
def test_verifier_script_is_the_template_for_its_category(package):
    """Every tests/test.sh is new_task's one template rendered for its category (no drift: fix
    the template in evaluation/management/commands/new_task.py and regenerate, never one copy)."""
    category = load_task_package(package).manifest.metadata.category
    assert (package / "tests" / "test.sh").read_text() == render_test_sh(category)


def test_every_category_has_a_runnable_synthetic_package():
    for category, path in SYNTHETIC.items():
        manifest = load_task_package(path).manifest
        assert manifest.metadata.category == category
        assert manifest.metadata.synthetic is True
        assert manifest.task.name == f"healthagentbench-synthetic/{category}-synthetic_01"
        assert manifest.metadata.agent_network == "none"
        assert manifest.network_contradiction is None


def test_manifests_read_as_harbor_legacy_and_current_schema():
    # Harbor 0.1.x ignores [task]/schema_version and reads these with its defaults; 0.2x reads
    # schema_version. Both need these tables with numeric timeouts and limits. No Harbor network
    # keys in [environment]: Harbor's Docker provider rejects "no-network" when offline.
    for path in SYNTHETIC.values():
        data = tomllib.loads((path / "task.toml").read_text())
        assert data["schema_version"] == "1.1"
        assert isinstance(data["agent"]["timeout_sec"], float)
        assert isinstance(data["verifier"]["timeout_sec"], float)
        assert {"cpus", "memory_mb", "storage_mb"} <= set(data["environment"])
        assert not {"network_mode", "allow_internet"} & set(data["environment"])


def test_digest_is_stable_and_sees_every_byte(tmp_path):
    src = SYNTHETIC["ct-abnormality-classification"]
    copy = tmp_path / "tasks" / src.parent.name / src.name
    shutil.copytree(src, copy)
    assert package_digest(copy) == load_task_package(src).content_digest
    (copy / "__pycache__").mkdir()
    (copy / "__pycache__" / "x.pyc").write_bytes(b"ignored")
    assert package_digest(copy) == package_digest(src)
    (copy / "README.md").write_text((copy / "README.md").read_text() + "\n")
    assert package_digest(copy) != package_digest(src)


@pytest.fixture
def broken(tmp_path):
    """A writable copy of a good package, placed as tasks/<category>/<task_id>."""
    src = SYNTHETIC["pathology-tumor-region"]
    dst = tmp_path / "tasks" / src.parent.name / src.name
    shutil.copytree(src, dst)
    return dst


def _problems(path) -> str:
    return "\n".join(check_task_package(path))


def test_it_rejects_an_answer_copied_into_the_environment(broken):
    shutil.copy(broken / "tests" / "answer.json", broken / "environment" / "data" / "hint.json")
    assert "identical to tests/answer.json" in _problems(broken)
    (broken / "environment" / "data" / "hint.json").unlink()
    (broken / "environment" / "data" / "gold.json").write_text("{}")
    assert "answer-like file name" in _problems(broken)


def test_it_rejects_network_builds_and_foreign_base_images(broken):
    dockerfile = broken / "environment" / "Dockerfile"
    dockerfile.write_text("FROM python:3.12\nRUN pip install \\\n  numpy\nCOPY ../tests /t\n")
    problems = _problems(broken)
    assert f"FROM {BASE_IMAGE}" in problems
    assert "RUN needs the network" in problems
    assert "outside the build context" in problems


def test_it_requires_the_output_path_in_the_instruction(broken):
    (broken / "instruction.md").write_text("Find the tumour.\n")
    assert "must name the output path /workspace/submission.json" in _problems(broken)


def test_it_rejects_bad_metadata_and_enabled_network(broken):
    toml = broken / "task.toml"
    text = toml.read_text().replace("gpus = 0", "gpus = 0\nallow_internet = true")
    toml.write_text(text.replace('group = "imaging"', 'group = "text"'))
    problems = _problems(broken)
    assert "[environment] grants network access" in problems
    assert "is 'imaging'" in problems
    toml.write_text(text.replace('category = "pathology-tumor-region"', 'category = "radiology"'))
    assert "unknown category" in _problems(broken)
    toml.write_text(text.replace('success_criterion = ', 'criterion = '))
    assert "metadata.success_criterion" in _problems(broken)
    toml.write_text(text.replace('agent_network = "none"', 'agent_network = "open"'))
    assert "metadata.agent_network" in _problems(broken)


def test_it_reports_missing_files(tmp_path):
    empty = tmp_path / "tasks" / "ct-abnormality-classification" / "case_99"
    empty.mkdir(parents=True)
    problems = _problems(empty)
    for rel in ("task.toml", "instruction.md", "environment/Dockerfile", "tests/test.sh"):
        assert f"missing {rel}" in problems


def _fill_in_placeholders(root):
    for rel in ("instruction.md", "README.md", "solution/solve.sh"):
        path = root / rel
        path.write_text(path.read_text().replace("TODO", "Written by the author"))


@pytest.mark.parametrize("category", sorted(CATEGORIES))
def test_new_task_scaffold_is_refused_until_its_placeholders_are_written(tmp_path, category):
    root = scaffold_package(tmp_path, category, "case_07", synthetic=False)
    problems = check_task_package(root)
    assert [p.split(":")[0] for p in problems] == ["instruction.md", "README.md",
                                                   "solution/solve.sh"], problems
    assert all("placeholder text" in p for p in problems)
    _fill_in_placeholders(root)
    assert check_task_package(root) == []
    assert load_task_package(root).manifest.metadata.data_source == CATEGORIES[category].paper_data


def _commands(script) -> list[str]:
    return [line for line in script.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize("category", sorted(CATEGORIES))
def test_synthetic_scaffold_oracle_runs_what_the_shipped_synthetic_oracle_runs(tmp_path, category):
    # The shipped synthetic_01 oracles pass in Docker (test_validate_task_docker.py); the
    # scaffold's solve.sh must be the same program over the generator's solution/ files.
    root = scaffold_package(tmp_path, category, "case_07", synthetic=True)
    shipped = TASKS_DIR / category / "synthetic_01" / "solution" / "solve.sh"
    assert _commands(root / "solution" / "solve.sh") == _commands(shipped)
    assert "TODO" not in (root / "solution" / "solve.sh").read_text()


def test_new_task_refuses_to_overwrite_or_take_bad_names(tmp_path):
    from django.core.management.base import CommandError

    scaffold_package(tmp_path, "clinical-trial-matching", "case_01", synthetic=True)
    with pytest.raises(CommandError, match="refusing to overwrite"):
        scaffold_package(tmp_path, "clinical-trial-matching", "case_01", synthetic=True)
    for bad in ("Case-1", "../x", "a b", ""):
        with pytest.raises(CommandError, match="must match"):
            scaffold_package(tmp_path, "clinical-trial-matching", bad, synthetic=False)
    with pytest.raises(CommandError, match="unknown category"):
        scaffold_package(tmp_path, "radiology", "case_01", synthetic=False)


def test_tasks_dir_holds_only_packages():
    # House style HS2: tasks/ is data, never imported as Python.
    assert not (TASKS_DIR / "__init__.py").exists()
    for category_dir in TASKS_DIR.iterdir():
        assert category_dir.name in CATEGORIES or category_dir.name == "benchmarks", category_dir


@pytest.mark.parametrize("section,user", [("agent", "root"), ("agent", "0"), ("agent", 0),
                                          ("verifier", "0:0"), ("agent", "root:agent"),
                                          ("verifier", " 0 ")])
def test_it_refuses_a_package_that_asks_for_root(broken, section, user):
    """S3: the agent (and the verifier) never run as root; a task.toml asking for root, by
    name or uid 0, is refused by check_task_package (so by validate_task and sync_tasks)."""
    toml = broken / "task.toml"
    text = toml.read_text()
    value = str(user) if isinstance(user, int) else f'"{user}"'
    assert f"[{section}]\n" in text
    toml.write_text(text.replace(f"[{section}]\n", f"[{section}]\nuser = {value}\n", 1))
    assert f"[{section}] user = {user!r} is root" in _problems(broken)


def test_it_accepts_an_unprivileged_user_and_refuses_root_in_the_dockerfile(broken):
    """S10: an unprivileged task.toml user is fine; a Dockerfile that switches to root or sets
    its WORKDIR inside /proc (the runc CVE-2024-21626 shape) is refused."""
    toml = broken / "task.toml"
    toml.write_text(toml.read_text().replace("[agent]\n", '[agent]\nuser = "1000"\n', 1))
    assert _problems(broken) == ""
    dockerfile = broken / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "USER root\nWORKDIR /proc/self/fd/7\n")
    problems = _problems(broken)
    assert "Dockerfile USER root is root" in problems
    assert "WORKDIR /proc/self/fd/7 points into /proc" in problems
