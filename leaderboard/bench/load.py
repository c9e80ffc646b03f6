"""R14 load measurement for ``manage.py bench_load`` (reliability matrix row R14).

Serves a checkout of the site (this one, or ``--tree`` for a before/after comparison: each
tree migrates its own throwaway database) with real gunicorn and ``config/gunicorn.py``, a real
intake worker when the tree has one, on a Redis broker with queues of its own, and PostgreSQL.
Then, on loopback: 200 readers (``/api/v1/leaderboard/`` and ``/leaderboard.csv``, one request
at a time each) first alone, then while 10 valid Harbor runs of 50 MB are uploaded at once,
until every upload has its verdict (queued or refused). Prints the readers' p50/p95/max and 5xx,
each upload's acceptance latency (request sent to answer) and verdict latency, and the web
workers' peak memory growth under 20 concurrent CSV downloads.

The archives are valid runs of healthagentbench-synthetic@1.0 (the test suite's Harbor job
builder, tests/submissions/harbor_fixtures.py: this is a developer tool run from a clone),
padded with a binary artifact (an image output: skipped by the secret scan) and a text agent log
(scanned), so each upload costs the full intake.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from leaderboard.bench import web
from submissions.client import upload

READ_PATHS = ("/api/v1/leaderboard/?benchmark=healthagentbench@1.0",
              "/leaderboard.csv?benchmark=healthagentbench@1.0")
VERDICTS = ("queued", "refused", "rejected", "verifying", "verified", "checked", "discrepancy")


@dataclass
class Reads:
    times: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, status: int | None, elapsed: float, error: str = "") -> None:
        with self.lock:
            self.times.append(elapsed)
            if status is not None:
                self.statuses.append(status)
            if error:
                self.errors.append(error)

    def line(self, label: str) -> str:
        if not self.times:
            return f"{label}: no requests"
        ms = sorted(t * 1000 for t in self.times)
        fivexx = sum(1 for s in self.statuses if s >= 500)
        return (f"{label}: n={len(ms)} p50 {_pct(ms, .5):.0f} ms, p95 {_pct(ms, .95):.0f} ms, "
                f"max {ms[-1]:.0f} ms, 5xx {fivexx}, other errors "
                f"{len(self.errors) + sum(1 for s in self.statuses if 400 <= s < 500)}")


def _pct(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(round(q * (len(sorted_values) - 1))))]


def _get(port: int, path: str, reads: Reads) -> None:
    started = time.perf_counter()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            while response.read(65536):
                pass
            reads.add(response.status, time.perf_counter() - started)
        finally:
            conn.close()
    except OSError as exc:
        reads.add(None, time.perf_counter() - started, f"{type(exc).__name__}: {exc}")


def read_until(port: int, *, readers: int, stop: threading.Event, reads: Reads,
               at_least: int = 1) -> None:
    """``readers`` clients each GET the read paths one after another until ``stop`` is set
    (each does at least ``at_least`` requests)."""

    def reader(i: int) -> None:
        n = 0
        while n < at_least or not stop.is_set():
            _get(port, READ_PATHS[(i + n) % len(READ_PATHS)], reads)
            n += 1

    with ThreadPoolExecutor(max_workers=readers) as pool:
        for f in [pool.submit(reader, i) for i in range(readers)]:
            f.result()


def build_archive(out: Path, tasks: dict[str, str], *, n: int, mb: int, text_mb: int) -> Path:
    """A valid Harbor run (3 attempts of every task) padded to about ``mb`` MB compressed:
    ``text_mb`` MB of agent log (words, scanned for secrets) and the rest as a binary artifact."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.submissions.harbor_fixtures import build_job_dir

    root = out / f"run-{n}"
    build_job_dir(root, tasks, attempts=3, agent="codex", model="openai/gpt-5.5",
                  job_name=f"2026-12-03__10-00-{n:02d}")
    agent = next(p for p in sorted(root.rglob("agent")) if p.is_dir())
    rng = random.Random(n)
    words = [f"{rng.getrandbits(24):06x}" for _ in range(4096)]
    with open(agent / "agent.log", "w") as fh:
        for _ in range(text_mb * 64):  # 16 KiB blocks of log lines
            fh.write("\n".join(" ".join(rng.choices(words, k=16)) for _ in range(150)) + "\n")
    with open(agent / "screenshot.bin", "wb") as fh:
        fh.write(b"\x89PNG\r\n\x1a\n\0")
        for _ in range(max(1, mb - text_mb // 2)):
            fh.write(os.urandom(1 << 20))
    archive = out / f"run-{n}.tar.gz"
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        tar.add(root, arcname=root.name)
    return archive


@dataclass
class Upload:
    status: str = ""
    accepted_s: float = 0.0
    verdict_s: float = 0.0
    answer: dict = field(default_factory=dict)


def upload_and_follow(port: int, token: str, archive: Path, meta: Path) -> Upload:
    """POST the archive (streamed, as the submitter client does), then poll its status until a
    verdict. Acceptance: request start to answer; verdict: request start to queued/refused."""
    result = Upload()
    started = time.perf_counter()
    try:
        body = upload(f"http://127.0.0.1:{port}", token, archive, meta, uuid.uuid4().hex,
                      out=open(os.devnull, "w"))
    except SystemExit as exc:  # a refusal in the request (the synchronous intake's 400)
        result.accepted_s = result.verdict_s = time.perf_counter() - started
        result.status = "refused in the request"
        result.answer = {"error": str(exc)[:300]}
        return result
    result.accepted_s = time.perf_counter() - started
    result.answer = body
    status = body.get("status", "")
    while status not in VERDICTS:
        time.sleep(0.5)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            conn.request("GET", f"/api/v1/submissions/{body['id']}/",
                         headers={"Authorization": f"Token {token}"})
            status = json.loads(conn.getresponse().read()).get("status", "")
        finally:
            conn.close()
    result.status = status
    result.verdict_s = time.perf_counter() - started
    return result


class IntakeWorker:
    """``celery -A config worker -Q <intake queue>`` from the served tree (stopped on exit)."""

    def __init__(self, *, tree: Path, env: dict, queue: str, concurrency: int, log: Path):
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", queue,
             "--concurrency", str(concurrency), "--without-mingle", "--without-gossip",
             "-l", "WARNING", "-n", f"bench-intake-{uuid.uuid4().hex[:6]}@%h"],
            cwd=tree, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def __enter__(self) -> IntakeWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def csv_memory(server: web.Gunicorn, *, clients: int = 20) -> float:
    """Peak RSS growth (MB) of the web workers while ``clients`` download /leaderboard.csv at
    once (streamed: flat)."""
    workers = server.worker_pids()
    for pid in workers:
        web.reset_peak(pid)
    before = {pid: web.rss_kb(pid) for pid in workers}
    reads = Reads()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        for f in [pool.submit(_get, server.port, READ_PATHS[1], reads) for _ in range(clients)]:
            f.result()
    return max(web.rss_kb(pid, "VmHWM") - before[pid] for pid in workers) / 1024


def summary(uploads: list[Upload]) -> list[str]:
    accepted = [u.accepted_s for u in uploads]
    verdict = [u.verdict_s for u in uploads]
    statuses: dict[str, int] = {}
    for u in uploads:
        statuses[u.status] = statuses.get(u.status, 0) + 1
    return [
        f"uploads accepted (request sent -> answer): p50 {statistics.median(accepted):.2f} s, "
        f"max {max(accepted):.2f} s",
        f"uploads' verdict (request sent -> queued/refused): p50 "
        f"{statistics.median(verdict):.1f} s, max {max(verdict):.1f} s; {statuses}",
    ]
