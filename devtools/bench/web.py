"""gunicorn for bench_scale, and the clients that measure it (stdlib HTTP, Debian's wrk)."""

from __future__ import annotations

import http.client
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gunicorn:
    """``gunicorn -c config/gunicorn.py -w 2`` (the site's own settings: threaded workers) with
    DEBUG off on a free port, stopped (SIGTERM, then SIGKILL) on exit. ``worker_class="sync"``
    serves as gunicorn's default does (one request per worker), for comparisons."""

    def __init__(self, *, app: str, env: dict[str, str], cwd: Path, workers: int = 2,
                 timeout_s: int = 120, worker_class: str | None = None, ready_s: float = 60):
        self.port = free_port()
        args = ["-k", worker_class] if worker_class else []
        self.server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", str(Path(cwd) / "config" / "gunicorn.py"),
             app, "-b", f"127.0.0.1:{self.port}", *args,
             "--workers", str(workers), "--timeout", str(timeout_s), "--backlog", "2048"],
            cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._wait(ready_s)

    def _wait(self, ready_s: float) -> None:
        deadline = time.monotonic() + ready_s
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError("gunicorn exited: " + self.server.stderr.read().decode()[-2000:])
            try:
                status, _ = get(self.port, "/healthz")
                if status == 200:
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"gunicorn did not answer /healthz within {ready_s:.0f} s")

    def worker_pids(self) -> list[int]:
        path = Path(f"/proc/{self.server.pid}/task/{self.server.pid}/children")
        return [int(p) for p in path.read_text().split()]

    def __enter__(self) -> Gunicorn:
        return self

    def __exit__(self, *exc) -> None:
        self.server.send_signal(signal.SIGTERM)
        try:
            self.server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def get_streamed(port: int, path: str) -> tuple[int, int, float]:
    """Status, bytes and seconds of a full download read in 64 KiB chunks (never held whole)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    started = time.perf_counter()
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        n = 0
        while chunk := response.read(65536):
            n += len(chunk)
        return response.status, n, time.perf_counter() - started
    finally:
        conn.close()


def p50_pair_ms(port: int, path: str, floor_path: str, *, budget_s: float = 6.0,
                max_n: int = 61, min_n: int = 15) -> tuple[float, float, int]:
    """Median latency (ms) of sequential GETs of a page and of its floor, taken alternately
    (page, floor, page, ...) so that both medians see the same load on a shared machine (one
    warm-up GET of each first), and the page's body size in bytes."""
    samples: dict[str, list[float]] = {path: [], floor_path: []}
    size = 0
    for p in samples:
        status, _ = get(port, p)
        if status != 200:
            raise RuntimeError(f"GET {p} answered {status}")
    spent_from = time.monotonic()
    while len(samples[path]) < max_n and (
            len(samples[path]) < min_n or time.monotonic() - spent_from < budget_s):
        for p, times in samples.items():
            started = time.perf_counter()
            status, body = get(port, p)
            times.append((time.perf_counter() - started) * 1000)
            if status != 200:
                raise RuntimeError(f"GET {p} answered {status}")
            if p == path:
                size = len(body)
    return statistics.median(samples[path]), statistics.median(samples[floor_path]), size


def rss_kb(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def reset_peak(pid: int) -> None:
    """Reset VmHWM to the current RSS (clear_refs 5), so a peak is measured from here."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def drain(port: int, *, timeout_s: float = 300.0) -> None:
    """Wait until the connections a load run left queued in the backlog have been served (a
    sync worker still answers each of them), so the next measurement starts from idle."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        started = time.perf_counter()
        get(port, "/healthz")
        if time.perf_counter() - started < 0.05:
            return
    raise RuntimeError("the server did not return to idle after the load run")


@dataclass(frozen=True)
class LoadResult:
    requests: int
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    detail: str


_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    return float(m.group(1)) * _UNITS_MS[m.group(2)] if m else float("nan")


def wrk_load(port: int, path: str, *, connections: int = 64, seconds: int = 30) -> LoadResult:
    """``wrk -c <connections> -d <seconds>s --latency``: requests/s, p50, p99 and every error
    (socket connect/read/write/timeout errors and non-2xx/3xx responses)."""
    wrk = shutil.which("wrk")
    if wrk is None:
        raise RuntimeError("wrk is not installed: apt-get install wrk (Debian)")
    out = subprocess.run(
        [wrk, "-t", "2", "-c", str(connections), "-d", f"{seconds}s", "--timeout", "60s",
         "--latency", f"http://127.0.0.1:{port}{path}"],
        capture_output=True, text=True, check=True, timeout=seconds + 120).stdout
    drain(port)
    return parse_wrk(out)


def parse_wrk(out: str) -> LoadResult:
    """The figures of one ``wrk --latency`` report."""
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    # The distribution's own lines: "86.50%" in the thread stats above also ends in "50%".
    p50 = re.search(r"^\s*50%\s+(\S+)", out, flags=re.M)
    p99 = re.search(r"^\s*99%\s+(\S+)", out, flags=re.M)
    errors = 0
    socket_errors = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if socket_errors:
        errors += sum(int(g) for g in socket_errors.groups())
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        errors += int(non2xx.group(1))
    return LoadResult(requests, rps, _ms(p50.group(1)) if p50 else float("nan"),
                      _ms(p99.group(1)) if p99 else float("nan"), errors,
                      socket_errors.group(0) if socket_errors else "")
