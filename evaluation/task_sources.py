"""Task sources (settings.TASK_SOURCES) as local directories.

An entry is either a directory of task packages, or a git repository pinned to a commit,
written ``<git URL>@<40-hex commit>[#<subdirectory>]`` (for example
``https://git.example.org/hab-private.git@3f2c...e1#tasks`` or ``file:///srv/hab.git@3f2c...``).
A git source is cloned once into ``settings.TASK_SOURCES_CACHE/<digest of URL and commit>`` and
checked out at exactly that commit (detached); later calls reuse the checkout, so a source never
moves unless its entry names another commit. The clone happens in a temporary folder next to
the cache entry and is renamed into place only once the commit is verified, so an interrupted
clone leaves nothing that looks finished.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from django.conf import settings

GIT_SOURCE = re.compile(
    r"^(?P<url>(?:https?|ssh|git|file)://\S+?|[\w.-]+@[\w.-]+:\S+?)@(?P<commit>[0-9a-f]{40})"
    r"(?:#(?P<subdir>[\w./-]+))?$")
GIT_TIMEOUT_S = 600


class TaskSourceError(Exception):
    """A task source that cannot be made available (not a directory, clone or commit failed)."""


def parse_git_source(entry: str) -> tuple[str, str, str] | None:
    """(url, commit, subdirectory) for a pinned git entry, else None (a directory)."""
    match = GIT_SOURCE.match(str(entry).strip())
    if match is None:
        return None
    subdir = match["subdir"] or ""
    if subdir.startswith("/") or ".." in Path(subdir).parts:
        raise TaskSourceError(f"task source {entry}: the subdirectory must stay in the repository")
    return match["url"], match["commit"], subdir


def _git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(["git", "-c", "advice.detachedHead=false", *args], cwd=cwd,  # noqa: S603, S607
                          capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise TaskSourceError(f"git {args[0]} failed: {done.stderr.strip()[-500:]}")
    return done.stdout.strip()


def git_checkout(url: str, commit: str) -> Path:
    """The cached checkout of ``url`` at ``commit`` (cloned on first use)."""
    cache = Path(settings.TASK_SOURCES_CACHE)
    target = cache / hashlib.sha256(f"{url}\n{commit}".encode()).hexdigest()[:16]
    if (target / ".git").is_dir():
        if _git("rev-parse", "HEAD", cwd=target) == commit:
            return target
        raise TaskSourceError(f"cached checkout {target} is not at {commit}: remove it")
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".clone-", dir=cache))
    try:
        try:
            _git("clone", "--quiet", "--no-checkout", url, str(staging / "repo"))
            _git("checkout", "--quiet", "--detach", commit, cwd=staging / "repo")
        except TaskSourceError as exc:
            raise TaskSourceError(f"task source {url}@{commit}: {exc}") from None
        if _git("rev-parse", "HEAD", cwd=staging / "repo") != commit:
            raise TaskSourceError(f"{url}: checked out another commit than {commit}")
        try:
            (staging / "repo").rename(target)
        except OSError:
            if not (target / ".git").is_dir():  # another process finished first: keep theirs
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def task_source_dir(entry: str | Path) -> Path:
    """The local directory of one TASK_SOURCES entry."""
    git = parse_git_source(str(entry))
    if git is None:
        path = Path(entry)
        if not path.is_dir():
            raise TaskSourceError(f"task source {path} is not a directory")
        return path
    url, commit, subdir = git
    path = git_checkout(url, commit) / subdir
    if not path.is_dir():
        raise TaskSourceError(f"task source {entry}: no directory {subdir!r} at {commit}")
    return path


def task_source_dirs(entries=None) -> list[Path]:
    """Every configured task source as a local directory (git sources checked out)."""
    return [task_source_dir(e) for e in (settings.TASK_SOURCES if entries is None else entries)]
