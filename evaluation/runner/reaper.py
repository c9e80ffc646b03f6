"""Reaping: remove labelled containers, volumes and networks left behind by dead workers."""

from __future__ import annotations

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
