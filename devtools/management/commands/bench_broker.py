"""manage.py bench_broker: does `make run`'s broker hold? N uploads and their verifications
through one running `make run` site (its worker at its default concurrency), counting lost
messages and crashed processes.

    PORT=8731 INTAKE_REPUBLISH_AFTER_S=1000000 VERIFICATION_UNCLAIMED_AFTER_S=1000000 \\
        VERIFICATION_REPUBLISH_AFTER_S=1000000 make run        # in one terminal
    .venv/bin/python manage.py bench_broker --url http://127.0.0.1:8731 --uploads 50

Start the site with the reapers' re-publishing turned off (the three variables above): the
reapers otherwise publish a lost message again, which hides it. A message is then lost when its
submission never reaches a verdict: an upload never validated (its intake message), or a queued
submission never verified (its verification message). A crash is a site process that ended
while the bench ran: the supervisor's start counts (var/run-dev.json, scripts/run-dev). With
CELERY_BROKER_URL=filesystem:// the same bench measures the filesystem transport.

The uploads are small valid Harbor runs (devtools/harbor_fixtures.py: one task, one attempt,
a codex agent) of a version of one task made for the bench (broker-bench@1.0: the synthetic CT
task, one attempt per task; a full run of the synthetic benchmark is 21 trials), posted by
--parallel threads with the upload client, each by a staff user's token (no daily quota), then
followed in the site's database until every one ends or --timeout.
Figures: docs/testing.md (The broker of make run).

    .venv/bin/python manage.py bench_broker --transport-only [--messages 20000]

--transport-only measures the transport alone, without a site: --producers processes publish
--messages messages between them to one queue while --consumers processes take them, as fast as
they can (the race a site hits now and then, hit on purpose). It counts messages lost (sent,
never read whole), read twice, and reads that raised (a Celery worker stops on one: kombu's
filesystem transport read an empty file as JSON, celery/kombu#1551).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from devtools.harbor_fixtures import HarborJobBuilder, build_metadata
from submissions.client import upload

FINAL = ("verified", "consistent", "discrepancy", "failed", "refused", "published")
TASK = "ct-abnormality-classification/synthetic_01"
BENCH_VERSION = "broker-bench"


def _starts() -> dict[str, int]:
    path = Path(settings.BASE_DIR) / "var" / "run-dev.json"
    try:
        return {name: p["starts"] for name, p in json.loads(path.read_text()).items()}
    except (OSError, ValueError, KeyError):
        return {}


class Command(BaseCommand):
    help = "N uploads and their verifications through a running make run: lost messages, crashes."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000")
        parser.add_argument("--uploads", type=int, default=50)
        parser.add_argument("--parallel", type=int, default=10,
                            help="uploads posted at once")
        parser.add_argument("--timeout", type=float, default=3 * 3600,
                            help="seconds to wait for every verdict")
        parser.add_argument("--transport-only", action="store_true",
                            help="the transport alone: producers and consumers, no site")
        parser.add_argument("--messages", type=int, default=20000)
        parser.add_argument("--producers", type=int, default=4)
        parser.add_argument("--consumers", type=int, default=4)
        parser.add_argument("--quiet-after", type=float, default=600,
                            help="give up when nothing ended for this long with nothing "
                                 "being verified (what is left is lost)")

    def handle(self, *args, **opts):
        from submissions.models import Submission
        from submissions.services import token_issue

        if not settings.DEBUG:
            raise CommandError("bench_broker measures make run's site (DEBUG=1)")
        if opts["transport_only"]:
            return self._transport(opts["messages"], opts["producers"], opts["consumers"])
        user, _ = get_user_model().objects.get_or_create(
            username="bench-broker", defaults={"email": "bench@example.org", "is_staff": True})
        _, token = token_issue(user=user, base="bench-broker")
        self._bench_version()
        run = uuid.uuid4().hex[:8]
        started_procs = _starts()
        self._say(f"bench_broker: {opts['uploads']} uploads to {opts['url']} "
                  f"({opts['parallel']} at once), broker {settings.CELERY_BROKER_URL}")
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="bench-broker-") as tmp:
            archives = [self._archive(Path(tmp), run, n) for n in range(opts["uploads"])]
            meta = Path(tmp) / "metadata.yaml"
            meta.write_text(yaml.safe_dump(build_metadata(
                agent_display_name=f"Broker bench {run}", benchmark=f"{BENCH_VERSION}@1.0")))
            with ThreadPoolExecutor(opts["parallel"]) as pool:
                answers = list(pool.map(lambda a: self._post(opts["url"], token, a, meta),
                                        archives))
        posted = time.monotonic() - t0
        ids = [a["id"] for a in answers if isinstance(a, dict) and "id" in a]
        failed_posts = len(answers) - len(ids)
        self._say(f"  posted {len(ids)} in {posted:.0f} s ({failed_posts} refused or failed)")
        ended: dict[int, float] = {}
        quiet_since = time.monotonic()
        while time.monotonic() - t0 < opts["timeout"]:
            rows = dict(Submission.objects.filter(pk__in=ids).values_list("pk", "status"))
            for pk, status in rows.items():
                if status in FINAL and pk not in ended:
                    ended[pk] = time.monotonic() - t0
                    quiet_since = time.monotonic()
            if len(ended) == len(ids):
                break
            busy = any(s in ("validating", "verifying") for s in rows.values())
            if not busy and time.monotonic() - quiet_since > opts["quiet_after"]:
                break
            time.sleep(2)
        self._report(ids, ended, started_procs, failed_posts, time.monotonic() - t0)

    def _bench_version(self) -> None:
        """broker-bench@1.0: the synthetic benchmark's CT task alone, one attempt per task."""
        from evaluation.models import BenchmarkTask, BenchmarkVersion

        task = BenchmarkTask.objects.select_related("category").filter(
            benchmark_version__name="healthagentbench-synthetic", name=TASK).first()
        if task is None:
            raise CommandError("healthagentbench-synthetic is not registered: run make run once")
        bv, created = BenchmarkVersion.objects.get_or_create(
            name=BENCH_VERSION, version="1.0",
            defaults={"title": "bench_broker's one-task version", "attempts_per_task": 1})
        if not created:
            return
        category = task.category
        category.pk = None
        category.benchmark_version = bv
        category.save()
        task.pk = None
        task.benchmark_version, task.category = bv, category
        task.save()

    def _archive(self, root: Path, run: str, n: int) -> Path:
        import tarfile

        from evaluation.task_specs import package_digest

        digest = package_digest(Path(settings.BASE_DIR) / "tasks" / TASK)
        out = root / f"run-{n}"
        HarborJobBuilder({TASK: digest}, attempts=1, agent="codex", model="openai/gpt-5.5",
                         job_name=f"2026-12-07__{run}-{n:03d}").build(out)
        archive = root / f"run-{n}.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(out, arcname=out.name)
        return archive

    def _post(self, url: str, token: str, archive: Path, meta: Path) -> dict | str:
        try:
            with open(os.devnull, "w") as devnull:
                return upload(url, token, archive, meta, uuid.uuid4().hex, out=devnull)
        except SystemExit as exc:  # the client's way of saying the site refused it
            return str(exc)[:300]

    def _report(self, ids, ended, started_procs, failed_posts, wall) -> None:
        from submissions.models import Submission

        rows = dict(Submission.objects.filter(pk__in=ids).values_list("pk", "status"))
        lost_intake = sorted(pk for pk, s in rows.items() if s in ("received", "validating"))
        lost_verify = sorted(pk for pk, s in rows.items() if s in ("queued", "verifying"))
        starts = _starts()
        crashes = {name: n - started_procs.get(name, n) for name, n in starts.items()}
        verdicts: dict[str, int] = {}
        for status in rows.values():
            verdicts[status] = verdicts.get(status, 0) + 1
        times = sorted(ended.values())
        self._say(
            f"\nresult after {wall:.0f} s: {len(ended)} of {len(ids)} submissions ended "
            f"({', '.join(f'{k} {v}' for k, v in sorted(verdicts.items()))})\n"
            f"  lost messages: {len(lost_intake) + len(lost_verify)} (intake {lost_intake or 0}, "
            f"verification {lost_verify or 0})\n"
            f"  crashes: {sum(crashes.values())} "
            f"({', '.join(f'{k} {v}' for k, v in sorted(crashes.items())) or 'no run-dev.json'})\n"
            f"  uploads refused or failed in the request: {failed_posts}\n"
            f"  last verdict at {times[-1] if times else 0:.0f} s, median "
            f"{times[len(times) // 2] if times else 0:.0f} s")

    def _transport(self, messages: int, producers: int, consumers: int) -> None:
        queue = f"bench-broker-{uuid.uuid4().hex[:8]}"
        per = messages // producers
        self._say(f"bench_broker --transport-only: {settings.CELERY_BROKER_URL}, "
                  f"{producers} producers x {per} messages, {consumers} consumers, queue {queue}")
        ctx = multiprocessing.get_context("fork")
        done = ctx.Event()
        results = ctx.Queue()
        with _connection() as conn:
            conn.SimpleQueue(queue).close()  # declared once, before anyone reads or writes
        t0 = time.monotonic()
        readers = [ctx.Process(target=_consume, args=(queue, done, results))
                   for _ in range(consumers)]
        writers = [ctx.Process(target=_produce, args=(queue, n, per, results))
                   for n in range(producers)]
        for proc in readers + writers:
            proc.start()
        sent, got, publish_errors, read_errors = [], [], [], []
        for _ in writers:
            _kind, ids, errs = results.get()
            sent += ids
            publish_errors += errs
        sent_s = time.monotonic() - t0
        done.set()  # consumers stop once the queue stays empty
        for _ in readers:
            _kind, ids, errs = results.get()
            got += ids
            read_errors += errs
        for proc in readers + writers:
            proc.join()
        wall = time.monotonic() - t0
        unique = set(got)
        self._say(f"  sent {len(sent)} of {producers * per} in {sent_s:.1f} s, read {len(got)} "
                  f"in {wall:.1f} s\n"
                  f"  lost messages: {len(set(sent) - unique)}\n"
                  f"  read twice: {len(got) - len(unique)}\n"
                  f"  publishes that raised (published again): {len(publish_errors)}\n"
                  f"  reads that raised (a worker's crash): {len(read_errors)}"
                  + "".join(f"\n    {e}" for e in sorted(set(publish_errors + read_errors))[:5]))

    def _say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()


