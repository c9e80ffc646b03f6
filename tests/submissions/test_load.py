"""R14 (reliability matrix): readers and uploads at once on real gunicorn (the production
command: sync workers, DEBUG off) over loopback, against the test database. Bounded: a fixed
number of requests, each with a timeout. Prints latency percentiles; asserts on errors only
(speed targets are measured by benchmark commands, never asserted here)."""

import io
import os
import random
import secrets
import statistics
import tarfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPConnection
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml
from django.core.management import call_command
from django.db import connection

from devtools.bench.web import Gunicorn
from submissions.services import token_issue
from devtools.harbor_fixtures import HarborJobBuilder, build_metadata

READERS = int(os.environ.get("HAB_LOAD_READERS", "200"))
UPLOADS = int(os.environ.get("HAB_LOAD_UPLOADS", "10"))
UPLOAD_MB = int(os.environ.get("HAB_LOAD_UPLOAD_MB", "4"))
REQUESTS_PER_READER = int(os.environ.get("HAB_LOAD_REQUESTS", "1"))
# Readers start this long after the uploads (0: all at once), to measure reads while uploads
# are being received rather than before them.
READER_DELAY_S = float(os.environ.get("HAB_LOAD_READER_DELAY_S", "0"))
READ_PATHS = ["/?benchmark=healthagentbench@1.0",
              "/api/v1/leaderboard/?benchmark=healthagentbench@1.0",
              "/leaderboard.csv?benchmark=healthagentbench@1.0"]
REPO = Path(__file__).resolve().parents[2]


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = quote(db["USER"] or "postgres")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"])
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _archive(tmp_path: Path, tasks: dict, n: int) -> bytes:
    """A valid Harbor run padded with an agent log of UPLOAD_MB of words (so it compresses
    like a log, not like zeros)."""
    root = tmp_path / f"upload-{n}"
    HarborJobBuilder(tasks, agent="codex", model="openai/gpt-5.5",
                     job_name=f"2026-12-02__09-18-{n:02d}").build(root)
    trial = next(p for p in sorted(root.rglob("agent")) if p.is_dir())
    with open(trial / "padding.log", "w") as fh:
        for _ in range(UPLOAD_MB):  # 1 MiB blocks: longer than gzip's 32 KiB window
            fh.write(_words_block())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=path.relative_to(root).as_posix(), recursive=False)
    return buf.getvalue()


_BLOCK: list[str] = []


def _words_block() -> str:
    if not _BLOCK:
        rng = random.Random(14)
        words = [f"{rng.getrandbits(24):06x}" for _ in range(4096)]
        lines, size = [], 0
        while size < 1 << 20:
            line = " ".join(rng.choices(words, k=16)) + "\n"
            lines.append(line)
            size += len(line)
        _BLOCK.append("".join(lines))
    return _BLOCK[0]


