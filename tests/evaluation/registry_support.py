"""An OCI registry and a second Docker engine for the registry tests.

- ``ImageRegistry``: Debian's ``docker-registry`` (the CNCF distribution server, 2.8) serving a
  temporary directory on a free loopback port (the Docker engines treat 127.0.0.0/8 as an
  insecure registry, so plain HTTP needs no engine configuration). Installed with
  scripts/apt-install when missing, as scripts/ensure-docker installs the engine.
- ``SecondEngine``: a dockerd with nothing in it: its own data root, exec root, pid file, socket,
  configuration file (not the machine's /etc/docker/daemon.json), cgroup parent, and its own
  bridge created with ``ip link add`` and a distinct address pool, with ``--iptables=false``, so
  the machine's shared engine, its docker0 and its rules are untouched (never ``--bridge none``
  in the host's network namespace: that deletes the shared docker0). It shares the host's
  network namespace so it reaches the registry on loopback. Callers pass
  ``DOCKER_HOST=engine.host`` to the one subprocess that should use it, never to os.environ.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REGISTRY_BIN = Path("/usr/bin/docker-registry")
MANIFEST_TYPES = ", ".join([
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
    raise AssertionError(f"{what} within {timeout:.0f} s\n{tail}")


def ensure_registry_binary() -> Path:
    if not REGISTRY_BIN.exists():
        done = subprocess.run(  # noqa: S603 - the repository's own installer
            [str(REPO / "scripts" / "apt-install"), "registry-test",
             "apt-get install docker-registry", "docker-registry"],
            capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0 or not REGISTRY_BIN.exists():
            pytest.fail(f"Debian's docker-registry is needed: {done.stdout}{done.stderr}",
                        pytrace=False)
    return REGISTRY_BIN


class ImageRegistry:
    """`docker-registry serve` on 127.0.0.1:<free port>, storing in ``root``."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = self.root / "registry.log"

    def start(self) -> ImageRegistry:
        binary = ensure_registry_binary()
        (self.root / "store").mkdir(parents=True, exist_ok=True)
        config = self.root / "config.yml"
        config.write_text(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {self.root / 'store'}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: {self.address}\n  secret: {uuid.uuid4().hex}\n")
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(  # noqa: S603 - Debian's binary, our config
                [str(binary), "serve", str(config)], stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        _wait(self._answers, 30, f"docker-registry answering on {self.address}", self.log)
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.address}/v2/", timeout=2):  # noqa: S310
                return True
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    def manifest(self, ref: str) -> dict:
        """The manifest of ``<address>/<repo>@sha256:...`` as the registry serves it."""
        repo, _, digest = ref.removeprefix(self.address + "/").partition("@")
        request = urllib.request.Request(f"http://{self.address}/v2/{repo}/manifests/{digest}",
                                         headers={"Accept": MANIFEST_TYPES})
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - loopback
            return json.load(response)

    def pushed_bytes(self, refs: list[str]) -> int:
        """Bytes the registry holds for these images: every distinct blob (compressed layers
        and configs) once, as a pull downloads them."""
        blobs = {}
        for ref in refs:
            manifest = self.manifest(ref)
            for blob in [manifest["config"], *manifest["layers"]]:
                blobs[blob["digest"]] = blob["size"]
        return sum(blobs.values())


class SecondEngine:
    """A dockerd with nothing built or pulled (see the module docstring)."""

    def __init__(self, root: Path, *, index: int = 0):
        self.id = uuid.uuid4().hex[:6]
        self.root = Path(root)
        self.bridge = f"habrg{self.id}"
        self.exec_root = Path(f"/run/hab-registry-{self.id}")
        self.socket = Path(f"/run/hab-registry-{self.id}.sock")
        self.host = f"unix://{self.socket}"
        # 10.213.<index>.1/24 for its bridge, 10.214.0.0/16 for the networks compose creates:
        # outside the shared engine's pools (172.17-31, 192.168), disjoint between engines.
        self.bip = f"10.213.{index}.1/24"
        self.pool = f"10.{214 + index}.0.0/16"
        self.proc: subprocess.Popen | None = None
        self.log = self.root / "dockerd.log"

    def start(self) -> SecondEngine:
        if shutil.which("dockerd") is None or shutil.which("ip") is None:
            pytest.fail("a second engine needs dockerd and ip (scripts/ensure-docker)",
                        pytrace=False)
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "daemon.json").write_text("{}\n")
        subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"], check=True)  # noqa: S603, S607
        subprocess.run(["ip", "addr", "add", self.bip, "dev", self.bridge], check=True)  # noqa: S603, S607
        subprocess.run(["ip", "link", "set", self.bridge, "up"], check=True)  # noqa: S603, S607
        argv = ["dockerd", "--config-file", str(self.root / "daemon.json"),
                "--data-root", str(self.root / "data"), "--exec-root", str(self.exec_root),
                "--pidfile", str(self.root / "dockerd.pid"), "-H", self.host,
                "--bridge", self.bridge, "--iptables=false", "--ip-masq=false",
                "--ip-forward=false", "--default-address-pool", f"base={self.pool},size=24",
                "--cgroup-parent", f"hab-registry-{self.id}", "--storage-driver", "overlay2"]
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,  # noqa: S603
                                         start_new_session=True)
        _wait(lambda: self.docker("version", check=False).returncode == 0, 60,
              f"the second engine answering on {self.socket}", self.log)
        return self

    def docker(self, *args: str, check: bool = True, timeout: float = 600):
        return subprocess.run(["docker", "-H", self.host, *args],  # noqa: S603, S607
                              capture_output=True, text=True, timeout=timeout, check=check)

    def images(self) -> list[dict]:
        out = self.docker("images", "--digests", "--format", "{{json .}}").stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def stop(self) -> None:
        """Stop the engine this object started (its own pid), remove its bridge and data."""
        if self.proc is not None and self.proc.poll() is None:
            ids = self.docker("ps", "-aq", check=False).stdout.split()
            if ids:
                self.docker("rm", "-f", *ids, check=False)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, check=False)  # noqa: S603, S607
        shutil.rmtree(self.root / "data", ignore_errors=True)
        shutil.rmtree(self.exec_root, ignore_errors=True)
