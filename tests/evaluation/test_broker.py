"""make run's broker (kombu's SQLAlchemy transport on a SQLite file) under producers and
consumers racing on one queue: nothing lost, nothing read twice, no read that raises (kombu's
filesystem transport, make run's broker before, loses a few of every few thousand to a
JSONDecodeError that stops a Celery worker: docs/testing.md has both figures)."""

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_make_runs_broker_loses_nothing_under_racing_producers_and_consumers(tmp_path):
    env = {**os.environ, "DEBUG": "1", "BROKER_SQLITE_FILE": str(tmp_path / "broker.sqlite3")}
    env.pop("CELERY_BROKER_URL", None)
    argv = [sys.executable, "manage.py", "bench_broker", "--transport-only",
            "--messages", "400", "--producers", "4", "--consumers", "4"]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True,  # noqa: S603
                          timeout=600)
    out = done.stdout
    assert done.returncode == 0, (out, done.stderr[-3000:])
    assert "sqla+sqlite:///" in out, out
    figures = dict(re.findall(r"^  ([a-z ()',]+): (\d+)", out, re.M))
    assert figures == {"lost messages": "0", "read twice": "0",
                       "publishes that raised (published again)": "0",
                       "reads that raised (a worker's crash)": "0"}, out
    assert "sent 400 of 400" in out and "read 400 in" in out, out
