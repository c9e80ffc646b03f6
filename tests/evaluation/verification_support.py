"""Helpers for the verification and reliability tests: a real Celery worker process on a real
Redis broker, submissions of synthetic-task trials stored like uploads, oracle outputs.

The worker shares the test database, so tests that use it need PostgreSQL (DATABASE_URL) and
`transaction=True`; on SQLite's in-memory test database they are skipped with that reason.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TEST_OUTPUT = REPO / "test-output"
BROKER_URL = os.environ.get("VERIFICATION_TEST_BROKER_URL", "redis://127.0.0.1:6379/13")
DEAD_BROKER_URL = "redis://127.0.0.1:1/0"
SESSION = uuid.uuid4().hex[:8]
QUEUE = f"evaluation-test-{SESSION}"
INPROC_QUEUE = f"{QUEUE}-inproc"  # published to by in-process tests; nobody consumes it
RUN_PREFIX = f"v{SESSION}x"  # container names unique to this test session on a shared engine


# --------------------------------------------------------------------------------------------
# The X-ray judge: one stub per test session, on the host's address on Docker's bridge (where
# the judge gateway's container reaches it). It judges by the injected-errors rule.
# --------------------------------------------------------------------------------------------
JUDGE_MODEL = "stub-judge-1"
_JUDGE: list = []


def judge_stub():
    from tests.evaluation.judge_standin import JudgeStandIn, docker_bridge_ip

    if not _JUDGE:
        _JUDGE.append(JudgeStandIn(host=docker_bridge_ip(), rule="injected-errors").start())
    return _JUDGE[0]


# --------------------------------------------------------------------------------------------
# Broker
# --------------------------------------------------------------------------------------------
def point_celery_at(url: str) -> None:
    """Make this process publish to `url` (drops cached connections and producer pools)."""
    from config.celery import app

    app.conf.broker_url = url
    app.conf.broker_transport_options = {"visibility_timeout": 6 * 3600}
    app.conf.broker_connection_timeout = 2
    if app._pool is not None:
        app._pool.force_close_all()
        app._pool = None
    from kombu import pools

    pools.reset()  # the global producer registry keeps pools of closed connections
    app.amqp._producer_pool = None


def redis_client():
    import redis

    return redis.Redis.from_url(BROKER_URL)


def queue_length(queue: str = QUEUE) -> int:
    return int(redis_client().llen(queue))


# --------------------------------------------------------------------------------------------
# Database shared with the worker
# --------------------------------------------------------------------------------------------
def shared_database_url() -> str:
    from django.db import connection

    sd = connection.settings_dict
    if connection.vendor == "sqlite":
        name = str(sd["NAME"])
        if "memory" in name or not Path(name).is_absolute():
            pytest.skip("a real worker process needs a database it can share: run with "
                        "DATABASE_URL=postgres://... (this SQLite test database is in memory)")
        return f"sqlite:///{name}"
    if connection.vendor != "postgresql":
        pytest.skip(f"no shared-database recipe for {connection.vendor}")
    user = sd.get("USER") or "postgres"
    auth = f"{user}:{sd['PASSWORD']}" if sd.get("PASSWORD") else user
    return f"postgres://{auth}@{sd.get('HOST') or '127.0.0.1'}:{sd.get('PORT') or 5432}/{sd['NAME']}"


# --------------------------------------------------------------------------------------------
# The worker
# --------------------------------------------------------------------------------------------
class Worker:
    """`celery -A config worker` as a subprocess (prefork pool) on the test queue."""

    def __init__(self, *, media_root: Path, concurrency: int = 1, env: dict | None = None,
                 queue: str = QUEUE, judge: bool = True):
        self.queue = queue
        # The X-ray judge stub listens on Docker's bridge, so a worker with one needs the engine;
        # an intake worker grades nothing and runs without Docker (judge=False).
        self.judge = judge
        self.media_root = Path(media_root)
        self.concurrency = concurrency
        self.extra_env = env or {}
        self.proc: subprocess.Popen | None = None
        self.log_path = TEST_OUTPUT / f"verification-worker-{SESSION}-{uuid.uuid4().hex[:4]}.log"

    def env(self) -> dict:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DEBUG": "1",
            "DATABASE_URL": shared_database_url(),
            "CELERY_BROKER_URL": BROKER_URL,
            "VERIFICATION_QUEUE": self.queue,
            "INTAKE_QUEUE": self.queue,  # one queue per test worker (intake tests set their own)
            "VERIFICATION_RUN_PREFIX": RUN_PREFIX,
            "MEDIA_ROOT": str(self.media_root),
            "VERIFICATION_HEARTBEAT_S": "1",
            "VERIFICATION_STALE_AFTER_S": "600",
            "VERIFICATION_PARALLEL_TRIALS": "2",
            "VERIFICATION_RETRY_BACKOFF_S": "1",
            "PYTHONUNBUFFERED": "1",
        }
        if self.judge:
            # The X-ray judge: the test session's stub (the gateway forwards to it).
            env.update(XRAY_JUDGE_URL=judge_stub().url, XRAY_JUDGE_MODEL=JUDGE_MODEL)
        # The trajectory judge: the session's stand-in (clean unless a test scripts it).
        from tests.evaluation.trajectory_judge_standin import MODEL, session_standin

        env.update(TRAJECTORY_JUDGE_URL=session_standin().url, TRAJECTORY_JUDGE_MODEL=MODEL)
        env.update(self.extra_env)
        return env

    def start(self) -> Worker:
        TEST_OUTPUT.mkdir(exist_ok=True)
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", self.queue,
             "--pool", "prefork", "--concurrency", str(self.concurrency), "-l", "INFO",
             "--without-mingle", "--without-gossip", "-n", f"verif-{uuid.uuid4().hex[:6]}@%h"],
            cwd=REPO, env=self.env(), stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        # A cold start takes about a minute when the shared 2-core machine is loaded (58 s
        # measured at load average 20): wait longer than that before calling it failed.
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited: {self.log_path.read_text()[-3000:]}")
            if b"ready." in self.log_path.read_bytes():
                return self
            time.sleep(0.2)
        raise RuntimeError(f"worker did not start: {self.log_path.read_text()[-3000:]}")

    def stop(self, sig=signal.SIGTERM, timeout: float = 60) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # our own process group only
            return self.proc.wait(timeout=10)
        finally:
            self.log.close()

    def tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]


def wait_for(predicate, timeout: float, what: str, interval: float = 0.3, worker=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    extra = f"\nworker log:\n{worker.tail()}" if worker is not None else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{extra}")


# --------------------------------------------------------------------------------------------
# Submissions shaped like stored uploads
# --------------------------------------------------------------------------------------------
def synthetic_version():
    from django.conf import settings

    from evaluation.services import benchmark_tasks_sync
    from evaluation.models import BenchmarkVersion

    benchmark_tasks_sync(tasks_dir=Path(settings.BASE_DIR) / "tasks")
    return BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")


def task_dir(task) -> Path:
    return REPO / task.package_path


_ORACLE_ROOT: list[Path] = []


def oracle_outputs(out_root: Path, only: list[str] | None = None) -> dict[str, Path]:
    """Run each synthetic task's oracle once per test session in Docker (outputs are reused
    by every module); returns task name -> outputs dir."""
    from evaluation import runner
    from evaluation.task_specs import version_packages

    if not _ORACLE_ROOT:
        _ORACLE_ROOT.append(Path(out_root))
    out_root = _ORACLE_ROOT[0]
    done = {}
    for tdir in version_packages(REPO / "tasks", "healthagentbench-synthetic@1.0"):
        name = f"{tdir.parent.name}/{tdir.name}"
        if only is not None and name not in only:
            continue
        dest = out_root / name.replace("/", "__")
        if not dest.exists():
            runner.build_task_image(tdir)
            run = runner.run_agent(tdir, job_id=f"oracle-{SESSION}", command="bash /solution/solve.sh",
                                   out_dir=dest, copy_in={"/solution": tdir / "solution"})
            assert run.result.ok and not run.missing, (name, run.result.reason, run.result.text)
        done[name] = dest
    return done


def oracle_output(oracle: dict[str, Path], task: str) -> bytes | dict[str, bytes]:
    """The oracle's output of ``task`` (from ``oracle_outputs``) as HarborJobBuilder takes it:
    a file's bytes, or a directory's files by relative name."""
    from devtools.harbor_fixtures import default_output_path

    path = default_output_path(task)
    src = oracle[task] / path.strip("/")
    if path.endswith("/"):
        return {p.relative_to(src).as_posix(): p.read_bytes()
                for p in src.rglob("*") if p.is_file()}
    return src.read_bytes()


def _store_tree(prefix: str, rel: str, src: Path) -> list[str]:
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    stored = []
    files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
    for f in files:
        sub = rel if src.is_file() else f"{rel}/{f.relative_to(src).as_posix()}"
        stored.append(default_storage.save(f"{prefix}/{sub}", ContentFile(f.read_bytes())))
    return stored


def make_submission(bv, *, outputs: dict[str, Path], harness: str = "oracle", attempts: int = 3,
                    tasks: list[str] | None = None, claims: dict | None = None,
                    replace: dict | None = None, trajectories: dict | None = None,
                    extra_files: dict | None = None, status: str = "queued"):
    """A stored submission of `attempts` trials per task.

    outputs: task name -> directory holding the oracle's outputs (workspace/...).
    claims: (task, attempt) -> claimed reward (default 1.0), or "infra" for a trial the
    submission reports as an infrastructure error (no reward; site outcome as at intake).
    replace: (task, attempt) -> {container path: bytes} replacing the stored output.
    trajectories: (task, attempt) -> ATIF dict stored as agent/trajectory.json.
    extra_files: (task, attempt) -> {trial-relative path: bytes} stored beside the outputs.
    """
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage
    from django.utils import timezone

    from evaluation import runner
    from evaluation.models import AIModel, Agent, Harness
    from submissions.models import (
        FLAG_INFRA_UNCONFIRMED,
        Outcome,
        Submission,
        Trial,
        site_outcome,
    )

    claims, replace = claims or {}, replace or {}
    trajectories, extra_files = trajectories or {}, extra_files or {}
    h, _ = Harness.objects.get_or_create(slug=harness, defaults={"display_name": harness,
                                                                  "family": harness})
    m, _ = AIModel.objects.get_or_create(slug="none", defaults={"display_name": "none",
                                                                "provider": "none"})
    agent, _ = Agent.objects.get_or_create(slug=f"{harness}-none", defaults={
        "harness": h, "model": m, "display_name": f"{harness} (none)"})
    uid = uuid.uuid4().hex[:10]
    prefix = f"verif-tests/{uid}/tree"
    sub = Submission.objects.create(
        agent=agent, benchmark_version=bv, status=status, source="upload", files_prefix=prefix,
        queued_at=timezone.now(), submitted_on=timezone.now().date())
    names = tasks or sorted(outputs)
    rows = []
    for task in bv.tasks.filter(name__in=names).order_by("position"):
        declared = runner.declared_outputs(task_dir(task))
        for attempt in range(1, attempts + 1):
            trial_dir = f"job/{task.name.replace('/', '__')}__{attempt}"
            paths = []
            for cpath in declared:
                rel = cpath.strip("/")
                over = replace.get((task.name, attempt), {})
                if cpath in over:
                    default_storage.save(f"{prefix}/{trial_dir}/artifacts/{rel}",
                                         ContentFile(over[cpath]))
                else:
                    _store_tree(prefix, f"{trial_dir}/artifacts/{rel}", outputs[task.name] / rel)
                paths.append(f"{trial_dir}/artifacts/{rel}")
            for relpath, data in extra_files.get((task.name, attempt), {}).items():
                default_storage.save(f"{prefix}/{trial_dir}/{relpath}", ContentFile(data))
            traj = trajectories.get((task.name, attempt))
            traj_path = ""
            if traj is not None:
                traj_path = f"{trial_dir}/agent/trajectory.json"
                default_storage.save(f"{prefix}/{traj_path}",
                                     ContentFile(json.dumps(traj).encode()))
            reward = claims.get((task.name, attempt), 1.0)
            if reward == "infra":
                claimed, reward = Outcome.INFRA_ERROR, None
            else:
                claimed = Outcome.PASSED if reward >= 1 else Outcome.FAILED
            outcome = site_outcome(claimed=claimed, verified_reward=None)
            rows.append(Trial(
                submission=sub, benchmark_task=task, attempt=attempt,
                outcome=outcome, success=outcome == Outcome.PASSED,
                claimed_outcome=claimed, claimed_success=claimed == Outcome.PASSED,
                reward=reward, trial_dir=trial_dir,
                flags=[FLAG_INFRA_UNCONFIRMED] if claimed == Outcome.INFRA_ERROR else [],
                trajectory_path=traj_path, artifact_paths=paths))
    Trial.objects.bulk_create(rows)
    Submission.objects.filter(pk=sub.pk).update(trials_total=len(rows))
    sub.refresh_from_db()
    return sub


def atif(agent: str, calls: list[tuple[str, dict]]) -> dict:
    steps = [{"step_id": 1, "source": "user", "message": "solve the task"}]
    for i, (name, args) in enumerate(calls, start=2):
        steps.append({"step_id": i, "source": "agent", "message": "",
                      "tool_calls": [{"tool_call_id": f"call_{i}", "function_name": name,
                                      "arguments": args}]})
    return {"schema_version": "ATIF-v1.6", "session_id": "s",
            "agent": {"name": agent, "version": "1"}, "steps": steps}


def labelled_containers(prefix: str) -> list[str]:
    from evaluation import runner

    c = runner.client()
    # sparse: no inspect per container, so one that vanishes meanwhile (another session's, on a
    # shared engine) cannot turn into a 404 (as in runner.reap_job_prefix).
    listed = c.containers.list(all=True, sparse=True, filters={"label": ["app=healthagentbench"]})
    return [(x.attrs.get("Names") or [x.id])[0].lstrip("/") for x in listed
            if str((x.attrs.get("Labels") or {}).get("job", "")).startswith(prefix)]
