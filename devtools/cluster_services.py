"""The shared services and engines of the local cluster (devtools/cluster.py): a throwaway
PostgreSQL cluster and Redis server listening on the cluster bridge's address, the cluster's
task source (two synthetic packages: small evaluation work), one dockerd per evaluation host and
the images it needs (loaded from the machine's engine, cached as one tar)."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import socket
import subprocess
import time
import tomllib
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
TASKS = ("ct-abnormality-classification/synthetic_01", "pathology-tumor-region/synthetic_01")
CLUSTER_BENCHMARK = "hab-cluster@1.0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_bin() -> Path:
    for base in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (base / "initdb").exists():
            return base
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise RuntimeError("the cluster needs PostgreSQL's server binaries (initdb, pg_ctl)")


class ClusterPostgres:
    """initdb + pg_ctl on a free port, listening on the cluster bridge's address only, trust
    authentication for the cluster's subnet (the hosts) and nothing else."""

    def __init__(self, root: Path, address: str, subnet: str):
        self.root, self.port, self.bin = root / "pg", _free_port(), _pg_bin()
        self.address, self.subnet = address, subnet
        self.as_postgres = os.geteuid() == 0  # initdb refuses to run as root

    def _run(self, *args) -> None:
        cmd = [str(a) for a in args]
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def start(self) -> ClusterPostgres:
        self.root.mkdir(parents=True)
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(self.bin / "initdb", "-D", self.root / "data", "-U", "postgres",
                  "--auth=trust", "-E", "UTF8")
        hba = self.root / "data" / "pg_hba.conf"
        hba.write_text(f"host all all {self.subnet} trust\n")
        self._run(self.bin / "pg_ctl", "-D", self.root / "data", "-w", "-t", "60", "-l",
                  self.root / "log", "-o", f"-p {self.port} -c listen_addresses={self.address} "
                  "-c unix_socket_directories='' -c fsync=off -c max_connections=200", "start")
        return self

    def stop(self) -> None:
        try:
            self._run(self.bin / "pg_ctl", "-D", self.root / "data", "-w", "-m", "immediate",
                      "stop")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pass
        pid_file = self.root / "data" / "postmaster.pid"
        if pid_file.exists():  # pg_ctl did not stop it: the postmaster's own pid
            try:
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGQUIT)
            except (ProcessLookupError, ValueError):
                pass


class ClusterRedis:
    """redis-server on the cluster bridge's address (append-only, no protected mode: the
    hosts connect from their own addresses)."""

    def __init__(self, root: Path, address: str):
        self.root, self.port, self.address = root / "redis", _free_port(), address
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.address}:{self.port}/0"

    def start(self) -> ClusterRedis:
        exe = shutil.which("redis-server")
        if not exe:
            raise RuntimeError("the cluster needs redis-server (apt-get install redis-server)")
        self.root.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", self.address, "--protected-mode", "no",
             "--save", "", "--appendonly", "yes", "--dir", str(self.root)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection((self.address, self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("the cluster's redis-server did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


def task_source(dest: Path, *, attempts: int = 2) -> Path:
    """A task source of two of the synthetic packages (copied: same content digests) and its
    benchmark version hab-cluster@1.0 with `attempts` attempts per task."""
    from evaluation.task_specs import write_benchmark_manifest

    released = tomllib.loads(
        (REPO / "tasks" / "benchmarks" / "healthagentbench-synthetic@1.0.toml").read_text())
    for name in TASKS:
        shutil.copytree(REPO / "tasks" / name, dest / name, symlinks=True)
    write_benchmark_manifest(dest, name="hab-cluster", version="1.0",
                             tasks={n: released["tasks"][n] for n in TASKS},
                             title="HealthAgentBench cluster test",
                             attempts_per_task=attempts)
    return dest


def engine_argv(host_dir: Path, *, exec_root: str, cgroup_parent: str, bip: str,
                pool: str) -> list[str]:
    """dockerd of one evaluation host: its own config, data root, exec root, socket (in the
    host's folder), pid file, bridge address, address pool and cgroup parent."""
    config = host_dir / "daemon.json"
    config.write_text("{}\n")
    return ["dockerd", "--config-file", str(config), "--data-root", str(host_dir / "docker"),
            "--exec-root", exec_root, "-H", f"unix://{host_dir / 'docker.sock'}",
            "--pidfile", str(host_dir / "docker.pid"), "--bip", bip,
            "--default-address-pool", f"base={pool},size=28", "--cgroup-parent", cgroup_parent,
            "--storage-driver", "overlay2"]


def needed_images() -> list[str]:
    """The images a worker's health check asks for: the base image and every task image of
    this checkout, by content tag."""
    from evaluation import runner
    from evaluation.task_specs import discover_task_packages

    tags = [runner.base_image_tag()]
    tags += [runner.task_image_tag(t) for t in discover_task_packages(REPO / "tasks")]
    return tags


def load_images(cluster, hosts) -> None:
    """Load the needed images into each host's engine from the machine's engine (built there by
    scripts/build-images), through one cached `docker save` tar."""
    tags = needed_images()
    missing = [t for t in tags if subprocess.run(["docker", "image", "inspect", t],
                                                 capture_output=True).returncode != 0]
    if missing:
        raise RuntimeError(f"images missing on this machine's engine: {missing} (run "
                           "scripts/build-images first)")
    cache = Path(os.environ.get("HAB_CLUSTER_IMAGE_CACHE", REPO / "var" / "cluster-images"))
    cache.mkdir(parents=True, exist_ok=True)
    tar = cache / (hashlib.sha256("\n".join(sorted(tags)).encode()).hexdigest()[:16] + ".tar")
    if not tar.exists():
        part = tar.with_suffix(".part")
        subprocess.run(["docker", "save", "-o", str(part), *tags], check=True, timeout=900)
        part.rename(tar)
    procs = [subprocess.Popen(["docker", "-H", cluster.docker_host(h), "load", "-q", "-i",
                               str(tar)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for h in hosts]
    for host, proc in zip(hosts, procs, strict=True):
        _, err = proc.communicate(timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"loading images into {host}'s engine: {err.decode()[-2000:]}")
    cluster.say(f"loaded {len(tags)} images into {', '.join(hosts)} ({tar.stat().st_size >> 20}"
                " MiB tar)")


def cgroup_pids(parent: str) -> list[str]:
    """Every process in an engine's cgroup parent (its containers), cgroup v1 or v2."""
    roots = [Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")]
    for root in roots:
        base = root / parent.lstrip("/")
        if base.is_dir():
            pids = []
            for procs in base.rglob("cgroup.procs"):
                try:
                    pids += procs.read_text().split()
                except OSError:
                    pass
            return pids
    return []
