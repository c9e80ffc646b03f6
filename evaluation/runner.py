"""The evaluation runner: every Docker SDK call of the project lives in this module (R21-R24).

Design
------
* The client is created lazily (`client()`), from `settings.DOCKER_HOST` and
  `settings.DOCKER_CLIENT_TIMEOUT_S`, never at import; it is re-created after a fork (Celery
  prefork children must not share the parent's HTTP connection pool).
* `ContainerRun` is the one way to run anything. A run is one container whose PID 1 is a bounded
  `sleep` (so the container outlives the command and its outputs can be copied out of its tmpfs
  volumes); the command itself runs through `exec` under the run's limits:
  no network (`network_mode="none"`), all capabilities dropped, `no-new-privileges`, read-only
  root filesystem, tmpfs `/tmp`, writable places (`/workspace`, `/tests`, `/logs/verifier`, ...)
  as size-limited tmpfs *volumes* (the Docker archive API can read and write volumes of a
  read-only container, but not plain tmpfs mounts), a non-root user, `mem_limit` = memswap,
  `nano_cpus`, `pids_limit`, a bounded json-file log, and a wall-clock deadline enforced here
  (the container is killed on expiry).
* Outcomes are mapped to user-facing reasons: "memory limit exceeded" (an OOM event),
  "time limit exceeded", "process limit exceeded" (the pids limit was reached), "exited with
  code N" / "killed by signal N". Docker API and connection errors become `InfrastructureError`
  (retryable; never scored as a failure).
* Two-container grading: `run_agent()` runs a command in a fresh container from the task image and
  copies out only the declared outputs; `run_verifier()` starts a *fresh* container from the same
  image, copies in those outputs (as data) and the task's `tests/` (which hold the hidden answer,
  so answers never enter an agent container), runs `bash /tests/test.sh` and reads
  `/logs/verifier/reward.json` (or `reward.txt`).
* The X-ray judge: with `judge=JudgeSpec(...)`, the verifier and a judge container share an
  `internal=True` network (no route out); everything else stays on `network none`.
* `reap_stale()` removes labelled containers, volumes and networks left behind by dead workers.

Run `python -m evaluation.runner build-task-images [task_dir ...]` to build task images (what
`scripts/build-images` does after building the base image).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import os
import re
import shutil
import tarfile
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

from django.conf import settings

from evaluation import archive, task_specs

log = logging.getLogger(__name__)

APP_LABEL = "healthagentbench"
LABEL_APP = "app"
LABEL_PURPOSE = "purpose"
LABEL_JOB = "job"
LABEL_ATTEMPT = "attempt"
LABEL_EXPIRES = "org.healthagentbench.expires"  # unix time after which a run is certainly stale
TASK_IMAGE_REPO = "hab-task"
TASK_DIGEST_LABEL = "org.healthagentbench.task-digest"

MiB = 1024 * 1024
DEFAULT_PIDS_LIMIT = 512
DEFAULT_LOG_CAP_BYTES = 4 * MiB  # output kept from one command; the rest is counted and dropped
DEFAULT_OUTPUT_CAP_BYTES = 256 * MiB  # largest archive copied out of a container
MAX_TMPFS_MB = 8192
TMP_TMPFS_MB = 512
LOGS_TMPFS_MB = 64
AGENT_UID = 1000
POLL_S = 0.2
MIN_RUNC = (1, 1, 12)  # CVE-2024-21626; Debian backports the fix into 1.1.5+ds1-1+deb12u1

TRUNCATION_MARKER = (
    "\n[... output truncated by the HealthAgentBench runner: {omitted} bytes omitted ...]\n"
)

REASON_OOM = "memory limit exceeded"
REASON_TIMEOUT = "time limit exceeded"
REASON_PIDS = "process limit exceeded"


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------
class InfrastructureError(Exception):
    """The engine failed us (unreachable, API error, missing image): retry, never score."""

    retryable = True


class ImageBuildError(Exception):
    """A Dockerfile failed to build; `log` holds the tail of the build output."""

    def __init__(self, message: str, log_tail: str = ""):
        super().__init__(message)
        self.log_tail = log_tail


class UnsafeArchiveError(Exception):
    """An archive copied out of a container holds a link, device, absolute path or `..`."""


class OutputTooLargeError(Exception):
    """An archive copied out of a container exceeds its size or member cap."""


def _docker():
    import docker  # imported lazily too: importing the runner must not need the SDK at all

    return docker


def _is_infra(exc: BaseException) -> bool:
    docker = _docker()
    import requests

    return isinstance(exc, docker.errors.DockerException | requests.exceptions.RequestException)


class _infra:
    """Context manager turning Docker/requests errors into InfrastructureError."""

    def __init__(self, what: str):
        self.what = what

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is not None and not isinstance(exc, InfrastructureError) and _is_infra(exc):
            raise InfrastructureError(f"{self.what}: {exc}") from exc
        return False


# --------------------------------------------------------------------------------------------
# Client
# --------------------------------------------------------------------------------------------
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
        "base_image": settings.TASK_BASE_IMAGE,
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
        c.images.get(settings.TASK_BASE_IMAGE)
        status["base_image_present"] = True
    except Exception:  # noqa: BLE001
        status["base_image_present"] = False
    return status


# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------
def image_exists(tag: str) -> bool:
    docker = _docker()
    with _infra(f"inspecting image {tag}"):
        try:
            client().images.get(tag)
            return True
        except docker.errors.ImageNotFound:
            return False


def image_build(
    context_dir: str | Path,
    tag: str,
    *,
    labels: dict[str, str] | None = None,
    dockerfile: str = "Dockerfile",
    timeout_s: float | None = None,
) -> str:
    """Build `context_dir` as `tag` with networking disabled and no pull; return the image id."""
    docker = _docker()
    c = client()
    kwargs = {}
    if timeout_s:
        kwargs["timeout"] = int(timeout_s)
    try:
        image, logs = c.images.build(
            path=str(context_dir),
            dockerfile=dockerfile,
            tag=tag,
            network_mode="none",
            pull=False,
            rm=True,
            forcerm=True,
            labels=labels or {},
            **kwargs,
        )
    except docker.errors.BuildError as exc:
        tail = "".join(
            str(chunk.get("stream") or chunk.get("error") or "") for chunk in exc.build_log
        )[-4000:]
        raise ImageBuildError(f"building {tag} from {context_dir} failed: {exc.msg}", tail) from exc
    except docker.errors.APIError as exc:
        if exc.response is not None and exc.response.status_code in (400, 404):
            raise ImageBuildError(f"building {tag} from {context_dir} failed: {exc}") from exc
        raise InfrastructureError(f"building {tag}: {exc}") from exc
    except Exception as exc:
        if _is_infra(exc):
            raise InfrastructureError(f"building {tag}: {exc}") from exc
        raise
    return image.id


def ensure_base_image() -> str:
    """The runtime base image's id; InfrastructureError naming the fix when it is missing."""
    docker = _docker()
    with _infra("inspecting the base image"):
        try:
            return client().images.get(settings.TASK_BASE_IMAGE).id
        except docker.errors.ImageNotFound:
            raise InfrastructureError(
                f"base image {settings.TASK_BASE_IMAGE} is missing: run `make images` "
                "(scripts/build-images builds it locally with debootstrap)"
            ) from None


