"""Reliability matrix row R7: PostgreSQL outage during grading.

A small TCP proxy (a thread in this file, in place of toxiproxy) sits between Django and
PostgreSQL: the test database's HOST/PORT are pointed at it for the duration of the test, and
every connection is closed first so all threads (the job, its trial pool, the heartbeat)
reconnect through it. In the middle of grading the proxy cuts every connection and refuses new
ones for a few seconds, then lets them through again.

Expected: the job either completes with exactly one check row per trial and one verdict, or fails
clean (released or left for the reaper), is requeued and then completes; never half-written
scores (no TrialCheck duplicates, each trial's verified_reward agrees with its check row, the
submission status agrees with the job).

The job runs in-process (`verification_run`, as the Celery task body does), on PostgreSQL:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hab_r7 \
        .venv/bin/python -m pytest tests/evaluation/test_database_outage_during_grading.py
"""

import socket
import threading
import time
from datetime import timedelta

import pytest

from tests.evaluation import verification_support as vs

CT = "ct-abnormality-classification/synthetic_01"
OUTAGE_S = 6.0


# --------------------------------------------------------------------------------------------
# The proxy
# --------------------------------------------------------------------------------------------
class PgProxy:
    """TCP forwarder 127.0.0.1:<port> -> upstream; `cut()` drops every connection and refuses
    new ones (accepted, then closed at once: the client sees the server close) until `restore()`.
    """

    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, int(upstream_port))
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.down = threading.Event()
        self.closed = threading.Event()
        self.lock = threading.Lock()
        self.socks: set[socket.socket] = set()
        self.accepted = 0
        self.refused = 0
        self.cuts = 0
        self.thread = threading.Thread(target=self._accept_loop, daemon=True, name="pgproxy")
        self.thread.start()

    def _accept_loop(self):
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.down.is_set():
                self.refused += 1
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            self.accepted += 1
            with self.lock:
                self.socks.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                _close(s)
                with self.lock:
                    self.socks.discard(s)

    def cut(self):
        self.down.set()
        self.cuts += 1
        with self.lock:
            socks = list(self.socks)
            self.socks.clear()
        for s in socks:
            _close(s)

    def restore(self):
        self.down.clear()

    def close(self):
        self.closed.set()
        self.cut()
        _close(self.listener)


def _close(s: socket.socket):
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def media_root(tmp_path_factory):
    return tmp_path_factory.mktemp("r7-media")


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, docker_engine):
    return vs.oracle_outputs(tmp_path_factory.mktemp("oracle-outputs"), only=[CT])


@pytest.fixture(autouse=True)
def _media_and_broker(settings, media_root):
    settings.MEDIA_ROOT = str(media_root)
    settings.VERIFICATION_QUEUE = vs.INPROC_QUEUE  # published to, consumed by nobody
    settings.VERIFICATION_RUN_PREFIX = vs.RUN_PREFIX
    settings.VERIFICATION_CHECKS = ["regrade"]
    settings.VERIFICATION_HEARTBEAT_S = 1
    settings.VERIFICATION_PARALLEL_TRIALS = 1
    vs.point_celery_at(vs.BROKER_URL)


@pytest.fixture
def pg_proxy(db):
    """Route every (new) connection of every thread through a PgProxy for the test."""
    from django.db import connection, connections

    if connection.vendor != "postgresql":
        pytest.skip("R7 needs PostgreSQL: run with DATABASE_URL=postgres://...")
    sd = connection.settings_dict  # the dict every thread's wrapper is built from
    host, port = sd.get("HOST") or "127.0.0.1", sd.get("PORT") or 5432
    proxy = PgProxy(host, port)
    connections.close_all()
    sd["HOST"], sd["PORT"] = "127.0.0.1", str(proxy.port)
    try:
        yield proxy
    finally:
        proxy.restore()
        connections.close_all()
        sd["HOST"], sd["PORT"] = host, port
        proxy.close()
        connections.close_all()


def _small_submission(oracle, attempts):
    from django.db import transaction

    from submissions.verification import verification_enqueue

    with transaction.atomic():
        sub = vs.make_submission(vs.synthetic_version(), outputs=oracle, tasks=[CT],
                                 attempts=attempts)
        job = verification_enqueue(submission=sub)
    return sub, job