def _multipart(archive: bytes, meta: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = []
    for field, name, data in (("archive", "run.tar.gz", archive),
                              ("metadata", "metadata.yaml", meta)):
        parts.append(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; "
                     f"filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                     .encode() + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), boundary


def _request(port, method, path, body=None, headers=None, timeout=120):
    t0 = time.perf_counter()
    conn = HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        response.read()
        return response.status, time.perf_counter() - t0
    finally:
        conn.close()


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] * 1000


@pytest.fixture
def served(transactional_db, tmp_path, owner):
    t0 = time.perf_counter()
    call_command("load_demo", verbosity=0)
    t1 = time.perf_counter()
    call_command("sync_tasks", verbosity=0)
    print(f"\nsetup: load_demo {t1 - t0:.1f} s, sync_tasks {time.perf_counter() - t1:.1f} s")
    from evaluation.models import BenchmarkVersion

    bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    tasks = {t.name: t.content_digest for t in bv.tasks.all()}
    env = dict(os.environ)
    env.update(DEBUG="0", SECRET_KEY=secrets.token_urlsafe(50),
               VERIFICATION_SAMPLE_SECRET=secrets.token_urlsafe(48), DATABASE_URL=_database_url(),
               CELERY_BROKER_URL="memory://", SECURE_SSL_REDIRECT="0",
               ALLOWED_HOSTS="127.0.0.1,localhost", USE_MANIFEST_STATIC="0",
               MEDIA_ROOT=str(tmp_path / "media"),
               SUBMISSION_STAGING_DIR=str(tmp_path / "staging"),
               SUBMISSION_DAILY_QUOTA=str(UPLOADS + 5), LOG_LEVEL="WARNING")
    # The site's gunicorn settings (threaded workers); HAB_LOAD_WORKER_CLASS=sync measures
    # gunicorn's default for comparison (docs/reliability.md: R14's figures).
    with Gunicorn(app="config.wsgi", env=env, cwd=REPO, workers=3,
                  worker_class=os.environ.get("HAB_LOAD_WORKER_CLASS") or None) as server:
        yield server.port, tasks


def test_r14_readers_and_uploads_at_once_answer_without_a_5xx(served, tmp_path, owner):
    """R14: READERS (200) concurrent clients read the leaderboard page, its JSON API or its
    CSV while UPLOADS (10) valid runs of UPLOAD_MB (4) each are uploaded at the same time: no 5xx
    and no failed request; every upload is received (202) and stored once (validation runs on
    the intake worker, outside the web process: `manage.py bench_upload --load` measures both). p50/p95 are
    printed (the matrix's 300 ms budget is a figure to watch, not an assertion)."""
    port, tasks = served
    _, raw = token_issue(user=owner)
    meta = yaml.safe_dump(build_metadata()).encode()
    bodies = [_multipart(_archive(tmp_path, tasks, n), meta) for n in range(UPLOADS)]
    reads: dict[str, list[float]] = {p: [] for p in READ_PATHS}
    statuses: list[tuple[str, int]] = []
    lock = threading.Lock()
    start = threading.Barrier(READERS + UPLOADS)

    def reader(i: int):
        start.wait()
        time.sleep(READER_DELAY_S)
        for k in range(REQUESTS_PER_READER):
            path = READ_PATHS[(i + k) % len(READ_PATHS)]
            status, elapsed = _request(port, "GET", path)
            with lock:
                statuses.append((path, status))
                reads[path].append(elapsed)

    upload_times = []

    def uploader(n: int):
        body, boundary = bodies[n]
        start.wait()
        status, elapsed = _request(port, "POST", "/api/v1/submissions/", body, {
            "Authorization": f"Token {raw}", "Idempotency-Key": f"load-{n}",
            "Content-Type": f"multipart/form-data; boundary={boundary}"})
        with lock:
            statuses.append(("upload", status))
            upload_times.append(elapsed)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=READERS + UPLOADS) as pool:
        futures = [pool.submit(reader, i) for i in range(READERS)]
        futures += [pool.submit(uploader, n) for n in range(UPLOADS)]
        for f in futures:
            f.result()
    wall = time.perf_counter() - t0
    print(f"\nR14 load: {READERS} readers x {REQUESTS_PER_READER} requests + {UPLOADS} uploads of "
          f"{UPLOAD_MB} MB in {wall:.1f} s")
    for path, times in reads.items():
        print(f"  GET {path:60s} n={len(times)} p50={_pct(times, .5):.0f} ms "
              f"p95={_pct(times, .95):.0f} ms max={max(times) * 1000:.0f} ms")
    print(f"  POST uploads n={len(upload_times)} p50={statistics.median(upload_times):.1f} s "
          f"max={max(upload_times):.1f} s")
    server_errors = [s for s in statuses if s[1] >= 500]
    assert server_errors == [], server_errors[:10]
    assert [s for s in statuses if s[0] != "upload" and s[1] != 200] == []
    assert [s for s in statuses if s[0] == "upload"] == [("upload", 202)] * UPLOADS
    from submissions.models import Submission

    received = Submission.objects.filter(owner=owner)
    assert received.count() == UPLOADS
    assert all(s.archive and s.status == "received" for s in received)
