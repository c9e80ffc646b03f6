"""The category registry (evaluation/categories): every registered category has all its parts,
and adding one folder is all it takes to register a new category everywhere (graders' command
line, synthetic generation, new_task, the structural checks)."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evaluation.categories import CATEGORIES, Category, RegistryError, discover, missing_parts
from evaluation.graders import DIRECTORY_CATEGORIES, GRADERS, JUDGE_CATEGORIES
from evaluation.synthetic import CATEGORIES as GENERATED
from evaluation.task_specs import CATEGORIES as SPEC_CATEGORIES
from evaluation.task_specs import TASK_ID_RE

REPO = Path(__file__).resolve().parents[2]
PAPER_ORDER = [
    "xray-report-correction", "pathology-tumor-region", "ct-abnormality-classification",
    "ehr-data-quality-audit", "ehr-format-conversion", "ehr-event-modeling",
    "clinical-trial-matching",
]


def test_the_seven_categories_are_registered_once_in_the_papers_order():
    assert list(CATEGORIES) == PAPER_ORDER
    # every consumer reads the one registry
    assert list(GRADERS) == list(GENERATED) == list(SPEC_CATEGORIES) == PAPER_ORDER
    assert SPEC_CATEGORIES is CATEGORIES
    assert DIRECTORY_CATEGORIES == {"ehr-format-conversion"}
    assert JUDGE_CATEGORIES == {"xray-report-correction"}


@pytest.mark.parametrize("slug", PAPER_ORDER)
def test_every_registered_category_has_all_its_parts(slug):
    category = CATEGORIES[slug]
    assert missing_parts(category) == []
    assert category.path == REPO / "evaluation" / "categories" / slug.replace("-", "_")
    assert category.group in ("imaging", "text")
    assert category.name and category.modality and category.paper_data and category.paper_access
    assert len(category.success_criterion) >= 10
    assert category.submission_path.startswith("/workspace/")
    assert category.grader().grade is GRADERS[slug]
    script = category.render_test_sh()
    assert script.startswith("#!/bin/bash\n") and "/logs/verifier/reward.json" in script
    assert f"-m evaluation.graders {slug} \\" in script
    assert f"--answer {category.answer_path} \\" in script
    assert category.synthetic_oracle.endswith("\n")


TOY_INIT = '''\
"""toy-counting: count the numbers in a file (a test category)."""

from evaluation.categories.spec import Category

CATEGORY = Category(
    slug="toy-counting",
    name="Toy counting",
    group="text",
    position=99,
    modality="a JSON list of integers",
    paper_data="none (a test category)",
    paper_access="public",
    success_criterion="the count of the numbers is exactly right",
    submission_path="/workspace/submission.json",
)
'''
TOY_GRADER = '''\
"""toy-counting's grader: passes when "count" equals the answer's."""

from evaluation.grading import GradeResult, GradingInputError, expect_object, load_json


def grade(answer_path, submission_path, **options):
    answer = load_json(answer_path, label="answer")
    want = expect_object(answer, label="answer", where="the top level", required=("count",))
    got = expect_object(load_json(submission_path, label="submission"), label="submission",
                        where="the top level")
    if not isinstance(got.get("count"), int):
        raise GradingInputError("submission: count must be an integer")
    return GradeResult(passed=got["count"] == want["count"], metrics={"count": got["count"]})
'''
TOY_GENERATOR = '''\
"""toy-counting's generator: 5 to 15 numbers, the count hidden under tests/."""

from evaluation.generating import reset_dir, write_json, write_readme


def generate(task_dir, rng, case_id="case_01"):
    numbers = [int(x) for x in rng.integers(0, 100, size=int(rng.integers(5, 16)))]
    data = reset_dir(task_dir / "environment" / "data")
    write_json(data / "numbers.json", {"numbers": numbers})
    write_readme(data / "README.md", "Numbers (synthetic)", "A JSON list of integers.")
    write_json(task_dir / "tests" / "answer.json", {"count": len(numbers)})
    write_json(task_dir / "solution" / "submission.json", {"count": len(numbers)})
