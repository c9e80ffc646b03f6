"""The OCI runtime of the containers that run submitter-written commands or read submitted output
(replays, re-grades, re-runs): gVisor's `runsc` when the engine lists it and it passes a
compatibility probe (matrix design invariant 6, "runsc where possible"; rows S14, S15).
`scripts/ensure-docker` registers two gVisor runtimes: `runsc` (no network at all) and
`runsc-hostinet` (the container's own network namespace passed through, for a re-run's agent
container whose only network is the model gateway's internal one)."""

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
GVISOR_HOSTINET_RUNTIME = "runsc-hostinet"
_RUNTIME_PROBE: dict = {}
# What the gVisor runtimes need beyond runsc's defaults: --overlay2=none, or Harbor's `docker cp`
# of a re-run's outputs finds nothing (a solved task would grade as failed); --host-uds=open, or a
# verifier cannot reach the judge gateway's socket on the volume they share.
_GVISOR_ARGS = {GVISOR_RUNTIME: ("--overlay2=none", "--host-uds=open"),
                GVISOR_HOSTINET_RUNTIME: ("--overlay2=none",)}
# GNU coreutils (ls, stat) and Python must work in the sandbox, or replays would differ.
_PROBE_CMD = "ls / >/dev/null && stat /usr >/dev/null && python3 -c 'import os; os.listdir(\"/\")'"


def engine_runtimes() -> list[str]:
    with _infra("listing the engine's runtimes"):
        return sorted((client().info().get("Runtimes") or {}).keys())


def _runtime_args(runtime: str) -> list[str]:
    with _infra("listing the engine's runtimes"):
        entry = (client().info().get("Runtimes") or {}).get(runtime) or {}
    return list(entry.get("runtimeArgs") or [])


def runtime_probe(runtime: str = GVISOR_RUNTIME) -> dict:
    """Does `runtime` run the base image with GNU coreutils working (and, for gVisor, write
    through to Docker's root filesystem)? Cached per process: {"runtime", "listed", "works",
    "detail"}."""
    if runtime in _RUNTIME_PROBE:
        return _RUNTIME_PROBE[runtime]
    result = {"runtime": runtime, "listed": runtime in engine_runtimes(), "works": False,
              "detail": ""}
    if not result["listed"]:
        result["detail"] = f"the engine has no runtime {runtime!r}"
    elif missing := [a for a in _GVISOR_ARGS.get(runtime, ()) if a not in _runtime_args(runtime)]:
        result["detail"] = (f"the engine's {runtime!r} runtime lacks {' '.join(missing)} "
                            "(run scripts/ensure-docker)")
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


def networked_runtime(runtime: str | None) -> str | None:
    """The runtime for a container of ``runtime``'s kind that needs a network (the model
    gateway's internal one): gVisor's host-network variant, or the engine's default when the
    engine does not list it."""
    if runtime != GVISOR_RUNTIME:
        return runtime
    args = _GVISOR_ARGS[GVISOR_HOSTINET_RUNTIME]
    if (GVISOR_HOSTINET_RUNTIME in engine_runtimes()
            and all(a in _runtime_args(GVISOR_HOSTINET_RUNTIME) for a in args)):
        return GVISOR_HOSTINET_RUNTIME
    log.warning("the engine has no %s runtime with --overlay2=none (scripts/ensure-docker "
                "registers it): a networked container runs under runc", GVISOR_HOSTINET_RUNTIME)
    return None


def isolation(runtime: str | None) -> str:
    """In words, for a trial's page: what separated a container run with ``runtime`` from the
    host (its kernel, and whose uid its root is)."""
    if runtime == GVISOR_RUNTIME:
        kernel = "gVisor (runsc): a kernel of its own"
    elif runtime == GVISOR_HOSTINET_RUNTIME:
        kernel = ("gVisor (runsc): a kernel of its own, its sockets on the host kernel in the "
                  "container's own network namespace")
    else:
        kernel = "runc: the host's kernel, namespaces only"
    return f"{kernel}; {user_mapping().describe()}"


def kernel_isolation_problem() -> str:
    """Why submitter-written commands would run on the host's kernel here ("" when they run
    under gVisor): the runtime choice and what the gVisor probe found."""
    if sandbox_runtime() == GVISOR_RUNTIME:
        return ""
    probe = runtime_probe(GVISOR_RUNTIME)
    return ("no kernel isolation beyond namespaces: replays, re-grades and re-runs run under "
            f"runc on the host's kernel (VERIFICATION_SANDBOX_RUNTIME="
            f"{settings.VERIFICATION_SANDBOX_RUNTIME or 'auto'}; gVisor: "
            f"{(probe['detail'] or 'not used').splitlines()[-1][:160]})")


def isolation_warnings() -> list[str]:
    """What worker_health warns about: no kernel isolation beyond namespaces (a failure of its
    own in production, evaluation.health), and an engine whose container root is host root."""
    warnings = []
    problem = kernel_isolation_problem()
    if problem:
        warnings.append(problem)
    if user_mapping().mode == "identity":
        warnings.append("no user-namespace remapping: container uid 0 is host uid 0 "
                        "(scripts/ensure-docker sets userns-remap)")
    return warnings
