"""manage.py bench_load: reliability row R14 on a throwaway database (devtools/bench/load.py).

    manage.py bench_load                  # this checkout
    manage.py bench_load --tree ../before # the same on another checkout (before/after)

A sibling of bench_upload (one upload's memory) rather than a mode of it: it serves the whole
site (the leaderboard's pages beside the uploads)."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import psycopg
import yaml
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from devtools.bench import load as bench
from devtools.bench import web
from devtools.harbor_fixtures import build_metadata


BUDGET_MS = 300  # R14: p95 of the leaderboard API


def _url(db: dict, name: str) -> str:
    auth = quote(db["USER"] or "postgres")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"])
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{name}"


def _manage(tree: Path, env: dict, *args: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=tree, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise CommandError(f"manage.py {' '.join(args)}: {done.stderr[-2000:]}")
    return done.stdout


def _use(name: str) -> None:
    connections["default"].close()
    settings.DATABASES["default"]["NAME"] = name
    connections["default"].settings_dict["NAME"] = name


class Command(BaseCommand):
    help = "R14: 200 readers of the leaderboard API and CSV beside 10 concurrent 50 MB uploads."

    def add_arguments(self, parser):
        parser.add_argument("--tree", default="", help="the checkout to serve (default: this)")
        parser.add_argument("--mb", type=int, default=50, help="size of each upload")
        parser.add_argument("--readers", type=int, default=200)
        parser.add_argument("--uploads", type=int, default=10)
        parser.add_argument("--text-mb", type=int, default=4,
                            help="MB of each upload that is a text log (scanned)")
        parser.add_argument("--web-workers", type=int, default=3)
        parser.add_argument("--intake-concurrency", type=int, default=2)
        parser.add_argument("--intake-nice", type=int, default=0,
                            help="niceness of the intake worker (10: readers win the CPU, "
                                 "verdicts wait)")
        parser.add_argument("--alone-s", type=float, default=15.0,
                            help="seconds of readers alone before the uploads")
        parser.add_argument("--broker-url", default="redis://127.0.0.1:6379/14")

    def handle(self, *args, **options):
        run_load(self, **options)


def run_load(cmd, *, mb: int, tree: str, readers: int, uploads: int, text_mb: int,
             web_workers: int, intake_concurrency: int, intake_nice: int, alone_s: float,
             broker_url: str, **_options) -> None:
    db = settings.DATABASES["default"]
    if connections["default"].vendor != "postgresql":
        raise CommandError("bench_load needs DATABASE_URL=postgres://...")
    served = Path(tree or settings.BASE_DIR).resolve()
    name = f"hab_bench_upload_{os.getpid()}"
    admin = psycopg.connect(_url(db, "postgres"), autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    original = db["NAME"]
    queues = (f"bench-intake-{os.getpid()}", f"bench-verify-{os.getpid()}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            _run(cmd, served, Path(tmp), _url(db, name), name, queues, mb=mb, readers=readers,
                 uploads=uploads, text_mb=text_mb, web_workers=web_workers,
                 intake_concurrency=intake_concurrency, intake_nice=intake_nice,
                 alone_s=alone_s, broker_url=broker_url)
    finally:
        _use(original)
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
        with contextlib.suppress(Exception):
            import redis

            redis.Redis.from_url(broker_url).delete(*queues)


def _say(cmd, text: str) -> None:
    cmd.stdout.write(text)
    cmd.stdout.flush()


def _run(cmd, served: Path, tmp: Path, database_url: str, name: str, queues: tuple[str, str], *,
         mb, readers, uploads, text_mb, web_workers, intake_concurrency, intake_nice, alone_s,
         broker_url) -> None:
    env = dict(os.environ)
    env.update(DEBUG="0", SECRET_KEY=secrets.token_urlsafe(50),
               VERIFICATION_SAMPLE_SECRET=secrets.token_urlsafe(48), DATABASE_URL=database_url,
               CELERY_BROKER_URL=broker_url, INTAKE_QUEUE=queues[0], VERIFICATION_QUEUE=queues[1],
               SECURE_SSL_REDIRECT="0", ALLOWED_HOSTS="127.0.0.1,localhost",
               USE_MANIFEST_STATIC="0", MEDIA_ROOT=str(tmp / "media"),
               SUBMISSION_STAGING_DIR=str(tmp / "staging"), LOG_LEVEL="WARNING",
               CONN_MAX_AGE="60")
    for step in (("migrate", "--noinput"), ("load_demo",), ("sync_tasks",)):
        _manage(served, env, *step)
    token = _manage(served, env, "issue_token", "bench", "--staff").strip().splitlines()[-1]
    _use(name)
    from evaluation.models import BenchmarkVersion

    bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    tasks = {t.name: t.content_digest for t in bv.tasks.all()}
    started = time.perf_counter()
    archives = [bench.build_archive(tmp, tasks, n=n, mb=mb, text_mb=text_mb)
                for n in range(uploads)]
    meta = tmp / "metadata.yaml"
    meta.write_text(yaml.safe_dump(build_metadata()))
    size = sum(a.stat().st_size for a in archives) / uploads / 1e6
    has_intake = "INTAKE_QUEUE" in (served / "config" / "settings.py").read_text()
    intake = (f"yes, concurrency {intake_concurrency}, nice {intake_nice}" if has_intake
              else "none, uploads are processed in the web request")
    _say(cmd, f"R14 bench_load: {served} (intake worker: {intake}); "
              f"gunicorn -c config/gunicorn.py -w {web_workers}; {readers} readers (wrk) on "
              f"{', '.join(p.split('?')[0] for p in bench.READ_PATHS)} and "
              f"{bench.FLOOR_CONNECTIONS} on each one's static copy; {uploads} uploads of "
              f"{size:.1f} MB ({time.perf_counter() - started:.0f} s to build)")
    worker = (bench.IntakeWorker(tree=served, env=env, queue=queues[0],
                                 concurrency=intake_concurrency, nice=intake_nice,
                                 log=tmp / "worker.log")
              if has_intake else contextlib.nullcontext())
    # The floor: the very bytes of each read path, served as static files by the same gunicorn
    # (WhiteNoise in front of the site, as bench_scale does), read at the same time.
    floor = tmp / "floor"
    floor.mkdir()
    with web.Gunicorn(app="config.wsgi", env=env, cwd=served, workers=1) as server:
        for i, path in enumerate(bench.READ_PATHS):
            status, body = web.get(server.port, path)
            if status != 200:
                raise CommandError(f"GET {path} answered {status}")
            (floor / f"read{i}{Path(path.split('?')[0]).suffix or '.json'}").write_bytes(body)
    floor_paths = [bench.FLOOR_PREFIX + f.name for f in sorted(floor.iterdir())]
    site = [(path, readers // len(bench.READ_PATHS)) for path in bench.READ_PATHS]
    probe = [(path, bench.FLOOR_CONNECTIONS) for path in floor_paths]
    app = f'devtools.bench.wsgi:make_application("{floor}")'
    # The floor's wrapper is this checkout's tool: a --tree without devtools/ imports it from
    # here (after its own folder, which gunicorn puts first, so its config.wsgi is served).
    served_env = {**env, "PYTHONPATH": os.pathsep.join(
        p for p in (env.get("PYTHONPATH"), str(settings.BASE_DIR)) if p)}
    with (web.Gunicorn(app=app, env=served_env, cwd=served, workers=web_workers) as server,
          worker):
        for path in bench.READ_PATHS:  # warm: the first hits render and cache
            web.get(server.port, path)
        alone = bench.WrkReaders.run_for(server.port, site + probe, tmp, alone_s)
        _report(cmd, "readers alone", alone, floor_paths)
        csv_mb = bench.csv_memory(server)
        _say(cmd, f"  20 concurrent /leaderboard.csv: web workers' peak RSS +{csv_mb:.1f} MB")
        for pid in server.worker_pids():
            web.reset_peak(pid)
        rss_before = {pid: web.rss_kb(pid) for pid in server.worker_pids()}
        reading = bench.WrkReaders(server.port, site + probe, tmp)
        time.sleep(1)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=uploads) as pool:
            results = list(pool.map(
                lambda a: bench.upload_and_follow(server.port, token, a, meta), archives))
        wall = time.perf_counter() - t0
        loaded = reading.stop()
        growth = max(web.rss_kb(pid, "VmHWM") - rss_before[pid]
                     for pid in rss_before) / 1024
    _report(cmd, f"readers during the uploads ({wall:.0f} s)", loaded, floor_paths)
    for line in bench.summary(results):
        _say(cmd, "  " + line)
    _say(cmd, f"  web workers' peak RSS growth during the uploads: +{growth:.1f} MB")


def _report(cmd, label: str, results: list, floor_paths: list[str]) -> None:
    """Each reader group's line, then the leaderboard API's p95 against the budget and against
    the static copy of the same bytes read at the same time."""
    _say(cmd, f"  {label}:")
    for r in results:
        _say(cmd, "    " + r.line("site" if r.path not in floor_paths else "floor"))
    api, api_floor = results[0], results[len(bench.READ_PATHS)]
    _say(cmd, f"    API p95 {api.p95_ms:.0f} ms = {api.p95_ms / BUDGET_MS:.2f}x the "
              f"{BUDGET_MS} ms budget, {api.p95_ms / max(api_floor.p95_ms, 0.001):.2f}x its "
              f"static floor ({api_floor.p95_ms:.0f} ms); 5xx "
              f"{sum(r.fivexx for r in results)}, errors {sum(r.errors for r in results)}")