def _iter_files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".pyc"):
                continue
            yield Path(dirpath) / name


def tree_digest(root: Path) -> str:
    """sha256 over the relative paths, exec bits and contents of every file under root."""
    h = hashlib.sha256()
    for path in _iter_files(root):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            h.update(f"L {rel} -> {os.readlink(path)}\n".encode())
            continue
        mode = "x" if os.access(path, os.X_OK) else "-"
        h.update(f"F {rel} {mode}\n".encode())
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(MiB), b""):
                h.update(block)
    return h.hexdigest()


def task_image_repo(task_dir: Path) -> str:
    task_dir = Path(task_dir).resolve()
    category, task_id = task_dir.parent.name, task_dir.name

    def clean(s: str) -> str:
        s = re.sub(r"[^a-z0-9._-]+", "-", s.lower()).strip("._-")
        return s or "x"

    return f"{TASK_IMAGE_REPO}/{clean(category)}/{clean(task_id)}"


def task_image_tag(task_dir: Path) -> str:
    """hab-task/<category>/<task_id>:<digest of environment/ + the base image id>."""
    env_dir = Path(task_dir) / "environment"
    h = hashlib.sha256()
    h.update(ensure_base_image().encode())
    h.update(tree_digest(env_dir).encode())
    return f"{task_image_repo(task_dir)}:{h.hexdigest()[:24]}"


def build_task_image(task_dir: Path, *, force: bool = False) -> tuple[str, bool]:
    """Build the task's environment/Dockerfile unless its digest tag exists: (tag, built)."""
    task_dir = Path(task_dir)
    if not (task_dir / "environment" / "Dockerfile").is_file():
        raise ImageBuildError(f"{task_dir}/environment/Dockerfile is missing")
    tag = task_image_tag(task_dir)
    if not force and image_exists(tag):
        return tag, False
    spec = load_task_toml(task_dir)
    timeout = (spec.get("environment") or {}).get("build_timeout_sec")
    image_build(
        task_dir / "environment",
        tag,
        labels={LABEL_APP: APP_LABEL, TASK_DIGEST_LABEL: tag.rsplit(":", 1)[1]},
        timeout_s=timeout,
    )
    _prune_old_tags(tag)
    return tag, True


def _prune_old_tags(current: str) -> None:
    """Untag older digests of the same task image (an image a container still uses stays)."""
    docker = _docker()
    repo = current.rsplit(":", 1)[0]
    try:
        for image in client().images.list(name=repo):
            for old in image.tags:
                if old != current and old.startswith(repo + ":"):
                    try:
                        client().images.remove(old, noprune=False)
                    except docker.errors.APIError as exc:
                        log.info("keeping %s: %s", old, exc)
    except Exception as exc:  # noqa: BLE001 - pruning is housekeeping only
        log.info("could not prune old tags of %s: %s", repo, exc)


def image_size(tag: str) -> int:
    with _infra(f"inspecting {tag}"):
        return int(client().images.get(tag).attrs.get("Size") or 0)


# --------------------------------------------------------------------------------------------
# Task limits
# --------------------------------------------------------------------------------------------
def load_task_toml(task_dir: Path) -> dict:
    with open(Path(task_dir) / "task.toml", "rb") as fh:
        return tomllib.load(fh)


@dataclasses.dataclass(frozen=True)
class Limits:
    cpus: float = 1.0
    memory_mb: int = 2048
    storage_mb: int = 1024  # size of the /workspace tmpfs volume
    pids: int = DEFAULT_PIDS_LIMIT
    timeout_s: float = 600.0
    log_cap_bytes: int = DEFAULT_LOG_CAP_BYTES
    output_cap_bytes: int = DEFAULT_OUTPUT_CAP_BYTES

    @classmethod
    def from_task(cls, task_dir: Path, phase: str = "agent", **overrides) -> Limits:
        """Limits from task.toml: [environment] cpus/memory_mb/storage_mb, [<phase>].timeout_sec."""
        spec = load_task_toml(task_dir)
        env = spec.get("environment") or {}
        phase_cfg = spec.get(phase) or {}
        values = {}
        if env.get("cpus"):
            values["cpus"] = float(env["cpus"])
        if env.get("memory_mb"):
            values["memory_mb"] = int(env["memory_mb"])
        if env.get("storage_mb"):
            values["storage_mb"] = min(int(env["storage_mb"]), MAX_TMPFS_MB)
        if phase_cfg.get("timeout_sec"):
            values["timeout_s"] = float(phase_cfg["timeout_sec"])
        values.update(overrides)
        return cls(**values)


