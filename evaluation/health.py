"""Health of an evaluation worker (reliability matrix R12): enough free disk, a reachable Docker
engine with a patched runc, the base image of this checkout present under its content tag (with the expected id when one is
pinned), the harness image of each Harbor installed agent configured for the re-run
and every registered task image present under its content-digest tag; in production (DEBUG off),
gVisor as the sandbox runtime (matrix S15), unless VERIFICATION_ALLOW_RUNC_WITHOUT_GVISOR accepts
runc.

A worker checks its health before claiming a job (submissions.verification): an unhealthy
worker claims nothing (the job stays pending and its message is retried with backoff, so a
healthy worker takes it); a job that a worker held when an image or the engine went away is
released as an infrastructure error and retried, never scored. `manage.py worker_health`
prints the report and exits 1 when unhealthy (a container health check or a cron probe).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from django.conf import settings

from evaluation import runner
from evaluation.task_specs import discover_task_packages

def _disk_paths() -> list[Path]:
    paths = [Path(tempfile.gettempdir()), Path(settings.MEDIA_ROOT)]
    return [p for p in paths if p.exists()] or [Path("/")]


def _check(name: str, ok: bool, detail: str) -> dict:
    return {"name": name, "ok": bool(ok), "detail": detail}


def worker_health(*, task_dirs: list[Path] | None = None) -> dict:
    """{"healthy": bool, "checks": [{"name", "ok", "detail"}], "problems": [str]}. Never
    raises: an engine that cannot be asked is itself a failed check."""
    checks = []
    min_free = settings.VERIFICATION_MIN_FREE_DISK_MB
    engine_root = None
    engine = runner.engine_status()
    for path in _disk_paths():
        free_mb = shutil.disk_usage(path).free // (1024 * 1024)
        checks.append(_check(f"disk {path}", free_mb >= min_free,
                             f"{free_mb} MB free (needs {min_free} MB)"))
    checks.append(_check("docker engine", engine["reachable"],
                         engine["error"] or f"Docker {engine['version']} at "
                         f"{engine['docker_host']}"))
    if engine["reachable"]:
        try:
            info = runner.client().info()
            engine_root = info.get("DockerRootDir")
        except Exception as exc:  # noqa: BLE001 - a health check reports, never raises
            checks.append(_check("docker engine", False, f"{type(exc).__name__}: {exc}"))
        if engine_root and Path(engine_root).exists():
            free_mb = shutil.disk_usage(engine_root).free // (1024 * 1024)
            checks.append(_check(f"disk {engine_root} (engine)", free_mb >= min_free,
                                 f"{free_mb} MB free (needs {min_free} MB)"))
        checks.append(_check("runc patched (CVE-2024-21626)", bool(engine["runc_patched"]),
                             str(engine["runc_version"])))
        checks += _image_checks(task_dirs)
        checks += _kernel_isolation_check()
    warnings = _isolation_warnings() if engine["reachable"] else []
    problems = [f"{c['name']}: {c['detail']}" for c in checks if not c["ok"]]
    return {"healthy": not problems, "checks": checks, "problems": problems,
            "warnings": warnings, "checked_at": time.time()}


def _kernel_isolation_check() -> list[dict]:
    """In production, a worker that would run submitter-written commands on the host's kernel
    (runc) is unhealthy unless the operator opted out by name; under DEBUG it is a warning."""
    if settings.DEBUG or settings.VERIFICATION_ALLOW_RUNC_WITHOUT_GVISOR:
        return []
    try:
        problem = runner.kernel_isolation_problem()
    except Exception as exc:  # noqa: BLE001 - a health check reports, never raises
        problem = f"unknown: {type(exc).__name__}: {exc}"
    return [_check("kernel isolation (gVisor)", not problem,
                   f"{problem} (scripts/ensure-docker installs a runsc that works; or set "
                   "VERIFICATION_ALLOW_RUNC_WITHOUT_GVISOR=1 to accept runc)" if problem
                   else runner.isolation(runner.GVISOR_RUNTIME))]


def _isolation_warnings() -> list[str]:
    try:
        return runner.isolation_warnings()
    except Exception as exc:  # noqa: BLE001 - a health check reports, never raises
        return [f"isolation unknown: {type(exc).__name__}: {exc}"]


def needed_harnesses() -> list[str]:
    """The Harbor installed agents this worker may re-run, so whose harness image it needs: each
    one configured in VERIFICATION_HARBOR_AGENTS, when the re-run check is on and a model
    endpoint is configured (without one nothing is re-run)."""
    if "rerun" not in (settings.VERIFICATION_CHECKS or []):
        return []
    if not settings.VERIFICATION_RERUN_MODEL_ENDPOINTS:
        return []
    return sorted(name for name in (settings.VERIFICATION_HARBOR_AGENTS or {})
                  if runner.installed_harness(name) is not None)


def _image_checks(task_dirs: list[Path] | None) -> list[dict]:
    """This checkout's images, by content tag: the base image (recipe + grader files), every
    task image built FROM it, and the harness image of each re-run harness it needs."""
    import docker

    c = runner.client()
    checks = []
    tag = runner.base_image_tag()
    try:
        base = c.images.get(tag)
    except docker.errors.ImageNotFound:
        return [_check(f"base image {tag}", False, "missing: run scripts/build-images "
                       "(this checkout's recipe and grader files are not built)")]
    except Exception as exc:  # noqa: BLE001
        return [_check(f"base image {tag}", False, f"{type(exc).__name__}: {exc}")]
    expected = settings.VERIFICATION_EXPECTED_BASE_IMAGE_ID
    checks.append(_check(f"base image {tag}",
                         not expected or base.id == expected,
                         base.id if not expected or base.id == expected
                         else f"{base.id} is not the expected {expected}"))
    if task_dirs is None:
        task_dirs = discover_task_packages(Path(settings.BASE_DIR) / "tasks")
    missing = []
    for tdir in task_dirs:
        tag = runner.task_image_tag(tdir)
        if not runner.image_exists(tag):
            missing.append(tag)
    checks.append(_check("task images (content-digest tags)", not missing,
                         f"missing: {', '.join(missing)} (run scripts/build-images)" if missing
                         else f"{len(task_dirs)} present"))
    for name in needed_harnesses():
        tag = runner.harness_image_tag(runner.installed_harness(name))
        present = runner.image_exists(tag)
        checks.append(_check(f"harness image {tag}", present,
                             "present" if present else
                             f"missing: run scripts/build-images --harness {name} ({name} is "
                             "configured for the re-run in VERIFICATION_HARBOR_AGENTS)"))
    return checks
