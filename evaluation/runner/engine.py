"""The engine client: the lazily created Docker client, engine errors, status, and labels.

Every object the runner creates carries `app=healthagentbench` plus purpose, job and attempt
labels (the reaper finds leftovers by them).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import threading

from django.conf import settings

from evaluation.runner.base import base_image_tag

APP_LABEL = "healthagentbench"
LABEL_APP = "app"
LABEL_PURPOSE = "purpose"
LABEL_JOB = "job"
LABEL_ATTEMPT = "attempt"
LABEL_EXPIRES = "org.healthagentbench.expires"  # unix time after which a run is certainly stale
MIN_RUNC = (1, 1, 12)  # CVE-2024-21626; Debian backports the fix into 1.1.5+ds1-1+deb12u1


class InfrastructureError(Exception):
    """The engine failed us (unreachable, API error, missing image): retry, never score."""

    retryable = True


class TaskEnvironmentError(InfrastructureError):
    """The engine answered but refused to start this task's container: the task's environment
    itself cannot start (e.g. its image lacks what a container needs). Still retryable where
    any infrastructure error is; the infrastructure re-attempt of a claimed infrastructure
    error (submissions/verification/checks/infra.py) counts it as the environment failing."""


class ImageBuildError(Exception):
    """A Dockerfile failed to build; `log` holds the tail of the build output."""

    def __init__(self, message: str, log_tail: str = ""):
        super().__init__(message)
        self.log_tail = log_tail


class RootUserRefused(Exception):
    """A task (or a caller) asked to run a container as root: never done (S3)."""


class UnsafeArchiveError(Exception):
    """An archive copied out of a container holds a link, device, absolute path or `..`."""


class OutputTooLargeError(Exception):
    """An archive copied out of a container exceeds its size or member cap."""


def _docker():
    import docker  # imported lazily too: importing the runner must not need the SDK at all

    return docker


def _is_infra(exc: BaseException) -> bool:
    """An engine error: the SDK's own exceptions, or its HTTP transport's (requests'
    RequestException, which docker-py lets through unwrapped). The latter is matched by class
    name and origin, so the runner imports no package the project does not declare."""
    if isinstance(exc, _docker().errors.DockerException):
        return True
    return any(k.__name__ == "RequestException" and k.__module__.startswith("requests.")
               for k in type(exc).__mro__)


class _infra:
    """Context manager turning engine errors (see _is_infra) into InfrastructureError."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and not isinstance(exc, InfrastructureError) and _is_infra(exc):
            raise InfrastructureError(f"{self.what}: {exc}") from exc
        return False


def _safe_name(s: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]+", "-", str(s)).strip("-")[:80] or "x"


_client = None
_client_pid = None
_client_lock = threading.Lock()


def client():
    """The process's Docker client, created on first use (never at import)."""
    global _client, _client_pid
    with _client_lock:
        if _client is None or _client_pid != os.getpid():
            docker = _docker()
            try:
                c = docker.DockerClient(
                    base_url=settings.DOCKER_HOST,
                    timeout=settings.DOCKER_CLIENT_TIMEOUT_S,
                )
            except docker.errors.DockerException as exc:
                raise InfrastructureError(
                    f"Docker engine at {settings.DOCKER_HOST} is not reachable: {exc}"
                ) from exc
            _client, _client_pid = c, os.getpid()
        return _client


def reset_client() -> None:
    """Forget the cached client (tests; or after the engine restarted)."""
    global _client
    with _client_lock:
        if _client is not None:
            try:
                _client.close()
            except Exception:  # noqa: BLE001, S110 - closing a dead client must not fail
                pass
        _client = None
        _mappings.clear()


def host_address(network: str = "bridge") -> str:
    """The host's address on a Docker network: where a container on it (or on any other
    network of the engine's host) reaches a server the host serves on that address."""
    docker = _docker()
    try:
        ipam = client().networks.get(network).attrs.get("IPAM") or {}
    except docker.errors.DockerException as exc:
        raise InfrastructureError(f"Docker network {network!r}: {exc}") from exc
    configs = [c for c in ipam.get("Config") or [] if c.get("Subnet") and ":" not in c["Subnet"]]
    if not configs:
        raise InfrastructureError(f"Docker network {network!r} has no IPv4 subnet")
    # The default bridge lists no gateway: the engine gives the host the subnet's first address.
    return configs[0].get("Gateway") or str(
        next(ipaddress.ip_network(configs[0]["Subnet"]).hosts()))


