"""The tooling app (devtools/, house style HS44) is installed for development and CI only.

Its commands (bench_*, chaos_soak, simulate_stats) are there under DEBUG (make run's .env, the
tests, CI) and with HAB_DEVTOOLS=1; a production configuration (DEBUG off) has none of them, and
the methods page still reads the committed simulation tables without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOOLS = {"bench_broker", "bench_isolation", "bench_load", "bench_runner", "bench_scale", "bench_ties",
         "bench_upload", "chaos_soak", "cluster", "reconstruction_spread", "screen_blind",
         "simulate_stats"}


def _commands(tmp_path: Path, **env: str) -> set[str]:
    """`manage.py help --commands` in a bare environment with these values (they win over a
    checkout's .env, which make run writes with DEBUG=1)."""
    base = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
    base.update(SECRET_KEY="x" * 50, VERIFICATION_SAMPLE_SECRET="s" * 32,
                DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
                CELERY_BROKER_URL="memory://", **env)  # HAB_DEVTOOLS only when given
    done = subprocess.run([sys.executable, str(REPO / "manage.py"), "help", "--commands"],
                          cwd=tmp_path, env=base, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(done.stdout.split())


@pytest.mark.parametrize(("env", "installed"), [
    ({"DEBUG": "1"}, True),
    ({"DEBUG": "0"}, False),
    ({"DEBUG": "0", "HAB_DEVTOOLS": "1"}, True),
    ({"DEBUG": "1", "HAB_DEVTOOLS": "0"}, False),
])
def test_the_tooling_commands_exist_exactly_where_devtools_is_installed(tmp_path, env, installed):
    commands = _commands(tmp_path, **env)
    assert "load_demo" in commands and "rebuild_leaderboard" in commands  # runtime: always
    assert (TOOLS <= commands) if installed else not (TOOLS & commands), sorted(commands)


def test_every_command_of_devtools_is_listed_here():
    """A new tool is a command of devtools; this list (and the docs) name them all."""
    found = {p.stem for p in (REPO / "devtools" / "management" / "commands").glob("*.py")
             if p.stem != "__init__"}
    assert found == TOOLS
