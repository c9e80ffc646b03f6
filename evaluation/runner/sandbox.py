"""The OCI runtime of containers that run submitter-written commands (replays, command agents):
gVisor's `runsc` when the engine lists it and it passes a compatibility probe (matrix design
invariant 6, "runsc where possible"); `scripts/ensure-docker` registers it."""

from __future__ import annotations

import logging
import os
import threading

from django.conf import settings

from evaluation.runner.base import base_image_tag
from evaluation.runner.container import ContainerRun
from evaluation.runner.engine import InfrastructureError, _infra, client, user_mapping
from evaluation.runner.limits import Limits

log = logging.getLogger(__name__)

GVISOR_RUNTIME = "runsc"
_RUNTIME_PROBE: dict = {}
# GNU coreutils (ls, stat) and Python must work in the sandbox, or replays would differ.
_PROBE_CMD = "ls / >/dev/null && stat /usr >/dev/null && python3 -c 'import os; os.listdir(\"/\")'"


def engine_runtimes() -> list[str]:
    with _infra("listing the engine's runtimes"):
        return sorted((client().info().get("Runtimes") or {}).keys())


def runtime_probe(runtime: str = GVISOR_RUNTIME) -> dict:
    """Does `runtime` run the base image with GNU coreutils working? Cached per process:
    {"runtime", "listed", "works", "detail"}."""
    if runtime in _RUNTIME_PROBE:
        return _RUNTIME_PROBE[runtime]
    result = {"runtime": runtime, "listed": runtime in engine_runtimes(), "works": False,
              "detail": ""}
    if not result["listed"]:
        result["detail"] = f"the engine has no runtime {runtime!r}"
    else:
        probe = ContainerRun(base_image_tag(), purpose="probe",
                             job_id=f"{runtime}-{os.getpid()}-{threading.get_ident() % 10**6}",
                             limits=Limits(timeout_s=60, memory_mb=256), runtime=runtime,
                             seed_workspace=False)
        with probe as run:
            res = run.exec(f"{_PROBE_CMD}; rc=$?; uname -r; dmesg 2>/dev/null | head -1; "
                           "exit $rc", timeout_s=60)
        result["works"] = res.exit_code == 0
        result["detail"] = res.text.strip()[-500:]
    _RUNTIME_PROBE[runtime] = result
    return result


def sandbox_runtime() -> str | None:
    """VERIFICATION_SANDBOX_RUNTIME: "auto" (gVisor when the engine lists runsc and it passes
    the probe, else the engine's default), "runsc" (required: an infrastructure error without
    it), or "default"."""
    choice = (settings.VERIFICATION_SANDBOX_RUNTIME or "auto").strip().lower()
    if choice in ("default", "runc", ""):
        return None
    if choice == "auto":
        probe = runtime_probe(GVISOR_RUNTIME)
        if not probe["works"]:
            log.info("sandbox runtime: engine default (%s)", probe["detail"][-200:])
        return GVISOR_RUNTIME if probe["works"] else None
    if choice not in engine_runtimes():
        raise InfrastructureError(f"VERIFICATION_SANDBOX_RUNTIME={choice} but the engine has no "
                                  "such runtime (scripts/ensure-docker registers runsc)")
    return choice


def isolation(runtime: str | None) -> str:
    """In words, for a trial's page: what separated a container run with ``runtime`` from the
    host (its kernel, and whose uid its root is)."""
    kernel = ("gVisor (runsc): a kernel of its own" if runtime == GVISOR_RUNTIME
              else "runc: the host's kernel, namespaces only")
    return f"{kernel}; {user_mapping().describe()}"


def isolation_warnings() -> list[str]:
    """What worker_health warns about (not a failure: the engine still isolates by namespaces,
    capabilities, seccomp and a non-root user): no kernel isolation beyond namespaces, and an
    engine whose container root is host root."""
    warnings = []
    if sandbox_runtime() != GVISOR_RUNTIME:
        probe = runtime_probe(GVISOR_RUNTIME)
        warnings.append("no kernel isolation beyond namespaces: replays and command agents run "
                        "under runc on the host's kernel (gVisor: "
                        f"{(probe['detail'] or 'not used').splitlines()[-1][:160]})")
    if user_mapping().mode == "identity":
        warnings.append("no user-namespace remapping: container uid 0 is host uid 0 "
                        "(scripts/ensure-docker sets userns-remap)")
    return warnings
