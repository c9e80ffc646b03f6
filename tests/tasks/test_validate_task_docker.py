"""CI's task validation: every package of @1.0 passes `manage.py validate_task` in Docker (the
tasks54 suite, test_tasks54.py, validates the rest of @2.0's 54).

This is the check CONTRIBUTING.md promises for a task pull request: structure, the task image
builds with networking disabled, the oracle passes, the nop agent fails, no answer file and no
network is reachable from the agent container. The X-ray package's verifier asks an LLM judge:
validate_task uses the configured one (XRAY_JUDGE_URL) through the judge gateway; here that is
the test's stub (tests/evaluation/judge_standin.py). Needs no database.
"""

import io
import time

import pytest
from task_package_paths import V1_PACKAGES, package_id

from tests.evaluation.judge_standin import JudgeStandIn, docker_bridge_ip

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def judge(settings):
    with JudgeStandIn(host=docker_bridge_ip(), rule="injected-errors") as stub:
        settings.XRAY_JUDGE_URL = stub.url
        yield stub


@pytest.mark.parametrize("package", V1_PACKAGES, ids=package_id)
def test_validate_task_passes(package):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    out, err = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    try:
        call_command("validate_task", str(package), stdout=out, stderr=err, no_color=True)
    except CommandError as exc:
        pytest.fail(
            f"validate_task {package_id(package)} failed: {exc}\n{out.getvalue()}{err.getvalue()}",
            pytrace=False,
        )
    report = out.getvalue()
    print(report)
    print(f"validate_task {package_id(package)}: {time.monotonic() - t0:.1f} s wall")
    assert "VALID " in report and "INVALID" not in report, report
    assert "all 1 task(s) valid" in report, report


def test_a_filled_in_synthetic_scaffold_validates_without_stray_tracebacks(tmp_path):
    """CONTRIBUTING's steps 1 and 4 as a contributor types them, in a subprocess (so what the
    interpreter prints at exit is seen): the --synthetic scaffold's oracle passes once the TODO
    text is written, and nothing but the report is printed."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    manage = [sys.executable, str(repo / "manage.py")]
    env = {**__import__("os").environ, "DEBUG": "1"}
    package = tmp_path / "clinical-trial-matching" / "case_02"
    subprocess.run([*manage, "new_task", "clinical-trial-matching", "case_02", "--synthetic",
                    "--tasks-dir", str(tmp_path)], check=True, env=env, cwd=repo,
                   capture_output=True)
    refused = subprocess.run([*manage, "validate_task", str(package), "--structure-only"],
                             env=env, cwd=repo, capture_output=True, text=True)
    assert refused.returncode != 0 and "placeholder text" in refused.stdout, refused.stdout
    for rel in ("instruction.md", "README.md"):
        path = package / rel
        path.write_text(path.read_text().replace("TODO", "Match the patient to every trial."))
    done = subprocess.run([*manage, "validate_task", str(package)], env=env, cwd=repo,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "oracle passes the verifier" in done.stdout and "all 1 task(s) valid" in done.stdout
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr
