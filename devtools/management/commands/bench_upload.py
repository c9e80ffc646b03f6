"""Measure the web process's memory while it receives a large upload.

Starts gunicorn (one sync worker) on this settings/database, uploads a tar.gz of the given size
(incompressible bytes inside a job-directory shape) through the real API with a token, and
prints the worker's resident memory before and its peak (VmHWM) after, as figures and ratios.
The upload is then refused by validation (it is not a real Harbor run): what is measured is the
streaming path (multipart parsing to disk, hashing, safe extraction)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from submissions.client import upload
from submissions.services import token_issue


def _rss_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _worker_pid(master: int) -> int:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return int(children[0]) if children else master


class Command(BaseCommand):
    help = "Upload a large archive to a real gunicorn worker and print its memory figures."

    def add_arguments(self, parser):
        parser.add_argument("--mb", type=int, default=200)

    def handle(self, *args, mb: int, **options):
        from django.contrib.auth import get_user_model

        user, _ = get_user_model().objects.get_or_create(username="bench-upload",
                                                         defaults={"is_staff": True})
        _, token = token_issue(user=user, base="bench")
        with tempfile.TemporaryDirectory() as tmp:
            archive = self._archive(Path(tmp), mb)
            archive_mib = archive.stat().st_size / 1024 / 1024
            port = self._free_port()
            env = dict(os.environ)
            server = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "config.wsgi", "-b", f"127.0.0.1:{port}",
                 "--workers", "1", "--timeout", "600"],
                cwd=settings.BASE_DIR, env=env, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            try:
                self._wait(port)
                worker = _worker_pid(server.pid)
                # Warm up: the first request imports the apps (numpy, scipy, DRF...); measure
                # the upload only, from a reset peak (clear_refs 5 resets VmHWM).
                small = Path(tmp) / "small.tar.gz"
                with tarfile.open(small, "w:gz") as tar:
                    tar.add(Path(tmp) / "job", arcname="job", recursive=False)
                try:
                    upload(f"http://127.0.0.1:{port}", token, small, None, "warm",
                           out=open(os.devnull, "w"))
                except SystemExit:
                    pass
                Path(f"/proc/{worker}/clear_refs").write_text("5")
                before = _rss_kb(worker, "VmRSS")
                started = time.monotonic()
                refusal = "accepted"
                try:
                    upload(f"http://127.0.0.1:{port}", token, archive, None, "bench",
                           out=open(os.devnull, "w"))
                except SystemExit as exc:  # the refusal is expected
                    refusal = str(exc)[:120]
                elapsed = time.monotonic() - started
                peak = _rss_kb(worker, "VmHWM")
            finally:
                server.send_signal(signal.SIGTERM)
                server.wait(timeout=30)
        self.stdout.write(f"archive: {archive_mib:.1f} MiB uploaded in {elapsed:.1f} s ({refusal})")
        self.stdout.write(f"worker RSS before: {before / 1024:.1f} MiB")
        self.stdout.write(f"worker peak RSS (VmHWM): {peak / 1024:.1f} MiB")
        self.stdout.write(f"peak growth / archive size: {(peak - before) / 1024 / archive_mib:.3f}")

    def _archive(self, tmp: Path, mb: int) -> Path:
        payload = tmp / "job" / "trial__x" / "agent" / "big.bin"
        payload.parent.mkdir(parents=True)
        mb -= 1  # leave room for tar headers and gzip framing under the limit
        with open(payload, "wb") as fh:
            for _ in range(mb):
                fh.write(os.urandom(1024 * 1024))
        out = tmp / "run.tar.gz"
        with tarfile.open(out, "w:gz", compresslevel=1) as tar:
            tar.add(tmp / "job", arcname="job")
        payload.unlink()
        return out

    def _free_port(self) -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def _wait(self, port: int) -> None:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("gunicorn did not start")
