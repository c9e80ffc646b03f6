"""Measure the leaderboard at scale against its floors, in one run.

Creates its own PostgreSQL database on the configured server (dropped afterwards), generates a
benchmark version with N published agents x 162 trials, rebuilds the aggregates with the real
services code, and serves the site with real gunicorn (-w 2, DEBUG off). Prints, each as a ratio
to its floor: every page's warm p50 against the same bytes served as a static file by the same
gunicorn; the full rebuild against DuckDB group-bys on the same trials; publishing and taking
down one submission; /trials.csv against ``psql \\copy``, with the workers' peak memory; and a
64-connection load on / and /leaderboard.csv with wrk, counting errors.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import psycopg
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from devtools.bench import dataset, duck, web
from devtools.bench.wsgi import FLOOR_PREFIX
from evaluation.models import Agent
from leaderboard import csv_copy
from leaderboard.filters import EntryFilters
from leaderboard.services import leaderboard_recompute
from submissions.models import SubmissionStatus
from submissions.services import submission_publish, submission_withdraw

PARTS = ("rebuild", "pages", "publish", "csv", "load")
PAGES = [
    ("/", "html"), ("/categories/", "html"), ("/imaging-vs-text/", "html"),
    ("/harness-effect/", "html"), ("/cost/", "html"), ("/task-matrix/", "html"),
    ("/api/v1/leaderboard/", "json"),
]


def _url(db: dict, name: str) -> str:
    auth = quote(db["USER"] or "postgres")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"])
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{name}"


class Command(BaseCommand):
    help = "Leaderboard at N agents on real gunicorn + PostgreSQL, each figure against a floor."

    def add_arguments(self, parser):
        parser.add_argument("--agents", type=int, default=1000)
        parser.add_argument("--load-seconds", type=int, default=30)
        parser.add_argument("--connections", type=int, default=64)
        parser.add_argument("--cache-url", default="locmemcache://",
                            help="CACHE_URL of the served site (production: redis://...)")
        parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
        parser.add_argument(
            "--database", default="",
            help="measure a database kept by an earlier --keep run (not generated again, "
                 "not dropped); --agents is then read from it")
        parser.add_argument(
            "--only", default=",".join(PARTS),
            help=f"comma-separated parts to measure, of {','.join(PARTS)} (default: all); "
                 "the data are generated and rebuilt once whatever is chosen")

    def handle(self, *args, **opts):
        db = settings.DATABASES["default"]
        if connections["default"].vendor != "postgresql":
            raise CommandError("bench_scale needs DATABASE_URL=postgres://... (PostgreSQL)")
        parts = {p.strip() for p in opts["only"].split(",") if p.strip()}
        if parts - set(PARTS):
            raise CommandError(f"--only takes {', '.join(PARTS)}, not "
                               f"{', '.join(sorted(parts - set(PARTS)))}")
        opts["parts"] = parts
        needed = ({"psql"} if "csv" in parts else set()) | ({"wrk"} if "load" in parts else set())
        missing = sorted(tool for tool in needed if shutil.which(tool) is None)
        if missing:  # before minutes of generating and measuring, not after
            packages = " ".join("postgresql-client" if t == "psql" else t for t in missing)
            raise CommandError(f"bench_scale needs {' and '.join(missing)} on PATH: apt-get "
                               f"install {packages} (Debian), or leave out their parts with "
                               "--only")
        reuse = opts["database"]
        name = reuse or f"hab_bench_scale_{os.getpid()}"
        admin = psycopg.connect(_url(db, "postgres"), autocommit=True)
        if not reuse:
            admin.execute(f'CREATE DATABASE "{name}"')
        original = db["NAME"]
        try:
            self._use(name)
            self._run(db, name, opts)
        finally:
            self._use(original)
            if opts["keep"] or reuse:
                self.stdout.write(f"kept database {name}")
            else:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.close()

    def _use(self, name: str) -> None:
        connections["default"].close()
        settings.DATABASES["default"]["NAME"] = name
        connections["default"].settings_dict["NAME"] = name

    def _say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def _run(self, db: dict, name: str, opts: dict) -> None:
        n = opts["agents"]
        only = opts["parts"]
        call_command("migrate", verbosity=0, interactive=False)
        started = time.perf_counter()
        if opts["database"]:
            gen = dataset.dataset_find()
            n = gen.agents
            self._say(f"bench_scale: {n:,} agents, {gen.trials:,} trials in the kept database "
                      f"{name}")
        else:
            gen = dataset.dataset_generate(n_agents=n)
            self._say(f"bench_scale: {n:,} agents x 162 = {gen.trials:,} trials generated in "
                      f"{time.perf_counter() - started:.1f} s (database {name})")
        bv = gen.benchmark_version
        rows = self._rebuild(bv) if "rebuild" in only else []
        if "rebuild" not in only:
            leaderboard_recompute(benchmark_version=bv)
        env = self._env(db, name, opts["cache_url"])
        with tempfile.TemporaryDirectory() as floor:
            if "pages" in only:
                with web.Gunicorn(app="config.wsgi", env=env, cwd=settings.BASE_DIR) as server:
                    for i, (path, ext) in enumerate(PAGES):
                        status, body = web.get(server.port, path)
                        if status != 200:
                            raise CommandError(f"GET {path} answered {status}")
                        (Path(floor) / f"page{i}.{ext}").write_bytes(body)
            app = f'devtools.bench.wsgi:make_application("{floor}")'
            # Warm means every worker: each answers the measured pages to itself before it
            # accepts a connection, as production warms its read paths (config/warmup.py);
            # otherwise the other worker's first render lands among the samples.
            if "pages" in only:
                env = dict(env, GUNICORN_WARM_PATHS=",".join(
                    ["/healthz"] + [p for p, _ in PAGES]))
            with web.Gunicorn(app=app, env=env, cwd=settings.BASE_DIR, ready_s=900) as server:
                if "pages" in only:
                    for i, (path, ext) in enumerate(PAGES):
                        page_ms, floor_ms, size = web.p50_pair_ms(
                            server.port, path, f"{FLOOR_PREFIX}page{i}.{ext}")
                        rows.append((f"{path} ({size / 1e6:.2f} MB)", f"{page_ms:.1f} ms p50",
                                     f"{floor_ms:.1f} ms", page_ms / floor_ms))
                        self._say(_fmt(rows[-1]))
                if "publish" in only:
                    rows += self._publish(server, bv)
                if "csv" in only:
                    rows += self._trials_csv(server, db, name, bv)
                if "load" in only:
                    rows += self._load(server, opts)
        self._say("\n" + _table(rows))

    def _rebuild(self, bv) -> list[tuple]:
        """The full rebuild, best of 3 (as the DuckDB floor is timed), beside DuckDB: as it
        runs on a current database (every row computed from the trials, only rows whose
        digest changed written: none), and rewriting every row (``rewrite``: what the first
        rebuild of a new database, or one after every number changed, writes)."""
        duck_s, duck_n = duck.duckdb_rebuild_seconds(benchmark_version=bv)
        floor = f"DuckDB best of 3 {duck_s:.2f} s ({duck_n:,} trials)"
        out = []
        for rewrite, what in ((False, "aggregate rebuild (all agents, rows current)"),
                              (True, "aggregate rebuild (all agents, every row rewritten)")):
            runs, phases = [], []
            for _ in range(3):
                timings: dict[str, float] = {}
                started = time.perf_counter()
                leaderboard_recompute(benchmark_version=bv, rewrite=rewrite, timings=timings)
                runs.append(time.perf_counter() - started)
                phases.append(timings)
            rebuild_s = min(runs)
            out.append((f"{what}, best of 3", f"{rebuild_s:.2f} s (first run {runs[0]:.2f} s)",
                        floor, rebuild_s / duck_s))
            self._say(_fmt(out[-1]))
            # The phases of the best run; what they leave out is mostly the commit.
            best = phases[runs.index(rebuild_s)]
            best["commit and the rest"] = rebuild_s - sum(best.values())
            self._say("  rebuild phases: " + ", ".join(f"{k} {v:.3f} s"
                                                       for k, v in best.items()))
        return out

    def _env(self, db: dict, name: str, cache_url: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            DEBUG="0", SECRET_KEY=secrets.token_urlsafe(50),
            VERIFICATION_SAMPLE_SECRET=secrets.token_urlsafe(48), DATABASE_URL=_url(db, name),
            CELERY_BROKER_URL="memory://", CACHE_URL=cache_url, SECURE_SSL_REDIRECT="0",
            ALLOWED_HOSTS="127.0.0.1,localhost", USE_MANIFEST_STATIC="0", CONN_MAX_AGE="60",
            LOG_LEVEL="WARNING",
        )
        return env

    def _publish(self, server: web.Gunicorn, bv) -> list[tuple]:
        """One more agent's verified submission: publish it, wait until its page answers,
        then take it down again."""
        # A fresh agent number each run (a kept database may hold earlier runs' agents).
        agent = dataset.agents_create(n_agents=1, start=10**6 + Agent.objects.count())[0]
        sub = dataset.submissions_create(benchmark_version=bv, agents=[agent],
                                         status=SubmissionStatus.VERIFIED)[0]
        dataset.trials_copy(submissions=[sub], tasks=list(bv.tasks.order_by("position")),
                            seed=7)
        started = time.perf_counter()
        submission_publish(submission=sub, actor=None)
        publish_s = time.perf_counter() - started
        while web.get(server.port, f"/agents/{agent.slug}/")[0] != 200:
            if time.perf_counter() - started > 120:
                raise CommandError("the published agent's page did not appear within 120 s")
        visible_s = time.perf_counter() - started
        started = time.perf_counter()
        submission_withdraw(submission=sub, actor=None, reason="bench_scale")
        withdraw_s = time.perf_counter() - started
        out = [("publish one submission", f"{publish_s:.2f} s", "-", None),
               ("  ... its agent page served", f"{visible_s:.2f} s", "target 1 s", visible_s),
               ("take it down", f"{withdraw_s:.2f} s", "-", None)]
        for row in out:
            self._say(_fmt(row))
        return out

    def _trials_csv(self, server: web.Gunicorn, db: dict, name: str, bv) -> list[tuple]:
        workers = server.worker_pids()
        for pid in workers:
            web.reset_peak(pid)
        before = {pid: web.rss_kb(pid) for pid in workers}
        status, size, csv_s = web.get_streamed(server.port, "/trials.csv")
        if status != 200:
            raise CommandError(f"/trials.csv answered {status}")
        growth_mb = max(web.rss_kb(pid, "VmHWM") - before[pid] for pid in workers) / 1024
        # The floor runs the very SELECT the site streams, so the ratio is the cost of serving
        # it over HTTP (and of the SQL's formatting, which psql pays too).
        sql, params = csv_copy.trials_sql(bv, EntryFilters())
        with psycopg.connect(_url(db, name)) as conn:
            sql = psycopg.ClientCursor(conn).mogrify(sql, params)
        with tempfile.TemporaryDirectory() as tmp:
            target = Path(tmp) / "trials.csv"
            started = time.perf_counter()
            subprocess.run(
                ["psql", _url(db, name), "-q", "-c",
                 f"\\copy ({sql}) TO '{target}' WITH CSV HEADER"],
                check=True)
            psql_s = time.perf_counter() - started
        row = ("/trials.csv", f"{csv_s:.2f} s, {size / 1e6:.1f} MB, peak +{growth_mb:.1f} MB",
               f"psql \\copy {psql_s:.2f} s", csv_s / psql_s)
        self._say(_fmt(row))
        return [row]

    def _load(self, server: web.Gunicorn, opts: dict) -> list[tuple]:
        out = []
        for path in ("/", "/leaderboard.csv"):
            r = web.wrk_load(server.port, path, connections=opts["connections"],
                             seconds=opts["load_seconds"])
            out.append((f"{opts['connections']} connections on {path}, {opts['load_seconds']} s",
                        f"{r.rps:.1f} req/s, p50 {r.p50_ms:.0f} ms, p99 {r.p99_ms:.0f} ms, "
                        f"{r.errors} errors", "target 0 errors", None))
            self._say(_fmt(out[-1]))
        return out


def _fmt(row: tuple) -> str:
    what, now, floor, ratio = row
    return f"  {what}: {now} | floor {floor}" + (f" | {ratio:.1f}x" if ratio else "")


def _table(rows: list[tuple]) -> str:
    lines = ["| what | now | floor | ratio |", "|---|---|---|---|"]
    lines += [f"| {w} | {n} | {f} | {f'{r:.1f}x' if r else '-'} |" for w, n, f, r in rows]
    return "\n".join(lines)
