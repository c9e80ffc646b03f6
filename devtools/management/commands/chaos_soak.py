"""Chaos soak (reliability matrix R1, R6, R7, R9 together): a batch of submissions is verified by
a REAL Celery worker against a throwaway PostgreSQL cluster, a throwaway Redis broker and the
Docker engine, while the worker is SIGKILLed at random points of verification (and restarted),
the broker is restarted once and PostgreSQL is restarted once. Prints what each fault hit and
the totals: verified exactly once, lost, duplicated, stuck, containers and work directories
leaked (the worker's temporary folder is var/chaos-<pid>/tmp, reaped by the reaper), and per submission
the longest time it waited with no worker on it while the worker was up and idle (a
prefetched message of a killed worker left a submission waiting half an hour).

    .venv/bin/python manage.py chaos_soak                       # 10 kills, 6 submissions
    .venv/bin/python manage.py chaos_soak --kills 2 --submissions 2   # short (the test)

The reaper runs every --reaper-interval seconds (as beat runs it, never more often), with
VERIFICATION_REAPER_INTERVAL_S and VERIFICATION_UNCLAIMED_AFTER_S (two intervals) set to match.

The PostgreSQL cluster (initdb, own port, TCP on 127.0.0.1 only) lives in a temporary
directory the ``postgres`` user owns (so the soak runs from any checkout, even one under /root),
the Redis server (own port, append-only) under var/chaos-<pid>/; both are removed afterwards
and the shared servers are never restarted. A failing initdb or pg_ctl prints its own error. Needs PostgreSQL's server binaries, redis-server and Docker.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connections
from django.test import override_settings

TASKS = ["ct-abnormality-classification/synthetic_01", "pathology-tumor-region/synthetic_01"]
# Oracle outputs are never contradicted: verified, or consistent where the soak's re-run does
# not cover every pass (only a re-run makes "verified").
CLEAN_VERDICTS = ("verified", "consistent")
FINAL = (*CLEAN_VERDICTS, "discrepancy", "failed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_bin() -> Path:
    for base in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (base / "initdb").exists():
            return base
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise CommandError("chaos_soak needs PostgreSQL's server binaries (apt-get install "
                       "postgresql): initdb and pg_ctl")


class ThrowawayPostgres:
    """initdb + pg_ctl on a free port, TCP on 127.0.0.1 only, trust auth; removed on stop.

    Its cluster lives in a fresh temporary directory (not under the checkout): run as root,
    initdb runs as the ``postgres`` user, who may not be able to enter a checkout under
    /root."""

    def __init__(self, root: Path):
        del root  # the cluster's own directory is a mkdtemp the postgres user owns
        self.root: Path | None = None
        self.port, self.bin = _free_port(), _pg_bin()
        self.as_postgres = os.geteuid() == 0  # initdb refuses to run as root

    def _run(self, *args: str) -> None:
        cmd = [str(a) for a in args]
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        try:
            subprocess.run(cmd, check=True, capture_output=True, timeout=120)
        except subprocess.CalledProcessError as exc:
            out = (exc.stderr or b"").decode(errors="replace").strip() or (
                exc.stdout or b"").decode(errors="replace").strip()
            raise CommandError(f"{Path(cmd[cmd.index('--') + 1] if '--' in cmd else cmd[0]).name}"
                               f" failed (exit {exc.returncode}): {out[-2000:]}") from exc

    def start(self) -> ThrowawayPostgres:
        self.root = Path(tempfile.mkdtemp(prefix="hab-chaos-pg-"))
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(self.bin / "initdb", "-D", self.root / "data", "-U", "postgres",
                  "--auth=trust", "-E", "UTF8")
        self.up()
        return self

    def up(self) -> None:
        self._run(self.bin / "pg_ctl", "-D", self.root / "data", "-w", "-t", "60", "-l",
                  self.root / "log", "-o", f"-p {self.port} -c listen_addresses=127.0.0.1 "
                  "-c unix_socket_directories='' -c fsync=off", "start")

    def restart(self) -> None:
        self._run(self.bin / "pg_ctl", "-D", self.root / "data", "-w", "-t", "60", "-m", "fast",
                  "stop")
        self.up()

    def stop(self) -> None:
        if self.root is None:
            return
        try:
            self._run(self.bin / "pg_ctl", "-D", self.root / "data", "-w", "-m", "immediate",
                      "stop")
        except CommandError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)


class ThrowawayRedis:
    """redis-server on a free port, append-only (queued messages survive a restart)."""

    def __init__(self, root: Path):
        self.root, self.port = root / "redis", _free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> ThrowawayRedis:
        exe = shutil.which("redis-server")
        if not exe:
            raise CommandError("chaos_soak needs redis-server (apt-get install redis-server)")
        self.root.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.root)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.2)
        raise CommandError("the throwaway redis-server did not start")

    def restart(self) -> None:
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


class Worker:
    """`celery -A config worker` (prefork, one child) in its own process group."""

    def __init__(self, env: dict, log: Path):
        self.env, self.log_path, self.proc = env, log, None
        self.up = False

    def start(self) -> Worker:
        self.log = open(self.log_path, "ab")
        self.log_from = self.log.tell()  # where this process's lines begin
        self.started_at = datetime.now(UTC)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q",
             self.env["VERIFICATION_QUEUE"], "--pool", "prefork", "--concurrency", "1",
             "-l", "INFO", "--without-mingle", "--without-gossip",
             "-n", f"chaos-{uuid.uuid4().hex[:6]}@%h"],
            cwd=settings.BASE_DIR, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        return self

    def ready(self) -> bool:
        """True once this process has said `ready.` (it consumes) and while it runs."""
        if not self.up:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_from)
                self.up = b" ready." in f.read()
        return self.up and self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the worker and its pool child
            self.proc.wait(timeout=30)
        self.log.close()

    def stop(self) -> None:
        if self.log.closed:
            return
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self.log.close()


def _point_celery_at(url: str) -> None:
    from kombu import pools

    from config.celery import app

    app.conf.broker_url = url
    app.conf.broker_connection_timeout = 2
    if app._pool is not None:
        app._pool.force_close_all()
        app._pool = None
    pools.reset()
    app.amqp._producer_pool = None


class Command(BaseCommand):
    help = ("SIGKILL a real verification worker at random points, restart the broker and "
            "PostgreSQL (throwaway instances); print per-fault results and totals.")

    def add_arguments(self, parser):
        parser.add_argument("--submissions", type=int, default=6)
        parser.add_argument("--kills", type=int, default=10)
        parser.add_argument("--seed", type=int, default=13)
        parser.add_argument("--timeout", type=int, default=1200,
                            help="seconds to wait for every submission to end")
        parser.add_argument("--keep", action="store_true", help="keep var/chaos-<pid>/")
        parser.add_argument("--reaper-interval", type=float, default=10.0,
                            help="seconds between reaper runs (beat's VERIFICATION_REAPER_"
                                 "INTERVAL_S; the unclaimed bound is two of them)")

    def handle(self, *args, **opts):
        self.rng = random.Random(opts["seed"])
        root = Path(settings.BASE_DIR) / "var" / f"chaos-{os.getpid()}"
        pg, broker = ThrowawayPostgres(root), ThrowawayRedis(root)
        saved = dict(connections["default"].settings_dict)
        # The worker's temporary folder, where its killed processes' work directories stay until
        # the reaper (run here, in this process: it looks in this process's tempdir) removes them.
        self.tmp = root / "tmp"
        saved_tempdir = tempfile.tempdir
        try:
            pg.start()
            broker.start()
            self.tmp.mkdir(parents=True, exist_ok=True)
            tempfile.tempdir = str(self.tmp)  # after the cluster's own mkdtemp (postgres's)
            self._say(f"throwaway PostgreSQL on 127.0.0.1:{pg.port}, Redis on "
                      f"127.0.0.1:{broker.port} (under {root})")
            self._use_db(pg.port)
            with override_settings(MEDIA_ROOT=str(root / "media"),
                                   VERIFICATION_RUN_PREFIX=f"chaos{os.getpid()}x",
                                   VERIFICATION_QUEUE=f"chaos-{os.getpid()}",
                                   VERIFICATION_STALE_AFTER_S=8,
                                   VERIFICATION_REAPER_INTERVAL_S=opts["reaper_interval"],
                                   VERIFICATION_UNCLAIMED_AFTER_S=2 * opts["reaper_interval"],
                                   VERIFICATION_MAX_ATTEMPTS=opts["kills"] + 5):
                self._soak(root, pg, broker, opts)
        finally:
            tempfile.tempdir = saved_tempdir
            if getattr(self, "worker", None) is not None:
                self.worker.stop()
            self._swap_db(saved)
            broker.stop()
            pg.stop()
            if not opts["keep"]:
                shutil.rmtree(root, ignore_errors=True)

    # -- setup ------------------------------------------------------------------------------
    def _swap_db(self, settings_dict: dict) -> None:
        """Point the default connection at another server (a new wrapper: the engine may
        differ, e.g. SQLite -> PostgreSQL)."""
        connections["default"].close()
        connections.settings["default"] = settings_dict
        del connections["default"]

    def _use_db(self, port: int) -> None:
        self._swap_db({**connections["default"].settings_dict,
                       "ENGINE": "django.db.backends.postgresql", "NAME": "postgres",
                       "USER": "postgres", "PASSWORD": "", "HOST": "127.0.0.1",
                       "PORT": str(port), "OPTIONS": {}, "CONN_MAX_AGE": 0})
        call_command("migrate", verbosity=0)

    def _worker_env(self, pg, broker, root) -> dict:
        env = dict(os.environ)
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings", DEBUG="1",
            DATABASE_URL=f"postgres://postgres@127.0.0.1:{pg.port}/postgres",
            CELERY_BROKER_URL=broker.url, MEDIA_ROOT=str(root / "media"),
            VERIFICATION_QUEUE=settings.VERIFICATION_QUEUE,
            VERIFICATION_RUN_PREFIX=settings.VERIFICATION_RUN_PREFIX,
            VERIFICATION_CHECKS="regrade", VERIFICATION_HEARTBEAT_S="1",
            VERIFICATION_STALE_AFTER_S=str(settings.VERIFICATION_STALE_AFTER_S),
            VERIFICATION_MAX_ATTEMPTS=str(settings.VERIFICATION_MAX_ATTEMPTS),
            VERIFICATION_RETRY_BACKOFF_S="1", VERIFICATION_PARALLEL_TRIALS="2",
            VERIFICATION_REAPER_INTERVAL_S=str(settings.VERIFICATION_REAPER_INTERVAL_S),
            VERIFICATION_UNCLAIMED_AFTER_S=str(settings.VERIFICATION_UNCLAIMED_AFTER_S),
            PYTHONUNBUFFERED="1", TMPDIR=str(self.tmp))
        return env

    def _submissions(self, root: Path, n: int) -> list[int]:
        from django.core.files.base import ContentFile
        from django.core.files.storage import default_storage
        from django.db import transaction
        from django.utils import timezone

        from evaluation import agents, runner
        from evaluation.models import Agent, AIModel, BenchmarkVersion, Harness
        from evaluation.services import benchmark_tasks_sync
        from submissions.models import Outcome, Submission, Trial
        from submissions.verification import verification_enqueue

        benchmark_tasks_sync(tasks_dir=Path(settings.BASE_DIR) / "tasks")
        bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
        tasks = list(bv.tasks.filter(name__in=TASKS).order_by("position"))
        outputs = {}
        for task in tasks:
            tdir = Path(settings.BASE_DIR) / task.package_path
            out = root / "oracle" / task.name.replace("/", "__")
            run = agents.run_site_agent(agents.SiteAgent(kind="oracle", name="oracle"), tdir,
                                        job_id=f"chaos-oracle-{os.getpid()}", attempt=1,
                                        out_dir=out)
            if not run.result.ok or run.missing:
                raise CommandError(f"oracle of {task.name} failed: {run.result.reason}")
            outputs[task.pk] = (out, runner.declared_outputs(tdir))
        h, _ = Harness.objects.get_or_create(slug="oracle", defaults={
            "display_name": "oracle", "family": "oracle"})
        m, _ = AIModel.objects.get_or_create(slug="none", defaults={
            "display_name": "none", "provider": "none"})
        agent, _ = Agent.objects.get_or_create(slug="oracle-none", defaults={
            "harness": h, "model": m, "display_name": "oracle (none)"})
        ids = []
        for i in range(n):
            prefix = f"chaos/{uuid.uuid4().hex[:10]}/tree"
            with transaction.atomic():
                sub = Submission.objects.create(
                    agent=agent, benchmark_version=bv, status="queued", source="upload",
                    files_prefix=prefix, queued_at=timezone.now(),
                    submitted_on=timezone.now().date())
                rows = []
                for task in tasks:
                    out, declared = outputs[task.pk]
                    for attempt in (1, 2, 3):
                        trial_dir = f"job/{task.name.replace('/', '__')}__{attempt}"
                        paths = []
                        for cpath in declared:
                            rel = cpath.strip("/")
                            src = out / rel
                            for f in ([src] if src.is_file() else sorted(
                                    p for p in src.rglob("*") if p.is_file())):
                                sub_rel = rel if src.is_file() else \
                                    f"{rel}/{f.relative_to(src).as_posix()}"
                                default_storage.save(
                                    f"{prefix}/{trial_dir}/artifacts/{sub_rel}",
                                    ContentFile(f.read_bytes()))
                            paths.append(f"{trial_dir}/artifacts/{rel}")
                        rows.append(Trial(
                            submission=sub, benchmark_task=task, attempt=attempt,
                            outcome=Outcome.PASSED, success=True,
                            claimed_outcome=Outcome.PASSED, claimed_success=True, reward=1.0,
                            trial_dir=trial_dir, artifact_paths=paths))
                Trial.objects.bulk_create(rows)
                Submission.objects.filter(pk=sub.pk).update(trials_total=len(rows))
                verification_enqueue(submission=sub)
            ids.append(sub.pk)
            self._say(f"submission {sub.pk} ({i + 1}/{n}): {len(rows)} trials queued")
        return ids

    # -- the soak ---------------------------------------------------------------------------
    def _soak(self, root: Path, pg, broker, opts) -> None:
        from submissions.models import JobStatus, VerificationJob

        _point_celery_at(broker.url)
        sub_ids = self._submissions(root, opts["submissions"])
        self.waits = {pk: 0.0 for pk in sub_ids}  # longest wait with no worker on it, idle
        self.wait_since: dict[int, float] = {}
        self.next_reap = 0.0
        env = self._worker_env(pg, broker, root)
        worker = self.worker = Worker(env, root / "worker.log").start()
        faults = ["kill"] * opts["kills"] + ["broker", "postgres"]
        self.rng.shuffle(faults)
        results = []
        t_start = time.time()
        for n, fault in enumerate(faults, 1):
            running = self._wait_running(timeout=120)
            self._pause(self.rng.uniform(0.5, 4.0))  # a random point of the verification
            running = self._db(lambda: list(VerificationJob.objects.filter(
                status=JobStatus.RUNNING).values_list("pk", "attempt"))) or running
            t = time.time() - t_start
            if fault == "kill":
                worker.kill()
                what = f"SIGKILL worker (pid {worker.proc.pid})"
                worker = self.worker = Worker(env, root / "worker.log").start()
            elif fault == "broker":
                broker.restart()
                what = f"restart Redis broker (port {broker.port})"
            else:
                pg.restart()
                what = f"restart PostgreSQL (port {pg.port})"
                connections["default"].close()
            results.append({"n": n, "t": t, "fault": what, "running": running})
            self._say(f"fault {n:2d} at {t:6.1f} s: {what}; jobs running: "
                      f"{[f'{j}#{a}' for j, a in running] or 'none'}")
        deadline = time.time() + opts["timeout"]
        while time.time() < deadline:
            if self._db(lambda: not self._open(sub_ids)):
                break
            self._pause(3)
        worker.stop()
        self.worker = None
        self._reap()  # the last reaper run, with no worker left: it finds every dead one
        self._report(sub_ids, results, time.time() - t_start)

    def _db(self, fn, tries: int = 30):
        for _ in range(tries):
            try:
                return fn()
            except DatabaseError:
                connections["default"].close()
                time.sleep(1)
        raise CommandError("the throwaway database did not come back")

    def _open(self, sub_ids):
        from submissions.models import Submission

        return list(Submission.objects.filter(pk__in=sub_ids).exclude(status__in=FINAL)
                    .values_list("pk", flat=True))

    def _wait_running(self, timeout: float):
        from submissions.models import JobStatus, VerificationJob

        deadline = time.time() + timeout
        while time.time() < deadline:
            # A job the current worker runs (a heartbeat since it started), not the row of one
            # killed before.
            running = self._db(lambda: list(VerificationJob.objects.filter(
                status=JobStatus.RUNNING, heartbeat_at__gte=self.worker.started_at)
                .values_list("pk", "attempt")))
            if running:
                return running
            self._pause(0.5)
        return []

    def _pause(self, seconds: float) -> None:
        """Sleep, meanwhile running the reaper when it is due and sampling the waits."""
        end = time.time() + seconds
        while True:
            self._sample()
            if time.time() >= self.next_reap:
                self.next_reap = time.time() + settings.VERIFICATION_REAPER_INTERVAL_S
                self._reap()
            left = end - time.time()
            if left <= 0:
                return
            time.sleep(min(left, 0.5))

    def _sample(self) -> None:
        """Per open submission: how long it has waited with no worker on it while the worker
        was up and idle (a job is worked on while its heartbeat, every second, is fresh)."""
        from django.utils import timezone

        from submissions.models import JobStatus, Submission, VerificationJob

        try:
            now = timezone.now()
            fresh = now - timedelta(seconds=3)
            attended = set(VerificationJob.objects.filter(
                submission_id__in=self.waits, status=JobStatus.RUNNING,
                heartbeat_at__gte=fresh).values_list("submission_id", flat=True))
            open_ = set(Submission.objects.filter(pk__in=self.waits).exclude(
                status__in=FINAL).values_list("pk", flat=True))
        except DatabaseError:
            connections["default"].close()
            return
        idle = self.worker is not None and self.worker.ready() and not attended
        t = time.time()
        for pk in self.waits:
            if idle and pk in open_:
                since = self.wait_since.setdefault(pk, t)
                self.waits[pk] = max(self.waits[pk], t - since)
            else:
                self.wait_since.pop(pk, None)

    def _reap(self) -> None:
        from submissions.verification import reap_stuck_submissions

        try:
            reap_stuck_submissions()
        except Exception as exc:  # noqa: BLE001 - a broker or database outage: next round
            connections["default"].close()
            self._say(f"  (reaper: {type(exc).__name__}: {str(exc)[:120]})")

    def _report(self, sub_ids, results, wall: float) -> None:
        from evaluation import runner
        from submissions.models import (
            JobStatus,
            Submission,
            SubmissionEvent,
            TrialCheck,
            VerificationJob,
        )

        jobs = {j.pk: j for j in VerificationJob.objects.filter(submission_id__in=sub_ids)}
        self._say("\nper fault:")
        for r in results:
            hit = ", ".join(f"job {pk} attempt {a} -> {jobs[pk].status} after attempt "
                            f"{jobs[pk].attempt}" for pk, a in r["running"] if pk in jobs)
            self._say(f"  {r['n']:2d}. {r['t']:6.1f} s  {r['fault']}: {hit or 'no job running'}")
        subs = {s.pk: s for s in Submission.objects.filter(pk__in=sub_ids)}
        duplicated, once, lost, stuck, failed = [], [], [], [], []
        for pk, sub in subs.items():
            done = [j for j in jobs.values() if j.submission_id == pk
                    and j.status == JobStatus.DONE]
            verdicts = SubmissionEvent.objects.filter(
                submission_id=pk, to_status__in=[*CLEAN_VERDICTS, "discrepancy"]).count()
            # A check row per (job, trial, kind) is unique; `executions` counts its writes.
            rewritten = TrialCheck.objects.filter(job__submission_id=pk,
                                                  executions__gt=1).count()
            if len(done) > 1 or verdicts > 1 or rewritten:
                self._say(f"  submission {pk}: {len(done)} finished jobs, {verdicts} verdicts, "
                          f"{rewritten} checks written more than once")
                duplicated.append(pk)
            elif sub.status in CLEAN_VERDICTS and len(done) == 1:
                once.append(pk)
            elif sub.status == "failed":
                failed.append(pk)
            elif sub.status not in FINAL:
                stuck.append(pk) if any(j.submission_id == pk for j in jobs.values()) \
                    else lost.append(pk)
            else:
                lost.append(pk)  # a discrepancy on oracle outputs
        leaked = [c.name for c in runner.client().containers.list(
            all=True, filters={"name": settings.VERIFICATION_RUN_PREFIX})]
        for name in leaked:
            self._say(f"  leaked container: {name}")
        # The worker's processes' folders and any work directory in them or loose beside them.
        leaked_dirs = [str(p.relative_to(self.tmp)) for p in sorted(self.tmp.glob("hab-*"))
                       + sorted(self.tmp.glob("hab-work-*/hab-*"))]
        for name in leaked_dirs:
            self._say(f"  leaked work directory: {name}")
        attempts = sorted(j.attempt for j in jobs.values())
        interval = settings.VERIFICATION_REAPER_INTERVAL_S
        self._say("\nlongest wait with no worker on it (worker up and idle), per submission:")
        for pk in sub_ids:
            self._say(f"  submission {pk}: {self.waits[pk]:.1f} s")
        longest = max(self.waits.values(), default=0.0)
        self._say(
            f"\ntotals after {wall:.0f} s, {len(results)} faults "
            f"({sum('SIGKILL' in r['fault'] for r in results)} kills, 1 broker restart, "
            f"1 PostgreSQL restart), {len(sub_ids)} submissions:\n"
            f"  verified exactly once: {len(once)}\n  lost: {len(lost)} {lost or ''}\n"
            f"  duplicated: {len(duplicated)} {duplicated or ''}\n"
            f"  stuck: {len(stuck)} {stuck or ''}\n  failed (never scored): {len(failed)}\n"
            f"  containers leaked: {len(leaked)}\n"
            f"  work directories leaked: {len(leaked_dirs)}\n  job attempts: {attempts}\n"
            f"  longest wait, no worker on it: {longest:.1f} s (reaper interval {interval:g} s, "
            f"{longest / interval:.2f} intervals)")
        self.totals = {"once": len(once), "lost": len(lost), "duplicated": len(duplicated),
                       "stuck": len(stuck), "failed": len(failed), "leaked": len(leaked),
                       "leaked_dirs": len(leaked_dirs),
                       "faults": len(results), "longest_wait": longest,
                       "reaper_interval": interval}

    def _say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()
