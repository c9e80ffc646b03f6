"""manage.py run_worker --nice N: the Celery worker it becomes, and its pool process, run N
lower in priority than the caller (intake workers beside web: readers win the CPU, R14)."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from tests.evaluation import verification_support as vs

REPO = Path(__file__).resolve().parents[2]


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def test_run_worker_nice_lowers_the_worker_and_its_pool(tmp_path):
    log = tmp_path / "worker.log"
    queue = f"nice-test-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "DEBUG": "1",
           "CELERY_BROKER_URL": vs.BROKER_URL, "PYTHONUNBUFFERED": "1"}
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "run_worker", "--queues", queue, "--concurrency", "1",
             "--nice", "7", "--name", queue], cwd=REPO, env=env, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 180
        while b"ready." not in log.read_bytes():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.time() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        # run_worker exec'd celery in place: the same pid, now the worker.
        assert b"celery" in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        pool = _children(proc.pid)
        assert pool, "the prefork pool has no process"
        for pid in [proc.pid, *pool]:
            assert os.getpriority(os.PRIO_PROCESS, pid) == min(mine + 7, 19), pid
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # our own process group only
            proc.wait(timeout=10)
