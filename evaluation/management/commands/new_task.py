"""manage.py new_task <category> <task_id> [--synthetic] [--tasks-dir DIR]

Scaffolds a Harbor task package under tasks/<category>/<task_id>/ that already passes the
structural checks (evaluation.task_specs.check_task_package) except for what only its author
can supply: the data, the hidden answer and a real oracle. Refuses to overwrite anything.
With --synthetic it also runs the category's deterministic generator (evaluation.synthetic).
"""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from evaluation.categories import CATEGORIES
from evaluation.task_specs import BASE_IMAGE, BENCHMARK_NAME, SYNTHETIC_ACCESS, TASK_ID_RE

EXECUTABLE = {"tests/test.sh", "solution/solve.sh"}


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_task_toml(category: str, task_id: str, *, synthetic: bool) -> str:
    info = CATEGORIES[category]
    data_source = f"synthetic (shaped like {info.paper_data})" if synthetic else info.paper_data
    access = SYNTHETIC_ACCESS if synthetic else info.paper_access
    judge = info.needs_judge
    lines = [
        'schema_version = "1.1"',
        "",
        "[task]",
        f'name = "{BENCHMARK_NAME}/{category}-{task_id}"',
        f"description = {_toml_str(f'{info.name}: {info.success_criterion}')}",
        f'keywords = ["healthagentbench", "{info.group}", "{category}"]',
        "",
        "[metadata]",
        f'benchmark = "{BENCHMARK_NAME}"',
        f'category = "{category}"',
        f'task_id = "{task_id}"',
        f'group = "{info.group}"',
        f"modality = {_toml_str(info.modality)}",
        f"data_source = {_toml_str(data_source)}",
        f"access = {_toml_str(access)}",
        f"success_criterion = {_toml_str(info.success_criterion)}",
        f'submission_path = "{info.submission_path}"',
        f"synthetic = {'true' if synthetic else 'false'}",
        # Enforced by our runner and validate_task (network none). Not written as Harbor's
        # [environment] network_mode = "no-network": Harbor's Docker provider can only honour
        # that with an egress-control sidecar pulled from a registry, and rejects the task
        # offline, which would break `harbor run` on these packages.
        'agent_network = "none"',
        'author_name = "HealthAgentBench leaderboard maintainers"',
        "",
        "[agent]",
        "timeout_sec = 3600.0",
        "",
        "[verifier]",
        f"timeout_sec = {info.verifier_timeout_sec}",
    ]
    if judge:
        # The judge is the only thing the verifier needs to reach.
        lines += [
            'network_mode = "public"',
            "",
            "[verifier.env]",
            'XRAY_JUDGE_URL = "${XRAY_JUDGE_URL:-http://127.0.0.1:8765}"',
            'XRAY_JUDGE_MODEL = "${XRAY_JUDGE_MODEL:-gpt-5.4}"',
            'XRAY_JUDGE_API_KEY = "${XRAY_JUDGE_API_KEY:-unset}"',
        ]
    lines += [
        "",
        "[environment]",
        "build_timeout_sec = 600.0",
        "cpus = 1",
        "memory_mb = 2048",
        "storage_mb = 2048",
        "gpus = 0",
        "",
    ]
    return "\n".join(lines)


def render_dockerfile() -> str:
    return f"""\
# Agent environment. Builds run with networking disabled: everything the task needs is in the
# base image (built locally by `make images`) or in this build context. Never COPY answers here.
FROM {BASE_IMAGE}
WORKDIR /workspace
COPY --chown=agent:agent data/ /workspace/data/
"""


def render_test_sh(category: str) -> str:
    """The category's verifier script (evaluation/categories: its template, or the shared one)."""
    return CATEGORIES[category].render_test_sh()