def _connection():
    from config.celery import app

    return app.connection_for_write()


def _produce(queue: str, n: int, count: int, results) -> None:
    """Publish `count` messages; one that raised is published again (the site's reapers do the
    same for a publish the broker refused). Reports (ids sent, errors)."""
    sent, errors = [], []
    try:
        with _connection() as conn:
            q = conn.SimpleQueue(queue)
            for i in range(count):
                for _ in range(5):
                    try:
                        q.put({"id": n * count + i})
                    except Exception as exc:  # noqa: BLE001 - the transport's own errors
                        errors.append(f"publish: {type(exc).__name__}: {str(exc)[:100]}")
                        continue
                    sent.append(n * count + i)
                    break
            q.close()
    except Exception as exc:  # noqa: BLE001
        errors.append(f"producer: {type(exc).__name__}: {str(exc)[:100]}")
    finally:
        results.put(("sent", sent, errors))


def _consume(queue: str, done, results) -> None:
    """Take messages until the producers are done and the queue stayed empty for 3 s.
    Reports (ids read, errors)."""
    ids, errors, empty_since = [], [], None
    try:
        with _connection() as conn:
            channel = conn.default_channel
            while True:
                try:
                    message = channel.basic_get(queue, no_ack=True)
                except Exception as exc:  # noqa: BLE001 - what a worker would die of
                    errors.append(f"{type(exc).__name__}: {str(exc)[:120]}")
                    continue
                if message is None:
                    empty_since = empty_since or time.monotonic()
                    if done.is_set() and time.monotonic() - empty_since > 3:
                        break
                    time.sleep(0.01)
                    continue
                empty_since = None
                try:
                    ids.append(message.decode()["id"])
                except Exception as exc:  # noqa: BLE001 - a message that is not one
                    errors.append(f"{type(exc).__name__}: {str(exc)[:120]}")
    except Exception as exc:  # noqa: BLE001
        errors.append(f"consumer: {type(exc).__name__}: {str(exc)[:100]}")
    finally:
        results.put(("read", ids, errors))
