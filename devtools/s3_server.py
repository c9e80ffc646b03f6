"""A real S3-compatible server for tests and the local cluster: moto's server mode (PyPI
`moto[server]`, a dev dependency), run as its own process group on a TCP port. It keeps its
objects in memory, so an outage is simulated by stopping the process (SIGSTOP: the port still
accepts connections and nothing answers, the worst case for a client) and resuming it (SIGCONT)
rather than by killing it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ACCESS_KEY = "hab-test-access"
SECRET_KEY = "hab-test-secret"
REGION = "us-east-1"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class S3Server:
    def __init__(self, *, host: str = "127.0.0.1", port: int | None = None,
                 log: Path | None = None, netns: str | None = None):
        self.host, self.port = host, port or free_port(host)
        self.log, self.netns = log, netns
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 60) -> S3Server:
        exe = Path(sys.executable).with_name("moto_server")
        cmd = [str(exe), "-H", self.host, "-p", str(self.port)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.proc.returncode}")
            try:
                self.client().list_buckets()
                return self
            except Exception:  # noqa: BLE001 - not listening yet
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"moto_server did not answer on {self.url} in {timeout} s")

    def client(self, timeout: float = 5.0):
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=self.url, region_name=REGION,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                            config=Config(connect_timeout=timeout, read_timeout=timeout,
                                          retries={"max_attempts": 1}))

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                        Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def env(self, bucket: str, timeout_s: float = 10.0) -> dict[str, str]:
        """The site's settings (config/settings.py) for this store."""
        return {"USE_S3": "1", "S3_BUCKET": bucket, "S3_ENDPOINT_URL": self.url,
                "S3_REGION": REGION, "S3_ACCESS_KEY_ID": ACCESS_KEY,
                "S3_SECRET_ACCESS_KEY": SECRET_KEY, "S3_TIMEOUT_S": str(timeout_s)}

    def storage_setting(self, bucket: str, timeout_s: float = 10.0) -> dict:
        """STORAGES["default"] as config/settings.py builds it from env()."""
        from botocore.config import Config

        return {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": {
            "bucket_name": bucket, "endpoint_url": self.url, "region_name": REGION,
            "access_key": ACCESS_KEY, "secret_key": SECRET_KEY, "default_acl": "private",
            "querystring_auth": True, "file_overwrite": False,
            "client_config": Config(connect_timeout=timeout_s, read_timeout=timeout_s,
                                    retries={"max_attempts": 3, "mode": "standard"})}}

    def pause(self) -> None:
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGCONT)
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