'''


def _copy_project(dest: Path) -> None:
    for name in ("config", "evaluation", "submissions", "leaderboard", "devtools"):
        shutil.copytree(REPO / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "manage.py", dest / "manage.py")


def test_adding_one_folder_registers_a_category_everywhere(tmp_path):
    """A copy of the project plus one folder evaluation/categories/toy_counting/: new_task
    scaffolds and generates its package, the structural checks accept its metadata, and the
    graders' command line (what test.sh runs) grades its oracle. Nothing else is edited."""
    project = tmp_path / "project"
    _copy_project(project)
    folder = project / "evaluation" / "categories" / "toy_counting"
    folder.mkdir()
    (folder / "__init__.py").write_text(TOY_INIT)
    (folder / "grader.py").write_text(TOY_GRADER)
    (folder / "generator.py").write_text(TOY_GENERATOR)
    env = {
        "PATH": os.environ["PATH"], "DEBUG": "1", "HOME": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "config.settings", "PYTHONDONTWRITEBYTECODE": "1",
    }

    def run(*args, cwd=project, **extra_env):
        proc = subprocess.run([sys.executable, *args], cwd=cwd, env={**env, **extra_env},
                              capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    tasks = tmp_path / "tasks"
    run("manage.py", "new_task", "toy-counting", "case_01", "--synthetic", "--tasks-dir", str(tasks))
    package = tasks / "toy-counting" / "case_01"
    assert json.loads((package / "tests" / "answer.json").read_text())["count"] >= 5
    assert "-m evaluation.graders toy-counting" in (package / "tests" / "test.sh").read_text()
    report = run("-c", textwrap.dedent(f"""
        import json
        from evaluation.categories import CATEGORIES, missing_parts
        from evaluation.task_specs import check_task_package, load_task_package
        toy = CATEGORIES["toy-counting"]
        print(json.dumps({{
            "order": list(CATEGORIES),
            "missing": missing_parts(toy),
            "problems": check_task_package({str(package)!r}),
            "category": load_task_package({str(package)!r}).category,
        }}))
    """))
    report = json.loads(report)
    assert report["order"] == [*PAPER_ORDER, "toy-counting"]
    assert report["missing"] == [] and report["category"] == "toy-counting"
    # Only what the scaffold leaves to the author (the TODO text) is left to fix.
    assert report["problems"] and all("placeholder text" in p for p in report["problems"])
    # The graders' command line, as test.sh runs it, from the copy (no Django).
    reward = tmp_path / "reward.json"
    out = run("-s", "-P", "-m", "evaluation.graders", "toy-counting",
              "--answer", str(package / "tests" / "answer.json"),
              "--submission", str(package / "solution" / "submission.json"),
              "--reward-file", str(reward), cwd=tmp_path, PYTHONPATH=str(project))
    assert json.loads(out)["passed"] is True
    assert json.loads(reward.read_text())["reward"] == 1


def test_discovery_refuses_an_incomplete_or_misnamed_folder(tmp_path, monkeypatch):
    root = tmp_path / "extra_categories"
    (root / "half_done").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "half_done" / "__init__.py").write_text('"""no CATEGORY here"""\n')
    (root / "_private").mkdir()
    (root / "_private" / "__init__.py").write_text("raise ImportError('never imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RegistryError, match="must define CATEGORY"):
        discover("extra_categories", [str(root)])
    shutil.rmtree(root / "half_done")
    (root / "misnamed").mkdir()
    (root / "misnamed" / "__init__.py").write_text(TOY_INIT)
    with pytest.raises(RegistryError, match="named after the slug"):
        discover("extra_categories", [str(root)])
    shutil.rmtree(root / "misnamed")
    (root / "toy_counting").mkdir()
    (root / "toy_counting" / "__init__.py").write_text(TOY_INIT)
    found = discover("extra_categories", [str(root)])
    assert list(found) == ["toy-counting"] and isinstance(found["toy-counting"], Category)
    # the folder exists but has no grader.py / generator.py yet: incomplete
    assert missing_parts(found["toy-counting"]) == ["grader.py", "generator.py"]
    assert TASK_ID_RE.match("case_01")
