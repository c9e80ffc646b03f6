"""The chaos soak command: a real worker, a throwaway PostgreSQL cluster and Redis broker,
Docker. The short run is part of `make test`; the long one (3 seeds, 10 submissions and 15 kills
each) is marked `soak`: `make test` deselects it and .ci/run runs it (`-m soak`). Figures are in
docs/reliability.md."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
CLEAN = {"lost": "0", "duplicated": "0", "stuck": "0", "failed (never scored)": "0",
         "containers leaked": "0", "work directories leaked": "0"}


def _soak(*args: str, timeout: int, cwd: Path = REPO) -> tuple[dict, float, float, str]:
    """Run chaos_soak; its totals, its longest wait with no worker on it and reaper interval."""
    env = {**os.environ, "DEBUG": "1"}
    result = subprocess.run([sys.executable, "manage.py", "chaos_soak", *args], cwd=cwd,
                            env=env, capture_output=True, text=True, timeout=timeout)
    out = result.stdout
    assert result.returncode == 0, (out[-3000:], result.stderr[-3000:])
    print(out[-2500:])
    totals = dict(re.findall(r"^  ([a-z ()]+): (\d+)", out, re.M))
    wait = re.search(r"^  longest wait, no worker on it: ([\d.]+) s \(reaper interval ([\d.]+) s",
                     out, re.M)
    assert wait, out[-3000:]
    return totals, float(wait.group(1)), float(wait.group(2)), out


@pytest.fixture
def private_checkout():
    """A copy of this checkout under a 0700 directory of root's, which the ``postgres`` user
    cannot traverse (as a checkout under /root is)."""
    parent = Path(tempfile.mkdtemp(prefix="hab-private-", dir=Path.home()))
    checkout = parent / "checkout"
    shutil.copytree(REPO, checkout, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", ".venv-*", "var", "node_modules", "test-output", "__pycache__"))
    yield checkout
    shutil.rmtree(parent, ignore_errors=True)


def test_r1_r6_r7_chaos_soak_short_run_loses_and_duplicates_nothing(docker_engine,
                                                                    private_checkout):
    """R1, R6, R7, R9, R15 together: a worker SIGKILLed mid-verification (and restarted), the
    broker restarted and PostgreSQL restarted during a batch of two submissions: every
    submission is verified exactly once; nothing lost, duplicated or stuck; no container
    and no work directory of a killed worker left behind; no submission waited 3 reaper intervals with the worker idle. The shared
    PostgreSQL and Redis are not touched (throwaway instances).
    R19: it runs from a checkout the ``postgres`` user cannot traverse (the
    throwaway cluster lives in a temporary directory that user owns)."""
    if os.geteuid() == 0:
        denied = subprocess.run(["runuser", "-u", "postgres", "--", "test", "-x",
                                 str(private_checkout)], check=False)
        assert denied.returncode != 0, "the postgres user can traverse the private checkout"
    totals, longest, interval, out = _soak("--kills", "1", "--submissions", "2",
                                           "--timeout", "420", "--seed", "5", timeout=900,
                                           cwd=private_checkout)
    assert totals == {"verified exactly once": "2", **CLEAN}, out
    assert longest < 3 * interval, out
    assert out.count("SIGKILL worker") >= 2  # the fault line and the per-fault line
    assert "restart Redis broker" in out and "restart PostgreSQL" in out


@pytest.mark.soak
@pytest.mark.parametrize("seed", [21, 22, 23])
def test_r15_chaos_soak_long_run_no_submission_waits_on_an_idle_worker(docker_engine, seed):
    """R15: 10 submissions, 15 SIGKILLs of the worker at random points, a broker
    and a PostgreSQL restart: no submission waits 3 reaper intervals with no worker on it while
    the worker is up and idle (a prefetched or lost message is published again within about
    two), and the soak ends with nothing lost, duplicated, stuck or leaked."""
    totals, longest, interval, out = _soak("--kills", "15", "--submissions", "10", "--seed",
                                           str(seed), "--timeout", "1200", timeout=3600)
    assert totals == {"verified exactly once": "10", **CLEAN}, out
    assert longest < 3 * interval, out
