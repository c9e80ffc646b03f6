"""A fresh clone of this checkout that reuses its installed venv, for the tests that run the
README's commands as a newcomer types them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def fresh_clone(root: Path) -> Path:
    """``git clone`` of this checkout into ``root``, its ``.venv`` linked to the installed one.
    The Makefile reinstalls when pyproject/uv.lock/bootstrap are newer than the venv's stamp, and
    a fresh clone's files are new: they are dated back."""
    subprocess.run(["git", "clone", "-q", str(REPO), str(root)], check=True)  # noqa: S603, S607
    (root / ".venv").symlink_to(REPO / ".venv")
    for rel in ("pyproject.toml", "uv.lock", "scripts/bootstrap"):
        os.utime(root / rel, (1, 1))
    return root