@dataclasses.dataclass(frozen=True)
class UserMapping:
    """How the engine maps container user ids to the host's: ``identity`` (container root is
    host root), ``userns-remap`` (the daemon's remapped range: container uid N is host uid
    ``uid_offset + N``) or ``rootless`` (the daemon itself runs as an unprivileged user)."""

    mode: str
    uid_offset: int = 0
    gid_offset: int = 0

    def host_uid(self, uid: int) -> int:
        return self.uid_offset + uid

    def host_gid(self, gid: int) -> int:
        return self.gid_offset + gid

    def describe(self) -> str:
        if self.mode == "userns-remap":
            return (f"userns-remap: container uid 0 is host uid {self.uid_offset} "
                    "(unprivileged)")
        if self.mode == "rootless":
            return "rootless engine: container uid 0 is the engine's unprivileged user"
        return "identity: container uid 0 is host uid 0"


_mappings: dict[str, UserMapping] = {}


def user_mapping() -> UserMapping:
    """The engine's user mapping, read once per engine from ``docker info``: its security
    options name ``userns`` or ``rootless``, and a remapped daemon keeps its data under
    ``<data-root>/<uid>.<gid>`` (DockerRootDir), the first host ids of its range."""
    key = settings.DOCKER_HOST
    if key not in _mappings:
        docker = _docker()
        try:
            info = client().info()
        except docker.errors.DockerException as exc:
            raise InfrastructureError(f"Docker engine at {key}: {exc}") from exc
        options = " ".join(info.get("SecurityOptions") or [])
        root = re.search(r"/(\d+)\.(\d+)/?$", info.get("DockerRootDir") or "")
        if "name=rootless" in options:
            mapping = UserMapping("rootless")
        elif "name=userns" in options and root:
            mapping = UserMapping("userns-remap", int(root.group(1)), int(root.group(2)))
        else:
            mapping = UserMapping("identity")
        _mappings[key] = mapping
    return _mappings[key]


def _parse_version(text: str) -> tuple[int, ...]:
    m = re.match(r"v?(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(x) for x in m.groups()) if m else ()


def engine_status() -> dict:
    """For health and status pages: is an engine reachable, which versions, is runc patched.

    Never raises; `reachable` False comes with `error` naming the reason.
    """
    status = {
        "reachable": False,
        "docker_host": settings.DOCKER_HOST,
        "version": None,
        "api_version": None,
        "runc_version": None,
        "runc_patched": None,
        "storage_driver": None,
        "cgroup_version": None,
        "base_image": base_image_tag(),
        "base_image_present": None,
        "error": None,
    }
    try:
        c = client()
        version = c.version()
        info = c.info()
    except Exception as exc:  # noqa: BLE001 - the status page must render whatever happens
        status["error"] = f"{type(exc).__name__}: {exc}"
        return status
    status.update(
        reachable=True,
        version=version.get("Version"),
        api_version=version.get("ApiVersion"),
        storage_driver=info.get("Driver"),
        cgroup_version=info.get("CgroupVersion"),
    )
    for comp in version.get("Components") or []:
        if comp.get("Name") == "runc":
            status["runc_version"] = comp.get("Version")
    if not status["runc_version"]:
        status["runc_version"] = (info.get("RuncCommit") or {}).get("ID")
    runc = status["runc_version"] or ""
    commit = (info.get("RuncCommit") or {}).get("ID") or ""
    if commit and commit != runc:
        runc = status["runc_version"] = f"{runc} ({commit})" if runc else commit
    parsed = _parse_version(runc)
    # Debian's bookworm runc 1.1.5+ds1-1+deb12u1 carries the CVE-2024-21626 fix as a backport.
    status["runc_patched"] = bool(parsed and (parsed >= MIN_RUNC or "deb12u" in runc))
    try:
        c.images.get(status["base_image"])
        status["base_image_present"] = True
    except Exception:  # noqa: BLE001
        status["base_image_present"] = False
    return status
