"""The several-machine deployment on one machine: PostgreSQL, Redis and an S3 store
(moto's server mode) shared by a web host (gunicorn), an intake host (intake + web queues and the
one beat) and evaluation hosts, each with its own Docker engine and its own worker.

Each host is a network namespace of its own (`ip netns` + a veth pair on a bridge of the cluster,
10.231.<n>.0/24) with a hostname of its own (`unshare --uts`), and its processes run as one
process group per program. Hosts reach each other and the shared services only by TCP addresses
on that bridge; each has its own folder under the cluster root (media, temporary files, staging)
that no other host is told about. An evaluation host's engine has its own data root, exec root,
Unix socket (in the host's folder), pid file, bridge address and address pool, and a cgroup
parent of its own, so that losing the host (`kill_host`) kills every process of it, containers
included. PostgreSQL, Redis and the bridge's address live in the machine's own namespace.

Needs root (netns, dockerd), PostgreSQL's server binaries, redis-server and Docker's dockerd.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from devtools.cluster_services import (
    CLUSTER_BENCHMARK,
    TASKS,
    ClusterPostgres,
    ClusterRedis,
    cgroup_pids,
    engine_argv,
    load_images,
    task_source,
)
from devtools.s3_server import S3Server

__all__ = ["CLUSTER_BENCHMARK", "TASKS", "Cluster", "describe"]

BUCKET = "hab-cluster"
HOST_OCTETS = {"web": 10, "intake": 11, "s3": 20, "eval1": 31, "eval2": 32}
EVAL_HOSTS = ("eval1", "eval2")


def sh(*cmd, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], check=check, capture_output=True, text=True,
                          timeout=timeout)


def _free_subnet() -> int:
    """The first 10.231.<n>.0/24 (n in 1..23) no interface of this machine uses."""
    used = sh("ip", "-4", "-o", "addr").stdout
    for n in range(1, 24):
        if f"10.231.{n}." not in used and f"10.231.{100 + 2 * n}." not in used:
            return n
    raise RuntimeError("no free 10.231.<n>.0/24 subnet for a cluster")


def _wait_port(host: str, port: int, timeout: float, what: str, proc=None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{what} did not listen on {host}:{port} in {timeout} s")


@dataclasses.dataclass
class Program:
    name: str
    proc: subprocess.Popen
    log: Path
    log_from: int = 0  # where this process's lines begin in its (appended) log


class Network:
    """A bridge in the machine's namespace and one namespace (+ veth) per host."""

    def __init__(self, tag: str, n: int):
        self.tag, self.n = tag, n
        self.bridge = f"{tag}br"
        self.gateway = f"10.231.{n}.1"
        self._forward = ["FORWARD", "-i", self.bridge, "-o", self.bridge, "-j", "ACCEPT"]

    def address(self, host: str) -> str:
        return f"10.231.{self.n}.{HOST_OCTETS[host]}"

    def netns(self, host: str) -> str:
        return f"{self.tag}-{host}"

    def veth(self, host: str) -> str:
        return f"{self.tag}{host[:1]}{host[-1]}h"

    def up(self) -> None:
        sh("ip", "link", "add", "name", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        # Docker's FORWARD policy is DROP and bridged frames pass iptables (br_netfilter).
        sh("iptables", "-I", *self._forward)

    def add_host(self, host: str) -> None:
        ns, outer, inner = self.netns(host), self.veth(host), f"{self.tag}{host[:1]}{host[-1]}n"
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
        sh("ip", "link", "set", outer, "master", self.bridge, "up")
        sh("ip", "link", "set", inner, "netns", ns)
        sh("ip", "-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", inner)
        sh("ip", "-n", ns, "link", "set", inner, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "route", "add", "default", "via", self.gateway)

    def down(self) -> None:
        for host in HOST_OCTETS:
            sh("ip", "netns", "del", self.netns(host), check=False)
            sh("ip", "link", "del", self.veth(host), check=False)
        sh("ip", "link", "del", self.bridge, check=False)
        sh("iptables", "-D", *self._forward, check=False)


class Cluster:
    """Start with `start()`, stop with `stop()` (or use it as a context manager)."""

    def __init__(self, root: Path, *, stale_after_s: int = 15, reaper_interval_s: float = 5.0,
                 images_cache: Path | None = None, say=print):
        self.root = Path(root).resolve()
        self.tag = f"hc{os.getpid() % 100000}"
        self.say = say
        self.stale_after_s, self.reaper_interval_s = stale_after_s, reaper_interval_s
        self.images_cache = images_cache
        self.programs: dict[str, Program] = {}
        self.net: Network | None = None
        self.s3: S3Server | None = None
        self.pg = self.redis = None
        self.secret_key = secrets.token_hex(32)
        # One for every host, as production shares it: each worker must draw the same sample.
        self.sample_secret = secrets.token_hex(32)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- addresses ------------------------------------------------------------------------
    @property
    def web_url(self) -> str:
        return f"http://{self.net.address('web')}:8000"

    @property
    def database_url(self) -> str:
        return f"postgres://postgres@{self.net.gateway}:{self.pg.port}/postgres"

    def host_dir(self, host: str) -> Path:
        return self.root / host

    def docker_host(self, host: str) -> str:
        return f"unix://{self.host_dir(host) / 'docker.sock'}"

    def env(self, host: str) -> dict[str, str]:
        """A host's settings: only TCP addresses of the shared services, its own folders."""
        hd = self.host_dir(host)
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "HOME")}
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings", DEBUG="0", SECRET_KEY=self.secret_key,
            VERIFICATION_SAMPLE_SECRET=self.sample_secret,
            ALLOWED_HOSTS=self.net.address("web"), SECURE_SSL_REDIRECT="0",
            SESSION_COOKIE_SECURE="0", CSRF_COOKIE_SECURE="0", SECURE_HSTS_SECONDS="0",
            USE_MANIFEST_STATIC="0", HAB_DEVTOOLS="0", PYTHONUNBUFFERED="1",
            DATABASE_URL=self.database_url, CELERY_BROKER_URL=self.redis.url,
            CACHE_URL=self.redis.url[:-1] + "1", **self.s3.env(BUCKET, timeout_s=5.0),
            TASK_SOURCES=str(self.root / "tasks"), TASK_SOURCES_CACHE=str(hd / "task-sources"),
            MEDIA_ROOT=str(hd / "media"), TMPDIR=str(hd / "tmp"),
            SUBMISSION_STAGING_DIR=str(hd / "staging"), CELERY_FS_DIR=str(hd / "broker"),
            VERIFICATION_CHECKS="regrade", VERIFICATION_HEARTBEAT_S="1",
            VERIFICATION_STALE_AFTER_S=str(self.stale_after_s),
            VERIFICATION_REAPER_INTERVAL_S=str(self.reaper_interval_s),
            VERIFICATION_UNCLAIMED_AFTER_S=str(2 * self.reaper_interval_s),
            INTAKE_REAPER_INTERVAL_S=str(self.reaper_interval_s),
            VERIFICATION_RETRY_BACKOFF_S="1", VERIFICATION_PARALLEL_TRIALS="2",
            VERIFICATION_RUN_PREFIX=f"{self.tag}x", VERIFICATION_SANDBOX_RUNTIME="default",
            # The hosts' own engines register no gVisor: runc is accepted by name, in production
            # mode, as an operator would.
            VERIFICATION_ALLOW_RUNC_WITHOUT_GVISOR="1",
            VERIFICATION_MIN_FREE_DISK_MB="512", WEB_CONCURRENCY="2", SUBMISSION_DAILY_QUOTA="1000",
        )
        if host in EVAL_HOSTS:
            env.update(DOCKER_HOST=self.docker_host(host), VERIFICATION_REAP_ON_START="1")
        else:
            env["DOCKER_HOST"] = "tcp://127.0.0.1:9"  # web and intake have no engine
        return env

    # -- processes --------------------------------------------------------------------------
    def spawn(self, host: str, name: str, argv: list[str], env: dict | None = None) -> Program:
        """`argv` in the host's namespace, with the host's hostname, as its own process group."""
        log = self.host_dir(host) / f"{name}.log"
        log_from = log.stat().st_size if log.exists() else 0
        cmd = ["nsenter", f"--net=/run/netns/{self.net.netns(host)}", "unshare", "--uts", "--",
               "sh", "-c", 'hostname "$0" && exec "$@"', f"{self.tag}-{host}", *argv]
        with open(log, "ab") as out:
            proc = subprocess.Popen(cmd, env=env or self.env(host), stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    cwd=_repo())
        program = Program(f"{host}/{name}", proc, log, log_from)
        self.programs[program.name] = program
        return program

    def manage(self, host: str, *args: str, timeout: float = 600) -> str:
        """`manage.py <args>` run on a host (e.g. the release step), its output."""
        program = self.spawn(host, f"manage-{args[0]}", [sys.executable, "manage.py", *args])
        if program.proc.wait(timeout) != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} on {host} failed: "
                               f"{program.log.read_text()[-3000:]}")
        return program.log.read_text()

    def _stop_program(self, name: str, sig=signal.SIGTERM, grace: float = 30) -> None:
        program = self.programs.pop(name, None)
        if program is None or program.proc.poll() is not None:
            return
        try:
            os.killpg(program.proc.pid, sig)
            program.proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(program.proc.pid, signal.SIGKILL)
            program.proc.wait(30)
        except ProcessLookupError:
            pass

    def worker_argv(self, queues: str, *, beat: bool = False, host: str = "") -> list[str]:
        argv = [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", queues,
                "--pool", "prefork", "--concurrency", "1", "-l", "INFO", "--without-mingle",
                "--without-gossip", "-n", f"{host}@{self.tag}-{host}"]
        if beat:
            argv += ["--beat", "--schedule", str(self.host_dir(host) / "celerybeat-schedule")]
        return argv

    def wait_ready(self, name: str, timeout: float = 240) -> None:
        program = self.programs[name]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if program.proc.poll() is not None:
                raise RuntimeError(f"{name} exited: {program.log.read_text()[-3000:]}")
            if b" ready." in program.log.read_bytes()[program.log_from:]:
                return
            time.sleep(0.3)
        raise RuntimeError(f"{name} not ready in {timeout} s: {program.log.read_text()[-3000:]}")

    # -- start and stop ---------------------------------------------------------------------
    def start(self) -> Cluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.net = Network(self.tag, _free_subnet())
        try:
            self.net.up()
            for host in HOST_OCTETS:
                self.net.add_host(host)
                for sub in ("media", "tmp", "staging"):
                    (self.host_dir(host) / sub).mkdir(parents=True, exist_ok=True)
            task_source(self.root / "tasks")
            self.pg = ClusterPostgres(self.root, self.net.gateway, f"10.231.{self.net.n}.0/24")
            self.pg.start()
            self.redis = ClusterRedis(self.root, self.net.gateway).start()
            self.s3 = S3Server(host=self.net.address("s3"), port=9000, netns=None,
                               log=self.host_dir("s3") / "moto.log")
            self._start_s3()
            self.say(f"cluster {self.tag}: bridge {self.net.bridge} 10.231.{self.net.n}.0/24, "
                     f"PostgreSQL {self.net.gateway}:{self.pg.port}, Redis {self.redis.url}, "
                     f"S3 {self.s3.url}")
            self.manage("web", "migrate", "--no-input")
            self.manage("web", "sync_tasks")
            for host in EVAL_HOSTS:
                self.start_engine(host)
            self.load_images()
            self.start_web()
            self.spawn("intake", "worker", self.worker_argv("intake,web", beat=True,
                                                            host="intake"))
            for host in EVAL_HOSTS:
                self.start_worker(host)
            for name in ("intake/worker", *(f"{h}/worker" for h in EVAL_HOSTS)):
                self.wait_ready(name)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_s3(self) -> None:
        program = self.spawn("s3", "moto", [str(Path(sys.executable).with_name("moto_server")),
                                            "-H", self.s3.host, "-p", str(self.s3.port)])
        self.s3.proc = program.proc
        _wait_port(self.s3.host, self.s3.port, 60, "moto_server", program.proc)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.s3.create_bucket(BUCKET)
                return
            except Exception:  # noqa: BLE001 - listening, not answering yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def start_web(self) -> None:
        env = {**self.env("web"), "GUNICORN_WARM_PATHS": "/healthz"}
        program = self.spawn("web", "gunicorn", [
            sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi",
            "--bind", f"{self.net.address('web')}:8000"], env=env)
        _wait_port(self.net.address("web"), 8000, 120, "gunicorn", program.proc)

    def start_engine(self, host: str) -> None:
        hd = self.host_dir(host)
        i = EVAL_HOSTS.index(host)
        program = self.spawn(host, "dockerd", engine_argv(
            hd, exec_root=f"/run/{self.tag}-{host}", cgroup_parent=self.cgroup_parent(host),
            bip=f"10.231.{100 + 2 * self.net.n + i}.1/24",
            pool=f"10.231.{150 + 2 * self.net.n + i}.0/24"))
        deadline = time.monotonic() + 120
        while sh("docker", "-H", self.docker_host(host), "info", check=False,
                 timeout=30).returncode != 0:
            if program.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dockerd of {host}: {program.log.read_text()[-3000:]}")
            time.sleep(0.5)

    def cgroup_parent(self, host: str) -> str:
        return f"/{self.tag}-{host}"

    def load_images(self) -> None:
        load_images(self, EVAL_HOSTS)

    def start_worker(self, host: str) -> Program:
        return self.spawn(host, "worker", self.worker_argv("evaluation", host=host))

    def kill_host(self, host: str) -> int:
        """The host is lost whole: SIGKILL every process in its namespace (worker, dockerd,
        containerd, shims) and in its engine's cgroup (the containers). Returns how many."""
        pids = set(sh("ip", "netns", "pids", self.net.netns(host)).stdout.split())
        pids |= set(cgroup_pids(self.cgroup_parent(host)))
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        for name in [n for n in self.programs if n.startswith(f"{host}/")]:
            program = self.programs.pop(name)
            program.proc.wait(30)
        return len(pids)

    def restart_host(self, host: str) -> Program:
        self.start_engine(host)
        program = self.start_worker(host)
        self.wait_ready(program.name)
        return program

    def stop(self) -> None:
        for name in [n for n in self.programs if not n.endswith("/dockerd")]:
            self._stop_program(name)
        for name in [n for n in self.programs if n.endswith("/dockerd")]:
            self._stop_program(name, grace=60)
        if self.net is not None:
            for host in EVAL_HOSTS:
                if cgroup_pids(self.cgroup_parent(host)):  # containers outlived their engine
                    self.kill_host(host)
                shutil.rmtree(f"/run/{self.tag}-{host}", ignore_errors=True)
            self.net.down()
        for service in (self.redis, self.pg):
            if service is not None:
                service.stop()
        self._cleanup_host_state()

    def _cleanup_host_state(self) -> None:
        """What a lost engine leaves in the machine's namespaces: mounts under the cluster's
        root (its data root) and its empty cgroup folders."""
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
        for point in sorted((m for m in mounts if m.startswith(f"{self.root}/")), reverse=True):
            sh("umount", "-l", point, check=False)
        for host in EVAL_HOSTS:
            for base in Path("/sys/fs/cgroup").glob(f"*/{self.cgroup_parent(host).lstrip('/')}"):
                # A cgroup folder goes with rmdir once empty of processes, children first.
                for d in sorted((p for p in base.rglob("*") if p.is_dir()), reverse=True):
                    sh("rmdir", d, check=False)
                sh("rmdir", base, check=False)


def _repo() -> Path:
    return Path(__file__).resolve().parents[1]


def describe(cluster: Cluster) -> str:
    return json.dumps({
        "web": cluster.web_url, "database": cluster.database_url, "redis": cluster.redis.url,
        "s3": cluster.s3.url, "bucket": BUCKET,
        "hosts": {h: {"netns": cluster.net.netns(h), "address": cluster.net.address(h)}
                  for h in HOST_OCTETS},
        "engines": {h: cluster.docker_host(h) for h in EVAL_HOSTS},
        "programs": {n: p.proc.pid for n, p in cluster.programs.items()},
    }, indent=2)
