"""CI's task validation: every package under tasks/ passes `manage.py validate_task` in Docker.

This is the check CONTRIBUTING.md promises for a task pull request: structure, the task image
builds with networking disabled, the oracle passes, the nop agent fails, no answer file and no
network is reachable from the agent container. The X-ray package's verifier asks an LLM judge;
validate_task serves it the scripted stand-in (tests/evaluation/judge_standin.py) on an internal
Docker network, so no endpoint or key is needed. Needs no database.
"""

import io
import time

import pytest
from task_package_paths import PACKAGES, package_id

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("package", PACKAGES, ids=package_id)
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
