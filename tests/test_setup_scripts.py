"""`make test` sets a fresh machine up itself (scripts/ensure-docker, scripts/ensure-browser, both
through scripts/apt-install) and, where it cannot, says what to do instead of failing later in a
test. These run the real scripts with a PATH that hides apt-get or chromium and an `id` that
reports the user to be root or not; nothing is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _bin(tmp_path: Path, uid: int, tools: tuple[str, ...] = ()) -> Path:
    """A PATH directory holding `id` (printing uid) and the named real tools, nothing else."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (bin_dir / "id").chmod(0o755)
    for tool in ("bash", "dirname", *tools):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    return bin_dir


def _run(script: str, bin_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/bash", str(REPO / "scripts" / script), *args], cwd=REPO,
                          env={"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/tmp")},
                          capture_output=True, text=True, timeout=60)


def test_apt_install_without_root_says_to_run_as_root_or_what_else_to_do(tmp_path):
    proc = _run("apt-install", _bin(tmp_path, uid=1000), "ensure-browser",
                "install Debian's chromium yourself", "chromium", "npm")
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("ensure-browser: ERROR: installing chromium npm needs root "
                                   "(run as root, or install Debian's chromium yourself)")


def test_apt_install_without_apt_get_says_so(tmp_path):
    proc = _run("apt-install", _bin(tmp_path, uid=0), "ensure-docker",
                "start a Docker engine and set DOCKER_HOST", "--no-install-recommends",
                "debootstrap")
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("ensure-docker: ERROR: installing debootstrap needs apt-get "
                                   "(Debian or Ubuntu; or start a Docker engine and set "
                                   "DOCKER_HOST)")


def test_ensure_browser_installs_a_missing_chromium_or_says_why_it_cannot(tmp_path):
    # npm is found, chromium is not (not on this PATH, no CHROMIUM_PATH): the script asks
    # apt-get for chromium alone, which a non-root user cannot.
    fake_npm = tmp_path / "npm-dir" / "npm"
    fake_npm.parent.mkdir()
    fake_npm.write_text("#!/bin/sh\necho npm must not run before chromium is there >&2\nexit 3\n")
    fake_npm.chmod(0o755)
    bin_dir = _bin(tmp_path, uid=1000)
    (bin_dir / "npm").symlink_to(fake_npm)
    proc = _run("ensure-browser", bin_dir)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip() == (
        "ensure-browser: ERROR: installing chromium needs root (run as root, or install "
        "Debian's chromium yourself; `make test-fast` needs no browser)")