def task_user(task_dir: Path, phase: str = "agent") -> str:
    """The user a phase runs as: `[<phase>].user` from task.toml, else the base image's `agent`."""
    user = (load_task_toml(task_dir).get(phase) or {}).get("user")
    return str(user) if user not in (None, "") else str(AGENT_UID)


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass
class ExecResult:
    exit_code: int | None
    output: bytes
    output_bytes: int  # total bytes the command wrote (stdout + stderr), kept or not
    truncated: bool
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False
    pids_exhausted: bool = False
    container_died: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not (self.timed_out or self.oom_killed)

    @property
    def status(self) -> str:
        """ok | memory_limit | process_limit | time_limit | error_exit."""
        if self.oom_killed:
            return "memory_limit"
        if self.pids_exhausted and (self.timed_out or self.exit_code != 0):
            return "process_limit"
        if self.timed_out:
            return "time_limit"
        return "ok" if self.exit_code == 0 else "error_exit"

    @property
    def reasons(self) -> list[str]:
        out = []
        if self.oom_killed:
            out.append(REASON_OOM)
        if self.pids_exhausted:
            out.append(REASON_PIDS)
        if self.timed_out:
            out.append(REASON_TIMEOUT)
        if self.exit_code not in (None, 0) and not self.timed_out:
            if self.exit_code > 128:
                out.append(f"killed by signal {self.exit_code - 128}")
            else:
                out.append(f"exited with code {self.exit_code}")
        if self.container_died and not self.timed_out:
            out.append("container stopped unexpectedly")
        return out

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")


# --------------------------------------------------------------------------------------------
# Archives
# --------------------------------------------------------------------------------------------
def tar_from_dir(
    src: Path, *, arcname: str = ".", uid: int = 0, gid: int = 0, writable: bool = False
) -> bytes:
    """A tar (in memory) of a host directory: regular files and directories only, fixed owner.

    Symlinks and special files are refused (ValueError): copies into containers are data.
    """
    src = Path(src)
    buf = io.BytesIO()
    fmode, xmode, dmode = (0o664, 0o775, 0o775) if writable else (0o644, 0o755, 0o755)
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add(path: Path, name: str):
            st = path.lstat()
            info = tarfile.TarInfo(name)
            info.uid, info.gid, info.uname, info.gname = uid, gid, "", ""
            info.mtime = int(st.st_mtime)
            if path.is_symlink():
                raise ValueError(f"refusing to copy symlink {path} into a container")
            if path.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, dmode
                tar.addfile(info)
                for child in sorted(path.iterdir()):
                    if child.name == "__pycache__":
                        continue
                    add(child, f"{name}/{child.name}")
            elif path.is_file():
                info.size = st.st_size
                info.mode = xmode if st.st_mode & 0o111 else fmode
                with open(path, "rb") as fh:
                    tar.addfile(info, fh)
            else:
                raise ValueError(f"refusing to copy special file {path} into a container")

        add(src, arcname)
    return buf.getvalue()


