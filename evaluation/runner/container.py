"""ContainerRun: one hardened container, the one way the project runs anything in Docker."""

from __future__ import annotations

import logging
import tarfile
import time
from pathlib import Path, PurePosixPath

from evaluation.runner import probes
from evaluation.runner.engine import (
    APP_LABEL,
    LABEL_APP,
    LABEL_ATTEMPT,
    LABEL_EXPIRES,
    LABEL_JOB,
    LABEL_PURPOSE,
    InfrastructureError,
    OutputTooLargeError,
    RootUserRefused,
    TaskEnvironmentError,
    UnsafeArchiveError,
    _docker,
    user_mapping,
    _infra,
    _is_infra,
    _safe_name,
    client,
)
from evaluation.runner.limits import AGENT_UID, LOGS_TMPFS_MB, TMP_TMPFS_MB, Limits, MiB
from evaluation.runner.results import ExecResult, _OutputCollector
from evaluation.runner.transfer import (
    _read_capped,
    safe_extract,
    tar_from_dir,
    tar_from_files,
    tar_reowned,
)

log = logging.getLogger(__name__)

POLL_S = 0.2


class ContainerRun:
    """One hardened container; always killed and removed (with its volumes) on exit.

        with ContainerRun(image, purpose="agent", job_id=42, attempt=1, limits=limits) as run:
            run.put_dir(host_dir, "/solution")
            result = run.exec(["bash", "/solution/solve.sh"])
            run.get_path("/workspace/submission.json", out_dir)

    `volumes` maps container paths to tmpfs sizes in MB: the places the run can write and that
    the runner can copy in and out (`/workspace` is seeded from the image's own /workspace).
    `shared_volumes` mounts volumes the caller created and removes (the judge gateway's socket).
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
        runtime: str | None = None,
        shared_volumes: dict[str, tuple[str, bool]] | None = None,
    ):
        from evaluation.task_specs import is_root_user

        if is_root_user(user):
            raise RootUserRefused(f"refusing to run {purpose} as root ({user!r})")
        self.runtime = runtime
        self.image = image
        self.purpose = _safe_name(purpose)
        self.job_id = _safe_name(job_id)
        self.attempt = int(attempt)
        self.limits = limits or Limits()
        self.user = user
        # HOME on the container's private tmpfs (the root filesystem is read-only).
        # TZ and PYTHONHASHSEED pinned: grading is deterministic (R13).
        self.env = {"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "TZ": "UTC",  # noqa: S108
                    "PYTHONHASHSEED": "0", **(env or {})}
        if volumes is None:
            volumes = {"/workspace": self.limits.storage_mb}
        self.volumes = volumes
        self.seed_workspace = seed_workspace and "/workspace" in volumes
        self.network = network
        # container path -> (an existing volume the caller owns, read-only?): not removed here.
        self.shared_volumes = shared_volumes or {}
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
            mapping = user_mapping()
            for path, size_mb in self.volumes.items():
                vname = self._volume_name(path)
                c.volumes.create(
                    name=vname,
                    driver="local",
                    driver_opts={
                        "type": "tmpfs",
                        "device": "tmpfs",
                        # The engine mounts a volume's tmpfs on the host side: host ids.
                        "o": f"size={int(size_mb)}m,uid={mapping.host_uid(AGENT_UID)},"
                             f"gid={mapping.host_gid(AGENT_UID)},mode=0755",
                    },
                    labels=labels,
                )
                self._volume_names[path] = vname
                mounts.append(docker.types.Mount(target=path, source=vname, type="volume"))
            for path, (vname, ro) in self.shared_volumes.items():
                mounts.append(docker.types.Mount(target=path, source=vname, type="volume",
                                                 read_only=ro))
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
                **({"runtime": self.runtime} if self.runtime else {}),
                **net_kwargs,
            )
            try:
                self.container.start()
            except docker.errors.APIError as exc:
                # The engine is there and created the container, but it cannot start: the
                # image (the task's environment) is at fault, not the engine.
                raise TaskEnvironmentError(f"starting {self.name} from {self.image}: "
                                           f"{exc.explanation or exc}") from exc
            self.started_at = time.time()
            if seed is not None:
                # The image's files belong to the run's user, as `docker cp -a` would copy them.
                uid, gid = self._user_ids()
                self._put_archive("/workspace", tar_reowned(seed, uid=uid, gid=gid))
        except Exception as exc:
            self._cleanup()
            if isinstance(exc, TaskEnvironmentError):
                raise
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

    def _user_ids(self) -> tuple[int, int]:
        """The numeric uid and gid of the run's user ("1000", "0:0", or a name in the image)."""
        uid, _, gid = self.user.partition(":")
        if uid.isdigit() and (not gid or gid.isdigit()):
            return int(uid), int(gid or uid)
        res = self.exec(["sh", "-c", "id -u; id -g"], timeout_s=30, workdir="/")
        ids = res.text.split()
        if res.exit_code != 0 or len(ids) != 2:
            raise InfrastructureError(f"cannot resolve user {self.user!r} in {self.name}")
        return int(ids[0]), int(ids[1])

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
        """Unpack a tar at path (on a volume): members keep the tar's owners and modes."""
        with _infra(f"copying into {self.name}:{path}"):
            self.container.put_archive(path, data)

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
        cid = self.container.id
        oom_before = probes.oom_event_count(api, cid, self.started_at)
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
        sampler = probes.PidsSampler(api, cid)
        sampler.start()
        try:
            while True:
                with _infra(f"inspecting exec in {self.name}"):
                    info = api.exec_inspect(exec_id)
                # Finished: not running and an exit code. The daemon answers the exec's
                # start (the hijacked stream) before it starts the process, so an exec
                # inspected at once can be "not running" with no exit code yet: not done.
                if not info.get("Running") and info.get("ExitCode") is not None:
                    break
                now = time.time()
                if now - started > timeout_s:
                    timed_out = True
                    self.kill()
                    break
                if not probes.is_running(api, cid):
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
        oom = probes.oom_event_count(api, cid, self.started_at) > oom_before
        pids_hit = max_pids >= self.limits.pids or probes.pids_events(api, cid, self.user)
        if not timed_out and not container_died and not probes.is_running(api, cid):
            container_died = True
        return ExecResult(
            exit_code=exit_code,
            output=collector.output(),
            output_bytes=collector.total,
            truncated=collector.truncated,
            duration_s=duration,
            timed_out=timed_out,
            oom_killed=oom or probes.state_oom(api, cid),
            pids_exhausted=bool(pids_hit),
            container_died=container_died,
        )

    def kill(self) -> None:
        docker = _docker()
        try:
            self.container.kill()
        except docker.errors.APIError:
            pass  # already dead
