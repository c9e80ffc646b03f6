"""Reaping: remove labelled containers, volumes and networks left behind by dead workers, and
their work directories in the temporary folder."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from evaluation.runner.engine import (
    APP_LABEL,
    LABEL_APP,
    LABEL_ATTEMPT,
    LABEL_EXPIRES,
    LABEL_JOB,
    _docker,
    _infra,
    _safe_name,
    client,
)


def _parse_docker_time(text: str) -> datetime | None:
    if not text:
        return None
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)?", text)
    if not m:
        return None
    tz = m.group(2) or "Z"
    return datetime.fromisoformat(m.group(1) + ("+00:00" if tz == "Z" else tz))


def reap_stale(
    older_than: timedelta | float = timedelta(hours=2), *, job=None
) -> dict[str, list[str]]:
    """Remove labelled containers (then volumes, networks) created more than older_than ago.

    A container that is still running inside its own lifetime (label
    org.healthagentbench.expires, set from the run's timeout) is kept: it may belong to a live
    worker running a long agent. `job` restricts the sweep to one job's label; the caller then
    asserts that job's runs are dead (its worker was lost), so running ones go too.
    """
    if not isinstance(older_than, timedelta):
        older_than = timedelta(seconds=float(older_than))
    docker = _docker()
    c = client()
    cutoff = datetime.now(UTC) - older_than
    removed: dict[str, list[str]] = {"containers": [], "volumes": [], "networks": []}
    flt = {"label": [f"{LABEL_APP}={APP_LABEL}"]}
    if job is not None:
        flt["label"].append(f"{LABEL_JOB}={_safe_name(job)}")
    with _infra("reaping stale containers"):
        for cont in c.containers.list(all=True, filters=flt):
            created = _parse_docker_time(cont.attrs.get("Created", ""))
            if created is None or created > cutoff:
                continue
            try:
                expires = float(cont.labels.get(LABEL_EXPIRES, "0"))
            except ValueError:
                expires = 0.0
            if job is None and cont.status == "running" and expires > time.time():
                continue
            try:
                cont.remove(force=True, v=True)
                removed["containers"].append(cont.name)
            except docker.errors.NotFound:
                pass
        for vol in c.volumes.list(filters=flt):
            created = _parse_docker_time(vol.attrs.get("CreatedAt", ""))
            if created is None or created > cutoff:
                continue
            try:
                vol.remove(force=True)
                removed["volumes"].append(vol.name)
            except docker.errors.APIError:
                pass  # still in use
        for net in c.networks.list(filters=flt):
            created = _parse_docker_time(net.attrs.get("Created", ""))
            if created is None or created > cutoff:
                continue
            try:
                net.remove()
                removed["networks"].append(net.name)
            except docker.errors.APIError:
                pass
    return removed


def reap_job_prefix(prefix: str, *, keep_attempt: int | None = None) -> list[str]:
    """Remove every labelled container (and volume, network) whose job label starts with prefix.

    For a verification job taken over from a dead worker: its runs are named per trial
    (job label "v<job>-t<trial>-<kind>"), so the sweep goes by prefix. Runs of keep_attempt
    (the live attempt) are kept. Returns the removed container names.
    """
    docker = _docker()
    c = client()
    prefix = _safe_name(prefix) if prefix else ""  # "": every labelled run (reap_engine)
    removed: list[str] = []

    def doomed(labels: dict) -> bool:
        if not str(labels.get(LABEL_JOB, "")).startswith(prefix):
            return False
        return keep_attempt is None or labels.get(LABEL_ATTEMPT) != str(keep_attempt)

    flt = {"label": [f"{LABEL_APP}={APP_LABEL}"]}
    with _infra(f"reaping runs of {prefix}"):
        # sparse: no inspect per container, so one that vanishes meanwhile (another worker's, on a
        # shared engine) cannot turn into a 404 and cost this job an attempt.
        for cont in c.containers.list(all=True, filters=flt, sparse=True):
            if doomed(cont.attrs.get("Labels") or {}):
                try:
                    cont.remove(force=True, v=True)
                    removed.append((cont.attrs.get("Names") or [cont.id])[0].lstrip("/"))
                except docker.errors.NotFound:
                    pass
        for vol in c.volumes.list(filters=flt):
            if doomed(vol.attrs.get("Labels") or {}):
                try:
                    vol.remove(force=True)
                except docker.errors.APIError:
                    pass
        for net in c.networks.list(filters=flt):
            if doomed(net.attrs.get("Labels") or {}):
                try:
                    net.remove()
                except docker.errors.APIError:
                    pass
    return removed


# Temporary folders of the runner, the agents and the checks are all named hab-* (tempfile
# prefixes in evaluation/ and submissions/verification/checks/).
TEMP_PREFIX = "hab-"
# A verification's work directories (the checks' and the runner's tempfile prefixes): what a
# worker killed mid-job leaves behind. Other hab-* folders (validate_task's, image builds',
# the chaos soak's PostgreSQL) belong to commands, not to jobs.
WORK_DIR_PREFIXES = ("hab-regrade-", "hab-replay-", "hab-rerun-", "hab-harbor-", "hab-infra-",
                     "hab-agent-", "hab-output-", "hab-harness-task-")
# Each worker process's own temporary folder, <tmp>/hab-work-<pid> (work_tempdir_use).
WORK_ROOT_PREFIX = "hab-work-"
_base_tempdir: str | None = None  # the temporary folder before work_tempdir_use


def temp_root() -> Path:
    """The host's temporary folder (TMPDIR), where the work folders of every process are."""
    return Path(_base_tempdir or tempfile.gettempdir())


def work_tempdir_use() -> Path:
    """Give this process a temporary folder of its own, <tmp>/hab-work-<pid>, for everything
    it makes with tempfile: once the process is gone (a worker SIGKILLed mid-job), its work
    directories are known by its pid and reaped at once (reap_work_dirs), whatever their age."""
    global _base_tempdir
    base = temp_root()
    path = base / f"{WORK_ROOT_PREFIX}{os.getpid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    _base_tempdir = str(base)
    tempfile.tempdir = str(path)
    return path


def work_tempdir_done() -> None:
    """A worker process that stops cleanly removes its own folder (the reaper would later)."""
    global _base_tempdir
    if _base_tempdir is None:
        return
    shutil.rmtree(tempfile.gettempdir(), ignore_errors=True)
    tempfile.tempdir, _base_tempdir = None, None


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # another user's live process
    return False


def reap_work_dirs(older_than: timedelta | float) -> list[str]:
    """Remove the work directories of dead workers from the temporary folder, only those this
    user owns: a process's own folder (hab-work-<pid>) once that process is gone, and a loose
    work directory (a worker without its own folder) untouched for older_than, longer than a
    live job keeps one (its hard time limit). Returns the names removed."""
    if isinstance(older_than, timedelta):
        older_than = older_than.total_seconds()
    uid, cutoff, removed = os.getuid(), time.time() - float(older_than), []
    for path in sorted(temp_root().glob(f"{TEMP_PREFIX}*")):
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if st.st_uid != uid or not path.is_dir() or path.is_symlink():
            continue
        name = path.name
        if name.startswith(WORK_ROOT_PREFIX):
            pid = name.removeprefix(WORK_ROOT_PREFIX)
            doomed = pid.isdigit() and int(pid) != os.getpid() and _process_gone(int(pid))
        else:
            doomed = name.startswith(WORK_DIR_PREFIXES) and st.st_mtime < cutoff
        if doomed:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
    return removed


def reap_engine() -> dict[str, list[str]]:
    """Everything the runner left on this worker's engine and in its temporary folder, whatever
    its age or state: for a worker that is the only user of both (VERIFICATION_REAP_ON_START),
    at start, before it takes a job. After its host was lost, its containers, networks and
    volumes and the temporary files of the jobs it ran belong to jobs another host took over."""
    containers = reap_job_prefix("")  # every labelled run: the empty prefix matches them all
    temp = []
    for path in sorted(Path(tempfile.gettempdir()).glob(f"{TEMP_PREFIX}*")):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            temp.append(path.name)
    return {"containers": containers, "temporary": temp}