def render_solve_sh(category: str, *, synthetic: bool = False) -> str:
    target = CATEGORIES[category].submission_path
    if synthetic:
        return f"""\
#!/bin/bash
# Oracle: the reference answer, precomputed by the generator (evaluation/synthetic) from the
# same parameters that drew the data; writes {target}.
set -euo pipefail
{CATEGORIES[category].synthetic_oracle}"""
    return f"""\
#!/bin/bash
# Oracle: writes a passing answer to {target}. Replace with a real solution.
set -euo pipefail
echo "TODO: oracle for this task" >&2
exit 1
"""


def render_instruction(category: str) -> str:
    target = CATEGORIES[category].submission_path
    return f"""\
TODO: describe the task in a few sentences. The input data is under `/workspace/data/`.

Write your answer to `{target}`.
TODO: its exact format and when it passes (CONTRIBUTING.md, section 1, has each category's).
"""


def render_readme(category: str, task_id: str, *, synthetic: bool) -> str:
    info = CATEGORIES[category]
    label = "**SYNTHETIC.** " if synthetic else ""
    generate = (f"\nRegenerate the data with `.venv/bin/python -m evaluation.synthetic "
                f"{category} tasks/{category}/{task_id}`.\n") if synthetic else ""
    return f"""\
# {info.name}: {task_id}

{label}TODO: what the task is, where its data comes from and under which terms.

Success criterion: {info.success_criterion}.
{generate}"""


def render_package(category: str, task_id: str, *, synthetic: bool) -> dict[str, str]:
    return {
        "task.toml": render_task_toml(category, task_id, synthetic=synthetic),
        "instruction.md": render_instruction(category),
        "README.md": render_readme(category, task_id, synthetic=synthetic),
        "environment/Dockerfile": render_dockerfile(),
        "environment/data/.gitkeep": "",
        "tests/test.sh": render_test_sh(category),
        "solution/solve.sh": render_solve_sh(category, synthetic=synthetic),
    }


def scaffold_package(tasks_dir: Path, category: str, task_id: str, *, synthetic: bool) -> Path:
    if category not in CATEGORIES:
        raise CommandError(f"unknown category {category!r}; choose one of {sorted(CATEGORIES)}")
    if not TASK_ID_RE.match(task_id):
        raise CommandError(f"task_id {task_id!r} must match {TASK_ID_RE.pattern}")
    root = Path(tasks_dir) / category / task_id
    if root.exists():
        raise CommandError(f"{root} already exists; refusing to overwrite it")
    for rel, text in render_package(category, task_id, synthetic=synthetic).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if rel in EXECUTABLE:
            os.chmod(path, 0o755)
    return root


def _shown(root: Path) -> str:
    try:
        return root.resolve().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(root)


class Command(BaseCommand):
    help = "Scaffold a Harbor task package under tasks/<category>/<task_id>/."

    def add_arguments(self, parser):
        parser.add_argument("category", choices=sorted(CATEGORIES))
        parser.add_argument("task_id")
        parser.add_argument("--synthetic", action="store_true",
                            help="mark it synthetic and run the category's data generator")
        parser.add_argument("--tasks-dir", type=Path, default=Path(settings.BASE_DIR) / "tasks")

    def handle(self, *args, category, task_id, synthetic, tasks_dir, **options):
        root = scaffold_package(tasks_dir, category, task_id, synthetic=synthetic)
        if synthetic:
            from evaluation.synthetic import generate  # build-time deps (numpy, pillow, ...)

            (root / "environment" / "data" / ".gitkeep").unlink()
            generate(category, root)
        self.stdout.write(self.style.SUCCESS(f"created {root}"))
        todo = "instruction.md and README.md" + ("" if synthetic else " and solution/solve.sh")
        self.stdout.write(f"next: replace the TODO text in {todo}, then run "
                          "`.venv/bin/python -m pytest tests/tasks -q -p no:django "
                          "-m \"not docker\"` and "
                          f"`.venv/bin/python manage.py validate_task {_shown(root)}`; "
                          "release it in a new benchmark version with "
                          "`.venv/bin/python manage.py sync_tasks --new-version <name>@<version>`")
