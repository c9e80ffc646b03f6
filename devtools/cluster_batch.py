"""The cluster's batch (`manage.py cluster batch`, tests/evaluation/test_cluster.py): synthetic
submissions uploaded through the API to the web host, verified by two evaluation hosts; one host
lost whole mid-job and brought back; the S3 store stopped while uploads arrive. This process is
the operator: it uploads over HTTP and reads the cluster's database and bucket to report."""

from __future__ import annotations

import hashlib
import io
import os
import statistics
import tarfile
import tempfile
import threading
import time
import uuid
from pathlib import Path

import requests
import yaml

from devtools.cluster import BUCKET, CLUSTER_BENCHMARK, EVAL_HOSTS, TASKS, Cluster, sh

FINAL = ("verified", "consistent", "discrepancy", "failed", "refused")
CLEAN = ("verified", "consistent")


def _targz(root: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=path.relative_to(root).as_posix(), recursive=False)
    return buf.getvalue()


class Batch:
    def __init__(self, cluster: Cluster, *, say=print, timeout: float = 600):
        self.c, self.say, self.timeout = cluster, say, timeout
        self.url = f"{cluster.web_url}/api/v1/submissions/"

    # -- helpers -----------------------------------------------------------------------------
    def _host_of(self, claimed_by: str) -> str:
        name = (claimed_by or "").split(":")[0]
        return name.removeprefix(f"{self.c.tag}-")

    def _token(self) -> str:
        from django.contrib.auth import get_user_model

        from submissions.services import token_issue

        user = get_user_model().objects.create_user("cluster", "cluster@example.org",
                                                    uuid.uuid4().hex)
        return token_issue(user=user)[1]

    def _outputs(self, work: Path) -> dict:
        """The oracle's outputs of each task, run once on eval1's engine (test data)."""
        from django.test import override_settings

        from evaluation import agents, runner

        outputs = {}
        with override_settings(DOCKER_HOST=self.c.docker_host("eval1"),
                               VERIFICATION_RUN_PREFIX=f"{self.c.tag}o"):
            runner.reset_client()
            for name in TASKS:
                tdir = self.c.root / "tasks" / name
                out = work / "oracle" / name.replace("/", "__")
                run = agents.run_site_agent(agents.SiteAgent(kind="oracle", name="oracle"), tdir,
                                            job_id="cluster-oracle", attempt=1, out_dir=out)
                if not run.result.ok or run.missing:
                    raise RuntimeError(f"oracle of {name} failed: {run.result.reason}")
                (declared,) = runner.declared_outputs(tdir)[:1]
                src = out / declared.strip("/")
                outputs[name] = src.read_bytes() if src.is_file() else {
                    p.relative_to(src).as_posix(): p.read_bytes()
                    for p in sorted(src.rglob("*")) if p.is_file()}
        runner.reset_client()
        return outputs

    def _archives(self, n: int) -> list[bytes]:
        from devtools.harbor_fixtures import HarborJobBuilder
        from evaluation.models import BenchmarkVersion

        name, version = CLUSTER_BENCHMARK.split("@")
        bv = BenchmarkVersion.objects.get(name=name, version=version)
        tasks = {t.name: t.content_digest for t in bv.tasks.all()}
        with tempfile.TemporaryDirectory(prefix="hab-cluster-") as tmp:
            outputs = self._outputs(Path(tmp))
            archives = []
            for i in range(n):
                root = Path(tmp) / f"job{i}"
                HarborJobBuilder(tasks, attempts=bv.attempts_per_task, agent="codex",
                                 model="openai/gpt-5.5", outputs=outputs,
                                 job_name=f"2026-12-05__10-00-{i:02d}",
                                 tasks_dir=self.c.root / "tasks").build(root)
                archives.append(_targz(root))
        return archives

    def _post(self, archive: bytes, key: str) -> requests.Response:
        from devtools.harbor_fixtures import build_metadata

        meta = yaml.safe_dump(build_metadata(benchmark=CLUSTER_BENCHMARK))
        return requests.post(self.url, headers={"Authorization": f"Token {self.token}",
                                                "Idempotency-Key": key},
                             files={"archive": ("run.tar.gz", archive),
                                    "metadata": ("metadata.yaml", meta)}, timeout=120)

    def _wait(self, predicate, what: str, timeout: float | None = None, step: float = 0.5):
        deadline = time.monotonic() + (timeout or self.timeout)
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(step)
        raise RuntimeError(f"timed out waiting for {what}")

    def _open(self, ids: list[int]) -> list[int]:
        from submissions.models import Submission

        return list(Submission.objects.filter(pk__in=ids).exclude(status__in=FINAL)
                    .values_list("pk", flat=True))

    # -- the run -----------------------------------------------------------------------------
    def run(self, *, submissions: int, outage_s: float) -> dict:
        self.token = self._token()
        archives = self._archives(submissions + 2)
        t0 = time.monotonic()
        ids = []
        for archive in archives[:submissions]:
            response = self._post(archive, uuid.uuid4().hex)
            if response.status_code != 202:
                raise RuntimeError(f"upload: {response.status_code} {response.text[:500]}")
            ids.append(response.json()["id"])
        self.say(f"uploaded {len(ids)} submissions through {self.url}")
        loss = self._host_loss()
        self._wait(lambda: not self._open(ids), "the batch to finish")
        batch_wall = time.monotonic() - t0
        self.say(f"batch finished in {batch_wall:.0f} s")
        outage = self._s3_outage(archives[submissions:], outage_s)
        ids += outage.pop("accepted_ids")
        self._wait(lambda: not self._open(ids), "the outage's uploads to finish")
        return {**self._report(ids), "batch_wall_s": round(batch_wall, 1), "host_loss": loss,
                "s3_outage": outage}

    def _host_loss(self) -> dict:
        """Kill eval1 whole while it holds a job; the other host takes the job over after
        VERIFICATION_STALE_AFTER_S; eval1 comes back and reaps what it left before it claims."""
        from submissions.models import JobStatus, VerificationJob

        prefix = f"{self.c.tag}-eval1:"
        # Its second job or later: both hosts have then finished a job of the batch.
        self._wait(lambda: VerificationJob.objects.filter(
            status=JobStatus.DONE, claimed_by__startswith=prefix).exists(), "eval1 to end a job")
        job = self._wait(lambda: VerificationJob.objects.filter(
            status=JobStatus.RUNNING, claimed_by__startswith=prefix).first(),
            "eval1 to run a job", step=0.2)
        time.sleep(2)  # mid-job: its verifier containers are running
        killed = self.c.kill_host("eval1")
        t_kill = time.monotonic()
        self.say(f"host eval1 lost (SIGKILL of {killed} processes) while it ran job {job.pk} "
                 f"(attempt {job.attempt})")
        self._wait(lambda: not VerificationJob.objects.filter(
            pk=job.pk, status=JobStatus.RUNNING, claimed_by__startswith=prefix).exists(),
            f"job {job.pk} to be released", step=0.2)
        released_s = time.monotonic() - t_kill
        taken = self._wait(lambda: VerificationJob.objects.filter(
            pk=job.pk, attempt__gt=job.attempt).exclude(claimed_by__startswith=prefix).first(),
            f"job {job.pk} to be taken over", step=0.2)
        reclaim_s = time.monotonic() - t_kill
        self.say(f"job {job.pk} released after {released_s:.1f} s, re-claimed by "
                 f"{self._host_of(taken.claimed_by)} after {reclaim_s:.1f} s (stale after "
                 f"{self.c.stale_after_s} s, reaper every {self.c.reaper_interval_s:g} s)")
        done = self._wait(lambda: VerificationJob.objects.filter(
            pk=job.pk, status__in=[JobStatus.DONE, JobStatus.FAILED]).first(),
            f"job {job.pk} to finish")
        finish_s = time.monotonic() - t_kill
        tmp = self.c.host_dir("eval1") / "tmp"
        left_tmp = [p.name for p in tmp.glob("hab-*")]
        self.c.start_engine("eval1")
        engine = ["docker", "-H", self.c.docker_host("eval1")]
        label = "label=app=healthagentbench"
        left = {"containers": sh(*engine, "ps", "-aq", "--filter", label).stdout.split(),
                "networks": sh(*engine, "network", "ls", "-q", "--filter", label).stdout.split(),
                "temporary": left_tmp}
        worker = self.c.start_worker("eval1")
        self.c.wait_ready(worker.name)
        # The restarted worker's own pool folders (hab-work-<live pid>) are its, not leftovers.
        after = {"containers": sh(*engine, "ps", "-aq", "--filter", label).stdout.split(),
                 "networks": sh(*engine, "network", "ls", "-q", "--filter", label).stdout.split(),
                 "temporary": [p.name for p in tmp.glob("hab-*") if not _live_work_root(p)]}
        reaped_line = [ln for ln in worker.log.read_text().splitlines() if "reaped at start" in ln]
        self.say(f"eval1 back: left behind {({k: len(v) for k, v in left.items()})}, after its "
                 f"start {({k: len(v) for k, v in after.items()})}; {reaped_line[-1:]}")
        return {"job": job.pk, "job_status": done.status, "released_s": round(released_s, 1),
                "reclaim_s": round(reclaim_s, 1),
                "finished_after_s": round(finish_s, 1), "taken_by": self._host_of(taken.claimed_by),
                "left_behind": {k: len(v) for k, v in left.items()},
                "after_restart": {k: len(v) for k, v in after.items()},
                "reap_logged": bool(reaped_line)}

    def _s3_outage(self, archives: list[bytes], outage_s: float) -> dict:
        """Stop the S3 store (SIGSTOP: its port open, nothing answers) for outage_s while
        uploads arrive; each gets 503 + Retry-After or is stored whole; the refused ones are
        sent again afterwards with the same Idempotency-Key."""
        keys = [uuid.uuid4().hex for _ in archives]
        answers: list[tuple[int, float, str]] = [None] * len(archives)

        def upload(i: int) -> None:
            start = time.monotonic()
            response = self._post(archives[i], keys[i])
            answers[i] = (response.status_code, round(time.monotonic() - start, 1),
                          response.headers.get("Retry-After", ""))

        self.c.s3.pause()
        t_stop = time.monotonic()
        threads = []
        for i in range(len(archives)):
            threads.append(threading.Thread(target=upload, args=(i,)))
            threads[-1].start()
            time.sleep(min(5.0, outage_s / (len(archives) + 1)))
        for t in threads:
            t.join()
        time.sleep(max(0.0, outage_s - (time.monotonic() - t_stop)))
        self.c.s3.resume()
        t_back = time.monotonic()
        accepted, retries = [], []
        for i, archive in enumerate(archives):
            for _ in range(20):
                response = self._post(archive, keys[i])
                if response.status_code == 202:
                    accepted.append(response.json()["id"])
                    retries.append(round(time.monotonic() - t_back, 1))
                    break
                time.sleep(2)
        self.say(f"S3 store stopped {outage_s:.0f} s: answers during it {answers}; sent again "
                 f"after it, accepted {len(accepted)}/{len(archives)}")
        return {"outage_s": outage_s, "answers": answers, "accepted_ids": accepted,
                "accepted_after_s": retries}

    def _report(self, ids: list[int]) -> dict:
        from submissions.models import (
            JobStatus,
            Submission,
            SubmissionEvent,
            TrialCheck,
            VerificationJob,
        )

        jobs = list(VerificationJob.objects.filter(submission_id__in=ids))
        per_host = {h: 0 for h in EVAL_HOSTS}
        once, duplicated, lost, stuck = [], [], [], []
        for sub in Submission.objects.filter(pk__in=ids):
            done = [j for j in jobs if j.submission_id == sub.pk and j.status == JobStatus.DONE]
            verdicts = SubmissionEvent.objects.filter(
                submission_id=sub.pk, to_status__in=[*CLEAN, "discrepancy"]).count()
            rewritten = TrialCheck.objects.filter(job__submission_id=sub.pk,
                                                  executions__gt=1).count()
            if len(done) > 1 or verdicts > 1 or rewritten:
                duplicated.append(sub.pk)
            elif sub.status in CLEAN and len(done) == 1:
                once.append(sub.pk)
                per_host[self._host_of(done[0].claimed_by)] += 1
            elif sub.status not in FINAL:
                stuck.append(sub.pk)
            else:
                lost.append(sub.pk)
        stored_ok = self._archives_whole(ids)
        media = {h: sum(1 for p in (self.c.host_dir(h) / "media").rglob("*") if p.is_file())
                 for h in ("web", "intake", *EVAL_HOSTS)}
        checks = list(TrialCheck.objects.filter(job__submission_id__in=ids, kind="regrade")
                      .exclude(duration_s=None).values_list("duration_s", flat=True))
        # A host's throughput: a finished job's wall time per trial (one job at a time per
        # host, VERIFICATION_PARALLEL_TRIALS trials at once), jobs of one attempt only.
        done = VerificationJob.objects.filter(submission_id__in=ids, attempt=1,
                                              status=JobStatus.DONE).select_related("submission")
        per_trial = [(j.finished_at - j.started_at).total_seconds()
                     / max(1, j.submission.trials_total) for j in done]
        return {"submissions": len(ids), "verified_once": len(once), "lost": len(lost),
                "job_s_per_trial": round(statistics.median(per_trial), 2) if per_trial else None,
                "duplicated": len(duplicated), "stuck": len(stuck), "jobs_per_host": per_host,
                "job_attempts": sorted(j.attempt for j in jobs), "archives_whole": stored_ok,
                "local_media_files": media, "regrade_checks": len(checks),
                "regrade_median_s": round(statistics.median(checks), 2) if checks else None}

    def _archives_whole(self, ids: list[int]) -> bool:
        """Every accepted submission's archive is in the bucket, byte for byte."""
        from submissions.models import Submission

        client = self.c.s3.client()
        for sub in Submission.objects.filter(pk__in=ids):
            if not sub.archive:
                return False
            body = client.get_object(Bucket=BUCKET, Key=sub.archive)["Body"].read()
            if hashlib.sha256(body).hexdigest() != sub.archive_sha256:
                return False
        return True


def _live_work_root(path: Path) -> bool:
    """A running process's own work folder (<tmp>/hab-work-<pid>)."""
    pid = path.name.removeprefix("hab-work-")
    if pid == path.name or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
