"""The chaos soak command, short: a real worker, a throwaway PostgreSQL cluster and Redis
broker, Docker. The full run (10 kills) is `manage.py chaos_soak`; its figures are in README."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]


def test_r1_r6_r7_chaos_soak_short_run_loses_and_duplicates_nothing(docker_engine):
    """R1, R6, R7, R9 together: a worker SIGKILLed mid-verification (and restarted), the
    broker restarted and PostgreSQL restarted during a batch of two submissions: every
    submission is verified exactly once; nothing lost, duplicated or stuck; no container
    left behind. The shared PostgreSQL and Redis are not touched (throwaway instances)."""
    env = {**os.environ, "DEBUG": "1"}
    result = subprocess.run(
        [sys.executable, "manage.py", "chaos_soak", "--kills", "1", "--submissions", "2",
         "--timeout", "420", "--seed", "5"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    out = result.stdout
    assert result.returncode == 0, (out[-3000:], result.stderr[-3000:])
    print(out[-2500:])
    totals = dict(re.findall(r"^  ([a-z ()]+): (\d+)", out, re.M))
    assert totals == {"verified exactly once": "2", "lost": "0", "duplicated": "0",
                      "stuck": "0", "failed (never scored)": "0", "containers leaked": "0"}, out
    assert out.count("SIGKILL worker") >= 2  # the fault line and the per-fault line
    assert "restart Redis broker" in out and "restart PostgreSQL" in out
