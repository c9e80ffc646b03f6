"""R14 load measurement for ``manage.py bench_load`` (reliability matrix row R14).

Serves a checkout of the site (this one, or ``--tree`` for a before/after comparison: each
tree migrates its own throwaway database) with real gunicorn and ``config/gunicorn.py``, a real
intake worker when the tree has one, on a Redis broker with queues of its own, and PostgreSQL.
Then, on loopback: 200 readers (``wrk``: 100 keep-alive connections on ``/api/v1/leaderboard/``
and 100 on ``/leaderboard.csv``, one request at a time each), beside 5 connections on each
one's static copy (the same bytes served by WhiteNoise in the same gunicorn: the floor), first
alone, then while 10 valid Harbor runs of 50 MB are uploaded at once, until every upload has its
verdict (queued or refused). Prints each group's p50/p95/p99/max, 5xx and other errors, the API's
p95 against the 300 ms budget and against its floor, each upload's acceptance latency (request
sent to answer) and verdict latency, and the web workers' peak memory growth under 20
concurrent CSV downloads. ``--intake-nice`` runs the intake worker niced.

The archives are valid runs of healthagentbench-synthetic@1.0 (the Harbor job builder the tests
share, devtools/harbor_fixtures.py), padded with a binary artifact (an image output: skipped by
the secret scan) and a text agent log (scanned), so each upload costs the full intake.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import shutil
import signal
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

from devtools.bench import web
from devtools.bench.wsgi import FLOOR_PREFIX  # noqa: F401 - bench_load's floor paths
from devtools.harbor_fixtures import HarborJobBuilder
from submissions.client import upload

# A few connections reading static copies of the read paths' bytes beside the readers: the
# latency of a response that costs the site nothing, under the same load at the same time.
FLOOR_CONNECTIONS = 5
READ_PATHS = ("/api/v1/leaderboard/?benchmark=healthagentbench@1.0",
              "/leaderboard.csv?benchmark=healthagentbench@1.0")
# The submitter client polls every 5 s; the bench every second (verdict times to the second).
POLL_S = 1.0
VERDICTS = ("queued", "refused", "rejected", "verifying", "verified", "consistent", "discrepancy")


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


# wrk (Debian's, C) is the reader: 200 Python threads in this process measured their own GIL
# and CPU as much as the server. Each wrk prints one line when it stops (SIGINT or -d): its
# requests, 5xx, non-2xx/3xx, socket errors and latency percentiles in microseconds.
_WRK_SCRIPT = """
fivexx = 0
local threads = {}
function setup(thread) table.insert(threads, thread) end
function response(status, headers, body)
  if status >= 500 then fivexx = fivexx + 1 end
end
function done(summary, latency, requests)
  local five = 0
  for _, t in ipairs(threads) do five = five + t:get("fivexx") end
  local e = summary.errors
  io.write(string.format("R14WRK %d %d %d %d %d %d %d %d %d %d %d\\n",
    summary.requests, summary.duration, five, e.status, e.connect + e.read + e.write,
    e.timeout, latency:percentile(50), latency:percentile(95), latency:percentile(99),
    latency.max, summary.bytes))
end
"""


@dataclass
class WrkResult:
    path: str
    connections: int
    requests: int
    seconds: float
    fivexx: int
    non_2xx_3xx: int
    socket_errors: int
    timeouts: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float

    @property
    def errors(self) -> int:
        return self.non_2xx_3xx + self.socket_errors + self.timeouts

    def line(self, label: str) -> str:
        return (f"{label} {self.path.split('?')[0]} ({self.connections} connections): "
                f"n={self.requests} ({self.requests / max(self.seconds, 1e-9):.0f}/s) "
                f"p50 {self.p50_ms:.1f} ms, p95 {self.p95_ms:.1f} ms, p99 {self.p99_ms:.1f} ms, "
                f"max {self.max_ms:.0f} ms; 5xx {self.fivexx}, errors {self.errors}")


class WrkReaders:
    """One ``wrk`` per (path, connections), each with keep-alive connections reading that
    path one request after another, from start until ``stop()`` (SIGINT: wrk prints its
    summary and exits)."""

    def __init__(self, port: int, readers: list[tuple[str, int]], script_dir: Path):
        wrk = shutil.which("wrk")
        if wrk is None:
            raise RuntimeError("wrk is not installed: apt-get install wrk (Debian)")
        script = script_dir / "r14.lua"
        script.write_text(_WRK_SCRIPT)
        self.procs = [
            (path, n, subprocess.Popen(
                [wrk, "-t", "1", "-c", str(n), "-d", "24h", "--timeout", "60s", "-s",
                 str(script), f"http://127.0.0.1:{port}{path}"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            for path, n in readers]

    def stop(self) -> list[WrkResult]:
        for _path, _n, proc in self.procs:
            proc.send_signal(signal.SIGINT)
        return [_wrk_result(path, n, proc.communicate(timeout=120)[0])
                for path, n, proc in self.procs]

    @classmethod
    def run_for(cls, port: int, readers: list[tuple[str, int]], script_dir: Path,
                seconds: float) -> list[WrkResult]:
        running = cls(port, readers, script_dir)
        time.sleep(seconds)
        return running.stop()


def _wrk_result(path: str, connections: int, out: str) -> WrkResult:
    line = next((ln for ln in out.splitlines() if ln.startswith("R14WRK ")), None)
    if line is None:
        raise RuntimeError(f"wrk on {path} printed no summary: {out[-1000:]}")
    (requests, duration_us, fivexx, non2xx, sock, timeouts, p50, p95, p99, mx,
     _bytes) = (int(float(v)) for v in line.split()[1:])
    return WrkResult(path, connections, requests, duration_us / 1e6, fivexx, non2xx, sock,
                     timeouts, p50 / 1000, p95 / 1000, p99 / 1000, mx / 1000)


def build_archive(out: Path, tasks: dict[str, str], *, n: int, mb: int, text_mb: int) -> Path:
    """A valid Harbor run (3 attempts of every task) padded to about ``mb`` MB compressed:
    ``text_mb`` MB of agent log (words, scanned for secrets) and the rest as a binary artifact."""
    root = out / f"run-{n}"
    HarborJobBuilder(tasks, agent="codex", model="openai/gpt-5.5",
                     job_name=f"2026-12-03__10-00-{n:02d}").build(root)
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
        time.sleep(POLL_S)
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

    def __init__(self, *, tree: Path, env: dict, queue: str, concurrency: int, log: Path,
                 nice: int = 0):
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(
            ["nice", "-n", str(nice), sys.executable, "-m", "celery", "-A", "config", "worker",
             "-Q", queue, "--concurrency", str(concurrency), "--without-mingle",
             "--without-gossip", "-l", "WARNING", "-n", f"bench-intake-{uuid.uuid4().hex[:6]}@%h"],
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