def _run_until_done(job, settings, log):
    """What the Celery retries and the reaper do after an outage, until the job is final."""
    from django.db import DatabaseError, connections

    from evaluation import runner
    from submissions.models import VerificationJob
    from submissions.verification import reap_stuck_submissions, verification_run

    for _ in range(30):
        connections.close_all()  # what Celery's Django fixup does around each task
        try:
            r = verification_run(job_id=job.pk)
        except (DatabaseError, runner.InfrastructureError) as exc:  # the task's autoretry
            log.append(f"raised {type(exc).__name__}")
            time.sleep(1)
            continue
        log.append(r)
        if r in ("done", "final"):
            return r
        if r == "busy":  # the claim of the attempt that died with the outage: the reaper
            j = VerificationJob.objects.get(pk=job.pk)
            settings.VERIFICATION_STALE_AFTER_S = 2
            vs.wait_for(lambda: timezone_now() - j.heartbeat_at > timedelta(seconds=3), 30,
                        "the dead attempt's heartbeat to go stale")
            report = reap_stuck_submissions()
            log.append(f"reaper {report}")
    raise AssertionError(f"job {job.pk} never completed: {log}")


def timezone_now():
    from django.utils import timezone

    return timezone.now()


def _assert_consistent(sub, job, n_trials):
    from submissions.models import TrialCheck, VerificationJob
    from submissions.models import SubmissionEvent

    j = VerificationJob.objects.get(pk=job.pk)
    sub.refresh_from_db()
    checks = list(TrialCheck.objects.filter(job=job, kind="regrade"))
    # Re-grade only: the clean verdict is "consistent" (no pass replayed or re-run).
    assert j.status == "done" and j.verdict == "consistent", (j.status, j.verdict, j.last_error)
    assert sub.status == "consistent" and not sub.is_verified
    assert len(checks) == n_trials == sub.trials.count()  # exactly one set of check rows
    assert len({c.trial_id for c in checks}) == n_trials  # no duplicates
    assert {c.executions for c in checks} == {1}, [c.executions for c in checks]
    assert j.summary["regrade"]["checked"] == n_trials
    # The trial-level projection the leaderboard reads agrees with the check rows.
    for c in checks:
        trial = sub.trials.get(pk=c.trial_id)
        assert trial.verified_reward == c.verified_reward == 1.0, (
            f"trial {trial.pk}: check row says {c.verified_reward}, "
            f"trial.verified_reward is {trial.verified_reward} (half-written score)")
    # A single verdict: one transition into `checked`.
    assert SubmissionEvent.objects.filter(submission=sub, to_status="consistent").count() == 1
    return j


# --------------------------------------------------------------------------------------------
# R7
# --------------------------------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_r7_postgres_outage_while_a_trial_is_graded(oracle, pg_proxy, settings, monkeypatch):
    """Cut every DB connection while the second trial's verifier container runs, refuse new
    ones for OUTAGE_S, then restore."""
    from evaluation import runner

    sub, job = _small_submission(oracle, attempts=3)
    real = runner.run_verifier
    calls = []
    timers = []

    def run_verifier(*a, **k):
        calls.append(time.time())
        if len(calls) == 2:  # mid-grading: one trial written, this one in its container
            pg_proxy.cut()
            t = threading.Timer(OUTAGE_S, pg_proxy.restore)
            t.daemon = True
            t.start()
            timers.append(t)
        return real(*a, **k)

    monkeypatch.setattr(runner, "run_verifier", run_verifier)
    log: list = []
    t0 = time.time()
    _run_until_done(job, settings, log)
    for t in timers:
        t.join()
    assert pg_proxy.cuts == 1
    j = _assert_consistent(sub, job, 3)
    print(f"R7 outage while grading: {log}, attempt {j.attempt}, refused {pg_proxy.refused}, "
          f"{time.time() - t0:.1f} s")


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_r7_postgres_outage_between_check_row_and_trial_score(oracle, pg_proxy, settings,
                                                              monkeypatch):
    """The worst moment: the first trial's check row is written, its score on the trial
    (verified_reward, flags: what the leaderboard reads) not yet. Both must land, or neither."""
    from submissions.verification.checks import base as checks

    sub, job = _small_submission(oracle, attempts=2)
    real = checks.set_trial_flag
    timers = []

    def set_trial_flag(*a, **kw):
        if pg_proxy.cuts == 0:
            pg_proxy.cut()
            t = threading.Timer(OUTAGE_S, pg_proxy.restore)
            t.daemon = True
            t.start()
            timers.append(t)
        return real(*a, **kw)

    monkeypatch.setattr(checks, "set_trial_flag", set_trial_flag)
    log: list = []
    t0 = time.time()
    _run_until_done(job, settings, log)
    for t in timers:
        t.join()
    assert pg_proxy.cuts == 1
    j = _assert_consistent(sub, job, 2)
    print(f"R7 outage between check row and trial score: {log}, attempt {j.attempt}, "
          f"{time.time() - t0:.1f} s")