def tar_from_files(files: dict[str, bytes], *, uid: int = 0, gid: int = 0, mode=0o644) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid = len(data), mode, uid, gid
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def safe_extract(
    tar_path_or_obj, dest: Path, *, max_bytes: int, max_members: int = 100_000
) -> list[str]:
    """Extract a container's output archive with the project's one vetted extractor
    (evaluation/archive.py: regular files and directories only, no links, devices, absolute or
    `..` paths, streamed byte caps). Returns the extracted member names."""
    limits = archive.ArchiveLimits(
        max_compressed_bytes=max_bytes + 16 * MiB,  # tar headers: 512 bytes per member
        max_total_bytes=max_bytes, max_file_bytes=max_bytes, max_entries=max_members,
    )
    with tempfile.TemporaryDirectory(prefix="hab-output-") as tmp:
        tar_path = Path(tmp) / "output.tar"
        with open(tar_path, "wb") as fh:
            shutil.copyfileobj(tar_path_or_obj, fh, 1 * MiB)
        staged = Path(tmp) / "out"
        try:
            report = archive.safe_extract(tar_path, staged, limits)
        except archive.ArchiveError as exc:
            if exc.code in ("too_large", "too_many_entries"):
                raise OutputTooLargeError(str(exc)) from exc
            raise UnsafeArchiveError(str(exc)) from exc
        # Several outputs may land in one host folder: merge, never following a link.
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        for top in sorted(staged.iterdir()):
            target = dest / top.name
            if target.is_symlink():
                raise UnsafeArchiveError(f"refusing to write through a link: {target}")
            if top.is_dir():
                shutil.copytree(top, target, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(top, target)
    return list(report.directories) + list(report.members)


# --------------------------------------------------------------------------------------------
# ContainerRun
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class JudgeSpec:
    """An LLM-judge stand-in reachable only from the verifier, over an internal network."""

    script: Path  # host path of the stand-in server script (tests/evaluation/judge_standin.py)
    # 0.0.0.0 inside the judge container, which sits on an internal network only.
    args: tuple[str, ...] = ("--host", "0.0.0.0", "--rule", "injected-errors")  # noqa: S104
    port: int = 8080
    url_path: str = ""  # appended to http://<judge container name>:<port>


def _safe_name(s: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]+", "-", str(s)).strip("-")[:80] or "x"


class ContainerRun:
    """One hardened container; always killed and removed (with its volumes) on exit.

        with ContainerRun(image, purpose="agent", job_id=42, attempt=1, limits=limits) as run:
            run.put_dir(host_dir, "/solution")
            result = run.exec(["bash", "/solution/solve.sh"])
            run.get_path("/workspace/submission.json", out_dir)

    `volumes` maps container paths to tmpfs sizes in MB: the places the run can write and that
    the runner can copy in and out (`/workspace` is seeded from the image's own /workspace).
    """

    def __init__(
        self,
        image: str,
        *,
        purpose: str,
        job_id,
        attempt: int = 1,
        limits: Limits | None = None,
        user: str = str(AGENT_UID),
        env: dict[str, str] | None = None,
        volumes: dict[str, int] | None = None,
        seed_workspace: bool = True,
        network: str | None = None,
        read_only: bool = True,
        command: list[str] | None = None,
    ):
        self.image = image
        self.purpose = _safe_name(purpose)
        self.job_id = _safe_name(job_id)
        self.attempt = int(attempt)
        self.limits = limits or Limits()
        self.user = user
        # HOME on the container's private tmpfs (the root filesystem is read-only).
        self.env = {"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}  # noqa: S108
        if volumes is None:
            volumes = {"/workspace": self.limits.storage_mb}
        self.volumes = volumes
        self.seed_workspace = seed_workspace and "/workspace" in volumes
        self.network = network
        self.read_only = read_only
        self.command = command
        self.name = f"hab-{self.purpose}-{self.job_id}-{self.attempt}"
        self.container = None
        self._volume_names: dict[str, str] = {}
        self.started_at: float | None = None

    # -- naming/labels
    @property
    def labels(self) -> dict[str, str]:
        expires = int(time.time() + self._lifetime_s() + 60)
        return {
            LABEL_APP: APP_LABEL,
            LABEL_PURPOSE: self.purpose,
            LABEL_JOB: self.job_id,
            LABEL_ATTEMPT: str(self.attempt),
            LABEL_EXPIRES: str(expires),
        }

    def _lifetime_s(self) -> int:
        # PID 1 sleeps this long: a runner that dies leaves a container that ends by itself.
        return int(self.limits.timeout_s * 2 + 600)

    def _volume_name(self, path: str) -> str:
        return f"{self.name}-{_safe_name(path.strip('/').replace('/', '-'))}"

    # -- lifecycle
    def __enter__(self) -> ContainerRun:
        docker = _docker()
        c = client()
        try:
            self._remove_stale()
            labels = self.labels
            mounts = []
            for path, size_mb in self.volumes.items():
                vname = self._volume_name(path)
                c.volumes.create(
                    name=vname,
                    driver="local",
                    driver_opts={
                        "type": "tmpfs",
                        "device": "tmpfs",
                        "o": f"size={int(size_mb)}m,uid={AGENT_UID},gid={AGENT_UID},mode=0755",
                    },
                    labels=labels,
                )
                self._volume_names[path] = vname
                mounts.append(docker.types.Mount(target=path, source=vname, type="volume"))
            tmpfs = {"/tmp": f"rw,nosuid,nodev,size={TMP_TMPFS_MB}m,mode=1777"}  # noqa: S108
            for p in ("/logs/agent", "/logs/verifier", "/logs/artifacts"):
                if p not in self.volumes:
                    tmpfs[p] = (
                        f"rw,nosuid,nodev,size={LOGS_TMPFS_MB}m,uid={AGENT_UID},"
                        f"gid={AGENT_UID},mode=0755"
                    )
            net_kwargs = (
                {"network_mode": "none", "network_disabled": True}
                if self.network is None
                else {"network": self.network}
            )
            seed = self._image_workspace_tar(c) if self.seed_workspace else None
            self.container = c.containers.create(
                self.image,
                command=self.command or ["sleep", str(self._lifetime_s())],
                name=self.name,
                labels=labels,
                user=self.user,
                environment=self.env,
                working_dir="/workspace",
                read_only=self.read_only,
                tmpfs=tmpfs,
                mounts=mounts,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                mem_limit=f"{self.limits.memory_mb}m",
                memswap_limit=f"{self.limits.memory_mb}m",
                nano_cpus=int(self._cpus(c) * 1e9),
                pids_limit=self.limits.pids,
                log_config=docker.types.LogConfig(
                    type="json-file", config={"max-size": "1m", "max-file": "1"}
                ),
                ipc_mode="private",
                init=False,
                stop_signal="SIGKILL",
                **net_kwargs,
            )
            self.container.start()
            self.started_at = time.time()
            if seed is not None:
                self._put_archive("/workspace", seed)
        except Exception as exc:
            self._cleanup()
            if _is_infra(exc):
                if isinstance(exc, docker.errors.ImageNotFound):
                    raise InfrastructureError(
                        f"image {self.image} is missing: run `make images`"
                    ) from exc
                raise InfrastructureError(f"starting {self.name}: {exc}") from exc
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        self._cleanup()
        return False

    def _cpus(self, c) -> float:
        try:
            ncpu = int(c.info().get("NCPU") or 1)
        except Exception:  # noqa: BLE001
            ncpu = 1
        return max(0.01, min(float(self.limits.cpus), float(ncpu)))

    def _image_workspace_tar(self, c) -> bytes | None:
        """The image's own /workspace content (a tmpfs volume would hide it)."""
        docker = _docker()
        helper = c.containers.create(
            self.image,
            command=["true"],
            network_disabled=True,
            network_mode="none",
            labels={LABEL_APP: APP_LABEL, LABEL_PURPOSE: "seed", LABEL_JOB: self.job_id},
        )
        try:
            try:
                stream, _stat = helper.get_archive("/workspace/.")
            except docker.errors.NotFound:
                return None
            spool = _read_capped(stream, self.limits.storage_mb * MiB)
            return spool.read()
        finally:
            helper.remove(force=True)

    def _remove_stale(self) -> None:
        docker = _docker()
        c = client()
        try:
            old = c.containers.get(self.name)
            log.warning("removing stale container %s", self.name)
            old.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        for path in self.volumes:
            try:
                c.volumes.get(self._volume_name(path)).remove(force=True)
            except docker.errors.NotFound:
                pass

    def _cleanup(self) -> None:
        docker = _docker()
        try:
            c = client()
        except InfrastructureError:
            return
        if self.container is not None:
            try:
                self.container.remove(force=True, v=True)
            except docker.errors.NotFound:
                pass
            except Exception as exc:  # noqa: BLE001 - reap_stale() will get it
                log.warning("could not remove %s: %s", self.name, exc)
        for vname in self._volume_names.values():
            for _ in range(10):
                try:
                    c.volumes.get(vname).remove(force=True)
                    break
                except docker.errors.NotFound:
                    break
                except docker.errors.APIError:
                    time.sleep(0.2)  # still in use while the container is being torn down
                except Exception as exc:  # noqa: BLE001
                    log.warning("could not remove volume %s: %s", vname, exc)
                    break
        self._volume_names.clear()

    # -- copy in/out
    def _put_archive(self, path: str, data: bytes) -> None:
        """PUT an archive with copyUIDGID=1 so the tar's owners are kept (docker-py lacks it)."""
        api = self.container.client.api
        with _infra(f"copying into {self.name}:{path}"):
            res = api._put(
                api._url("/containers/{0}/archive", self.container.id),
                params={"path": path, "copyUIDGID": "1"},
                data=data,
            )
            api._raise_for_status(res)

    def put_dir(self, host_dir: Path, container_dir: str, *, uid: int = 0, writable=False) -> None:
        """Copy a host directory's content to container_dir (which must be on a volume)."""
        self._put_archive(
            container_dir, tar_from_dir(Path(host_dir), uid=uid, gid=uid, writable=writable)
        )

    def put_path(self, host_path: Path, container_path: str, *, uid: int = 0) -> None:
        """Copy one host file or directory to exactly container_path (parent must exist)."""
        host_path = Path(host_path)
        cp = PurePosixPath(container_path)
        data = tar_from_dir(host_path, arcname=cp.name, uid=uid, gid=uid)
        self.mkdirs(str(cp.parent))
        self._put_archive(str(cp.parent), data)

    def put_files(self, container_dir: str, files: dict[str, bytes], *, uid: int = 0) -> None:
        self._put_archive(container_dir, tar_from_files(files, uid=uid, gid=uid))

    def mkdirs(self, container_dir: str) -> None:
        if container_dir in ("/", ""):
            return
        res = self.exec(["mkdir", "-p", container_dir], timeout_s=30)
        if res.exit_code != 0:
            raise InfrastructureError(f"mkdir {container_dir} in {self.name}: {res.text[-500:]}")

    def get_path(
        self, container_path: str, host_dir: Path, *, max_bytes: int | None = None
    ) -> list[str]:
        """Copy container_path (file or directory) into host_dir; links and specials refused."""
        docker = _docker()
        max_bytes = max_bytes or self.limits.output_cap_bytes
        with _infra(f"copying {self.name}:{container_path}"):
            try:
                stream, _stat = self.container.get_archive(container_path)
            except docker.errors.NotFound:
                raise FileNotFoundError(container_path) from None
            spool = _read_capped(stream, max_bytes + 10 * MiB)
        with spool:
            return safe_extract(spool, Path(host_dir), max_bytes=max_bytes)

    def read_file(self, container_path: str, *, max_bytes: int = 4 * MiB) -> bytes | None:
        """One regular file's bytes, or None when it does not exist."""
        docker = _docker()
        with _infra(f"reading {self.name}:{container_path}"):
            try:
                stream, _stat = self.container.get_archive(container_path)
            except docker.errors.NotFound:
                return None
            spool = _read_capped(stream, max_bytes + MiB)
        with spool, tarfile.open(fileobj=spool, mode="r:") as tar:
            for m in tar:
                if not m.isfile():
                    raise UnsafeArchiveError(f"{container_path} is not a regular file")
                if m.size > max_bytes:
                    raise OutputTooLargeError(f"{container_path} exceeds {max_bytes} bytes")
                return tar.extractfile(m).read()
        return None

    # -- exec
    def exec(
        self,
        cmd: list[str] | str,
        *,
        timeout_s: float | None = None,
        user: str | None = None,
        env: dict[str, str] | None = None,
        workdir: str = "/workspace",
        log_cap_bytes: int | None = None,
    ) -> ExecResult:
        """Run cmd under the run's limits; the container is killed if the deadline passes."""
        if isinstance(cmd, str):
            cmd = ["bash", "-c", cmd]
        timeout_s = self.limits.timeout_s if timeout_s is None else timeout_s
        cap = self.limits.log_cap_bytes if log_cap_bytes is None else log_cap_bytes
        c = client()
        api = c.api
        started = time.time()
        oom_before = self._oom_event_count(api)
        with _infra(f"exec in {self.name}"):
            exec_id = api.exec_create(
                self.container.id,
                cmd,
                stdout=True,
                stderr=True,
                user=user or self.user,
                environment={**self.env, **(env or {})},
                workdir=workdir,
            )["Id"]
            sock = api.exec_start(exec_id, socket=True)
        collector = _OutputCollector(sock, cap)
        collector.start()
        timed_out = False
        container_died = False
        sampler = _PidsSampler(self, api)
        sampler.start()
        try:
            while True:
                with _infra(f"inspecting exec in {self.name}"):
                    info = api.exec_inspect(exec_id)
                if not info.get("Running"):
                    break
                now = time.time()
                if now - started > timeout_s:
                    timed_out = True
                    self.kill()
                    break
                if not self._is_running(api):
                    container_died = True
                    break
                time.sleep(POLL_S)
            collector.join(timeout=10)
        finally:
            sampler.stop()
            collector.close()
        max_pids = sampler.max_pids
        duration = time.time() - started
        exit_code = None
        if not timed_out:
            with _infra(f"inspecting exec in {self.name}"):
                exit_code = api.exec_inspect(exec_id).get("ExitCode")
        oom = self._oom_event_count(api) > oom_before
        pids_hit = max_pids >= self.limits.pids or self._pids_events()
        if not timed_out and not container_died and not self._is_running(api):
            container_died = True
        return ExecResult(
            exit_code=exit_code,
            output=collector.output(),
            output_bytes=collector.total,
            truncated=collector.truncated,
            duration_s=duration,
            timed_out=timed_out,
            oom_killed=oom or self._state_oom(api),
            pids_exhausted=bool(pids_hit),
            container_died=container_died,
        )

    def kill(self) -> None:
        docker = _docker()
        try:
            self.container.kill()
        except docker.errors.APIError:
            pass  # already dead

    def _is_running(self, api) -> bool:
        try:
            return bool(api.inspect_container(self.container.id)["State"]["Running"])
        except Exception:  # noqa: BLE001
            return False

    def _state_oom(self, api) -> bool:
        try:
            return bool(api.inspect_container(self.container.id)["State"].get("OOMKilled"))
        except Exception:  # noqa: BLE001
            return False

    def _pids_current(self, api) -> int:
        try:
            stats = api.stats(self.container.id, stream=False, one_shot=True)
            return int((stats.get("pids_stats") or {}).get("current") or 0)
        except Exception:  # noqa: BLE001 - a sampling miss is not an error
            return 0

    def _pids_events(self) -> bool:
        """cgroup pids.events 'max' counter > 0 (best effort; fails when pids are exhausted)."""
        if not self._is_running(self.container.client.api):
            return False
        try:
            api = self.container.client.api
            exec_id = api.exec_create(
                self.container.id,
                [
                    "sh",
                    "-c",
                    "cat /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events 2>/dev/null",
                ],
                user=self.user,
            )["Id"]
            sock = api.exec_start(exec_id, socket=True)
            try:
                out = b"".join(_exec_frames(sock)).decode("utf-8", "replace")
            finally:
                _close_exec_socket(sock)
        except Exception:  # noqa: BLE001
            return False
        m = re.search(r"^max (\d+)", out, re.M)
        return bool(m and int(m.group(1)) > 0)

    def _oom_event_count(self, api) -> int:
        """OOM events of this container so far (any process of it killed by the OOM killer)."""
        since = int(self.started_at or time.time()) - 1
        try:
            events = api.events(
                since=since,
                # Fractional "now": an integer in the future would make the engine wait for it.
                until=f"{time.time():.9f}",
                filters={"container": self.container.id, "event": "oom"},
                decode=True,
            )
            try:
                return sum(1 for _ in events)
            finally:
                events.close()
        except Exception:  # noqa: BLE001
            return 0


class _PidsSampler(threading.Thread):
    """Samples the container's pids count about once a second (stats calls can take ~1 s)."""

    def __init__(self, run: ContainerRun, api):
        super().__init__(daemon=True)
        self.run_ref, self.api = run, api
        self.max_pids = 0
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            self.max_pids = max(self.max_pids, self.run_ref._pids_current(self.api))
            self._halt.wait(1.0)

    def stop(self):
        self._halt.set()
        self.join(timeout=5)


def _exec_frames(sock):
    """The output bytes of a started exec's hijacked socket (stdout and stderr interleaved)."""
    from docker.utils.socket import frames_iter

    for _stream_id, data in frames_iter(sock, False):
        yield data


def _close_exec_socket(sock) -> None:
    """Close a hijacked exec socket and its HTTP response, response first.

    docker-py keeps the 101 response on the socket (``sock._response``), a reference cycle. Left
    to the garbage collector, the socket may be finalised first and the response's close then
    prints "Exception ignored ... ValueError: I/O operation on closed file" at interpreter exit.
    """
    response = sock.__dict__.pop("_response", None) if hasattr(sock, "__dict__") else None
    for closeable in (response, sock):
        try:
            if closeable is not None:
                closeable.close()
        except Exception:  # noqa: BLE001, S110 - already closed by the engine or a kill
            pass


class _OutputCollector(threading.Thread):
    """Drains an exec's socket; keeps the first `cap` bytes and counts the rest (bounded memory)."""

    def __init__(self, sock, cap: int):
        super().__init__(daemon=True)
        self.sock = sock
        self.stream = _exec_frames(sock)
        self.cap = cap
        self.buf = bytearray()
        self.total = 0
        self.truncated = False
        self.error: BaseException | None = None

    def run(self):
        try:
            for chunk in self.stream:
                if not chunk:
                    continue
                self.total += len(chunk)
                room = self.cap - len(self.buf)
                if room > 0:
                    self.buf += chunk[:room]
                if len(chunk) > room:
                    self.truncated = True
        except Exception as exc:  # noqa: BLE001 - a closed stream ends the collection
            self.error = exc

    def close(self):
        _close_exec_socket(self.sock)

    def output(self) -> bytes:
        out = bytes(self.buf)
        if self.truncated:
            out += TRUNCATION_MARKER.format(omitted=self.total - len(self.buf)).encode()
        return out


def _read_capped(stream: Iterable[bytes], max_bytes: int):
    """Spool a streamed archive to a temp file (memory stays bounded); cap its size."""
    spool = tempfile.SpooledTemporaryFile(max_size=8 * MiB)
    total = 0
    for chunk in stream:
        total += len(chunk)
        if total > max_bytes:
            spool.close()
            raise OutputTooLargeError(f"archive exceeds {max_bytes // MiB} MiB")
        spool.write(chunk)
    spool.seek(0)
    return spool


# --------------------------------------------------------------------------------------------
# Two-container grading
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass
class AgentRun:
    result: ExecResult
    outputs_dir: Path
    collected: list[str]  # container paths copied out
    missing: list[str]  # declared outputs that did not exist
    output_error: str | None = None  # unsafe or oversized output


@dataclasses.dataclass
class VerifierRun:
    result: ExecResult
    reward: float | None
    rewards: dict
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.reward is not None and self.reward >= 1.0


def declared_outputs(task_dir: Path) -> list[str]:
    """Container paths the agent must produce (see evaluation.task_specs.declared_outputs)."""
    return task_specs.declared_outputs(load_task_toml(task_dir))


def _copy_out(run: ContainerRun, paths: list[str], out_dir: Path) -> tuple[list[str], list[str]]:
    collected, missing = [], []
    for p in paths:
        pp = PurePosixPath(p)
        if not pp.is_absolute() or ".." in pp.parts:
            raise UnsafeArchiveError(f"declared output {p!r} must be an absolute path")
        target_parent = Path(out_dir) / str(pp.parent).lstrip("/")
        try:
            run.get_path(p, target_parent)
            collected.append(p)
        except FileNotFoundError:
            missing.append(p)
    return collected, missing


def run_agent(
    task_dir: Path,
    *,
    job_id,
    attempt: int = 1,
    command: str | list[str] | None,
    out_dir: Path,
    copy_in: dict[str, Path] | None = None,
    image: str | None = None,
    limits: Limits | None = None,
    outputs: list[str] | None = None,
    purpose: str = "agent",
    env: dict[str, str] | None = None,
) -> AgentRun:
    """Run `command` (None: the nop agent) in a fresh task container; copy out declared outputs.

    copy_in maps container directories (e.g. "/solution") to host directories; each gets its own
    small tmpfs volume. Outputs land under out_dir at their container path
    (out_dir/workspace/submission.json).
    """
    task_dir = Path(task_dir)
    image = image or task_image_tag(task_dir)
    limits = limits or Limits.from_task(task_dir, "agent")
    outputs = outputs or declared_outputs(task_dir)
    copy_in = copy_in or {}
    volumes = {"/workspace": limits.storage_mb}
    for cpath, host in copy_in.items():
        size = max(16, int(sum(f.stat().st_size for f in _iter_files(Path(host))) * 2 / MiB) + 16)
        volumes[cpath] = size
    out_dir = Path(out_dir)
    with ContainerRun(
        image,
        purpose=purpose,
        job_id=job_id,
        attempt=attempt,
        limits=limits,
        user=task_user(task_dir, "agent"),
        volumes=volumes,
        env=env,
    ) as run:
        for cpath, host in copy_in.items():
            run.put_dir(Path(host), cpath, uid=AGENT_UID)
        if command is None:
            result = ExecResult(0, b"", 0, False, 0.0)
        else:
            result = run.exec(command)
        collected, missing, error = [], [], None
        if not result.timed_out and not result.container_died:
            try:
                collected, missing = _copy_out(run, outputs, out_dir)
            except (UnsafeArchiveError, OutputTooLargeError) as exc:
                error = str(exc)
        else:
            missing = list(outputs)
    (out_dir / "agent").mkdir(parents=True, exist_ok=True)
    (out_dir / "agent" / "output.txt").write_bytes(result.output)
    return AgentRun(result, out_dir, collected, missing, error)


def _start_judge(c, spec: JudgeSpec, net_name: str, job_id, attempt) -> ContainerRun:
    run = ContainerRun(
        settings.TASK_BASE_IMAGE,
        purpose="judge",
        job_id=job_id,
        attempt=attempt,
        limits=Limits(cpus=1, memory_mb=256, timeout_s=3600),
        volumes={"/judge": 16},
        seed_workspace=False,
        network=net_name,
    )
    run.__enter__()
    try:
        run.put_files("/judge", {"judge_standin.py": Path(spec.script).read_bytes()}, uid=AGENT_UID)
        api = c.api
        exec_id = api.exec_create(
            run.container.id,
            ["python3", "/judge/judge_standin.py", "--port", str(spec.port), *spec.args],
            user=run.user,
            workdir="/judge",
        )["Id"]
        api.exec_start(exec_id, detach=True)
        # Wait until it listens (from inside its own container).
        probe = (
            "import socket,sys,time\n"
            "for _ in range(100):\n"
            "    try:\n"
            f"        socket.create_connection(('127.0.0.1',{spec.port}),0.5).close()\n"
            "        sys.exit(0)\n"
            "    except OSError: time.sleep(0.1)\n"
            "sys.exit(1)\n"
        )
        res = run.exec(["python3", "-c", probe], timeout_s=30, workdir="/judge")
        if res.exit_code != 0:
            raise InfrastructureError("the judge stand-in did not start listening")
    except BaseException:
        run.__exit__(None, None, None)
        raise
    return run


def run_verifier(
    task_dir: Path,
    *,
    job_id,
    attempt: int = 1,
    artifacts_dir: Path,
    outputs: list[str] | None = None,
    image: str | None = None,
    limits: Limits | None = None,
    judge: JudgeSpec | None = None,
) -> VerifierRun:
    """Grade in a fresh container: declared outputs (as data) + tests/ in, reward.json out."""
    task_dir = Path(task_dir)
    image = image or task_image_tag(task_dir)
    limits = limits or Limits.from_task(task_dir, "verifier")
    outputs = outputs or declared_outputs(task_dir)
    tests_dir = task_dir / "tests"
    tests_mb = int(sum(f.stat().st_size for f in _iter_files(tests_dir)) * 2 / MiB) + 16
    env = {"PYTHONPATH": "/opt/hab"}
    c = client()
    net = None
    judge_run = None
    verifier_user = task_user(task_dir, "verifier")
    try:
        if judge is not None:
            net_name = f"hab-judge-{_safe_name(job_id)}-{int(attempt)}"
            with _infra("creating the judge network"):
                for old in c.networks.list(names=[net_name]):
                    for cont in old.attrs.get("Containers") or {}:
                        try:
                            old.disconnect(cont, force=True)
                        except Exception:  # noqa: BLE001, S110
                            pass
                    old.remove()
                net = c.networks.create(
                    net_name,
                    driver="bridge",
                    internal=True,
                    labels={LABEL_APP: APP_LABEL, LABEL_JOB: _safe_name(job_id)},
                )
            judge_run = _start_judge(c, judge, net_name, job_id, attempt)
            # Container names resolve through the engine's DNS on user-defined networks.
            env["XRAY_JUDGE_URL"] = f"http://{judge_run.name}:{judge.port}{judge.url_path}"
        with ContainerRun(
            image,
            purpose="verifier",
            job_id=job_id,
            attempt=attempt,
            limits=limits,
            user=verifier_user,
            volumes={
                "/workspace": limits.storage_mb,
                "/tests": tests_mb,
                "/logs/verifier": LOGS_TMPFS_MB,
            },
            env=env,
            network=net.name if net is not None else None,
        ) as run:
            # The agent's declared outputs, as data (read-only for the grader: owned by root).
            for p in outputs:
                host = Path(artifacts_dir) / p.lstrip("/")
                if host.exists():
                    run.put_path(host, p, uid=0)
            run.put_dir(tests_dir, "/tests", uid=0)
            result = run.exec(["bash", "/tests/test.sh"], workdir="/tests")
            reward, rewards, error = None, {}, None
            if not result.container_died and not result.timed_out:
                raw = run.read_file("/logs/verifier/reward.json")
                if raw is not None:
                    try:
                        rewards = json.loads(raw)
                        reward = float(rewards["reward"])
                    except (ValueError, KeyError, TypeError) as exc:
                        error = f"unparsable reward.json: {exc}"
                else:
                    raw = run.read_file("/logs/verifier/reward.txt")
                    if raw is not None:
                        try:
                            reward = float(raw.decode().strip())
                            rewards = {"reward": reward}
                        except ValueError as exc:
                            error = f"unparsable reward.txt: {exc}"
                    elif result.exit_code == 0:
                        # The task's test.sh writes a reward in every case except a grader
                        # infrastructure error (exit 3: e.g. the X-ray judge is unreachable).
                        raise InfrastructureError(
                            "the verifier wrote no reward file: the grader reported an "
                            "infrastructure error (e.g. the LLM judge is unreachable); retry. "
                            + result.text[-500:]
                        )
                    else:
                        error = f"no reward file written ({result.reason})"
            else:
                error = result.reason
        return VerifierRun(result, reward, rewards, error)
    finally:
        if judge_run is not None:
            judge_run.__exit__(None, None, None)
        if net is not None:
            try:
                net.remove()
            except Exception as exc:  # noqa: BLE001 - reap_stale() will get it
                log.warning("could not remove network %s: %s", net.name, exc)


# --------------------------------------------------------------------------------------------
# Reaping
# --------------------------------------------------------------------------------------------
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
    prefix = _safe_name(prefix)
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


def bare_docker_run(
    image: str, *, binds: dict[str, str], command: list[str], timeout_s: float = 600
) -> tuple[int, float, str]:
    """A plain `docker run --rm --network none` (the CLI), as the baseline of bench_runner.

    binds maps host paths to container paths (read-only). Returns (exit code, wall s, output).
    """
    import shutil
    import subprocess

    docker_cli = shutil.which("docker")
    if docker_cli is None:
        raise InfrastructureError("the docker CLI is not installed")
    args = [docker_cli, "run", "--rm", "--network", "none", "--label", f"{LABEL_APP}={APP_LABEL}"]
    for host, cpath in binds.items():
        args += ["-v", f"{Path(host).resolve()}:{cpath}:ro"]
    args += ["--tmpfs", "/logs/verifier:uid=0", image, *command]
    t0 = time.time()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, check=False)  # noqa: S603
    return proc.returncode, time.time() - t0, (proc.stdout + proc.stderr)[-2000:]


# --------------------------------------------------------------------------------------------
# Command line (scripts/build-images)
# --------------------------------------------------------------------------------------------
def discover_tasks(tasks_dir: Path | None = None) -> list[Path]:
    roots = [Path(tasks_dir)] if tasks_dir else [Path(p) for p in settings.TASK_SOURCES]
    return sorted(p.parent.parent for root in roots for p in root.glob("*/*/environment/Dockerfile"))


def _main(argv: list[str] | None = None) -> int:
    import argparse

    import django

    parser = argparse.ArgumentParser(prog="python -m evaluation.runner")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build-task-images", help="build every task image (cached by digest)")
    b.add_argument("task_dirs", nargs="*", type=Path)
    b.add_argument("--force", action="store_true")
    sub.add_parser("status", help="print engine_status() as JSON")
    r = sub.add_parser("reap", help="remove labelled containers older than --hours")
    r.add_argument("--hours", type=float, default=2.0)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    if args.cmd == "status":
        print(json.dumps(engine_status(), indent=2))
        return 0
    if args.cmd == "reap":
        print(json.dumps(reap_stale(timedelta(hours=args.hours)), indent=2))
        return 0
    tasks = args.task_dirs or discover_tasks()
    failures = 0
    for task in tasks:
        t0 = time.time()
        try:
            tag, built = build_task_image(task, force=args.force)
        except (ImageBuildError, InfrastructureError) as exc:
            failures += 1
            print(f"FAIL  {task}: {exc}")
            if isinstance(exc, ImageBuildError) and exc.log_tail:
                print(exc.log_tail)
            continue
        verb = "built " if built else "cached"
        print(f"{verb} {tag}  ({time.time() - t0:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(_main())
